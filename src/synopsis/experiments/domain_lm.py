"""The leave-one-domain-out experiment of the domain-attribute LM paper and its three tables.

For every domain of a full attribute grid (default: MASC, style x topic, see docs/domain_lm.md) the models
are trained on the other domains (per domain: first 90% of lines train, last 10% dev; vocabulary = training
words seen >= ``min_count`` times) and evaluated on the whole held-out domain:

* Table 4: the plain LSTM LM vs the (in), (out) and (in, out) models, each given the target's attributes;
* Table 5: the (in) model given every combination of attribute values (no retraining);
* Table 6: (in) models trained and evaluated with one attribute name only (style-only, topic-only) vs all.

Every trained model is saved with its result under ``output_dir/runs/<target>/<model>/``; a rerun skips
finished models and resumes interrupted ones from their last epoch checkpoint.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any, ClassVar

import torch

from synopsis.config import AT_LEAST_ONE, DROPOUT, HARDWARE, Checked, ForHardware, Range, to_dict
from synopsis.data.lm_corpus import (
    AttributedDocument,
    DomainSpec,
    TokenStream,
    build_vocabulary,
    check_grid,
    read_attributed_documents,
    select_domains,
    split_train_dev,
)
from synopsis.errors import ConfigError, InputError
from synopsis.experiments.domain_lm_tables import LMVariant, build_tables, restrict, write_outputs
from synopsis.io import read_json, write_json
from synopsis.models.domain_lm import (
    MODEL_VERSION,
    VARIANTS,
    DomainLM,
    DomainLMConfig,
    attribute_slots_from,
)
from synopsis.progress import ProgressReporter
from synopsis.training.language_model import LMTrainConfig, perplexity, train_language_model
from synopsis.training.language_model import memory_plan as lm_memory_plan
from synopsis.training.memory import MemoryPlan
from synopsis.vocab import Vocab

MASC_ZIP = "../shared/data/masc/masc_tagged.zip"

logger = logging.getLogger(__name__)


def masc_grid() -> list[DomainSpec]:
    """style (spoken / written) x topic (public / everyday) over MASC genres; see docs/domain_lm.md."""
    return [
        DomainSpec(
            {"style": "spoken", "topic": "public"}, {"genre": ["court-transcript", "debate-transcript"]}
        ),
        DomainSpec({"style": "spoken", "topic": "everyday"}, {"genre": ["face-to-face", "telephone"]}),
        DomainSpec({"style": "written", "topic": "public"}, {"genre": ["govt-docs"]}),
        DomainSpec({"style": "written", "topic": "everyday"}, {"genre": ["blog"]}),
    ]


@dataclass
class ModelSizes(Checked):
    embedding_dim: int = 100
    hidden_dim: int = 100
    num_layers: int = 1
    dropout: float = 0.5

    RANGES: ClassVar[dict[str, Range]] = {
        "embedding_dim": AT_LEAST_ONE,
        "hidden_dim": AT_LEAST_ONE,
        "num_layers": AT_LEAST_ONE,
        "dropout": DROPOUT,
    }


#: Size grids searched per model, each setting chosen by dev perplexity (``grid`` / ``--grid``). "paper": the
#: paper's E x H x BPTT (27 trainings per model); "cpu": 4 of them, for a CPU budget.
GRIDS: dict[str, dict[str, list[int]]] = {
    "paper": {"embedding_dim": [100, 200, 300], "hidden_dim": [50, 100, 150], "bptt": [4, 8, 16]},
    "cpu": {"embedding_dim": [100, 200], "hidden_dim": [50, 100], "bptt": [16]},
}
GRID_KEYS = ("embedding_dim", "hidden_dim", "bptt")


@dataclass
class ExperimentConfig(ForHardware):
    corpus: str = MASC_ZIP
    lowercase: bool = True
    domains: list[DomainSpec] = field(default_factory=masc_grid)
    max_tokens_per_domain: int | None = 29000
    dev_fraction: float = 0.1
    min_count: int = 3
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    single_attribute_models: bool = True
    held_out: list[str] = field(default_factory=list)
    model: ModelSizes = field(default_factory=ModelSizes)
    # the paper's schedule (lr 0.1, halving rule until it stops); configs/domain_lm_fast.yaml: 0.5, 6 epochs
    training: LMTrainConfig = field(default_factory=LMTrainConfig)
    # None: model.embedding_dim / hidden_dim and training.bptt for every model. A grid (a name of GRIDS, or
    # {embedding_dim: [...], hidden_dim: [...], bptt: [...]}) trains each model at every setting and keeps
    # the one with the best dev perplexity (the paper's model selection); the results say which.
    grid: str | dict[str, list[int]] | None = None

    RANGES: ClassVar[dict[str, Range]] = {
        **HARDWARE,
        "max_tokens_per_domain": AT_LEAST_ONE,
        "dev_fraction": Range(0.0, 0.5, low_open=True, high_open=True),
        "min_count": AT_LEAST_ONE,
    }

    def validate(self) -> None:
        grid = self.size_grid()
        if grid is not None:
            bad = sorted(set(grid) - set(GRID_KEYS)) or [k for k in GRID_KEYS if not grid.get(k)]
            if bad or any(not isinstance(v, int) or v < 1 for values in grid.values() for v in values):
                raise ValueError(
                    f"grid must be one of {', '.join(GRIDS)} or lists of positive integers for "
                    f"{', '.join(GRID_KEYS)}; got {self.grid!r}"
                )
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or "in" not in self.variants:
            raise ValueError(
                f"variants must be among {', '.join(VARIANTS)} and include 'in'; got {self.variants}"
            )

    def size_grid(self) -> dict[str, list[int]] | None:
        """The grid of sizes to choose from (None: the fixed sizes)."""
        if self.grid is None or isinstance(self.grid, dict):
            return self.grid
        if self.grid not in GRIDS:
            raise ValueError(f"grid must be one of {', '.join(GRIDS)} or a dict, got {self.grid!r}")
        return GRIDS[self.grid]


def memory_plan(config: ExperimentConfig, variant: str = "in_out") -> MemoryPlan:
    """The plan of one training step per device (``experiment domain-lm --dry-run``) of the largest model the
    experiment trains (``in_out``: both attribute-augmented layers; with a size grid, its largest sizes). The
    vocabulary is only known from the data: the corpus is read and the vocabulary built over every domain
    (``min_count``), the bound of each held-out model's; the model is built on the meta device. Plain SGD."""
    domains = load_domains(config, require_grid=False)
    vocab, train, _ = build_training_data(domains, None, config.dev_fraction, config.min_count)
    names = sorted({k for docs in domains.values() for k in docs[0].attributes})
    sizes = asdict(config.model)
    bptt = config.training.bptt
    grid = config.size_grid()
    if grid is not None:
        sizes.update(embedding_dim=max(grid["embedding_dim"]), hidden_dim=max(grid["hidden_dim"]))
        bptt = max(grid["bptt"])
    model_config = DomainLMConfig(
        vocab_size=len(vocab),
        variant=variant,
        attribute_slots=attribute_slots_from(train.attribute_sets, names),
        **sizes,
    )
    return lm_memory_plan(
        model_config,
        replace(config.training, bptt=bptt),
        devices=config.devices,
        device_memory_gb=config.device_memory_gb,
        device_type=config.device_type,
        # distinct attribute combinations in a batch: at most the domains
        groups=len(domains),
        notes=f"vocabulary of {len(vocab):,} words built from the corpus (every domain, min_count "
        f"{config.min_count}); target tokens = the BPTT window",
    )


@dataclass
class HeldOutData:
    """Everything one held-out domain needs: streams over a vocabulary built from its training part."""

    target: str
    vocab: Vocab
    train: TokenStream
    dev: TokenStream
    test: TokenStream
    test_attributes: dict[str, str]


def build_training_data(
    domains: dict[str, list[AttributedDocument]], exclude: str | None, dev_fraction: float, min_count: int
) -> tuple[Vocab, TokenStream, TokenStream]:
    """Vocabulary, train and dev streams from every domain but ``exclude`` (90/10 per domain by default)."""
    train_docs: list[AttributedDocument] = []
    dev_docs: list[AttributedDocument] = []
    for name, docs in domains.items():
        if name != exclude:
            train_part, dev_part = split_train_dev(docs, dev_fraction)
            train_docs += train_part
            dev_docs += dev_part
    vocab = build_vocabulary(train_docs, min_count)
    return vocab, TokenStream.from_documents(train_docs, vocab), TokenStream.from_documents(dev_docs, vocab)


def build_held_out(
    domains: dict[str, list[AttributedDocument]], target: str, dev_fraction: float, min_count: int
) -> HeldOutData:
    vocab, train, dev = build_training_data(domains, target, dev_fraction, min_count)
    test_docs = domains[target]
    return HeldOutData(
        target, vocab, train, dev, TokenStream.from_documents(test_docs, vocab), dict(test_docs[0].attributes)
    )


def load_domains(config: ExperimentConfig, require_grid: bool = True) -> dict[str, list[AttributedDocument]]:
    """The corpus's documents per domain (the config's grid, or one domain per distinct attribute set)."""
    if config.domains:
        check_grid(config.domains)  # fail on a bad grid before reading the corpus
    documents = read_attributed_documents(config.corpus, config.lowercase)
    grid = config.domains or infer_domains(documents)
    if require_grid:
        check_grid(grid)
        return select_domains(documents, grid, config.max_tokens_per_domain)
    return select_domains(documents, grid, config.max_tokens_per_domain, check=False)


def infer_domains(documents: Sequence[AttributedDocument]) -> list[DomainSpec]:
    """One domain per distinct attribute set of the documents (corpora already labelled with style/topic)."""
    seen = dict.fromkeys(tuple(sorted(d.attributes.items())) for d in documents if d.attributes)
    if not seen:
        raise InputError("no document has attributes; cannot define domains")
    return [DomainSpec(dict(key)) for key in seen]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def model_specs(config: ExperimentConfig, names: Sequence[str]) -> list[LMVariant]:
    specs = [LMVariant(v, list(names)) for v in config.variants]
    if config.single_attribute_models and len(names) > 1:
        specs += [LMVariant("in", [n]) for n in names]
    return specs


def run_experiment(config: ExperimentConfig, output_dir: str | Path, resume: bool = True) -> dict[str, Any]:
    """Run every held-out domain and model; write results.json, tables.md and the Table 5 heatmap."""
    output_dir = Path(output_dir)
    domains = load_domains(config)
    grid = [DomainSpec(docs[0].attributes) for docs in domains.values()]
    names = check_grid(grid)
    targets = config.held_out or list(domains)
    for target in targets:
        if target not in domains:
            raise ConfigError(f"held_out: unknown domain {target!r}; domains: {'; '.join(domains)}")
    values = {n: list(dict.fromkeys(spec.attributes[n] for spec in grid)) for n in names}
    combinations = [dict(zip(names, combo, strict=True)) for combo in product(*(values[n] for n in names))]
    specs = model_specs(config, names)

    results: dict[str, Any] = {
        "config": to_dict(config),
        "attribute_names": names,
        "domains": {
            name: {"attributes": dict(docs[0].attributes), "documents": len(docs), "tokens": _tokens(docs)}
            for name, docs in domains.items()
        },
        "held_out": {},
    }
    with ProgressReporter("domain-lm", len(targets) * len(specs), "runs") as progress:
        for target in targets:
            data = build_held_out(domains, target, config.dev_fraction, config.min_count)
            held: dict[str, Any] = {
                "vocab_size": len(data.vocab),
                "train_tokens": len(data.train),
                "dev_tokens": len(data.dev),
                "test_tokens": len(data.test),
                "test_oov_rate": float((data.test.ids == data.vocab.unk_id).float().mean()),
                "models": {},
            }
            results["held_out"][target] = held
            for spec in specs:
                progress.update(f"{target} | {spec.name}")
                job = _ModelRun(config, spec, data, combinations, resume)
                run_dir = output_dir / "runs" / slug(target) / slug(spec.name)
                held["models"][spec.name] = _run_model(job, run_dir)
                progress.advance()
                test_ppl = held["models"][spec.name]["test_perplexity"]
                logger.info("%-40s %-22s test ppl %8.2f", target, spec.name, test_ppl)
            # Tables over the targets finished so far, so a long run shows results as it goes.
            results["tables"] = build_tables(results, names, combinations, specs)
            write_outputs(results, output_dir, plot=target == targets[-1])
    return results


def _tokens(docs: Sequence[AttributedDocument]) -> int:
    return sum(d.num_tokens for d in docs)


@dataclass
class _ModelRun:
    """What every size setting of one model shares: the experiment, the model, its held-out data."""

    config: ExperimentConfig
    spec: LMVariant
    data: HeldOutData
    combinations: list[dict[str, str]]
    resume: bool


def _run_model(job: _ModelRun, run_dir: Path) -> dict[str, Any]:
    """One model at the config's sizes, or (with a grid) at every size, keeping the best by dev perplexity:
    its result, plus every setting's dev perplexity and the chosen setting."""
    config = job.config
    grid = config.size_grid()
    if grid is None:
        return _run_setting(job, config.model, config.training, run_dir)
    results = []
    for embedding, hidden, bptt in product(*(grid[k] for k in GRID_KEYS)):
        sizes = replace(config.model, embedding_dim=embedding, hidden_dim=hidden)
        training = replace(config.training, bptt=bptt)
        name = f"e{embedding}-h{hidden}-bptt{bptt}"
        result = _run_setting(job, sizes, training, run_dir / "grid" / name)
        results.append(({"embedding_dim": embedding, "hidden_dim": hidden, "bptt": bptt}, result))
    chosen, best = min(results, key=lambda item: item[1]["best_dev_perplexity"])  # dev only, never test
    return {
        **best,
        "chosen_setting": chosen,
        "grid_dev_perplexity": [{**s, "dev_perplexity": r["best_dev_perplexity"]} for s, r in results],
    }


def _run_setting(job: _ModelRun, sizes: ModelSizes, training: LMTrainConfig, run_dir: Path) -> dict[str, Any]:
    """One model at one size setting (resumed, or only re-read when finished with the same settings)."""
    config, spec, data, combinations, resume = job.config, job.spec, job.data, job.combinations, job.resume
    result_file = run_dir / "result.json"
    settings = {
        "model_version": MODEL_VERSION,
        "model": asdict(sizes),
        "training": asdict(training),
        "vocab_size": len(data.vocab),
    }
    settings_file = run_dir / "settings.json"
    if resume and settings_file.exists():
        if read_json(settings_file, "a domain-LM run", InputError) != settings:
            shutil.rmtree(run_dir)  # finished or started with other settings: retrain rather than mix
        elif result_file.exists():
            return read_json(result_file, "a finished domain-LM run", InputError, dict)
    elif not resume:
        shutil.rmtree(run_dir, ignore_errors=True)
    write_json(settings_file, settings)
    torch.manual_seed(training.seed)
    # Each model sees only the attribute names it uses (style-only models never see the topic).
    train = relabel(data.train, spec.attribute_names)
    dev = relabel(data.dev, spec.attribute_names)
    model = DomainLM(
        DomainLMConfig(
            vocab_size=len(data.vocab),
            variant=spec.variant,
            attribute_slots=attribute_slots_from(train.attribute_sets, spec.attribute_names),
            **asdict(sizes),
        )
    )
    trained = train_language_model(
        model,
        train,
        dev,
        training,
        run_dir=run_dir,
        resume=resume,
        description=f"  {spec.name}",
    )
    given = restrict(data.test_attributes, spec.attribute_names)
    result: dict[str, Any] = {
        "variant": spec.variant,
        "settings": settings,
        "attribute_names": spec.attribute_names,
        "attribute_slots": model.config.attribute_slots,
        "parameters": model.num_parameters(),
        "given_attributes": given,
        # every target counted (<unk> too: the tables' figure), and known-word targets only (the paper is
        # silent on OOV; here 11-25% of test tokens are <unk>, which a small vocabulary makes easy to predict)
        "test_perplexity": perplexity(model, data.test.with_attributes(given)),
        "test_perplexity_known_words": perplexity(
            model, data.test.with_attributes(given), skip_target=data.vocab.unk_id
        ),
        "best_dev_perplexity": trained.best_dev_perplexity,
        "epochs": trained.epochs,
        "train_seconds": trained.seconds,
        "train_tokens_per_second": trained.train_tokens_per_second,
        "history": trained.history,
    }
    if spec.variant == "in" and len(spec.attribute_names) == len(combinations[0]):
        result["given_attribute_perplexity"] = [
            {"attributes": combo, "perplexity": perplexity(model, data.test.with_attributes(combo))}
            for combo in combinations
        ]
    model.save_pretrained(run_dir / "model", extra={"lowercase": config.lowercase})
    data.vocab.save(run_dir / "model" / "vocab.json")
    write_json(result_file, result)
    # Finished: the epoch checkpoints were only needed to resume; model/ holds the best weights.
    shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)
    shutil.rmtree(run_dir / "best", ignore_errors=True)
    return result


def relabel(stream: TokenStream, names: Sequence[str]) -> TokenStream:
    """The same tokens with each attribute set restricted to ``names``."""
    return TokenStream(stream.ids, stream.groups, [restrict(a, names) for a in stream.attribute_sets])
