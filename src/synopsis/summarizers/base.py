"""The one contract every summarizer keeps (in the spirit of rouge_score's ``scoring.BaseScorer``).

``summarize(documents, instructions=None, references=None) -> list[str]``: a batch in, one summary per
document out, in order. ``instructions`` (one per document, ``None`` entries allowed) steer methods that take
them and are ignored by the rest; ``references`` are read only by methods that need them (the oracle) and
ignored by the rest. Callers never check which method they hold.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.summarizers.sections import (
    DEFAULT_MAX_WORDS,
    DocumentSummary,
    SummarySentence,
    Window,
    aligned_sentences,
    summarize_by_section,
    window_document,
)
from synopsis.text import split_sentences


class Summarizer(ABC):
    """Base class of every method behind ``synopsis summarize`` and the service."""

    #: whether ``instructions`` change the output (the CLI and the service say so when they do not)
    takes_instructions: bool = False
    #: whether ``references`` are required (the oracle)
    needs_references: bool = False
    #: whether the model reads the section tree, so that by section each section is read as its subtree
    reads_section_tree: bool = False

    @abstractmethod
    def summarize(
        self,
        documents: Sequence[Document],
        instructions: Sequence[str | None] | None = None,
        references: Sequence[Sequence[str]] | None = None,
    ) -> list[str]:
        """One summary per document."""

    # ------------------------------------------------------------------ by section
    def input_capacity(self) -> int | None:
        """How much one model call reads, in :meth:`input_length` units (``None``: no limit)."""
        return None

    def input_length(self, text: str) -> int:
        """The length of ``text`` in the units of :meth:`input_capacity` (words unless a model says)."""
        return len(text.split())

    def summarize_windows(
        self, windows: Sequence[Window], instructions: Sequence[str | None] | None = None
    ) -> list[list[SummarySentence]]:
        """The summary sentences of each window, each citing its window's sentences.

        This default summarizes each window as a document and cites by lexical alignment; methods that know
        where their words came from (extractive selection, the pointer-generator's attention) override it. A
        subtree window (a model that reads the section tree) is given as its section's subtree."""
        documents = [window_document(w) if w.subtree else Document.from_sentences(w.texts) for w in windows]
        predictions = self.summarize(documents, instructions)
        out = []
        for window, prediction in zip(windows, predictions, strict=True):
            sentences = [s for line in prediction.split("\n") for s in split_sentences(line)]
            out.append(aligned_sentences(sentences, window))
        return out

    def summarize_by_section(
        self,
        documents: Sequence[Document],
        instructions: Sequence[str | None] | None = None,
        *,
        max_words: int = DEFAULT_MAX_WORDS,
        **options: Any,
    ) -> list[DocumentSummary]:
        """A summary of every section of each document and a document summary of at most ``max_words``
        words composed from them, every sentence with its sources: see
        :func:`synopsis.summarizers.sections.summarize_by_section` for the options."""
        return summarize_by_section(self, documents, instructions, max_words=max_words, **options)

    def to(self, device: Any) -> Summarizer:
        """Move the model (if any) to ``device``, e.g. a process's own GPU in a sharded run; returns self."""
        model = getattr(self, "model", None)
        if model is not None and hasattr(model, "to"):
            model.to(device)
        return self

    @staticmethod
    def _check_batch(
        documents: Sequence[Document],
        instructions: Sequence[str | None] | None,
        references: Sequence[Sequence[str]] | None = None,
    ) -> list[str | None]:
        """Instructions as a list of the documents' length; mismatched lengths are an error."""
        if instructions is None:
            instructions = [None] * len(documents)
        if len(instructions) != len(documents):
            raise InputError(f"got {len(instructions)} instructions for {len(documents)} documents")
        if references is not None and len(references) != len(documents):
            raise InputError(f"got {len(references)} reference lists for {len(documents)} documents")
        return list(instructions)
