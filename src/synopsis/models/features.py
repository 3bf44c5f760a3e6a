"""What a method adds to its encoder's input: a few small roles, composed as a list, found through one table.

:class:`~synopsis.models.inputs.Seq2SeqInputs` builds what every seq2seq model reads: token ids, the mask,
and each token's sentence, document section (``document_section_ids``) and segment. A method that reads
more, or lays its input out otherwise, says so by an input feature beside its own code, a class that takes
only the roles its method has (each role is defined once, here):

* :class:`TextMarkers`: text put into the source (a sentence marker, a section marker, a token alone between
  a question and the document): Hie-BART's sentence-start token (:mod:`synopsis.models.hie_bart`), the
  SECTOK / LVLSECTOK markers and HIBRIDS' question start (:mod:`synopsis.models.hibrids.inputs`).
* :class:`PromptLayout`: the whole input laid out around the document for some instructions, and its
  truncation (each part its own budget): InstructSum's prompt (:mod:`synopsis.models.instructsum.inputs`).
* :class:`InputFields`: fields of the method's own, added to each source's encoding
  (:meth:`InputFields.source_fields`) and to the batch (:meth:`InputFields.batch_fields`): HIBRIDS' node of
  every token, its relation buckets and depths; LED's global attention on the first token
  (:class:`GlobalAttentionInputs`, here). A model that reads none of them computes and pads none of them.
* :class:`CachedSourcePrompt`: the prompt a source cache reads (InstructSum: one encoding of a document serves
  every instruction).

A model's features form an :class:`InputFeatureList`, as transformers' ``LogitsProcessorList`` composes
processors: the builder asks the list, the list asks each feature of the role in order. Each feature is
registered under a name in :data:`synopsis.models.registry.INPUT_FEATURES` (``"module:Class"``, imported the
first time a model that reads it builds its inputs, as transformers' Auto mappings name their classes), and
a checkpoint type's entry says which names it reads (:attr:`~synopsis.models.registry.CheckpointType.
features`). So the input builder imports no method module, tests no model or method name and reads no
method's config flag.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import torch

from synopsis.models.registry import INPUT_FEATURES, checkpoint_type, config_setting

if TYPE_CHECKING:
    from synopsis.document import Document, Section

#: Segment ids: source text (and the model's prefix) vs instruction text.
SOURCE_SEGMENT, INSTRUCTION_SEGMENT = 0, 1


@dataclass
class Piece:
    """A run of the encoder's text and the labels of its every character: its sentence and document section
    (-1: none), its segment, and whether truncation may cut it (False: InstructSum's template and title)."""

    text: str
    sentence: int = -1
    section: int = -1
    segment: int = SOURCE_SEGMENT
    cut: bool = True


@dataclass(frozen=True)
class Limits:
    """The input builder's token budgets: the whole input, and an instruction's own part."""

    source: int
    instruction: int


class InputFeature:
    """What every role shares: a feature is built once per input builder from the model's config and
    tokenizer."""

    def __init__(self, config: Any, tokenizer: Any) -> None:
        self.config = config
        self.tokenizer = tokenizer


class TextMarkers(InputFeature):
    """Role: text the builder puts into the source. Each default adds nothing.

    ``sentence_marker``: text put before every sentence (Hie-BART's sentence-start token);
    ``question_start``: a token put alone between an instruction and the document (HIBRIDS on a tokenizer
    with a BOS)."""

    sentence_marker: str | None = None
    question_start: str | None = None

    def section_marker(self, section: Section) -> str | None:
        """Text put before the first sentence of ``section`` (SECTOK's ``[SEC]``), or None."""
        return None


class PromptLayout(InputFeature, ABC):
    """Role: the whole input laid out around the document for some instructions, truncated part by part.

    ``fixed_source_length``: the input length the method always reads (InstructSum's 1024 tokens), else None.
    """

    fixed_source_length: ClassVar[int | None] = None

    @abstractmethod
    def owns_prompt(self, instruction: str | None) -> bool:
        """Whether this feature lays out the whole input for ``instruction`` (:meth:`prompt`)."""

    @abstractmethod
    def prompt(self, document: Document, body: list[Piece], instruction: str | None) -> list[Piece]:
        """The whole input around ``body``, the document's plain text (whitespace normalised, no markers)."""

    @abstractmethod
    def kept(
        self, special: np.ndarray, segments: np.ndarray, cuttable: np.ndarray, limits: Limits
    ) -> np.ndarray:
        """Which tokens of a :meth:`prompt` input truncation keeps (a boolean array)."""

    @abstractmethod
    def prompt_room(self, instruction_length: int) -> int:
        """Tokens :meth:`prompt` adds around a document when there is no instruction yet to count."""


class InputFields(InputFeature):
    """Role: fields of the method's own, on each source's encoding and in the batch. Each default adds
    none."""

    def source_fields(self, document: Document, source: Any) -> dict[str, Any]:
        """Fields of one source (``source``: its encoding, truncated, with the generic fields and the
        fields of the features before this one), by name."""
        return {}

    def batch_fields(self, sources: Sequence[Any], batch: dict[str, torch.Tensor]) -> dict:
        """Fields of a padded batch record (``batch``: its generic fields), by name."""
        return {}


class CachedSourcePrompt(InputFeature, ABC):
    """Role: the model decodes from a cached source part (InstructSum: one encoding of a document serves
    every instruction)."""

    @abstractmethod
    def cached_prompt(self, source: Any) -> Any:
        """One encoded input as the source cache reads it."""


Role = TypeVar("Role", bound=InputFeature)


class InputFeatureList(list):
    """A model's input features in :data:`INPUT_FEATURES`' order; the builder asks it, and it asks each
    feature of the role in turn (as ``LogitsProcessorList`` applies each processor)."""

    def of(self, role: type[Role]) -> list[Role]:
        """The features that take ``role``."""
        return [feature for feature in self if isinstance(feature, role)]

    def first(self, role: type[Role], value: Callable[[Role], Any]) -> Any:
        """The first value of a feature of ``role`` that is not None (None when none gives one)."""
        return first(self.of(role), value)

    def prompt_owner(self, instruction: str | None) -> PromptLayout | None:
        """The feature that lays out the whole input for ``instruction`` (InstructSum's prompt), if any."""
        return next((f for f in self.of(PromptLayout) if f.owns_prompt(instruction)), None)

    def source_fields(self, document: Document, source: Any) -> None:
        """Add every field feature's fields to ``source``, in order (a later feature sees the earlier's)."""
        for feature in self.of(InputFields):
            source.fields.update(feature.source_fields(document, source))

    def batch_fields(self, sources: Sequence[Any], batch: dict[str, torch.Tensor]) -> None:
        """Add every field feature's batch fields to ``batch``, in order."""
        for feature in self.of(InputFields):
            batch.update(feature.batch_fields(sources, batch))


def pad_rows(rows: Iterable[Sequence[int]], width: int, value: int, *, left: bool = False) -> torch.Tensor:
    """(B, width) long tensor of per-token rows, padded with ``value`` on the tokenizer's padding side."""
    rows = list(rows)
    padded = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        if left:
            padded[i, width - len(row) :] = torch.as_tensor(row, dtype=torch.long)
        else:
            padded[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return padded


class GlobalAttentionInputs(InputFields):
    """LED (Beltagy et al., 2020): global attention on the first token (``<s>``), as its summarization
    fine-tuning does; every other token attends within its window."""

    def batch_fields(self, sources: Sequence[Any], batch: dict[str, torch.Tensor]) -> dict:
        global_mask = torch.zeros_like(batch["input_ids"])
        global_mask[:, 0] = 1
        return {"global_attention_mask": global_mask}


@cache
def _feature_class(name: str) -> type[InputFeature]:
    module, _, attribute = INPUT_FEATURES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def feature_classes(config: Any) -> list[type[InputFeature]]:
    """The input features a model of ``config`` reads, in :data:`INPUT_FEATURES`' order: its checkpoint
    type's, and SECTOK's markers where the config records them (``synopsis convert section-tokens``)."""
    entry = checkpoint_type(config)
    names = set(() if entry is None else entry.features)
    if config_setting(config, "section_markers"):
        names.add("section_markers")
    return [_feature_class(name) for name in INPUT_FEATURES if name in names]


def fixed_source_length(config: Any) -> int | None:
    """The input length a model of ``config`` always reads, when a prompt layout fixes it (InstructSum)."""
    layouts = [f for f in feature_classes(config) if issubclass(f, PromptLayout)]
    return first(layouts, lambda layout: layout.fixed_source_length)


def input_features(config: Any, tokenizer: Any) -> InputFeatureList:
    """The input features a model of ``config`` reads, built for ``tokenizer``."""
    return InputFeatureList(feature(config, tokenizer) for feature in feature_classes(config))


def first(features: Iterable[Any], value: Callable[[Any], Any]) -> Any:
    """The first feature's value that is not None (None when none gives one)."""
    return next((v for v in map(value, features) if v is not None), None)
