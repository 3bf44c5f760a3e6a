"""``synopsis train pointer-generator``: train or resume a pointer-generator network."""

from __future__ import annotations

from pathlib import Path

import typer

from synopsis.errors import ConfigError


def train(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML training config (required unless --resume continues a run)."
    ),
    sets: list[str] | None = typer.Option(
        None, "--set", help="Any config key, value as YAML: --set schedule.max_steps=100 (repeatable)."
    ),
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Run directory (checkpoints, model)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --output-dir exactly."),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads (default: torch's)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Train a pointer-generator network (See et al., 2017) with the paper's two-phase schedule."""
    from synopsis.config import load_config, parse_overrides
    from synopsis.training.pointer_generator import TRAIN_CONFIG_FILE, PointerGeneratorTrainConfig
    from synopsis.training.pointer_generator import train as run_training

    if config is None and resume and (output_dir / TRAIN_CONFIG_FILE).is_file():
        config = output_dir / TRAIN_CONFIG_FILE
    elif config is None:
        raise ConfigError("--config is required (except with --resume on an existing run)")
    train_config = load_config(PointerGeneratorTrainConfig, config, parse_overrides(sets))
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    run_training(train_config, output_dir, resume=resume, progress=not quiet)
    typer.echo(f"model written to {output_dir / 'model'}")
