"""What a method adds to its encoder's input: one small interface, found through one table.

:class:`~synopsis.models.inputs.Seq2SeqInputs` builds what every seq2seq model reads (token ids, masks, each
token's sentence, section and segment). A method that reads more, or lays its input out otherwise, says so
by an :class:`InputFeatures` subclass beside its own code: Hie-BART's sentence-start marker
(:mod:`synopsis.models.hie_bart`), HIBRIDS' section-tree nodes, question layout and relations and the
SECTOK / LVLSECTOK section markers (:mod:`synopsis.models.hibrids.inputs`), InstructSum's prompt and its
per-part truncation (:mod:`synopsis.models.instructsum.inputs`), LED's global attention on the first token
(:class:`GlobalAttentionInputs`, here). Each is registered under a name in
:data:`synopsis.models.registry.INPUT_FEATURES` (``"module:Class"``, imported the first time a model that
reads it builds its inputs, as transformers' Auto mappings name their classes), and a checkpoint type's
entry says which names it reads (:attr:`~synopsis.models.registry.CheckpointType.features`). So the input
builder imports no method module, tests no model or method name and reads no method's config flag: it
calls the hooks below, whose defaults leave the input as it is.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from synopsis.models.registry import INPUT_FEATURES, checkpoint_type, config_setting

if TYPE_CHECKING:
    from synopsis.document import Document, Section

#: Segment ids: source text (and the model's prefix) vs instruction text.
SOURCE_SEGMENT, INSTRUCTION_SEGMENT = 0, 1


@dataclass
class Piece:
    """A run of the encoder's text and the labels of its every character: its sentence and section (-1:
    none), its segment, and whether truncation may cut it (False: InstructSum's template and title)."""

    text: str
    sentence: int = -1
    section: int = -1
    segment: int = SOURCE_SEGMENT
    cut: bool = True


class InputFeatures:
    """One method's part of a model's encoder input; built once per input builder from the model's config
    and tokenizer. Every hook's default changes nothing, so a feature overrides only what its method reads.

    Class attributes: ``fixed_source_length``, the input length the method always reads (InstructSum's
    1024 tokens), else None; ``question_start``, a token put alone between an instruction and the document
    (HIBRIDS on a tokenizer with a BOS); ``sentence_marker``, text put before every sentence (Hie-BART's
    sentence-start token).
    """

    fixed_source_length: ClassVar[int | None] = None
    question_start: str | None = None
    sentence_marker: str | None = None

    def __init__(self, config: Any, tokenizer: Any) -> None:
        self.config = config
        self.tokenizer = tokenizer

    def section_marker(self, section: Section) -> str | None:
        """Text put before the first sentence of ``section`` (SECTOK's ``[SEC]``), or None."""
        return None

    def owns_prompt(self, instruction: str | None) -> bool:
        """Whether this feature lays out the whole input for ``instruction`` (:meth:`prompt`)."""
        return False

    def prompt(self, document: Document, body: list[Piece], instruction: str | None) -> list[Piece]:
        """The whole input around ``body``, the document's plain text (whitespace normalised, no markers)."""
        raise NotImplementedError

    def kept(
        self, special: np.ndarray, segments: np.ndarray, cuttable: np.ndarray, limits: Limits
    ) -> np.ndarray:
        """Which tokens of a :meth:`prompt` input truncation keeps (a boolean array)."""
        raise NotImplementedError

    def prompt_room(self, instruction_length: int) -> int:
        """Tokens :meth:`prompt` adds around a document when there is no instruction yet to count."""
        return 0

    def section_ids(self, sections: np.ndarray, segments: np.ndarray, input_ids: np.ndarray) -> np.ndarray:
        """Each kept token's section id as the model reads it (default: the document's section index)."""
        return sections

    def relations(self, source: Any) -> torch.Tensor | None:
        """The (S, S) relation ids between one source's section-tree nodes, when the model reads them."""
        return None

    def collate(self, sources: Sequence[Any], batch: dict[str, torch.Tensor]) -> None:
        """Add this feature's fields to a padded batch record (``sources``: its SourceEncodings)."""


@dataclass(frozen=True)
class Limits:
    """The input builder's token budgets: the whole input, and an instruction's own part."""

    source: int
    instruction: int


class GlobalAttentionInputs(InputFeatures):
    """LED (Beltagy et al., 2020): global attention on the first token (``<s>``), as its summarization
    fine-tuning does; every other token attends within its window."""

    def collate(self, sources: Sequence[Any], batch: dict[str, torch.Tensor]) -> None:
        global_mask = torch.zeros_like(batch["input_ids"])
        global_mask[:, 0] = 1
        batch["global_attention_mask"] = global_mask


@cache
def _feature_class(name: str) -> type[InputFeatures]:
    module, _, attribute = INPUT_FEATURES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def feature_classes(config: Any) -> list[type[InputFeatures]]:
    """The input features a model of ``config`` reads, in :data:`INPUT_FEATURES`' order: its checkpoint
    type's, and SECTOK's markers where the config records them (``synopsis convert section-tokens``)."""
    entry = checkpoint_type(config)
    names = set(() if entry is None else entry.features)
    if config_setting(config, "section_markers"):
        names.add("section_markers")
    return [_feature_class(name) for name in INPUT_FEATURES if name in names]


def first(features: Sequence[InputFeatures], value: Callable[[InputFeatures], Any]) -> Any:
    """The first feature's value that is not None (None when none gives one)."""
    return next((v for v in map(value, features) if v is not None), None)
