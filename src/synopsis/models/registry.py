"""One table of the checkpoint types synopsis reads, and what each needs.

A checkpoint's ``config.json`` names its ``model_type``; everything that depends on it (which inputs the
model reads, the task prefix, which conversions apply, how long a source may be) is looked up here, so no
other module keeps a list of model types. Pure data: importing it builds no model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The model type of InstructSum's T5 (Nishida et al.), whose encoder reads ``segment_ids``.
INSTRUCTSUM_MODEL_TYPE = "instructsum_t5"
#: Batch-record fields a HIBRIDS model reads (Cao & Wang, 2022).
SECTION_INPUTS = ("section_ids", "section_relations")
#: Batch-record field InstructSum's block mask reads.
SEGMENT_INPUTS = ("segment_ids",)


@dataclass(frozen=True)
class CheckpointType:
    """What a checkpoint of one ``model_type`` needs.

    ``family``: the Hugging Face base (``bart``, ``t5``, ``led``); ``methods``: the synopsis methods stacked
    on it (empty for a stock checkpoint); ``inputs``: batch-record fields beyond ids and masks the model
    reads; ``task_prefix``: the source prefix when the config names none (T5's ``"summarize: "``).
    """

    name: str
    family: str
    methods: frozenset[str] = frozenset()
    inputs: tuple[str, ...] = ()
    task_prefix: str = ""

    @property
    def stock(self) -> bool:
        return not self.methods

    @property
    def hibrids(self) -> bool:
        """Section-tree attention biases: reads ``section_ids``/``section_relations``."""
        return "hibrids" in self.methods

    @property
    def hie_bart(self) -> bool:
        """Sentence-level heads: the source carries a sentence-start marker (when the config has them)."""
        return "hie_bart" in self.methods

    @property
    def instructsum(self) -> bool:
        return "instructsum" in self.methods


def _types(*types: CheckpointType) -> dict[str, CheckpointType]:
    return {t.name: t for t in types}


#: Every supported ``model_type``.
MODEL_TYPES: dict[str, CheckpointType] = _types(
    CheckpointType("bart", "bart"),
    CheckpointType("hie_bart", "bart", frozenset({"hie_bart"})),
    CheckpointType("t5", "t5", task_prefix="summarize: "),
    CheckpointType("mt5", "t5", task_prefix="summarize: "),
    CheckpointType("led", "led"),
    CheckpointType(INSTRUCTSUM_MODEL_TYPE, "t5", frozenset({"instructsum"}), SEGMENT_INPUTS),
    CheckpointType("hibrids_bart", "bart", frozenset({"hibrids"}), SECTION_INPUTS),
    CheckpointType("hibrids_t5", "t5", frozenset({"hibrids"}), SECTION_INPUTS, "summarize: "),
    CheckpointType("hibrids_led", "led", frozenset({"hibrids"}), SECTION_INPUTS),
    CheckpointType("hibrids_hie_bart", "bart", frozenset({"hibrids", "hie_bart"}), SECTION_INPUTS),
    CheckpointType(
        "instructsum_hibrids_t5", "t5", frozenset({"instructsum", "hibrids"}), SEGMENT_INPUTS + SECTION_INPUTS
    ),
)
SUPPORTED_MODEL_TYPES = tuple(MODEL_TYPES)


def checkpoint_type(config: Any) -> CheckpointType | None:
    """The entry of a config (or a ``model_type`` string); None for a type synopsis does not know."""
    name = config if isinstance(config, str) else getattr(config, "model_type", None)
    return MODEL_TYPES.get(name)


def model_types(predicate: Callable[[CheckpointType], bool]) -> tuple[str, ...]:
    """The model types whose entry satisfies ``predicate``, in table order."""
    return tuple(name for name, entry in MODEL_TYPES.items() if predicate(entry))


def is_hibrids(config: Any) -> bool:
    entry = checkpoint_type(config)
    return entry is not None and entry.hibrids


def is_family(config: Any, family: str, *, stock: bool | None = None) -> bool:
    """Whether the config's type is of ``family`` (and, when ``stock`` is given, stock or not)."""
    entry = checkpoint_type(config)
    return entry is not None and entry.family == family and (stock is None or entry.stock == stock)


#: HIBRIDS checkpoint types (derived from the table).
HIBRIDS_MODEL_TYPES = model_types(lambda t: t.hibrids)
