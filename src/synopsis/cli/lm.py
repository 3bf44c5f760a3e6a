"""``synopsis lm`` (train / perplexity / sample) and ``synopsis experiment domain-lm``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from synopsis.cli import options as shared_options
from synopsis.cli.options import count_option, ranged, seed_option, set_torch_threads, switch, threads_option
from synopsis.cli.runtime import print_plan, reporting_interrupts, stdout_console, training_account
from synopsis.config import POSITIVE
from synopsis.errors import CheckpointError, ConfigError, InputError

if TYPE_CHECKING:
    from synopsis.experiments.domain_lm import ExperimentConfig
    from synopsis.models.domain_lm import DomainLM
    from synopsis.training.language_model import LMTrainResult
    from synopsis.vocab import Vocab

log = logging.getLogger("synopsis.cli")

app = typer.Typer(help="Domain-attribute LSTM language models.", no_args_is_help=True)

CONFIG_HELP = "Experiment/training YAML (configs/domain_lm.yaml); defaults: MASC style x topic grid."
CORPUS_HELP = (
    "MASC masc_tagged.zip or JSONL ({'text','attributes'} or synopsis Examples). Without --config, a corpus "
    "other than MASC defines one domain per distinct attribute set."
)


SET_HELP = "Any experiment config key, value as YAML: --set training.lr=0.05 (repeatable)."


def _load_config(
    config: Path | None,
    corpus: str | None,
    max_epochs: int | None,
    sets: list[str] | None,
    grid: str | None = None,
):
    from synopsis.config import load_config, merge, parse_overrides, to_dict
    from synopsis.experiments.domain_lm import ExperimentConfig

    base = to_dict(ExperimentConfig())
    if config is None and corpus is not None and not corpus.endswith(".zip"):
        base["domains"] = []  # a corpus other than MASC defines its own domains
    given: dict = {}
    if corpus is not None:
        given["corpus"] = corpus
    if max_epochs is not None:
        given["training"] = {"max_epochs": max_epochs}
    if grid is not None:
        given["grid"] = None if grid == "none" else grid
    return load_config(ExperimentConfig, config, merge(given, parse_overrides(sets)), base=base)


def _parse_attributes(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name or not value:
            raise InputError(f"--attribute {pair!r}: expected name=value, e.g. style=spoken")
        out[name] = value
    return out


def _training_data(cfg, variant: str, attributes: str | None, held_out: str | None):  # noqa: ANN202
    """(vocabulary, train stream, dev stream, model config) of ``lm train``, shared by its run and plan."""
    from dataclasses import asdict

    from synopsis.experiments.domain_lm import build_training_data, load_domains, relabel
    from synopsis.models.domain_lm import DomainLMConfig, attribute_slots_from

    domains = load_domains(cfg, require_grid=False)
    if held_out is not None and held_out not in domains:
        raise InputError(f"--held-out: unknown domain {held_out!r}; domains: {'; '.join(domains)}")
    all_names = sorted({k for docs in domains.values() for k in docs[0].attributes})
    names = [n.strip() for n in attributes.split(",")] if attributes else all_names
    unknown = [n for n in names if n not in all_names]
    if unknown:
        raise InputError(f"--attributes: unknown name(s) {unknown}; the domains have {all_names}")
    vocab, train_stream, dev_stream = build_training_data(domains, held_out, cfg.dev_fraction, cfg.min_count)
    train_stream, dev_stream = relabel(train_stream, names), relabel(dev_stream, names)
    try:
        model_config = DomainLMConfig(
            vocab_size=len(vocab),
            variant=variant,
            attribute_slots=attribute_slots_from(train_stream.attribute_sets, names),
            **asdict(cfg.model),
        )
    except ValueError as err:
        raise ConfigError(str(err)) from None
    return vocab, train_stream, dev_stream, model_config


@app.command("train")
def train(
    output_dir: Path | None = typer.Option(
        None, "--output-dir", "-o", help="Run directory (checkpoints, model/); required unless --dry-run."
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
    corpus: str | None = typer.Option(None, "--corpus", help=CORPUS_HELP),
    variant: str = typer.Option("in", "--variant", help="baseline, in, out or in_out."),
    attributes: str | None = typer.Option(
        None, "--attributes", help="Comma-separated attribute names to use (default: all of the grid's)."
    ),
    held_out: str | None = typer.Option(
        None, "--held-out", help="Leave this domain out of training, e.g. 'style=spoken, topic=everyday'."
    ),
    max_epochs: int | None = count_option(None, "--max-epochs", help="Override training.max_epochs."),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    resume: bool = switch("--resume", "Continue from the run's latest checkpoint."),
    threads: int | None = threads_option(),
    dry_run: bool = switch(
        "--dry-run",
        "Print the memory plan per device and exit; reads the corpus for the vocabulary size only.",
    ),
    plan_json: Path | None = typer.Option(None, "--json", help="With --dry-run: write the plan as JSON."),
) -> None:
    """Train one language model on the corpus's domains (90% train / 10% dev per domain)."""
    import torch

    from synopsis.models.domain_lm import DomainLM
    from synopsis.training.distributed import Distributed
    from synopsis.training.language_model import train_language_model

    set_torch_threads(threads)
    cfg = _load_config(config, corpus, max_epochs, sets)
    if dry_run:  # writes no run directory
        _print_memory_plan(cfg, variant, attributes, held_out, plan_json)
        return
    if output_dir is None:
        raise ConfigError("--output-dir is required (except with --dry-run)")
    out = Path(output_dir)
    distributed = Distributed.launch()  # one process, or one of several (torchrun / accelerate launch)
    _check_run_dir(out, resume)
    vocab, train_stream, dev_stream, model_config = _training_data(cfg, variant, attributes, held_out)
    torch.manual_seed(cfg.training.seed)
    model = DomainLM(model_config)
    log.info(
        "%s model, %s parameters, slots %s; vocab %d, train %d / dev %d tokens",
        variant,
        f"{model.num_parameters():,}",
        model_config.attribute_slots,
        len(vocab),
        len(train_stream),
        len(dev_stream),
    )
    distributed.barrier()  # every process has looked at the run directory before anyone writes
    with reporting_interrupts(lambda: training_account(out, unit="epoch")):
        result = train_language_model(
            model, train_stream, dev_stream, cfg.training, run_dir=out, resume=resume, distributed=distributed
        )
    if distributed.is_main:
        _write_model(out, model, vocab, result, variant, {"lowercase": cfg.lowercase, "held_out": held_out})
    distributed.finish()


def _print_memory_plan(
    cfg: ExperimentConfig, variant: str, attributes: str | None, held_out: str | None, plan_json: Path | None
) -> None:
    """``--dry-run``: the memory plan per device, from the corpus's vocabulary size; no run directory."""
    from synopsis.training.language_model import memory_plan

    vocab, train_stream, _, model_config = _training_data(cfg, variant, attributes, held_out)
    notes = (
        f"vocabulary of {len(vocab):,} words built from the training part of the corpus (min_count "
        f"{cfg.min_count}); target tokens = the BPTT window"
    )
    plan = memory_plan(
        model_config,
        cfg.training,
        devices=cfg.devices,
        device_memory_gb=cfg.device_memory_gb,
        groups=len(train_stream.attribute_sets),
        notes=notes,
        device_type=cfg.device_type,
    )
    print_plan(plan, plan_json)


def _check_run_dir(out: Path, resume: bool) -> None:
    """Refuse to train over an earlier run unless ``--resume``; say what a resume will start from."""
    from synopsis.checkpoint import CheckpointManager

    latest = CheckpointManager(out).latest()
    if latest is not None and not resume:
        raise InputError(
            f"{out}: already holds a run; pass --resume to continue it or pick a new --output-dir"
        )
    if resume and latest is None:
        log.warning("%s: no checkpoint yet (nothing to resume); starting from the first epoch", out)
    elif latest is None and out.is_dir() and any(out.iterdir()):
        log.info("%s: the earlier run stopped before its first checkpoint; starting afresh", out)


def _write_model(
    out: Path, model: DomainLM, vocab: Vocab, result: LMTrainResult, variant: str, extra: dict[str, Any]
) -> None:
    """The trained model (``out/model``: weights, config with ``extra``, vocabulary), the result and the
    perplexity curves (main process)."""
    from dataclasses import asdict

    from synopsis.io import write_json
    from synopsis.training.plots import plot_curves

    model.save_pretrained(out / "model", extra=extra)
    vocab.save(out / "model" / "vocab.json")
    write_json(out / "train_result.json", asdict(result))
    plot_curves(
        {
            "train": [(h["epoch"], h["train_perplexity"]) for h in result.history],
            "dev": [(h["epoch"], h["dev_perplexity"]) for h in result.history],
        },
        out / "curves.png",
        title=f"DomainLM ({variant})",
        ylabel="perplexity",
    )
    log.info(
        "best dev perplexity %.2f after %d epochs; model in %s",
        result.best_dev_perplexity,
        result.epochs,
        out / "model",
    )


def _load_model(model_dir: Path):
    from synopsis.checkpoint import STATE_FILE
    from synopsis.io import read_json
    from synopsis.models.domain_lm import DomainLM
    from synopsis.vocab import Vocab

    model = DomainLM.from_pretrained(model_dir)
    if not (model_dir / "vocab.json").is_file():
        raise CheckpointError(
            f"{model_dir}: missing vocab.json; not a model directory from `synopsis lm train`"
        )
    vocab = Vocab.load(model_dir / "vocab.json")
    if len(vocab) != model.config.vocab_size:
        raise CheckpointError(
            f"{model_dir}: vocab.json has {len(vocab)} words, the model {model.config.vocab_size}"
        )
    state = read_json(
        model_dir / STATE_FILE, "a model directory from `synopsis lm train`", CheckpointError, dict
    )
    return model, vocab, bool(state.get("lowercase", True))


@app.command("perplexity")
def perplexity_command(
    model_dir: Path = typer.Option(..., "--model", "-m", help="A model directory (…/model) from `lm train`."),
    corpus: str = typer.Option(..., "--corpus", help=CORPUS_HELP),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="Domain grid to relabel the corpus with."
    ),
    domain: list[str] | None = typer.Option(None, "--domain", help="Only these domains (repeatable)."),
    attribute: list[str] | None = typer.Option(
        None, "--attribute", "-a", help="Give these attributes instead of each document's own (name=value)."
    ),
    threads: int | None = threads_option(),
) -> None:
    """Test perplexity per domain (unseen attribute values fall back to the shared representation)."""
    import math

    from rich.table import Table

    from synopsis.data.lm_corpus import TokenStream
    from synopsis.experiments.domain_lm import load_domains, restrict
    from synopsis.training.language_model import evaluate

    set_torch_threads(threads)
    model, vocab, lowercase = _load_model(model_dir)
    cfg = _load_config(config, corpus, None, None)
    cfg.lowercase = lowercase
    cfg.max_tokens_per_domain = None if config is None else cfg.max_tokens_per_domain
    domains = load_domains(cfg, require_grid=False)
    given = _parse_attributes(attribute)
    for name in domain or []:
        if name not in domains:
            raise InputError(f"--domain: unknown domain {name!r}; domains: {'; '.join(domains)}")
    names = sorted({s.split("=", 1)[0] for s in model.config.attribute_slots})
    table = Table("domain", "given attributes", "tokens", "OOV", "perplexity")
    grand_total, grand_count = 0.0, 0
    for name, docs in domains.items():
        if domain and name not in domain:
            continue
        stream = TokenStream.from_documents(docs, vocab)
        attrs = given if given is not None else restrict(docs[0].attributes, names)
        total, count = evaluate(model, stream.with_attributes(attrs))
        if not count:
            raise InputError(f"--corpus: domain {name!r} has no tokens to score")
        if not math.isfinite(total):
            raise CheckpointError(
                f"{model_dir}: the model gives {name!r} a perplexity of {math.exp(total / count)}; "
                "its weights are broken (not finite, or far out of range)"
            )
        grand_total, grand_count = grand_total + total, grand_count + count
        oov = float((stream.ids == vocab.unk_id).float().mean())
        table.add_row(name, str(attrs or "-"), str(count), f"{oov:.1%}", f"{math.exp(total / count):.2f}")
    if not grand_count:
        raise InputError("--domain: no domain selected")
    table.add_row("all", "", str(grand_count), "", f"{math.exp(grand_total / grand_count):.2f}")
    stdout_console().print(table)


@app.command("sample")
def sample_command(
    model_dir: Path = typer.Option(..., "--model", "-m", help="A model directory (…/model) from `lm train`."),
    attribute: list[str] | None = typer.Option(None, "--attribute", "-a", help="name=value (repeatable)."),
    prompt: str = typer.Option("", "--prompt", help="Text the sample continues."),
    length: int = count_option(60, "--length", help="Words to sample."),
    temperature: float = ranged(
        1.0, "--temperature", allowed=POSITIVE, help="Softmax temperature (< 1: safer, > 1: wilder)."
    ),
    seed: int = seed_option("Random seed."),
    threads: int | None = threads_option(),
) -> None:
    """Sample text given domain attributes."""
    from synopsis.generation.sampling import detokenize, sample
    from synopsis.text import word_tokenize

    set_torch_threads(threads)
    model, vocab, lowercase = _load_model(model_dir)
    tokens = sample(
        model,
        vocab,
        _parse_attributes(attribute),
        word_tokenize(prompt, lower=lowercase),
        length,
        temperature,
        seed,
    )
    typer.echo(detokenize([*word_tokenize(prompt, lower=lowercase), *tokens]))


def domain_lm_experiment(
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
    corpus: str | None = typer.Option(None, "--corpus", help=CORPUS_HELP),
    output_dir: Path = typer.Option(
        Path("runs/domain_lm"), "--output-dir", "-o", help="Experiment directory (results, tables, models)."
    ),
    max_epochs: int | None = count_option(None, "--max-epochs", help="Override training.max_epochs."),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    grid: str | None = typer.Option(
        None,
        "--grid",
        help="Choose E, H and BPTT on dev per model: paper (E 100/200/300 x H 50/100/150 x BPTT 4/8/16, 27 "
        "trainings per model), cpu (E 100/200 x H 50/100, BPTT 16) or none (the config's sizes).",
    ),
    fresh: bool = switch("--fresh", "Retrain models that already have results."),
    threads: int | None = threads_option(),
    dry_run: bool = switch(
        "--dry-run",
        "Print the memory plan per device of the largest model (in_out) and exit; reads the corpus for "
        "the vocabulary size only.",
    ),
    plan_json: Path | None = typer.Option(None, "--json", help="With --dry-run: write the plan as JSON."),
    device: str = shared_options.device_option(),
    dtype: str | None = shared_options.experiment_dtype_option(),
) -> None:
    """Leave-one-domain-out: train on the other domains, test on the unseen one; Tables 4-6 + heatmap."""
    from synopsis.devices import compute_device
    from synopsis.experiments.domain_lm import memory_plan, run_experiment
    from synopsis.training.distributed import default_precision

    set_torch_threads(threads)
    cfg = _load_config(config, corpus, max_epochs, sets, grid)
    if dry_run:
        with default_precision(dtype):
            print_plan(memory_plan(cfg), plan_json)
        return
    account = f"models finished so far are kept in {output_dir}; the same command continues with the others"
    with reporting_interrupts(lambda: account), compute_device(device), default_precision(dtype):
        results = run_experiment(cfg, output_dir, resume=not fresh)
    for key, value in results["tables"]["findings"].items():
        log.info("%s: %s of %s", key, value["count"], value["of"])
    log.info(
        "tables: %s, %s, %s",
        output_dir / "tables.md",
        output_dir / "results.json",
        output_dir / "table5_heatmap.png",
    )
