"""The library's one summarize runner: read once, ``by`` decided once, hooks, and cancellation between windows
(the service stops a request's remaining windows when it times out or its client leaves)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from synopsis.errors import InputError
from synopsis.pipeline import RunHooks, SummarizeRunner, document_items, read_source
from synopsis.serve import ModelRegistry, ServeSettings, create_app, describe
from synopsis.summarizers.extractive import LeadSummarizer
from synopsis.summarizers.sections import Cancelled

#: 12 sections, one window each for an extractive method
LONG = "# Report\n\n" + "".join(f"## Part {i}\n\nPart {i} says a thing. It says more.\n\n" for i in range(12))


class CountingLead(LeadSummarizer):
    """LEAD-2 that counts (and may slow down) its window batches."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(2)
        self.delay = delay
        self.batches = 0
        self.lock = threading.Lock()

    def summarize_windows(self, windows: Any, instructions: Any = None, decoding: Any = None) -> Any:
        with self.lock:
            self.batches += 1
        time.sleep(self.delay)
        return super().summarize_windows(windows, instructions)


def test_the_runner_stops_between_windows_when_cancelled() -> None:
    summarizer = CountingLead()
    asked = []

    def cancelled() -> bool:
        asked.append(summarizer.batches)
        return summarizer.batches >= 1  # after the first batch of windows

    runner = SummarizeRunner(summarizer, by="section", batch_size=4)
    with pytest.raises(Cancelled, match="8 of 12 windows left"):
        runner.run(LONG, hooks=RunHooks(cancelled=cancelled))
    assert summarizer.batches == 1 and asked == [0, 1]


def test_the_runner_reads_once_and_reports_through_its_hooks(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"  # a .txt with headings is Markdown, as pasted
    path.write_text(LONG)
    seen: dict[str, list[Any]] = {"parsed": [], "section": [], "summary": []}
    hooks = RunHooks(
        parsed=lambda parsed, by_section: seen["parsed"].append((parsed.format, by_section)),
        section=lambda index, instruction, section: seen["section"].append((index, section.heading)),
        summary=lambda summary: seen["summary"].append((summary.index, summary.instruction, summary.by)),
    )
    SummarizeRunner(LeadSummarizer(2), by="section").run(path, ["a", "b"], hooks)
    assert seen["parsed"] == [("markdown", True)]
    assert [heading for index, heading in seen["section"] if index == 1] == [f"Part {i}" for i in range(12)]
    assert seen["summary"] == [(0, "a", "section"), (1, "b", "section")]
    assert read_source(path).offsets == read_source(LONG).offsets  # one place computes them
    with pytest.raises(InputError, match="by must be one of"):
        SummarizeRunner(LeadSummarizer(2), by="chapter")


@pytest.mark.parametrize("batching", [False, True])
def test_a_timed_out_request_stops_its_remaining_windows(batching: bool) -> None:
    """Before: unbatched, a timed-out by-section request kept its thread summarizing every window left."""
    summarizer = CountingLead(delay=0.25)
    summarizer.extractive = False  # as a neural model: batched, it waits for the batch window
    registry = ModelRegistry()
    registry.add(describe("slow", summarizer))
    settings = ServeSettings(request_timeout_s=0.6, batch_window_ms=5 if batching else 0, max_batch=1)
    with TestClient(create_app(registry, settings)) as client:
        body = {"document": LONG, "model": "slow", "by": "section"}
        response = client.post("/v1/summarize", json=body)
        assert response.status_code == 504, response.text
        time.sleep(1.0)  # what would have run by now without cancellation: 6 more windows
        stopped_at = summarizer.batches
        time.sleep(0.6)
    assert summarizer.batches == stopped_at and stopped_at <= 5, stopped_at  # of 12


def test_bytes_are_read_as_utf8_text_and_anything_else_is_one_line_error() -> None:
    assert read_source(LONG.encode()).document.title == "Report"
    with pytest.raises(InputError, match="not UTF-8"):
        read_source(b"\xff\xfe broken")
    with pytest.raises(InputError, match="empty"):
        read_source("  \n")


def test_awaited_model_calls_give_the_same_summaries_and_hooks_as_blocking_ones() -> None:
    """The service awaits its batcher by document (``run_items_async``); the CLI blocks (``run_items``): the
    same calls, summaries, citations and hook events, in the same order."""
    import asyncio

    summarizer = LeadSummarizer(2)
    text = "The dam broke. The valley flooded. Crews came at dawn. Roads stayed shut for a week."
    instructions = ["What broke?", "What flooded?", "Who came?"]

    def traced() -> tuple[RunHooks, list[Any]]:
        events: list[Any] = []
        return RunHooks(summary=lambda s: events.append(s.to_dict() | {"index": s.index})), events

    calls: list[Any] = []

    def blocking(documents: Any, wanted: Any) -> list[str]:
        calls.append(("blocking", len(documents), wanted))
        return summarizer.summarize(documents, wanted)

    async def awaited(documents: Any, wanted: Any) -> list[str]:
        calls.append(("awaited", len(documents), wanted))
        await asyncio.sleep(0)
        return summarizer.summarize(documents, wanted)

    runner = SummarizeRunner(summarizer, by="document", batch_size=2, summarize_documents=blocking)
    items = document_items(read_source(text), instructions)
    hooks, events = traced()
    blocked = runner.run_items(items, hooks)
    hooks_async, events_async = traced()
    done = asyncio.run(runner.run_items_async(items, hooks_async, awaited))
    assert [s.to_dict() for s in done] == [s.to_dict() for s in blocked]
    assert events_async == events and len(events) == 3
    assert [c[1:] for c in calls if c[0] == "awaited"] == [c[1:] for c in calls if c[0] == "blocking"]
    assert [c[1:] for c in calls if c[0] == "blocking"] == [(2, instructions[:2]), (1, instructions[2:])]
    assert events[0]["summary"][0]["sources"], "each summary sentence cites the document"
    with pytest.raises(ValueError, match="by section, use run_items"):  # windows are blocking calls
        asyncio.run(SummarizeRunner(summarizer, by="section").run_items_async(items, RunHooks(), awaited))
