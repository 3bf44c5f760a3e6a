"""``synopsis train seq2seq``, ``synopsis convert`` and the seq2seq experiments."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import typer

from synopsis.cli.models import revision_option
from synopsis.cli.options import (
    count_option,
    device_option,
    experiment_dtype_option,
    ranged,
    set_torch_threads,
    switch,
    threads_option,
)
from synopsis.cli.runtime import (
    print_plan,
    refuse_to_overwrite_inputs,
    reporting_interrupts,
    stdout_console,
    training_account,
)
from synopsis.config import NON_NEGATIVE, POSITIVE

if TYPE_CHECKING:  # the training module imports transformers; the CLI loads it only when used
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

DEFAULT_SHARED = Path("../shared/data")


def train(
    model: Path | None = typer.Option(
        None, "--model", "-m", help="Hugging Face model: a local directory or a hub id (org/name, or name)."
    ),
    revision: str | None = revision_option(),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="Training YAML (configs/seq2seq_*.yaml)."
    ),
    train_path: Path | None = typer.Option(None, "--train", help="Training corpus file or folder."),
    corpus: str | None = typer.Option(None, "--corpus", help="Corpus name (synopsis, scitldr, cnn, ...)."),
    train_split: str | None = typer.Option(None, "--train-split", help="Split of --train (e.g. train)."),
    dev_path: Path | None = typer.Option(None, "--dev", help="Dev corpus (default: --train)."),
    dev_split: str | None = typer.Option(None, "--dev-split", help="Split of --dev (e.g. dev)."),
    output: Path | None = typer.Option(None, "--output-dir", "--output", "-o", help="Run directory."),
    random_init: bool | None = typer.Option(
        None, "--random-init/--no-random-init", help="Random weights from the model's config.json."
    ),
    max_steps: int | None = count_option(None, "--max-steps", help="Optimizer steps."),
    batch_size: int | None = count_option(
        None, "--batch-size", help="Examples per forward pass (per process)."
    ),
    grad_accum_steps: int | None = count_option(
        None, "--grad-accum", help="Global batch = --batch-size x this, any world size."
    ),
    learning_rate: float | None = ranged(None, "--lr", allowed=POSITIVE, help="Peak learning rate."),
    eval_every: int | None = count_option(None, "--eval-every", help="Dev ROUGE every this many steps."),
    patience: int | None = ranged(
        None, "--patience", allowed=NON_NEGATIVE, help="Early stopping patience (evaluations; 0: off)."
    ),
    sets: list[str] | None = typer.Option(
        None, "--set", help="Any config key, value as YAML: --set warmup_steps=100 (repeatable)."
    ),
    resume: bool = switch("--resume", "Continue from the run's latest checkpoint."),
    threads: int | None = threads_option(),
    dry_run: bool = switch(
        "--dry-run", "Print the memory plan per device (from config.json alone) and exit."
    ),
    plan_json: Path | None = typer.Option(None, "--json", help="With --dry-run: write the plan as JSON."),
) -> None:
    """Fine-tune a BART / PEGASUS / T5 / LED / Hie-BART / ... checkpoint; dev ROUGE picks the best model.

    The checkpoint's config.json says what the model is; to start a method from a stock checkpoint, convert it
    first (synopsis convert) or set convert in the config (--set convert.method=hie-bart ...).
    """
    from synopsis.config import load_config, merge, parse_overrides, read_config_file
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    options = {
        "model": model,
        "revision": revision,
        "train_path": train_path,
        "train_corpus": corpus,
        "train_split": train_split,
        "dev_path": dev_path,
        "dev_split": dev_split,
        "output_dir": output,
        "random_init": random_init,
        "max_steps": max_steps,
        "batch_size": batch_size,
        "grad_accum_steps": grad_accum_steps,
        "learning_rate": learning_rate,
        "eval_every": eval_every,
        "patience": patience,
    }
    given = {k: str(v) if isinstance(v, Path) else v for k, v in options.items() if v is not None}
    overrides = merge(given, parse_overrides(sets))
    if dry_run:  # a plan reads no data and writes no run directory: neither needs to be given
        stated = {**(read_config_file(config) if config is not None else {}), **overrides}
        overrides.update({key: "-" for key in ("output_dir", "train_path") if key not in stated})
    cfg = load_config(Seq2SeqTrainConfig, config, overrides)
    if dry_run:
        _dry_run(cfg, plan_json)
        return
    run_dir = Path(cfg.output_dir)
    refuse_to_overwrite_inputs(run_dir, [Path(cfg.model), Path(cfg.train_path), config], "--output-dir")
    _run_training(cfg, resume, threads)


def _dry_run(cfg: Seq2SeqTrainConfig, plan_json: Path | None) -> None:
    from synopsis.training.seq2seq import memory_plan

    print_plan(memory_plan(cfg), plan_json)


def _run_training(cfg: Seq2SeqTrainConfig, resume: bool, threads: int | None) -> None:
    import logging

    from synopsis.progress import progress_enabled
    from synopsis.training.seq2seq import Seq2SeqTrainer

    set_torch_threads(threads)
    trainer = Seq2SeqTrainer(cfg, resume=resume, show_progress=progress_enabled())
    trainer.save_config()
    with reporting_interrupts(lambda: training_account(trainer.run_dir, trainer.state["step"])):
        result = trainer.train()
    trainer.distributed.finish()
    best = " ".join(f"{k} {v:.2f}" for k, v in result.best_metrics.items())
    logging.getLogger("synopsis.cli").info(
        "%d steps%s; best dev %s at step %d; model: %s",
        result.steps,
        " (stopped early)" if result.stopped_early else "",
        best,
        result.best_step,
        result.output_dir / "best",
    )


# The small seq2seq experiments: one command each, built alike.
def _output_option(default: str) -> Path:
    return typer.Option(Path(default), "--output-dir", "--output", "-o", help="Output directory.")


_MAX_STEPS = count_option(None, "--max-steps", help="Optimizer steps per model.")


def _experiment_config(
    cls: type, config: Path | None, sets: list[str] | None, threads: int | None, **given: object
) -> Any:
    """``cls`` from the YAML, the options given (``None``: not given; a string: a comma-separated list) and
    ``--set`` on top; torch's threads are set first."""
    from synopsis.config import load_config, merge, parse_overrides

    set_torch_threads(threads)
    values = {
        key: [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value
        for key, value in given.items()
        if value is not None
    }
    return load_config(cls, config, merge(values, parse_overrides(sets)))


class _Experiment(NamedTuple):
    """One experiment of ``synopsis.experiments.<module>`` (imported when it runs): ``config_class`` from
    ``--config`` (e.g. ``configs/<module>.yaml``), then ``runner(cfg, output, data_dir)``'s table.
    ``data``: what the shared data folder must hold; ``runs``: the config's list of runs (field, help), its
    ``--<field>`` a comma-separated subset; ``doc``: the command's help."""

    module: str
    config_class: str
    runner: str
    data: str
    runs: tuple[str, str]
    doc: str


def _experiment_command(spec: _Experiment) -> Callable[..., None]:
    """The command of ``spec``: its config from the YAML, the options and ``--set``, then the runner's
    table on stdout."""
    module, field = spec.module, spec.runs[0]

    def command(
        output: Path = _output_option(f"runs/{module}"),
        config: Path | None = typer.Option(
            None, "--config", "-c", help=f"Experiment YAML (configs/{module}.yaml)."
        ),
        data_dir: Path = typer.Option(DEFAULT_SHARED, "--data", help=f"Shared data folder ({spec.data})."),
        chosen: str | None = typer.Option(None, f"--{field}", help=spec.runs[1]),
        max_steps: int | None = _MAX_STEPS,
        sets: list[str] | None = typer.Option(
            None, "--set", help="Any experiment config key, value as YAML: --set d_model=128 (repeatable)."
        ),
        threads: int | None = threads_option(),
        device: str = device_option(),
        dtype: str | None = experiment_dtype_option(),
    ) -> None:
        import importlib

        from synopsis.devices import compute_device
        from synopsis.training.distributed import default_precision

        experiment = importlib.import_module(f"synopsis.experiments.{module}")
        given = {field: chosen, "max_steps": max_steps}
        cfg = _experiment_config(getattr(experiment, spec.config_class), config, sets, threads, **given)
        account = f"the {field} finished so far are kept in {output}"
        with reporting_interrupts(lambda: account), compute_device(device), default_precision(dtype):
            table = getattr(experiment, spec.runner)(cfg, output, data_dir)
        stdout_console().print(table)

    command.__doc__ = spec.doc
    return command


#: ``synopsis experiment <name>``: the experiments whose commands are alike, in the order --help lists them
_EXPERIMENTS = {
    "hie-bart-heads": _Experiment(
        "hie_bart_heads", "HeadSweepConfig", "run_head_sweep", "scitldr/, tokenizers/",
        ("ratios", "Word:sentence head splits, e.g. '8:0,6:2,4:4'."),
        "Hie-BART word:sentence head ratios (the paper's Table 2) with small models on SciTLDR, on CPU.",
    ),
    "instructsum": _Experiment(
        "instructsum_qmsum", "InstructSumExperimentConfig", "run_instructsum_experiment",
        "qmsum/train, qmsum/val, tokenizers/t5",
        ("variants", "Comma-separated subset of no-instruction,full,instructsum."),
        "InstructSum on QMSum with small T5s on CPU: no instruction vs full attention vs the cached model.",
    ),
    "hibrids": _Experiment(
        "hibrids_scisummnet", "HibridsExperimentConfig", "run_hibrids_experiment", "scisummnet/, tokenizers/",
        ("variants", "Comma-separated subset of base,sectok,lvlsectok,hibrids-enc,hibrids-dec."),
        "HIBRIDS (Cao & Wang, 2022): base, SECTOK, LVLSECTOK, HIBRIDS-ENC/-DEC on LVLSECTOK; SciSummNet.",
    ),
}  # fmt: skip
EXPERIMENT_COMMANDS = {name: _experiment_command(spec) for name, spec in _EXPERIMENTS.items()}


def hibrids_probe_experiment(
    output: Path = _output_option("runs/hibrids_probe"),
    steps: int | None = count_option(None, "--steps", help="Optimizer steps per run."),
    seeds: str = typer.Option("0,1,2", "--seeds", help="Comma-separated seeds."),
    sets: list[str] | None = typer.Option(
        None, "--set", help="Any probe config key, value as YAML: --set train_documents=500 (repeatable)."
    ),
    threads: int | None = threads_option(),
    device: str = device_option(),
) -> None:
    """HIBRIDS tree probe: write the heading path of a marked sentence; base, LVLSECTOK, HIBRIDS-ENC, +DEC."""
    from rich.console import Console

    from synopsis.devices import compute_device
    from synopsis.experiments.hibrids_probe import ProbeConfig, run_probe

    seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    cfg = _experiment_config(ProbeConfig, None, sets, threads, seeds=seed_list, steps=steps)
    with compute_device(device):
        Console().print(run_probe(cfg, output, DEFAULT_SHARED))


def convert_hie_bart(
    source: Path = typer.Argument(..., help="A BART checkpoint: a directory or a hub id (org/name or name)."),
    output: Path = typer.Argument(..., help="New directory for the Hie-BART checkpoint."),
    revision: str | None = revision_option(),
    word_heads: int = count_option(
        ..., "--word-heads", help="Word-level heads per encoder layer; the rest are sentence-level."
    ),
    sentence_marker: str = typer.Option(
        "<s>",
        "--sentence-marker",
        help="Token that starts every sentence: BART's own <s> (the paper's) or a new one such as <sent>.",
    ),
) -> None:
    """Write a Hie-BART checkpoint from a BART one: the same weights, and a config.json that says Hie-BART."""
    from synopsis.models.seq2seq import convert_checkpoint

    refuse_to_overwrite_inputs(output, [source], "OUTPUT")
    convert_checkpoint(
        "hie-bart",
        source,
        output,
        revision=revision,
        word_heads=word_heads,
        sentence_start_token=sentence_marker,
    )
    typer.echo(f"wrote Hie-BART ({word_heads} word heads) to {output}")


def convert_instructsum(
    source: Path = typer.Argument(..., help="A T5 / FLAN-T5 checkpoint: a directory or a hub id."),
    output: Path = typer.Argument(..., help="New directory for the InstructSum checkpoint."),
    revision: str | None = revision_option(),
) -> None:
    """Write an InstructSum checkpoint from a T5 one: the same weights, and an encoder that reads
    instructions with the block mask that lets one source encoding serve many (train it with train seq2seq).
    """
    from synopsis.models.seq2seq import convert_checkpoint

    convert_checkpoint("instructsum", source, output, revision=revision)
    typer.echo(f"wrote InstructSum to {output}")


def convert_hibrids(
    source: Path = typer.Argument(..., help="A BART, T5 or LED checkpoint: a directory or hub id."),
    output: Path = typer.Argument(..., help="New directory for the HIBRIDS checkpoint."),
    revision: str | None = revision_option(),
    encoder: bool = typer.Option(True, "--encoder/--no-encoder", help="Bias every encoder self-attention."),
    decoder: bool = typer.Option(True, "--decoder/--no-decoder", help="Bias the last cross-attention."),
    selected: bool = switch("--selected", "HIBRIDS-S: a table of salient relations only."),
    shared_decoder_table: bool = switch(
        "--shared-decoder-table",
        "A decoder-table column shared by the heads, as the public code (default: one per head, the paper).",
    ),
    band_only: bool = switch(
        "--band-only",
        "LED: bias only the sliding band, as the public code (default: global tokens too, the paper).",
    ),
) -> None:
    """Write a HIBRIDS checkpoint: the same weights plus zero-initialised section-tree bias tables (so it
    computes exactly the base model until trained); its config.json records the choice."""
    from synopsis.models.seq2seq import convert_checkpoint

    convert_checkpoint(
        "hibrids",
        source,
        output,
        revision=revision,
        encoder=encoder,
        decoder=decoder,
        selected=selected,
        decoder_per_head=not shared_decoder_table,
        global_bias=not band_only,
    )
    parts = [name for name, on in (("encoder", encoder), ("decoder", decoder)) if on]
    typer.echo(f"wrote HIBRIDS ({' + '.join(parts)}{', selected relations' if selected else ''}) to {output}")


def convert_section_tokens(
    source: Path = typer.Argument(..., help="A BART, T5 or LED checkpoint: a directory or hub id."),
    output: Path = typer.Argument(..., help="New directory for the checkpoint with section markers."),
    revision: str | None = revision_option(),
    kind: str = typer.Option(
        "sectok", "--kind", help="sectok: one [SEC] token; lvlsectok: [SEC-L1], [SEC-L2], ... by depth."
    ),
    max_depth: int = count_option(4, "--max-depth", help="Deepest LVLSECTOK level (deeper uses it)."),
) -> None:
    """The SECTOK / LVLSECTOK baselines of HIBRIDS: a marker token starts every section of the input."""
    from synopsis.models.seq2seq import convert_checkpoint

    convert_checkpoint("section-tokens", source, output, revision=revision, markers=kind, max_depth=max_depth)
    typer.echo(f"wrote {kind.upper()} to {output}")
