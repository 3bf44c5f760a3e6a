"""The pointer-generator trainer's configuration (See et al., 2017): data, vocabulary, model, optimizer and
schedule sections, checked when built, and the memory plan of a configuration (``--dry-run``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from synopsis.config import AT_LEAST_ONE, DROPOUT, HARDWARE, NON_NEGATIVE, POSITIVE, ForHardware, Range
from synopsis.generation.config import GenerationConfig
from synopsis.models.pointer_generator import (
    INIT_SCHEMES,
    PointerGenerator,
    PointerGeneratorConfig,
)
from synopsis.training.distributed import check_precision, resolve_precision
from synopsis.training.memory import (
    MemoryPlan,
    micro_batch,
    pointer_generator_activation_bytes,
    recurrent_plan,
)
from synopsis.vocab import SPECIALS

TRAIN_CONFIG_FILE = "train_config.json"
VOCAB_FILE = "vocab.txt"


@dataclass
class DataConfig:
    corpus: str = "scitldr"  # a corpus name for synopsis.data.readers.read_corpus, or "jsonl" (our format)
    path: str = "../shared/data/scitldr"
    train_split: str | None = "train"  # None for corpora without splits (a folder of .story files)
    dev_split: str | None = "dev"
    dev_path: str | None = None  # validation data somewhere else than ``path`` (e.g. a CNN/DM val folder)
    max_source_tokens: int = 400
    max_target_tokens: int = 100
    max_train_examples: int | None = None
    max_dev_examples: int | None = None
    all_references: bool = True  # one training pair per reference summary (else the first only)
    # the reader's own options, e.g. {text_column: article, summary_column: highlights} for corpus: hf
    corpus_options: dict[str, Any] | None = None


@dataclass
class VocabConfig:
    max_size: int = 50_000
    min_count: int = 1


@dataclass
class ModelConfig:
    embedding_dim: int = 128
    hidden_dim: int = 256
    pointer: bool = True
    coverage: bool = True  # run the coverage phase after convergence
    coverage_loss_weight: float = 1.0
    dropout: float = 0.0
    # Initial weights: "authors" (See et al.'s code: LSTMs uniform +-0.02, the rest truncated normal with
    # std 1e-4) or "pytorch" (the module defaults, as models trained before this option: the bundled one).
    init: str = "authors"


@dataclass
class OptimConfig:
    learning_rate: float = 0.15
    initial_accumulator: float = 0.1
    max_grad_norm: float = 2.0
    batch_size: int = 16  # the global batch: shared by all processes of a distributed run


#: Where the coverage phase's Adagrad accumulators start (``schedule.coverage_optimizer``).
COVERAGE_OPTIMIZER_STATES = ("fresh", "carry")


@dataclass
class ScheduleConfig:
    max_steps: int = 100_000  # cap on the main (no-coverage) phase
    eval_every: int = 500
    patience: int = 5  # evaluations without a better validation loss = converged
    coverage_steps: int = 3_000
    # The Adagrad accumulators the coverage phase starts with: "fresh" (at optim.initial_accumulator, as the
    # authors' convert_to_coverage_model, which restores every weight but no Adagrad slot) or "carry" (the
    # best main-phase checkpoint's, as this trainer did before; the bundled model was trained so).
    coverage_optimizer: str = "fresh"
    save_every: int = 500
    log_every: int = 50
    max_minutes: float | None = None  # wall-clock budget for the main phase (the coverage phase still runs)
    # The final model is the mean of the weights of the coverage phase's last K checkpoints (checkpoint
    # averaging; 1: the last weights, as in the paper). Checkpoints come every save_every steps.
    average_last: int = 1
    # Coverage phases trained one after the other from the same best main-phase weights (each on the next
    # batches of the stream); the final model combines their average_last means (1: the paper's).
    coverage_runs: int = 1
    # How: "mean" of their weights (one model), or "ensemble" (the runs decode as one model, their
    # distributions averaged at every step: coverage_runs times the decoding cost).
    combine_runs: str = "mean"


@dataclass
class PointerGeneratorTrainConfig(ForHardware):
    data: DataConfig = field(default_factory=DataConfig)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)  # defaults stored with the model
    seed: int = 1
    precision: str | None = None  # fp32 | bf16 | fp16; None: accelerate launch's --mixed_precision

    RANGES: ClassVar[dict[str, Range]] = {
        **HARDWARE,
        "data.max_source_tokens": AT_LEAST_ONE,
        "data.max_target_tokens": AT_LEAST_ONE,
        "data.max_train_examples": AT_LEAST_ONE,
        "data.max_dev_examples": AT_LEAST_ONE,
        "vocab.max_size": AT_LEAST_ONE,
        "vocab.min_count": AT_LEAST_ONE,
        "model.embedding_dim": AT_LEAST_ONE,
        "model.hidden_dim": AT_LEAST_ONE,
        "model.coverage_loss_weight": NON_NEGATIVE,
        "model.dropout": DROPOUT,
        "optim.learning_rate": POSITIVE,
        "optim.initial_accumulator": NON_NEGATIVE,
        "optim.max_grad_norm": POSITIVE,
        "optim.batch_size": AT_LEAST_ONE,
        "schedule.max_steps": AT_LEAST_ONE,
        "schedule.eval_every": AT_LEAST_ONE,
        "schedule.patience": AT_LEAST_ONE,
        "schedule.coverage_steps": NON_NEGATIVE,
        "schedule.save_every": AT_LEAST_ONE,
        "schedule.log_every": AT_LEAST_ONE,
        "schedule.max_minutes": POSITIVE,
        "schedule.average_last": AT_LEAST_ONE,
        "schedule.coverage_runs": AT_LEAST_ONE,
        "seed": NON_NEGATIVE,
    }

    def validate(self) -> None:
        check_precision(self.precision)
        if self.schedule.eval_every > self.schedule.max_steps:
            raise ValueError(
                f"schedule.eval_every ({self.schedule.eval_every}) must be <= schedule.max_steps "
                f"({self.schedule.max_steps}): the run would never be validated, so no model would be kept"
            )
        if self.model.init not in INIT_SCHEMES:
            raise ValueError(f"model.init must be one of {', '.join(INIT_SCHEMES)}, got {self.model.init!r}")
        start = self.schedule.coverage_optimizer
        if start not in COVERAGE_OPTIMIZER_STATES:
            raise ValueError(f"schedule.coverage_optimizer must be 'fresh' or 'carry', got {start!r}")
        combine = self.schedule.combine_runs
        if combine not in ("mean", "ensemble"):
            raise ValueError(f"schedule.combine_runs must be 'mean' or 'ensemble', got {combine!r}")
        if combine == "ensemble" and self.schedule.coverage_runs < 2:
            raise ValueError("schedule.combine_runs 'ensemble' needs schedule.coverage_runs >= 2")


def memory_plan(config: PointerGeneratorTrainConfig) -> MemoryPlan:
    """The plan of one training step per device (``train pointer-generator --dry-run``) from the config
    alone: no data is read, so the vocabulary is taken at its bound ``vocab.max_size`` (plus the special
    tokens), what a corpus with that many distinct words gives; the model is built on the meta device,
    with coverage (the second phase: its parameter and the larger step)."""
    m, d = config.model, config.data
    vocab = config.vocab.max_size + len(SPECIALS)
    with torch.device("meta"):
        model = PointerGenerator(
            PointerGeneratorConfig(
                vocab_size=vocab, embedding_dim=m.embedding_dim, hidden_dim=m.hidden_dim, pointer=m.pointer,
                coverage=True,
            )
        )  # fmt: skip
    batch = micro_batch(config.optim.batch_size, config.devices)
    precision = resolve_precision(config.precision)
    activations = pointer_generator_activation_bytes(
        vocab=vocab, embedding=m.embedding_dim, hidden=m.hidden_dim, source=d.max_source_tokens,
        target=d.max_target_tokens, batch=batch, precision=precision,
    )  # fmt: skip
    parameters = sum(p.numel() for p in model.parameters())
    return recurrent_plan(
        model=f"pointer-generator (vocabulary {vocab:,})", parameters=parameters,
        optimizer="adagrad", activations=activations, source=d.max_source_tokens, target=d.max_target_tokens,
        batch=batch, devices=config.devices, precision=precision, device_memory_gb=config.device_memory_gb,
        device_type=config.device_type,
        notes=f"vocabulary at its bound, vocab.max_size + {len(SPECIALS)} special tokens (no data read)",
    )  # fmt: skip
