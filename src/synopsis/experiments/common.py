"""What the small seq2seq experiments share (the Hie-BART head sweep, the HIBRIDS variants, InstructSum on
QMSum): the fields of their configs that size the model and one training run, the trainer's config of one run
from them, training a run (resumed when it has checkpoints) into
one row of scores, writing ``results.json`` and ``table.md``, and the dev ROUGE / dev loss figure."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from synopsis.config import AT_LEAST_ONE, DROPOUT, NON_NEGATIVE, POSITIVE, Checked, Range
from synopsis.io import open_for_atomic_write, write_json
from synopsis.training.objectives import METRICS
from synopsis.training.seq2seq import Seq2SeqTrainConfig, train_seq2seq


@dataclass(kw_only=True)
class Seq2SeqExperimentConfig(Checked):
    """The settings every small seq2seq experiment has: the model's width, depth and dropout (trained from
    random init) and one training run's, each named as the trainer's field it sets
    (:func:`seq2seq_run_config`); an experiment adds its own fields and may give these other defaults.
    ``train_examples`` / ``dev_examples``: the examples trained on / scored (``None``: all)."""

    d_model: int = 64
    layers: int = 2  # encoder and decoder layers each
    dropout: float = 0.1
    train_examples: int | None = None
    dev_examples: int | None = 100
    max_source_length: int = 256
    max_target_length: int = 48
    batch_size: int = 16
    learning_rate: float = 3e-3
    warmup_steps: int = 50
    max_steps: int = 200
    eval_max_length: int = 48
    seed: int = 0

    RANGES: ClassVar[dict[str, Range]] = {
        **dict.fromkeys(("d_model", "layers", "train_examples", "dev_examples"), AT_LEAST_ONE),
        **dict.fromkeys(("max_source_length", "max_target_length", "batch_size"), AT_LEAST_ONE),
        **dict.fromkeys(("max_steps", "eval_max_length"), AT_LEAST_ONE),
        "dropout": DROPOUT,
        "learning_rate": POSITIVE,
        "warmup_steps": NON_NEGATIVE,
        "seed": NON_NEGATIVE,
    }


#: Fields of :class:`Seq2SeqExperimentConfig` that the trainer's config has by the same name.
_SHARED = (
    "max_source_length",
    "max_target_length",
    "batch_size",
    "learning_rate",
    "warmup_steps",
    "max_steps",
    "eval_max_length",
    "seed",
)


def seq2seq_run_config(cfg: Seq2SeqExperimentConfig, **settings: Any) -> Seq2SeqTrainConfig:
    """The trainer's config of one run: ``cfg``'s training settings (``train_examples`` / ``dev_examples``
    as the example limits), dev scores every ``cfg.eval_every`` steps (an experiment without that field: once,
    at the end), no early stopping, one checkpoint kept; ``settings`` add to or replace them."""
    shared = {name: getattr(cfg, name) for name in _SHARED}
    limits = {"max_train_examples": cfg.train_examples, "max_dev_examples": cfg.dev_examples}
    shared["eval_every"] = getattr(cfg, "eval_every", cfg.max_steps)
    return Seq2SeqTrainConfig(**{**shared, **limits, "patience": 0, "keep_checkpoints": 1, **settings})


def train_run(run_config: Seq2SeqTrainConfig, show_progress: bool = True) -> dict[str, Any]:
    """Train one run (resumed if it has a checkpoint, only re-read if finished) and return its row: best dev
    ROUGE per metric and their average, the lowest and the last dev loss, the best step, the steps trained
    and the seconds it took."""
    start = time.perf_counter()
    resume = (Path(run_config.output_dir) / "checkpoints" / "latest").is_file()
    result = train_seq2seq(run_config, resume=resume, show_progress=show_progress)
    dev = result.history["dev"]
    return {
        **{m: result.best_metrics[m] for m in METRICS},
        "average": result.best_score,
        "dev_loss": min(d["loss"] for _, d in dev),
        "final_dev_loss": dev[-1][1]["loss"],
        "best_step": result.best_step,
        "steps": result.steps,
        "seconds": round(time.perf_counter() - start, 1),
    }


def write_results(output: Path, results: dict[str, Any], table: str) -> None:
    """``results.json`` and the Markdown ``table.md``, each written atomically."""
    write_json(output / "results.json", results)
    with open_for_atomic_write(output / "table.md") as handle:
        handle.write(table)


def plot_rouge_and_loss(
    rows: Sequence[dict[str, Any]],
    label: str,
    path: Path,
    title: str,
    xlabel: str | None = None,
    loss_as_line: bool = False,
) -> None:
    """Two panels: dev ROUGE bars per metric and their average for each row (named by ``row[label]``), and
    the dev loss (bars, or a line over an ordered setting)."""
    import matplotlib.pyplot as plt

    from synopsis.training.plots import save_figure  # selects the Agg backend, before any figure

    labels = [row[label] for row in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=110)
    width = 0.2
    for offset, metric in enumerate((*METRICS, "average")):
        xs = [i + (offset - 1.5) * width for i in range(len(rows))]
        left.bar(xs, [row[metric] for row in rows], width, label=metric)
    left.set_xticks(range(len(rows)), labels)
    left.set_ylabel("dev ROUGE F1 x 100")
    left.legend(fontsize=8)
    left.grid(axis="y", alpha=0.3)
    losses = [row["dev_loss"] for row in rows]
    if loss_as_line:
        right.plot(labels, losses, marker="o")
        right.grid(alpha=0.3)
    else:
        right.bar(labels, losses, color="tab:gray")
        margin = 0.05 * max(max(losses) - min(losses), 0.1) + 0.05
        right.set_ylim(min(losses) - margin, max(losses) + margin)
        right.grid(axis="y", alpha=0.3)
    if xlabel is not None:
        left.set_xlabel(xlabel)
        right.set_xlabel(xlabel)
    right.set_ylabel("dev loss (cross-entropy per token)")
    fig.suptitle(title)
    save_figure(fig, path)
