"""The one interface of a decoder (:mod:`synopsis.summarizers.decoders`): encoded inputs and one set of
decoding options in, summary token ids out.

A decoder maps a :class:`~synopsis.config.DecodingOptions` (checked once, where it was built) to its own
settings in one place, :meth:`Decoder.settings`, once per distinct value (it is frozen and hashable), so a
service answering many requests with the same options maps them once; what it cannot honour is a
:class:`~synopsis.errors.ConfigError` there, before any work (:meth:`Decoder.check`).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from synopsis.config import DecodingOptions

#: How many distinct option values a decoder keeps mapped (least recently used dropped first).
MAPPED_VALUES = 256


class Decoder(ABC):
    """What decodes a seq2seq model for :class:`~synopsis.summarizers.seq2seq.Seq2SeqSummarizer`."""

    #: its row in :data:`~synopsis.summarizers.decoders.DECODERS` (``torch``, ``ctranslate2``)
    backend: ClassVar[str]
    #: the model's config (``transformers.PretrainedConfig``) and tokenizer, which the inputs are built for
    config: Any
    tokenizer: Any
    #: the torch module it computes with (``None``: none, e.g. CTranslate2's translator)
    model: Any = None
    #: the source cache it keeps across calls (InstructSum's K/V cache), for the service's metrics
    cache: Any = None

    def __init__(self) -> None:
        # a service sees few distinct option sets; bounded anyway
        self._mapped = functools.lru_cache(maxsize=MAPPED_VALUES)(self.map)

    def settings(self, decoding: DecodingOptions) -> Any:
        """``decoding`` as this decoder's own settings (:meth:`map`), mapped once per distinct value."""
        return self._mapped(decoding)

    def check(self, decoding: DecodingOptions) -> None:
        """Refuse, in one line, options this decoder cannot honour (before any work)."""
        self.settings(decoding)

    #: what it adds to the summarizer's description (``on CTranslate2 (int8)``); empty: nothing
    description: str = ""

    @classmethod  # noqa: B027 - most backends run any checkpoint
    def check_checkpoint(cls, name: str, config: Any) -> None:
        """Refuse, in one line naming ``name``, a checkpoint (its ``config.json``) this backend cannot run,
        before anything is loaded (default: it runs any)."""

    def backend_for(self, decoding: DecodingOptions) -> str:
        """The backend that decodes with ``decoding`` (this one's; ``auto`` chooses per set of options)."""
        return self.backend

    @abstractmethod
    def map(self, decoding: DecodingOptions) -> Any:
        """The one place ``decoding`` (on top of the checkpoint's generation config) becomes this decoder's
        settings; a :class:`~synopsis.errors.ConfigError` for what it cannot honour."""

    @abstractmethod
    def decode(self, inputs: Any, encodings: Sequence[Any], decoding: DecodingOptions) -> list[list[int]]:
        """The summary token ids of each encoded source (:meth:`Seq2SeqInputs.encode_sources
        <synopsis.models.inputs.Seq2SeqInputs.encode_sources>`), special tokens included."""

    @property
    def device(self) -> Any:
        """The ``torch.device`` it computes on (the model's)."""
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> Any:
        """Its weights' precision: a ``torch.dtype``, or its backend's own name (``int8``)."""
        return next(self.model.parameters()).dtype

    def to(self, device: Any) -> None:
        """Move the model to ``device`` (a torch device)."""
        if self.model is not None:
            self.model.to(device)
