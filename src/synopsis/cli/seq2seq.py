"""``synopsis train seq2seq`` and ``synopsis experiment hie-bart-heads``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from synopsis.errors import ConfigError

if TYPE_CHECKING:  # the training module imports transformers; the CLI loads it only when used
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

DEFAULT_SHARED = Path("../shared/data")


def _parse_sets(pairs: list[str] | None) -> dict[str, object]:
    """``--set key=value`` pairs, values parsed as YAML scalars (numbers, true/false, null)."""
    import yaml

    out: dict[str, object] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected key=value, e.g. --set warmup_steps=100")
        out[key.strip()] = yaml.safe_load(value)
    return out


def train(
    model: Path | None = typer.Option(None, "--model", help="Local Hugging Face model directory."),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="Training YAML (configs/seq2seq_*.yaml)."
    ),
    train_path: Path | None = typer.Option(None, "--train", help="Training corpus file or folder."),
    corpus: str | None = typer.Option(None, "--corpus", help="Corpus name (synopsis, scitldr, cnn, ...)."),
    train_split: str | None = typer.Option(None, "--train-split", help="Split of --train (e.g. train)."),
    dev_path: Path | None = typer.Option(None, "--dev", help="Dev corpus (default: --train)."),
    dev_split: str | None = typer.Option(None, "--dev-split", help="Split of --dev (e.g. dev)."),
    output: Path | None = typer.Option(None, "--output-dir", "--output", "-o", help="Run directory."),
    hie_bart_word_heads: int | None = typer.Option(
        None, "--hie-bart-word-heads", help="Train a BART checkpoint as Hie-BART with this many word heads."
    ),
    random_init: bool | None = typer.Option(
        None, "--random-init/--no-random-init", help="Random weights from the model's config.json."
    ),
    max_steps: int | None = typer.Option(None, "--max-steps"),
    batch_size: int | None = typer.Option(None, "--batch-size"),
    grad_accum_steps: int | None = typer.Option(None, "--grad-accum", help="Gradient accumulation steps."),
    learning_rate: float | None = typer.Option(None, "--lr"),
    eval_every: int | None = typer.Option(None, "--eval-every"),
    patience: int | None = typer.Option(None, "--patience", help="Early stopping patience (evaluations)."),
    sets: list[str] | None = typer.Option(None, "--set", help="Any config key: --set warmup_steps=100."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the run's latest checkpoint."),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads."),
) -> None:
    """Fine-tune a local BART / Hie-BART / T5 / LED checkpoint; dev ROUGE picks the best model."""
    import yaml

    from synopsis.config import from_dict
    from synopsis.io import read_text
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    data: dict[str, object] = {}
    if config is not None:
        try:
            data = yaml.safe_load(read_text(config)) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{config}: not valid YAML: {str(err).splitlines()[0]}") from None
    options = {
        "model": model,
        "train_path": train_path,
        "train_corpus": corpus,
        "train_split": train_split,
        "dev_path": dev_path,
        "dev_split": dev_split,
        "output_dir": output,
        "hie_bart_word_heads": hie_bart_word_heads,
        "random_init": random_init,
        "max_steps": max_steps,
        "batch_size": batch_size,
        "grad_accum_steps": grad_accum_steps,
        "learning_rate": learning_rate,
        "eval_every": eval_every,
        "patience": patience,
    }
    data.update({k: str(v) if isinstance(v, Path) else v for k, v in options.items() if v is not None})
    data.update(_parse_sets(sets))
    cfg = from_dict(Seq2SeqTrainConfig, data, str(config or "options"))
    _run_training(cfg, resume, threads)


def _run_training(cfg: Seq2SeqTrainConfig, resume: bool, threads: int | None) -> None:
    import torch
    from rich.console import Console

    from synopsis.training.seq2seq import train_seq2seq

    if threads is not None:
        torch.set_num_threads(max(1, threads))
    result = train_seq2seq(cfg, resume=resume)
    console = Console(stderr=True)
    best = " ".join(f"{k} {v:.2f}" for k, v in result.best_metrics.items())
    console.print(
        f"{result.steps} steps{' (stopped early)' if result.stopped_early else ''}; best dev {best} "
        f"at step {result.best_step}; model: {result.output_dir / 'best'}"
    )


def hie_bart_heads_experiment(
    output: Path = typer.Option(
        Path("runs/hie_bart_heads"), "--output-dir", "--output", "-o", help="Output directory."
    ),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="Sweep YAML (configs/hie_bart_heads.yaml)."
    ),
    data_dir: Path = typer.Option(
        DEFAULT_SHARED, "--data", help="Shared data folder (scitldr/, tokenizers/)."
    ),
    ratios: str | None = typer.Option(
        None, "--ratios", help="Word:sentence head splits, e.g. '8:0,6:2,4:4'."
    ),
    max_steps: int | None = typer.Option(None, "--max-steps"),
    sets: list[str] | None = typer.Option(None, "--set", help="Any sweep config key: --set d_model=128."),
    threads: int = typer.Option(2, "--threads", help="torch CPU threads."),
) -> None:
    """Hie-BART word:sentence head ratios (the paper's Table 2) with small models on SciTLDR, on CPU."""
    import torch
    from rich.console import Console

    from synopsis.config import from_dict, load_config, to_dict
    from synopsis.training.seq2seq import HeadSweepConfig, run_head_sweep

    torch.set_num_threads(max(1, threads))
    cfg = load_config(HeadSweepConfig, config) if config is not None else HeadSweepConfig()
    data = to_dict(cfg)
    if ratios is not None:
        data["ratios"] = [r.strip() for r in ratios.split(",") if r.strip()]
    if max_steps is not None:
        data["max_steps"] = max_steps
    data.update(_parse_sets(sets))
    cfg = from_dict(HeadSweepConfig, data, str(config or "options"))
    table = run_head_sweep(cfg, output, data_dir)
    Console().print(table)
