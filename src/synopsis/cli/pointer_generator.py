"""``synopsis train pointer-generator``: train or resume a pointer-generator network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from synopsis.errors import ConfigError


def _parse_overrides(items: list[str]) -> dict[str, Any]:
    """``section.key=value`` pairs (values parsed as YAML) into a nested mapping."""
    import yaml

    nested: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override '{item}': expected section.key=value")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError(f"override '{item}': value is not valid YAML") from None
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{item}': '{part}' is not a section")
        node[leaf] = value
    return nested


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def train(
    overrides: list[str] = typer.Argument(None, help="Config overrides such as schedule.max_steps=100."),
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML training config."),
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Run directory (checkpoints, model)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --output-dir exactly."),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads (default: torch's)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Train a pointer-generator network (See et al., 2017) with the paper's two-phase schedule."""
    import json

    import yaml

    from synopsis.config import from_dict
    from synopsis.io import read_text
    from synopsis.training.pointer_generator import TRAIN_CONFIG_FILE, TrainConfig
    from synopsis.training.pointer_generator import train as run_training

    if config is not None:
        try:
            data = yaml.safe_load(read_text(config)) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{config}: not valid YAML: {str(err).splitlines()[0]}") from None
        where = str(config)
    elif resume and (output_dir / TRAIN_CONFIG_FILE).is_file():
        data = json.loads((output_dir / TRAIN_CONFIG_FILE).read_text(encoding="utf-8"))
        where = str(output_dir / TRAIN_CONFIG_FILE)
    else:
        raise ConfigError("--config is required (except with --resume on an existing run)")
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping at the top level")
    train_config = from_dict(TrainConfig, _merge(data, _parse_overrides(overrides or [])), where)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    run_training(train_config, output_dir, resume=resume, progress=not quiet)
    typer.echo(f"model written to {output_dir / 'model'}")
