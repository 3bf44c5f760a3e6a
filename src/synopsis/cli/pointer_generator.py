"""``synopsis train pointer-generator``: train or resume a pointer-generator network."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from synopsis.cli.options import set_torch_threads, switch, threads_option
from synopsis.cli.runtime import (
    print_plan,
    refuse_to_overwrite_inputs,
    reporting_interrupts,
    training_account,
)
from synopsis.errors import ConfigError
from synopsis.progress import progress_enabled

log = logging.getLogger("synopsis.cli")


def train(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML training config (required unless --resume continues a run)."
    ),
    sets: list[str] | None = typer.Option(
        None, "--set", help="Any config key, value as YAML: --set schedule.max_steps=100 (repeatable)."
    ),
    output_dir: Path | None = typer.Option(
        None, "--output-dir", "-o", help="Run directory (checkpoints, model); required unless --dry-run."
    ),
    resume: bool = switch("--resume", "Continue the run in --output-dir exactly."),
    threads: int | None = threads_option(),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="Errors only; no progress messages (the same as synopsis -q)."
    ),
    dry_run: bool = switch("--dry-run", "Print the memory plan per device (from the config alone) and exit."),
    plan_json: Path | None = typer.Option(None, "--json", help="With --dry-run: write the plan as JSON."),
) -> None:
    """Train a pointer-generator network (See et al., 2017) with the paper's two-phase schedule."""
    from synopsis.config import load_config, parse_overrides
    from synopsis.training.pointer_generator import (
        TRAIN_CONFIG_FILE,
        PointerGeneratorTrainConfig,
        Trainer,
        memory_plan,
    )

    if quiet:
        logging.getLogger("synopsis").setLevel(logging.ERROR)
    if dry_run:  # reads no data and writes no run directory
        if config is None:
            raise ConfigError("--dry-run needs --config")
        print_plan(
            memory_plan(load_config(PointerGeneratorTrainConfig, config, parse_overrides(sets))), plan_json
        )
        return
    if output_dir is None:
        raise ConfigError("--output-dir is required (except with --dry-run)")
    if config is None and resume and (output_dir / TRAIN_CONFIG_FILE).is_file():
        config = output_dir / TRAIN_CONFIG_FILE
    elif config is None:
        raise ConfigError("--config is required (except with --resume on an existing run)")
    if config != output_dir / TRAIN_CONFIG_FILE:
        refuse_to_overwrite_inputs(output_dir, [config], "--output-dir")
    train_config = load_config(PointerGeneratorTrainConfig, config, parse_overrides(sets))
    set_torch_threads(threads)
    trainer = Trainer(train_config, output_dir, resume=resume, progress=progress_enabled())

    def account() -> str:
        step = getattr(trainer, "state", {}).get("step")
        return training_account(output_dir, step)

    with reporting_interrupts(account):
        trainer.run()
    trainer.distributed.finish()
    log.info("model written to %s", output_dir / "model")
