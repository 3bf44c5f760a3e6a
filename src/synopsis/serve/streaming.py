"""The events of a summarize request, streamed (NDJSON, ``"stream": true``) or gathered into one answer.

A request's work runs on the inference pool and reports events as it goes: ``parsed`` (the outline and the
document's statistics), a ``section`` per section summary (by section), a ``summary`` per instruction, then
``done`` or ``error``, made from the hooks of the library's runner (:mod:`synopsis.serve.service`).
:func:`guarded` waits for the work within the request's time while watching for the client to leave.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import Request
from starlette.types import Receive

from synopsis.errors import SynopsisError
from synopsis.pipeline import Summary
from synopsis.serve.documents import document_stats, outline
from synopsis.serve.errors import ClientGone
from synopsis.serve.registry import ModelEntry

T = TypeVar("T")

#: One line of a streamed answer (``"stream": true``), in order: ``parsed`` (the outline and document
#: statistics), one ``summary`` per instruction as it finishes (``section`` events are the by-section
#: mode's), then ``done`` with the whole response, or ``error`` with the error body and its HTTP status.
STREAM_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["event"],
    "properties": {"event": {"type": "string", "enum": ["parsed", "section", "summary", "done", "error"]}},
}


async def until_disconnected(receive: Receive) -> None:
    """Returns when the client has gone away."""
    # After the body only a disconnect can arrive; the server delivers it when the client goes away.
    while (await receive())["type"] != "http.disconnect":
        pass


async def guarded(request: Request, work: Awaitable[T], timeout: float, withdraw: Callable[[], Any]) -> T:
    """``await work`` for at most ``timeout`` seconds while watching for the client to go away.

    On a timeout (``TimeoutError``) or a disconnect (:class:`ClientGone`) ``withdraw()`` takes the work
    back (a waiting job is cancelled before it runs) and ``work`` is cancelled.
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(until_disconnected(request.receive))
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


def summary_event(summary: Summary, batch: int) -> dict[str, Any]:
    """One instruction's summary: the model's text, and ``structured``, the one JSON schema of a summary
    (``synopsis summarize --output-format json``: its sentences with their sources; by section, every
    section's summary)."""
    return {
        "event": "summary",
        "index": summary.index,
        "instruction": summary.instruction,
        "summary": summary.prediction,
        "ms": summary.ms,
        "batch_size": batch,
        "by": summary.by,
        "structured": summary.to_dict(),
    }


def ndjson_line(event: dict[str, Any]) -> bytes:
    if event["event"] == "parsed":  # the Document itself stays on the server: its outline goes out
        event = {key: value for key, value in event.items() if key != "parsed"}
    return json.dumps(event, ensure_ascii=False).encode() + b"\n"


def check_by_section(entry: ModelEntry) -> None:
    """``by: section`` for a model that cannot is a 422 (a SynopsisError, see ``api_errors``)."""
    if not entry.by_section:
        raise SynopsisError(f"by: model '{entry.name}' cannot summarize by section")


def section_event(index: int, instruction: str | None, section: Any) -> dict[str, Any]:
    """One section's summary as soon as it is done (its subsections come in their own events)."""
    return {
        "event": "section",
        "index": index,
        "instruction": instruction,
        "section": {
            "heading": section.heading,
            "path": list(section.path),
            "index": section.index,
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
