"""The pointer-generator trainer (See et al., 2017), by concern: :mod:`.config` (the configuration and its
memory plan), :mod:`.batches` (examples, pairs, tensors, the batch order) and :mod:`.trainer` (the two-phase
schedule with exact resume). The names below are what the CLI and the tests import."""

from synopsis.training.pointer_generator.batches import (
    Pair,
    batch_to,
    collate,
    document_tokens,
    epoch_batches,
    make_pairs,
    read_split,
)
from synopsis.training.pointer_generator.config import (
    TRAIN_CONFIG_FILE,
    VOCAB_FILE,
    DataConfig,
    ModelConfig,
    OptimConfig,
    PointerGeneratorTrainConfig,
    ScheduleConfig,
    VocabConfig,
    memory_plan,
)
from synopsis.training.pointer_generator.trainer import Trainer, evaluate_loss, mean_weights, train

__all__ = [
    "TRAIN_CONFIG_FILE",
    "VOCAB_FILE",
    "DataConfig",
    "ModelConfig",
    "OptimConfig",
    "Pair",
    "PointerGeneratorTrainConfig",
    "ScheduleConfig",
    "Trainer",
    "VocabConfig",
    "batch_to",
    "collate",
    "document_tokens",
    "epoch_batches",
    "evaluate_loss",
    "make_pairs",
    "mean_weights",
    "memory_plan",
    "read_split",
    "train",
]
