"""The default summarizer (``load_summarizer()`` without a method or model): the bundled pointer-generator
where a document is in its domain, verbatim salient sentences where it is not, with one line saying so.

The bundled model was trained on SciTLDR paper abstracts. On anything else (a README, a meeting, a whole
paper) it writes fluent-looking nonsense that ROUGE still rewards, so the default checks every document
(:class:`~synopsis.summarizers.domain.DomainCheck`: length, sections, vocabulary) and summarizes the far
ones with :class:`~synopsis.summarizers.salient.SalientSummarizer`, whose sentences are the document's own,
each citing itself. The reason and the way to an abstractive summary are the document's note
(:meth:`DefaultSummarizer.notes`, ``DocumentSummary.note``). A method or model the user names is never
replaced: this class is only what ``load_summarizer()`` gives when none is named.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from synopsis.document import Document
from synopsis.summarizers.base import Summarizer, SummarizerInfo
from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer
from synopsis.summarizers.pretrained import abstractive_hint
from synopsis.summarizers.salient import SalientSummarizer, TfidfVectors
from synopsis.summarizers.sections import DocumentSummary, SummarySentence, Window

logger = logging.getLogger(__name__)


class DefaultSummarizer(Summarizer):
    """Per document: the bundled model in its domain, else :class:`SalientSummarizer` with a note."""

    takes_instructions = True  # the extractive summaries follow them; the bundled model ignores them
    #: what a by-section run counts: by section a document is long, so far from abstracts, so extractive
    progress_unit = "sections"
    options = PointerGeneratorSummarizer.options

    def __init__(self, bundled: PointerGeneratorSummarizer, salient: SalientSummarizer) -> None:
        self.bundled = bundled
        self.salient = salient
        self.model = bundled.model  # for Summarizer.to

    @classmethod
    def from_pretrained(cls, k: int = 3, **settings: Any) -> DefaultSummarizer:
        """The bundled pointer-generator with ``settings`` (see its ``from_pretrained``), and salient
        sentences, ``k`` per section."""
        return cls(PointerGeneratorSummarizer.from_pretrained(None, **settings), SalientSummarizer(k=k))

    # ------------------------------------------------------------------ which documents go where
    def notes(self, documents: Sequence[Document]) -> list[str | None]:
        """For each document the bundled model is not made for, one line: what it was summarized with, why,
        and how to get an abstractive summary; ``None`` for the others."""
        out: list[str | None] = []
        for document in documents:
            far = self.bundled.distances(document)
            if not far:
                out.append(None)
                continue
            how = (
                ""
                if self.salient.vectors_name != TfidfVectors.name
                else (" by TF-IDF (pip install 'synopsis[embeddings]' for sentence embeddings)")
            )
            out.append(
                f"Extractive summary (the document's own sentences{how}): the bundled model was trained on "
                f"paper abstracts and this document is not one ({', '.join(d.brief for d in far)}); "
                f"{abstractive_hint(document)}."
            )
        return out

    # ------------------------------------------------------------------ the contract
    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any
    ) -> list[str]:
        summaries: list[str] = [""] * len(documents)
        _, routes = self._routes(documents)
        for summarizer, _, rows in routes:
            made = summarizer.summarize([documents[i] for i in rows], [instructions[i] for i in rows])
            for row, summary in zip(rows, made, strict=True):
                summaries[row] = summary
        return summaries

    def _routes(
        self, documents: Sequence[Document]
    ) -> tuple[list[str | None], list[tuple[Summarizer, bool, list[int]]]]:
        """Each document's note (logged before the work) and ``(summarizer, bundled, rows)`` per summarizer
        with documents to do: the bundled model's rows are the documents in its domain, salient's the rest."""
        notes = self.notes(documents)
        for i, note in enumerate(notes):
            if note:  # first, so a reader sees it before the work; the results carry it too (serve: once)
                logger.info("%s: %s", documents[i].id or f"document {i + 1}", note)
        routes = []
        for summarizer, bundled in ((self.bundled, True), (self.salient, False)):
            rows = [i for i, note in enumerate(notes) if (note is None) is bundled]
            if rows:
                routes.append((summarizer, bundled, rows))
        return notes, routes

    def _by_section(
        self, documents: Sequence[Document], instructions: list[str | None], options: dict[str, Any]
    ) -> list[DocumentSummary]:
        """By section, each document with the summarizer its domain calls for; the far ones carry their note.
        ``options`` are :func:`~synopsis.summarizers.sections.summarize_by_section`'s; ``summarize_windows``
        (a shared queue) serves only the bundled model's documents (this summarizer's windows are its)."""
        notes, routes = self._routes(documents)
        results: list[DocumentSummary | None] = [None] * len(documents)
        for summarizer, bundled, rows in routes:
            made = summarizer.summarize_by_section(
                [documents[i] for i in rows],
                [instructions[i] for i in rows],
                **_for_rows(options, rows, shared_queue=bundled),
            )
            for row, result in zip(rows, made, strict=True):
                result.note = notes[row]
                results[row] = result
        return [r for r in results if r is not None]

    def summarize_windows(
        self, windows: Sequence[Window], instructions: Sequence[str | None] | None = None
    ) -> list[list[SummarySentence]]:
        # Only in-domain documents' windows come here (summarize_by_section routes the rest).
        return self.bundled.summarize_windows(windows, instructions)

    def input_capacity(self) -> int | None:
        return self.bundled.input_capacity()

    def input_length(self, text: str) -> int:
        return self.bundled.input_length(text)

    def describe(self) -> SummarizerInfo:
        return self._info(
            "default",
            "the bundled pointer-generator (trained on SciTLDR abstracts) for abstract-like documents; "
            f"for any other: {self.salient.describe().description}",
        )

    def _with_options(self, options: dict[str, Any]) -> DefaultSummarizer:
        return type(self)(self.bundled.with_options(**options), self.salient)  # type: ignore[arg-type]

    def prepare(self) -> None:
        self.salient.prepare()

    def generation_options(self) -> dict[str, Any]:
        return self.bundled.generation_options()


def _for_rows(options: dict[str, Any], rows: list[int], shared_queue: bool) -> dict[str, Any]:
    """``summarize_by_section`` options for the documents ``rows`` of a call: per-document lists cut to them,
    callbacks given the call's document positions back; a shared ``summarize_windows`` queue kept only for
    the bundled model (the extractive method needs no batching)."""
    out = dict(options)
    if out.get("offsets") is not None:
        out["offsets"] = [options["offsets"][i] for i in rows]
    if out.get("on_section") is not None:
        on_section = options["on_section"]
        out["on_section"] = lambda d, section: on_section(rows[d], section)
    if not shared_queue:
        out.pop("summarize_windows", None)
    return out
