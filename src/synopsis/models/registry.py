"""One table of the checkpoint types synopsis reads, and what each needs.

A checkpoint's ``config.json`` names its ``model_type``; everything that depends on it (which inputs the
model reads, the task prefix, which conversions apply, how long a source may be) is looked up here, so no
other module keeps a list of model types. The entries that carry several methods are also the one list of
which methods stack on which (:func:`stacked_type`). Pure data: importing it builds no model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from synopsis.errors import CheckpointError

#: The model type of InstructSum's T5 (Nishida et al.), whose encoder reads ``segment_ids``.
INSTRUCTSUM_MODEL_TYPE = "instructsum_t5"
#: Batch-record fields a HIBRIDS model reads (Cao & Wang, 2022).
SECTION_INPUTS = ("section_ids", "section_relations")
#: Batch-record field InstructSum's block mask reads.
SEGMENT_INPUTS = ("segment_ids",)
#: Batch-record field LED reads: which tokens attend globally.
GLOBAL_INPUTS = ("global_attention_mask",)
#: The methods a checkpoint type may carry, as their papers name them.
PAPER_NAMES = {"hie_bart": "Hie-BART", "hibrids": "HIBRIDS", "instructsum": "InstructSum"}
#: Where each input feature (:class:`~synopsis.models.features.InputFeature`) lives, as ``"module:Class"``,
#: imported the first time a model that reads it builds its inputs (transformers' Auto mappings name their
#: classes so). A method's feature goes under the method's name; the order is the order the input builder
#: asks them in (the first that lays out a prompt lays it out).
INPUT_FEATURES = {
    "instructsum": "synopsis.models.instructsum.inputs:InstructSumInputs",
    "instruction_prompt": "synopsis.models.instructsum.inputs:InstructionPromptInputs",
    "hie_bart": "synopsis.models.hie_bart:HieBartInputs",
    "hibrids": "synopsis.models.hibrids.inputs:HibridsInputs",
    "section_markers": "synopsis.models.hibrids.inputs:SectionMarkerInputs",
    "global_attention": "synopsis.models.features:GlobalAttentionInputs",
}
#: Input features every checkpoint of a family reads, beyond its methods': a T5 given an instruction reads
#: InstructSum's prompt (the paper's T5 baseline), LED gives its first token global attention.
FAMILY_FEATURES = {"t5": ("instruction_prompt",), "led": ("global_attention",)}
#: Settings a checkpoint's ``config.json`` may carry on any model type, with their defaults: a task prefix
#: (``task_specific_params``, T5's), read section headings before their text (``source_headings``), HIBRIDS'
#: SECTOK / LVLSECTOK section markers (``section_markers``, ``section_marker_max_depth``, recorded by
#: ``synopsis convert section-tokens``).
CONFIG_SETTINGS: dict[str, Any] = {
    "task_specific_params": None,
    "source_headings": True,
    "section_markers": None,
    "section_marker_max_depth": 1,
}
#: The longest input a stock T5 is allowed when asked (InstructSum's T5 baseline at inference).
T5_MAX_SOURCE_LENGTH = 1024


@dataclass(frozen=True)
class CheckpointType:
    """What a checkpoint of one ``model_type`` needs.

    ``family``: the Hugging Face base (``bart``, ``t5``, ``led``, ``pegasus``); ``methods``: the synopsis
    methods stacked on it (empty for a stock checkpoint); ``inputs``: batch-record fields beyond ids,
    the attention mask and labels the model reads (each added by one of its input features); ``task_prefix``:
    the source prefix when the config names none (T5's
    ``"summarize: "``); ``source_length``: for a family with relative positions (no position table), the
    input length its checkpoints are made for when the tokenizer names none; ``longest_asked``: the longest
    input such a model accepts when asked, when that is more (0: ``source_length``'s).
    """

    name: str
    family: str
    methods: frozenset[str] = frozenset()
    inputs: tuple[str, ...] = ()
    task_prefix: str = ""
    source_length: int = 512
    longest_asked: int = 0

    @property
    def stock(self) -> bool:
        return not self.methods

    @property
    def relative_positions(self) -> bool:
        """No position table: the length a model reads is its tokenizer's or :attr:`source_length`."""
        return self.family == "t5"

    @property
    def features(self) -> tuple[str, ...]:
        """The input features (names in :data:`INPUT_FEATURES`) it reads: its methods' and its family's."""
        own = self.methods | set(FAMILY_FEATURES.get(self.family, ()))
        return tuple(name for name in INPUT_FEATURES if name in own)

    @property
    def hibrids(self) -> bool:
        """Section-tree attention biases: reads ``section_ids``/``section_relations``."""
        return "hibrids" in self.methods

    @property
    def reads_section_tree(self) -> bool:
        """Reads the section tree's relations (HIBRIDS): by section, it reads each section's subtree."""
        return self.hibrids

    @property
    def hie_bart(self) -> bool:
        """Sentence-level heads: the source carries a sentence-start marker (when the config has them)."""
        return "hie_bart" in self.methods

    @property
    def instructsum(self) -> bool:
        return "instructsum" in self.methods


def _types(*types: CheckpointType) -> dict[str, CheckpointType]:
    return {t.name: t for t in types}


#: Every supported ``model_type``: the stock summarization families ``AutoModelForSeq2SeqLM`` builds (BART,
#: mBART, PEGASUS, PEGASUS-X, BigBird-PEGASUS, T5, mT5, UMT5, LongT5, LED), then the methods' types. A stock
#: type whose name is not its family's (mBART, PEGASUS-X, ...) runs as it is; methods stack on the
#: families' own classes (:func:`stacked_type`).
MODEL_TYPES: dict[str, CheckpointType] = _types(
    CheckpointType("bart", "bart"),
    CheckpointType("mbart", "bart"),
    CheckpointType("pegasus", "pegasus"),
    CheckpointType("pegasus_x", "pegasus"),
    CheckpointType("bigbird_pegasus", "pegasus"),
    CheckpointType("t5", "t5", task_prefix="summarize: ", longest_asked=T5_MAX_SOURCE_LENGTH),
    CheckpointType("mt5", "t5", task_prefix="summarize: ", longest_asked=T5_MAX_SOURCE_LENGTH),
    CheckpointType("umt5", "t5", longest_asked=T5_MAX_SOURCE_LENGTH),
    # Guo et al. (2022) read up to 16k tokens
    CheckpointType("longt5", "t5", source_length=16384, longest_asked=T5_MAX_SOURCE_LENGTH),
    CheckpointType("led", "led", inputs=GLOBAL_INPUTS),
    CheckpointType("hie_bart", "bart", frozenset({"hie_bart"})),
    CheckpointType(INSTRUCTSUM_MODEL_TYPE, "t5", frozenset({"instructsum"}), SEGMENT_INPUTS),
    CheckpointType("hibrids_bart", "bart", frozenset({"hibrids"}), SECTION_INPUTS),
    CheckpointType("hibrids_t5", "t5", frozenset({"hibrids"}), SECTION_INPUTS, "summarize: "),
    CheckpointType("hibrids_led", "led", frozenset({"hibrids"}), SECTION_INPUTS + GLOBAL_INPUTS),
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


def config_setting(config: Any, name: str) -> Any:
    """A setting of :data:`CONFIG_SETTINGS` as ``config`` records it, else its default: the one reader of
    the optional settings a config.json may carry."""
    return getattr(config, name, CONFIG_SETTINGS[name])


def position_table(config: Any) -> int | None:
    """How many positions the encoder's position table holds (LED's encoder table, else the model's);
    None for a family with relative positions (T5) or a config that names none."""
    entry = checkpoint_type(config)
    if entry is not None and entry.relative_positions:
        return None
    for name in ("max_encoder_position_embeddings", "max_position_embeddings"):
        if getattr(config, name, None) is not None:
            return int(getattr(config, name))
    return None


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


def _stacks_on(source: CheckpointType, method: str) -> CheckpointType | None:
    # methods attach to the family's own classes: a stock type of another name (mT5) takes none
    if source.stock and source.name != source.family:
        return None
    methods = source.methods | {method}
    return next((t for t in MODEL_TYPES.values() if t.family == source.family and t.methods == methods), None)


def stacked_type(config: Any, method: str) -> CheckpointType:
    """The type a checkpoint of ``config``'s type becomes with ``method`` stacked on it: the entry of the same
    family that carries the source's methods plus ``method`` (the source's own type when it carries it
    already). Which methods stack on which is read off the composed entries of :data:`MODEL_TYPES` alone.

    Refuses (:class:`~synopsis.errors.CheckpointError`, naming the families it stacks on) a type without one.
    """
    source = checkpoint_type(config)
    target = _stacks_on(source, method) if source is not None else None
    if target is None:
        families = dict.fromkeys(t.family for t in MODEL_TYPES.values() if _stacks_on(t, method) is not None)
        name = config if isinstance(config, str) else getattr(config, "model_type", None)
        raise CheckpointError(
            f"{PAPER_NAMES[method]} needs a {' or '.join(f.upper() for f in families)} checkpoint, "
            f"this one is {name!r}"
        )
    return target
