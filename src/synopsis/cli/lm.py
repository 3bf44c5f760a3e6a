"""``synopsis lm`` (train / perplexity / sample) and ``synopsis experiment domain-lm``."""

from __future__ import annotations

from pathlib import Path

import typer

from synopsis.errors import ConfigError, InputError

app = typer.Typer(help="Domain-attribute LSTM language models.", no_args_is_help=True)

CONFIG_HELP = "Experiment/training YAML (configs/domain_lm.yaml); defaults: MASC style x topic grid."
CORPUS_HELP = (
    "MASC masc_tagged.zip or JSONL ({'text','attributes'} or synopsis Examples). Without --config, a corpus "
    "other than MASC defines one domain per distinct attribute set."
)


SET_HELP = "Any experiment config key, value as YAML: --set training.lr=0.05 (repeatable)."


def _load_config(config: Path | None, corpus: str | None, max_epochs: int | None, sets: list[str] | None):
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


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(max(1, threads))


@app.command("train")
def train(
    output_dir: Path = typer.Option(..., "--output-dir", "-o", help="Run directory (checkpoints, model/)."),
    config: Path | None = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
    corpus: str | None = typer.Option(None, "--corpus", help=CORPUS_HELP),
    variant: str = typer.Option("in", "--variant", help="baseline, in, out or in_out."),
    attributes: str | None = typer.Option(
        None, "--attributes", help="Comma-separated attribute names to use (default: all of the grid's)."
    ),
    held_out: str | None = typer.Option(
        None, "--held-out", help="Leave this domain out of training, e.g. 'style=spoken, topic=everyday'."
    ),
    max_epochs: int | None = typer.Option(None, "--max-epochs"),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    resume: bool = typer.Option(False, "--resume", help="Continue from the run's latest checkpoint."),
    threads: int = typer.Option(1, "--threads"),
) -> None:
    """Train one language model on the corpus's domains (90% train / 10% dev per domain)."""
    from dataclasses import asdict

    import torch
    from rich.console import Console

    from synopsis.experiments.domain_lm import build_training_data, load_domains, relabel
    from synopsis.io import write_json
    from synopsis.lm.training import train_language_model
    from synopsis.models.domain_lm import DomainLM, DomainLMConfig, attribute_slots_from
    from synopsis.training.plots import plot_curves

    _set_threads(threads)
    cfg = _load_config(config, corpus, max_epochs, sets)
    out = Path(output_dir)
    if (out / "checkpoints").exists() and not resume:
        raise InputError(
            f"{out}: already holds a run; pass --resume to continue it or pick a new --output-dir"
        )
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
    torch.manual_seed(cfg.training.seed)
    model = DomainLM(model_config)
    console = Console(stderr=True)
    console.print(
        f"{variant} model, {model.num_parameters():,} parameters, slots {model_config.attribute_slots}; "
        f"vocab {len(vocab)}, train {len(train_stream)} / dev {len(dev_stream)} tokens"
    )
    result = train_language_model(model, train_stream, dev_stream, cfg.training, run_dir=out, resume=resume)
    model.save_pretrained(out / "model", extra={"lowercase": cfg.lowercase, "held_out": held_out})
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
    console.print(
        f"best dev perplexity {result.best_dev_perplexity:.2f} after {result.epochs} epochs; "
        f"model in {out / 'model'}"
    )


def _load_model(model_dir: Path):
    import json

    from synopsis.models.domain_lm import DomainLM
    from synopsis.vocab import Vocab

    model = DomainLM.from_pretrained(model_dir)
    vocab = Vocab.load(model_dir / "vocab.json")
    if len(vocab) != model.config.vocab_size:
        raise InputError(
            f"{model_dir}: vocab.json has {len(vocab)} words, the model {model.config.vocab_size}"
        )
    state = json.loads((model_dir / "state.json").read_text(encoding="utf-8"))
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
    threads: int = typer.Option(1, "--threads"),
) -> None:
    """Test perplexity per domain (unseen attribute values fall back to the shared representation)."""
    import math

    from rich.console import Console
    from rich.table import Table

    from synopsis.experiments.domain_lm import load_domains, restrict
    from synopsis.lm.corpus import TokenStream
    from synopsis.lm.training import evaluate

    _set_threads(threads)
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
        grand_total, grand_count = grand_total + total, grand_count + count
        oov = float((stream.ids == vocab.unk_id).float().mean())
        table.add_row(name, str(attrs or "-"), str(count), f"{oov:.1%}", f"{math.exp(total / count):.2f}")
    table.add_row("all", "", str(grand_count), "", f"{math.exp(grand_total / grand_count):.2f}")
    Console().print(table)


@app.command("sample")
def sample_command(
    model_dir: Path = typer.Option(..., "--model", "-m", help="A model directory (…/model) from `lm train`."),
    attribute: list[str] | None = typer.Option(None, "--attribute", "-a", help="name=value (repeatable)."),
    prompt: str = typer.Option("", "--prompt"),
    length: int = typer.Option(60, "--length"),
    temperature: float = typer.Option(1.0, "--temperature"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Sample text given domain attributes."""
    from synopsis.lm.sampling import detokenize, sample
    from synopsis.text import word_tokenize

    if temperature <= 0 or length < 1:
        raise InputError("--temperature must be > 0 and --length >= 1")
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
    output_dir: Path = typer.Option(Path("runs/domain_lm"), "--output-dir", "-o"),
    max_epochs: int | None = typer.Option(None, "--max-epochs", help="Override training.max_epochs."),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    fresh: bool = typer.Option(False, "--fresh", help="Retrain models that already have results."),
    threads: int = typer.Option(1, "--threads"),
) -> None:
    """Leave-one-domain-out: train on the other domains, test on the unseen one; Tables 4-6 + heatmap."""
    from rich.console import Console

    from synopsis.experiments.domain_lm import run_experiment

    _set_threads(threads)
    cfg = _load_config(config, corpus, max_epochs, sets)
    console = Console(stderr=True, highlight=False)
    results = run_experiment(
        cfg, output_dir, resume=not fresh
    )
    for key, value in results["tables"]["findings"].items():
        console.print(f"{key}: {value['count']} of {value['of']}")
    console.print(
        f"tables: {output_dir / 'tables.md'}, {output_dir / 'results.json'}, "
        f"{output_dir / 'table5_heatmap.png'}"
    )
