"""The events of a summarize request, streamed (NDJSON, ``"stream": true``) or gathered into one answer.

A request's work runs on the inference pool and reports events as it goes: ``parsed`` (the outline and the
document's statistics), a ``section`` per section summary (by section), a ``summary`` per instruction, then
``done`` or ``error``. :func:`guarded` waits for the work within the request's time while watching for the
client to leave; :func:`section_summaries` is the by-section job.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from fastapi import Request
from starlette.types import Receive

from synopsis.errors import SynopsisError
from synopsis.serve.batching import SharedWindows
from synopsis.serve.documents import document_stats, outline
from synopsis.serve.errors import ClientGone
from synopsis.serve.registry import ModelEntry
from synopsis.summarizers.sections import longer_than_input
from synopsis.text import locate_sentences

T = TypeVar("T")

#: One line of a streamed answer (``"stream": true``), in order: ``parsed`` (the outline and document
#: statistics), one ``summary`` per instruction as it finishes (``section`` events are the by-section
#: mode's), then ``done`` with the whole response, or ``error`` with the error body and its HTTP status.
STREAM_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["event"],
    "properties": {"event": {"type": "string", "enum": ["parsed", "section", "summary", "done", "error"]}},
}


async def _until_disconnected(receive: Receive) -> None:
    # After the body only a disconnect can arrive; the server delivers it when the client goes away.
    while (await receive())["type"] != "http.disconnect":
        pass


async def guarded(request: Request, work: Awaitable[T], timeout: float, withdraw: Callable[[], Any]) -> T:
    """``await work`` for at most ``timeout`` seconds while watching for the client to go away.

    On a timeout (``TimeoutError``) or a disconnect (:class:`ClientGone`) ``withdraw()`` takes the work
    back (a waiting job is cancelled before it runs) and ``work`` is cancelled.
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_until_disconnected(request.receive))
    try:
        done, _ = await asyncio.wait({task, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        withdraw()
        task.cancel()
        raise
    finally:
        gone.cancel()
    if task in done:
        return task.result()
    withdraw()
    task.cancel()
    raise ClientGone() if gone in done else TimeoutError()


def parsed_event(
    document: Any, used: str, submitted: float, started: float, parsed: float
) -> dict[str, Any]:
    """The first event of every summarize request, made on the inference thread that parsed the document."""
    return {
        "event": "parsed",
        "sections": outline(document),
        "document": document_stats(document, used),
        "timing_ms": {
            "queue": round(1000 * (started - submitted), 2),
            "parse": round(1000 * (parsed - started), 2),
        },
        "parsed": document,  # stays on the server (see ndjson_line)
    }


def summary_event(
    index: int, instruction: str | None, summary: str, ms: float, batch: int
) -> dict[str, Any]:
    return {
        "event": "summary",
        "index": index,
        "instruction": instruction,
        "summary": summary,
        "ms": ms,
        "batch_size": batch,
    }


def ndjson_line(event: dict[str, Any]) -> bytes:
    if event["event"] == "parsed":  # the Document itself stays on the server: its outline goes out
        event = {key: value for key, value in event.items() if key != "parsed"}
    return json.dumps(event, ensure_ascii=False).encode() + b"\n"


def check_by_section(entry: ModelEntry) -> None:
    """``by: section`` for a model that cannot is a 422 (a SynopsisError, see ``api_errors``)."""
    if not entry.by_section:
        raise SynopsisError(f"by: model '{entry.name}' cannot summarize by section")


def by_section(by: str, entry: ModelEntry, summarizer: Any, document: Any) -> bool:
    """Whether this request is summarized by section (``auto``: when the model can and the document is
    longer than the model's input). Runs on the pool: measuring the document may tokenize it."""
    if by != "auto":
        return by == "section"
    return entry.by_section and longer_than_input(summarizer, document) is not None


def section_event(index: int, instruction: str | None, section: Any) -> dict[str, Any]:
    """One section's summary as soon as it is done (its subsections come in their own events)."""
    return {
        "event": "section",
        "index": index,
        "instruction": instruction,
        "section": {
            "heading": section.heading,
            "path": list(section.path),
            "summary": [sentence.to_dict() for sentence in section.summary],
        },
    }


def question_summary_outline(summaries: list[str]) -> dict[str, Any] | None:
    """The first summary that is a question-summary hierarchy (a model trained on QS targets writes them,
    HIBRIDS section 4), parsed leniently: ``{"tree", "text", "problems"}``; ``None`` for plain summaries."""
    from synopsis.qs import ANSWER, LEVEL_MARKERS, parse_lenient, render_outline

    for summary in summaries:
        if ANSWER in summary or any(marker in summary for marker in LEVEL_MARKERS):
            parsed = parse_lenient(summary)
            return {
                "tree": parsed.tree.to_dict(),
                "text": render_outline(parsed.tree, width=None),
                "problems": [problem.problem for problem in parsed.problems],
            }
    return None


def section_summaries(
    summarizer: Any,
    document: Any,
    used: str,
    instructions: list[str],
    body: Any,
    emit: Callable[[dict[str, Any]], None],
    shared: SharedWindows | None = None,
    batch_size: int = 16,
) -> None:
    """By section, one ``summarize_by_section`` call per instruction: a ``section`` event per section
    summary as it is done (its ``on_section`` callback), then the instruction's ``summary`` event with
    the whole structured summary. With ``shared`` the windows go, ``batch_size`` at a time, to the model's
    batcher, where they share calls with other requests' windows."""
    offsets = None
    if used in ("text", "markdown"):  # sources get character offsets into the submitted text
        offsets = locate_sentences(body.document, [s.text for s in document.sentences])
    for index, instruction in enumerate(instructions or [None]):
        event_of = partial(section_event, index, instruction)
        begin = time.perf_counter()
        (result,) = summarizer.summarize_by_section(
            [document],
            None if instruction is None else [instruction],
            max_words=body.max_words,
            offsets=[offsets],
            on_section=lambda _, section, event_of=event_of: emit(event_of(section)),
            batch_size=batch_size,
            summarize_windows=shared,
        )
        ms = round(1000 * (time.perf_counter() - begin), 2)
        event = summary_event(index, instruction, result.prediction, ms, shared.largest if shared else 1)
        emit({**event, "by": "section", "structured": result.to_dict()})
