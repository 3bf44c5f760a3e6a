"""A summarize request between the edge and the runner: the body checked once (:class:`ApiRequest`, built by
:meth:`~synopsis.serve.service.SummarizeService.check`), then, once its document is read, the runner's typed
request, the one ``synopsis summarize`` builds (:class:`~synopsis.pipeline.SummarizeRequest`), and
at the end the answer made of its events (:func:`final_response`)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from synopsis.pipeline import ParsedDocument, SummarizeRequest, document_items
from synopsis.serve.errors import ApiError
from synopsis.serve.registry import ModelEntry, RequestOptions
from synopsis.serve.streaming import ndjson_line, question_summary_outline
from synopsis.summarizers.base import Summarizer


@dataclass(frozen=True)
class ApiRequest:
    """A ``POST /v1/summarize`` body as checked at the edge: the model, its summarizer for the request's
    options, the options as one frozen value (:class:`~synopsis.serve.registry.RequestOptions`: also the
    batch key), the instructions, and what the runner's request takes besides its items."""

    entry: ModelEntry
    summarizer: Summarizer
    options: RequestOptions
    document: str
    format: str
    instructions: tuple[str, ...]
    by: str
    max_words: int
    submitted: float
    warnings: tuple[str, ...] = ()

    def typed(self, parsed: ParsedDocument) -> SummarizeRequest:
        """The runner's request for the document as read: one item per instruction (one plain summary
        without any), ``by``, ``max_words`` and the decoding value, as the CLI builds it."""
        items = document_items(parsed, self.instructions)
        return SummarizeRequest(items, self.by, self.max_words, self.options.decoding, "json")


def final_response(
    asked: ApiRequest, parsed: dict[str, Any], summaries: list[dict[str, Any]], arrived: float
) -> dict[str, Any]:
    """The whole answer (``SummarizeResponse``; a stream's ``done`` event holds it) from the request's
    ``parsed`` event and its ``summary`` events; ``arrived``: when its first byte came."""
    items = sorted(summaries, key=lambda item: item["index"])
    return {
        "model": asked.entry.name,
        "backend": asked.summarizer.backend_for(asked.options.decoding),  # auto's choice for these options
        "summaries": [
            {key: item[key] for key in ("instruction", "summary", "by", "structured") if key in item}
            for item in items
        ],
        "sections": parsed["sections"],
        "document": parsed["document"],
        "outline": question_summary_outline([item["summary"] for item in items]),
        "timing_ms": {
            **parsed["timing_ms"],
            "summaries": [item["ms"] for item in items],
            "total": round(1000 * (time.perf_counter() - arrived), 2),
        },
        "warnings": list(asked.warnings),
    }


async def ndjson_answer(
    asked: ApiRequest,
    parsed: dict[str, Any],
    events: AsyncIterator[dict[str, Any]],
    errors: Callable[[], AbstractContextManager[None]],
    arrived: Callable[[], float],
) -> AsyncIterator[bytes]:
    """A streamed answer: the ``parsed`` event, each event as the runner reports it (a ``section`` per
    section summary by section, a ``summary`` per instruction), then ``done`` with :func:`final_response`,
    or an ``error`` event (``errors()`` maps a failure to its :class:`ApiError`, as for a plain answer)."""
    items: list[dict[str, Any]] = []
    yield ndjson_line(parsed)
    try:
        with errors():
            async for event in events:
                if event["event"] == "summary":
                    items.append(event)
                yield ndjson_line(event)
        yield ndjson_line({"event": "done", "response": final_response(asked, parsed, items, arrived())})
    except ApiError as err:
        body = {"code": err.code, "message": err.message, "field": err.field}
        yield ndjson_line({"event": "error", "status": err.status, "error": body})
    finally:
        await events.aclose()  # type: ignore[attr-defined]
