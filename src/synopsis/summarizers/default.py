"""The default summarizer (``load_summarizer()`` without a method or model): the bundled pointer-generator
where a document is in its domain, verbatim salient sentences where it is not, with one line saying so.

The bundled model was trained on SciTLDR paper abstracts. On anything else (a README, a meeting, a whole
paper) it writes fluent-looking nonsense that ROUGE still rewards, so the default checks every document
(:class:`~synopsis.summarizers.domain.DomainCheck`: length, sections, vocabulary, and whether it reads like
a paper abstract at all) and summarizes the far
ones with :class:`~synopsis.summarizers.salient.SalientSummarizer`, whose sentences are the document's own,
each citing itself. The reason and the way to an abstractive summary are the document's note
(:meth:`DefaultSummarizer.notes`, ``DocumentSummary.note``). A method or model the user names is never
replaced: this class is only what ``load_summarizer()`` gives when none is named.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from synopsis.config import DECODING_OPTIONS, DecodingOptions
from synopsis.document import Document
from synopsis.summarizers.base import Summarizer, SummarizerInfo
from synopsis.summarizers.pretrained import abstractive_hint
from synopsis.summarizers.salient import SalientSummarizer
from synopsis.summarizers.schema import DocumentSummary, SummarySentence
from synopsis.summarizers.windows import Window

if TYPE_CHECKING:  # imported when the model is loaded: an article never pays for torch
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

logger = logging.getLogger(__name__)


class DefaultSummarizer(Summarizer):
    """Per document: the bundled model in its domain, else :class:`SalientSummarizer` with a note."""

    takes_instructions = True  # the extractive summaries follow them; the bundled model ignores them
    #: what a by-section run counts: by section a document is long, so far from abstracts, so extractive
    progress_unit = "sections"
    #: the extractive summary's length; the bundled model's decoding options come with each call
    options = ("max_words",)
    decoding_options = tuple(DECODING_OPTIONS)

    def __init__(
        self,
        bundled: PointerGeneratorSummarizer | Callable[[], PointerGeneratorSummarizer] | Lazy,
        salient: SalientSummarizer,
    ) -> None:
        """``bundled``: the bundled model, or what loads it (called once, when a document in its domain
        comes: an article or a README never pays for torch and the model's weights)."""
        self._bundled = bundled if isinstance(bundled, Lazy) else Lazy(bundled)
        self.salient = salient

    @classmethod
    def from_pretrained(cls, k: int = 3, max_words: int | None = None, **settings: Any) -> DefaultSummarizer:
        """The bundled pointer-generator with ``settings`` (see its ``from_pretrained``; the device is
        checked now, the weights read when first needed), and salient sentences, ``k`` per section."""
        from synopsis.devices import check_device

        check_device(settings.get("device", "auto"))  # an unusable device is refused now, not later
        salient = SalientSummarizer(k=k) if max_words is None else SalientSummarizer(k=k, max_words=max_words)
        summarizer = cls(lambda: _load_bundled(settings), salient)
        if settings.get("max_source_tokens") is not None:
            _ = summarizer.bundled  # a setting of the bundled model: checked against it now
        return summarizer

    @property
    def bundled(self) -> PointerGeneratorSummarizer:
        """The bundled model, loaded on first use."""
        return self._bundled.get()

    @property
    def model(self) -> Any:  # type: ignore[override]
        """The bundled model's network once loaded (``None`` before: nothing to place on a device)."""
        return self._bundled.get().model if self._bundled.loaded else None

    # ------------------------------------------------------------------ which documents go where
    def _scope(self) -> Any:
        """What the bundled model reads of a document and its domain check: the loaded model's (its own
        settings count), else the one read from its files without torch or weights."""
        if self._bundled.loaded:
            return self.bundled.scope
        from synopsis.summarizers.domain import bundled_domain_check

        return bundled_domain_check()

    def bundled_distances(self, document: Document) -> list[Any]:
        """How ``document`` is far from the bundled model's domain (empty: in it), without its weights."""
        return self._scope().distances(document)

    def to(self, device: Any) -> DefaultSummarizer:
        """Move the bundled model to ``device``, now if it is loaded, else when it is."""
        self._bundled.then(lambda bundled: bundled.to(device))
        return self

    def notes(self, documents: Sequence[Document]) -> list[str | None]:
        """For each document the bundled model is not made for, one line: what it was summarized with, why,
        and how to get an abstractive summary; ``None`` for the others."""
        out: list[str | None] = []
        for document in documents:
            far = self.bundled_distances(document)
            if not far:
                out.append(None)
                continue
            out.append(
                "Extractive summary (the document's own sentences): the bundled model was trained on "
                f"paper abstracts and this document is not one ({', '.join(d.brief for d in far)}); "
                f"{abstractive_hint(document)}."
            )
        return out

    def methods(self, documents: Sequence[Document]) -> list[str]:
        """``pointer-generator`` for a document in the bundled model's domain, ``salient`` for the others."""
        return ["salient" if self.bundled_distances(d) else "pointer-generator" for d in documents]

    # ------------------------------------------------------------------ the contract
    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any,
        decoding: DecodingOptions,
    ) -> list[str]:
        summaries: list[str] = [""] * len(documents)
        _, routes = self._routes(documents)
        for summarizer, bundled, rows in routes:
            asked = [instructions[i] for i in rows]
            made = summarizer.summarize(
                [documents[i] for i in rows], asked, decoding=decoding if bundled else None
            )
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
        routes: list[tuple[Summarizer, bool, list[int]]] = []
        for bundled in (True, False):
            rows = [i for i, note in enumerate(notes) if (note is None) is bundled]
            if rows:  # the bundled model is loaded only for documents in its domain
                routes.append((self.bundled if bundled else self.salient, bundled, rows))
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
        self, windows: Sequence[Window], instructions: Sequence[str | None] | None = None,
        decoding: DecodingOptions | None = None,
    ) -> list[list[SummarySentence]]:
        # Only in-domain documents' windows come here (summarize_by_section routes the rest).
        return self.bundled.summarize_windows(windows, instructions, decoding)

    def input_capacity(self) -> int | None:
        return self._scope().reads  # deciding --by auto loads no weights

    def input_capacity_for(self, document: Document) -> int | None:
        """The bundled model's input for a document in its domain, and for a far one with headings (it goes
        by section, each section summarized as it is chosen); none for a far one without (its salient
        sentences are chosen over the whole text at once: an article, a transcript)."""
        if self.bundled_distances(document) and not any(s.heading for s in document.sections):
            return None
        return self.input_capacity()

    def input_length(self, text: str) -> int:
        return len(self._scope().words(text))

    def describe(self) -> SummarizerInfo:
        return self._info(
            "default",
            "the bundled pointer-generator (trained on SciTLDR abstracts) for abstract-like documents; "
            f"for any other: {self.salient.describe().description}",
        )

    def _with_options(self, options: dict[str, Any]) -> DefaultSummarizer:
        salient = self.salient.with_options(max_words=options["max_words"])
        return type(self)(self._bundled, salient)  # type: ignore[arg-type]

    def check_decoding(self, decoding: DecodingOptions | None) -> DecodingOptions:
        """The bundled model's decoding options: lengths are checked against its stored ones (loading it,
        as a document in its domain would)."""
        checked = super().check_decoding(decoding)
        if checked.min_length is not None or checked.max_length is not None:
            self.bundled.check_decoding(checked)
        return checked

    def prepare(self) -> None:
        """A server loads the bundled model and the embedding model before serving."""
        _ = self.bundled
        self.salient.prepare()

    def generation_options(self) -> dict[str, Any]:
        return self.bundled.generation_options()


def _for_rows(options: dict[str, Any], rows: list[int], shared_queue: bool) -> dict[str, Any]:
    """``summarize_by_section`` options for the documents ``rows`` of a call: per-document lists cut to them,
    callbacks given the call's document positions back; a shared ``summarize_windows`` queue and the
    decoding options kept only for the bundled model (the extractive method needs no batching and decodes
    nothing)."""
    out = dict(options)
    if out.get("offsets") is not None:
        out["offsets"] = [options["offsets"][i] for i in rows]
    if out.get("on_section") is not None:
        on_section = options["on_section"]
        out["on_section"] = lambda d, section: on_section(rows[d], section)
    if not shared_queue:  # and the decoding options are the bundled model's
        out.pop("summarize_windows", None)
        out.pop("decoding", None)
    return out


class Lazy:
    """A value made on first use, once, whatever the threads (the bundled model: its weights are read only
    when a document in its domain comes); copies of a summarizer share it."""

    def __init__(self, make: Any) -> None:
        self._make: Callable[[], Any] | None = make if callable(make) else None
        self._value: Any = None if callable(make) else make
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._make is None

    def get(self) -> Any:
        if self._make is not None:
            with self._lock:
                if self._make is not None:
                    self._value, self._make = self._make(), None
        return self._value

    def then(self, change: Callable[[Any], Any]) -> None:
        """Apply ``change`` to the value: now if made, else as soon as it is."""
        with self._lock:
            if self._make is None:
                change(self._value)
            else:
                make = self._make
                self._make = lambda: _applied(make(), change)


def _applied(value: Any, change: Callable[[Any], Any]) -> Any:
    change(value)
    return value


def _load_bundled(settings: dict[str, Any]) -> PointerGeneratorSummarizer:
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    return PointerGeneratorSummarizer.from_pretrained(None, **settings)
