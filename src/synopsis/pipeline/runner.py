"""One summarize request, the same under ``synopsis summarize`` and the service.

Both edges type a request once, as a :class:`SummarizeRequest`: its items (:class:`RequestItem`, a document
read once by :func:`read_source`, with the character offset of every sentence (:func:`sentence_offsets`, the
one place they are computed), or a corpus example, with one instruction each; :func:`document_items` makes
one document's), ``by``, ``max_words``, one :class:`~synopsis.config.DecodingOptions` and the output's form.
:class:`SummarizeRunner` (:meth:`SummarizeRunner.for_request`) runs its items (:meth:`SummarizeRunner.
run_items`; the service by document :meth:`SummarizeRunner.run_items_async`, with awaited model calls),
decides ``by="auto"`` per document (:func:`decide_by_section`) and reports what it does through
:class:`RunHooks`: ``parsed``, ``section`` (by section, each section as soon as it is done), ``summary`` (one
per item). ``cancelled()`` is asked between windows, so a caller that gave up (the service's timeout or a
client that left) stops the windows left. The CLI prints or writes what the hooks report; the service turns
them into events and plugs its batcher in where documents and windows are summarized.

Every summary is a :class:`~synopsis.summarizers.schema.DocumentSummary` (by document: the model's summary,
its sentences cited by alignment with the document's sentences, and no sections), so the JSON of the CLI and
the service is one schema.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from synopsis.config import DecodingOptions
from synopsis.document import Document
from synopsis.pipeline.reading import ParsedDocument, read_source
from synopsis.pipeline.request import (
    DEFAULT_BY,
    RequestItem,
    SummarizeRequest,
    check_by,
    decide_by_section,
    document_items,
)
from synopsis.summarizers.batches import DEFAULT_BATCH_SIZE, batch_size_in_force
from synopsis.summarizers.citing import aligned_sentences
from synopsis.summarizers.schema import DocumentSummary, SectionSummary, SummarySentence
from synopsis.summarizers.sections import DEFAULT_MAX_WORDS, Cancelled, summary_title
from synopsis.summarizers.windows import Window


@dataclass
class Summary:
    """One instruction's summary: ``prediction`` as the model wrote it (by section: the composed document
    summary), ``result`` its sentences with their sources (by section: and every section's summary);
    ``id``: the request item's name (a file, an example id, ``file | instruction``)."""

    index: int
    instruction: str | None
    by: str  # "document" or "section"
    prediction: str
    result: DocumentSummary
    ms: float
    batch_size: int = 1
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The one JSON schema (``--output-format json``, the service's ``structured``)."""
        return {**self.result.to_dict(), "prediction": self.prediction}

    def record(self) -> dict[str, Any]:
        """:meth:`to_dict` under the item's ``id``: one record of ``synopsis summarize``'s output, in every
        form (a JSON value, a JSONL line, a line of text, a block)."""
        data = self.to_dict()
        return {**data, "id": self.id if self.id is not None else data["id"]}


def cited_summary(
    parsed: ParsedDocument, prediction: str, note: str | None = None, method: str | None = None
) -> DocumentSummary:
    """A summary of the whole document as a :class:`DocumentSummary` without sections: each line of
    ``prediction`` cites the document's sentences by alignment (an extractive summary's cite themselves);
    ``note``: the summarizer's line for the reader (:meth:`~synopsis.summarizers.base.Summarizer.notes`);
    ``title``: what the document is called (:func:`summary_title`), as by section."""
    whole, words = parsed.citable
    lines = [line for line in prediction.split("\n") if line.strip()]
    summary = aligned_sentences(lines, whole, words)
    return DocumentSummary(
        parsed.document.id, summary, [], note=note, title=summary_title(parsed.document), method=method
    )


def _never() -> bool:
    return False


@dataclass
class RunHooks:
    """What a caller hears while a request runs (each optional): ``parsed(parsed, by_section)`` once;
    ``section(index, instruction, section)`` by section as each section is done; ``summary(summary)`` per
    instruction; ``progress(done, total)`` after each batch of windows; ``cancelled()`` is asked between
    windows and between documents, and when it says so the run ends with
    :class:`~synopsis.summarizers.sections.Cancelled`."""

    parsed: Callable[[ParsedDocument, bool], None] | None = None
    section: Callable[[int, str | None, SectionSummary], None] | None = None
    summary: Callable[[Summary], None] | None = None
    progress: Callable[[int, int], None] | None = None
    cancelled: Callable[[], bool] = field(default=_never)


#: One model call by document: the documents, their instructions (None: plain summaries) and references
#: (None unless the summarizer reads them).
DocumentsCall = tuple[list[Document], list[str | None] | None, list[Sequence[str]] | None]
SummarizeDocuments = Callable[..., list[str]]
SummarizeWindows = Callable[[list[Window], list[str | None]], list[list[SummarySentence]]]


def _call(summarize: Callable[..., Any], call: DocumentsCall) -> Any:
    """One model call: references only to a call that has them (the service's batcher takes two)."""
    documents, instructions, references = call
    return summarize(documents, instructions) if references is None else summarize(*call)


class SummarizeRunner:
    """One summarizer with one set of decoding options, ``by`` and ``max_words``: :meth:`run_items`
    summarizes the items of a :class:`SummarizeRequest` (a batch of them at a time), :meth:`run` one
    document once per instruction (see the module docstring).

    ``summarize_documents`` / ``summarize_windows`` (default: the summarizer's own ``summarize`` /
    ``summarize_windows``) make one model call of ``batch_size`` documents / windows at most, e.g. through
    the service's batcher, where they share calls with other requests."""

    def __init__(
        self,
        summarizer: Any,
        decoding: DecodingOptions | None = None,
        *,
        by: str = DEFAULT_BY,
        max_words: int = DEFAULT_MAX_WORDS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        summarize_documents: SummarizeDocuments | None = None,
        summarize_windows: SummarizeWindows | None = None,
    ) -> None:
        #: the request's decoding options, checked once against the summarizer (an option it does not take,
        #: a value its decoder cannot honour) and passed with every call
        self.decoding = summarizer.check_decoding(decoding)
        #: what decodes the model with them (``--backend auto`` chooses per set of options); None: no model
        self.backend = summarizer.backend_for(self.decoding)
        # an extractive summary by document fills the same budget as a document summary by section
        self.summarizer = (
            summarizer.with_options(max_words=max_words) if "max_words" in summarizer.options else summarizer
        )
        self.by = check_by(by)
        self.max_words = max_words
        self.batch_size = batch_size
        self._summarize_documents = summarize_documents
        self._summarize_windows = summarize_windows
        self._decided: dict[int, bool] = {}  # id(ParsedDocument) -> by section, decided once per document

    @classmethod
    def for_request(cls, summarizer: Any, request: SummarizeRequest, **calls: Any) -> SummarizeRunner:
        """The runner of ``request``'s options (``calls``: ``batch_size`` and the model calls, as above)."""
        return cls(summarizer, request.decoding, by=request.by, max_words=request.max_words, **calls)

    def run_items(self, items: Sequence[RequestItem], hooks: RunHooks | None = None) -> list[Summary]:
        """One summary per item, in order, each reported to ``hooks.summary`` as it is ready: ``by`` is
        decided per document (:func:`decide_by_section`); the items summarized whole share model calls of
        ``batch_size``, made first; the others go by section, in their place (their sections reported to
        ``hooks.section`` as each is done)."""
        hooks = hooks or RunHooks()
        sectioned = [self.sectioned(item.parsed, hooks) for item in items]
        whole = [item for item, by_section in zip(items, sectioned, strict=True) if not by_section]
        done = iter(self._drive(self._by_document(whole, RunHooks(cancelled=hooks.cancelled))))
        out = []
        for position, (item, by_section) in enumerate(zip(items, sectioned, strict=True)):
            if by_section:
                summary = self._by_section(item.parsed, position, item.instruction, hooks, item.id)
            else:
                summary = next(done)
                summary.index = position
                if hooks.summary is not None:
                    hooks.summary(summary)
            out.append(summary)
        return out

    def sectioned(self, parsed: ParsedDocument, hooks: RunHooks | None = None) -> bool:
        """Whether ``parsed`` goes by section (decided, and reported to ``hooks.parsed``, once)."""
        key = id(parsed)
        if key not in self._decided:
            self._decided[key] = decide_by_section(self.by, self.summarizer, parsed.document)
            if hooks is not None and hooks.parsed is not None:
                hooks.parsed(parsed, self._decided[key])
        return self._decided[key]

    def run(
        self,
        source: Path | str | bytes | ParsedDocument,
        instructions: Sequence[str] = (),
        hooks: RunHooks | None = None,
        *,
        format: str = "auto",  # noqa: A002
        max_mb: float | None = None,
    ) -> list[Summary]:
        """Read ``source`` once (unless already a :class:`ParsedDocument`) and summarize it once per
        instruction (once without any), reporting through ``hooks``: :meth:`run_items` of
        :func:`document_items`."""
        parsed = source if isinstance(source, ParsedDocument) else read_source(source, format, max_mb)
        return self.run_items(document_items(parsed, instructions), hooks)

    def _drive(self, calls: Generator[DocumentsCall, list[str], list[Summary]]) -> list[Summary]:
        """Run a :meth:`_by_document` generator with blocking model calls."""
        summarize = self._summarize_documents or partial(self.summarizer.summarize, decoding=self.decoding)
        # the runner's batch is one model call (the library's summarize() would cut it to its default)
        with batch_size_in_force(self.batch_size):
            try:
                call = next(calls)
                while True:
                    call = calls.send(_call(summarize, call))
            except StopIteration as done:
                return done.value

    async def run_items_async(
        self,
        items: Sequence[RequestItem],
        hooks: RunHooks,
        summarize_documents: Callable[[list[Document], list[str | None] | None], Awaitable[list[str]]],
    ) -> list[Summary]:
        """:meth:`run_items` for items that all go whole, with model calls that are awaited (the service's
        batcher, from its event loop): the same calls, in the same order, with the same summaries and hooks.
        An item that goes by section is a ``ValueError``: its windows are blocking calls (:meth:`run_items`
        on a thread)."""
        if any(self.sectioned(item.parsed, hooks) for item in items):
            raise ValueError("run_items_async summarizes whole documents; by section, use run_items")
        calls = self._by_document(items, hooks)
        try:
            call = next(calls)
            while True:
                call = calls.send(await _call(summarize_documents, call))
        except StopIteration as done:
            return done.value

    def _by_section(
        self,
        parsed: ParsedDocument,
        index: int,
        instruction: str | None,
        hooks: RunHooks,
        name: str | None = None,
    ) -> Summary:
        on_section = None
        if hooks.section is not None:
            section_hook = hooks.section

            def on_section(_: int, section: SectionSummary) -> None:
                section_hook(index, instruction, section)

        begin = time.perf_counter()
        # The summarizer's own method: a summarizer may route documents (the default sends documents outside
        # its model's domain to salient sentences).
        (result,) = self.summarizer.summarize_by_section(
            [parsed.document],
            None if instruction is None else [instruction],
            max_words=self.max_words,
            batch_size=self.batch_size,
            offsets=[parsed.offsets],
            on_section=on_section,
            progress=hooks.progress,
            summarize_windows=self._summarize_windows,
            cancelled=hooks.cancelled,
            decoding=self.decoding,
        )
        ms = round(1000 * (time.perf_counter() - begin), 2)
        (result.method,) = self.summarizer.methods([parsed.document])
        summary = Summary(index, instruction, "section", result.prediction, result, ms, id=name)
        if hooks.summary is not None:
            hooks.summary(summary)
        return summary

    def _by_document(
        self, items: Sequence[RequestItem], hooks: RunHooks
    ) -> Generator[DocumentsCall, list[str], list[Summary]]:
        """The items ``batch_size`` at a time, each a summary of its whole document (what the model reads of
        it), cited by :func:`cited_summary`. Yields each model call ``(documents, instructions, references)``
        and is sent its predictions: the caller makes the call, blocking or awaited."""
        out: list[Summary] = []
        notes: dict[int, tuple[str | None, str]] = {}  # each document's note and method, asked once
        for start in range(0, len(items), self.batch_size):
            if hooks.cancelled():
                raise Cancelled(f"cancelled with {len(items) - start} of {len(items)} summaries left")
            chunk = items[start : start + self.batch_size]
            begin = time.perf_counter()
            # All-None instructions go as None, as a plain summary is asked for.
            instructions = [item.instruction for item in chunk]
            references = [item.references or [] for item in chunk]
            predictions = yield (
                [item.parsed.document for item in chunk],
                None if all(i is None for i in instructions) else instructions,
                None if all(item.references is None for item in chunk) else references,
            )
            ms = round(1000 * (time.perf_counter() - begin), 2)
            # After the call, not before: nothing delays it, and a summarizer that checks the document's
            # domain has done so in it and remembers (PointerGeneratorSummarizer.distances).
            fresh = list({id(i.parsed): i.parsed for i in chunk if id(i.parsed) not in notes}.values())
            if fresh:
                documents = [p.document for p in fresh]
                asked = zip(self.summarizer.notes(documents), self.summarizer.methods(documents), strict=True)
                notes.update(zip(map(id, fresh), asked, strict=True))
            for offset, (item, prediction) in enumerate(zip(chunk, predictions, strict=True)):
                result = cited_summary(item.parsed, prediction, *notes[id(item.parsed)])
                summary = Summary(
                    start + offset, item.instruction, "document", prediction, result, ms, len(chunk), item.id
                )
                out.append(summary)
                if hooks.summary is not None:
                    hooks.summary(summary)
        return out
