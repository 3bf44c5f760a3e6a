"""Summaries by section in the service and on the page: the request's ``by``, the structured items with
sources and offsets, streamed section by section, and in Chromium the by-section control, the section
summaries and source highlights."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from helpers.fakes import FakeSummarizer

from synopsis.serve import ModelEntry, ModelRegistry, ServeSettings, create_app, describe
from synopsis.summarizers import load_summarizer

DOCUMENT = """# Flood report

Heavy rain fell for a week. The river rose fast.

## Damage

Three bridges were closed on Monday. Two roads were washed
away.

## Outlook

Officials expect the bridges to reopen next week.
"""


class PlainSummarizer(FakeSummarizer):
    """A model that cannot summarize by section."""

    by_section_capable = False

    def summarize(self, documents: Any, instructions: Any = None, **options: Any) -> list[str]:
        return ["plain"] * len(documents)


@pytest.fixture()
def client() -> Iterator[TestClient]:
    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    registry.add(ModelEntry("plain", PlainSummarizer()))
    with TestClient(create_app(registry, ServeSettings())) as test_client:
        yield test_client


def test_by_section_items_carry_sections_sources_and_offsets(client: TestClient) -> None:
    response = client.post(
        "/v1/summarize", json={"document": DOCUMENT, "model": "lead-3", "by": "section", "max_words": 12}
    )
    assert response.status_code == 200, response.text
    (item,) = response.json()["summaries"]
    assert item["by"] == "section"
    structured = item["structured"]
    assert item["summary"] == structured["prediction"]
    # the root's text is the preface; sections[i] is the section at path (i,)
    assert structured["preface"]["heading"] == "Flood report" and structured["preface"]["path"] == []
    assert [s["heading"] for s in structured["sections"]] == ["Damage", "Outlook"]
    assert sum(len(s["text"].split()) for s in structured["summary"]) <= 12
    for section in [structured["preface"], *structured["sections"]]:
        for sentence in section["summary"]:
            for source in sentence["sources"]:
                assert source["path"] == section["path"]
                assert DOCUMENT[source["start"] : source["end"]].split() == source["text"].split()
    plain = client.post("/v1/summarize", json={"document": DOCUMENT, "model": "lead-3"}).json()
    (whole,) = plain["summaries"]  # by document: the same schema, without sections
    assert whole["by"] == "document" and whole["structured"]["sections"] == []
    for sentence in whole["structured"]["summary"]:
        for source in sentence["sources"]:
            assert DOCUMENT[source["start"] : source["end"]].split() == source["text"].split()


def test_by_section_errors_name_the_field(client: TestClient) -> None:
    response = client.post("/v1/summarize", json={"document": DOCUMENT, "model": "plain", "by": "section"})
    assert response.status_code == 422 and "by:" in response.json()["error"]["message"]
    response = client.post("/v1/summarize", json={"document": DOCUMENT, "by": "chapter"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "by"


def _walk(structured: dict[str, Any]) -> list[dict[str, Any]]:
    """The structured answer's preface and sections in document order, each without its subsections."""
    sections = (
        [structured["preface"], *structured["sections"]] if structured["preface"] else structured["sections"]
    )
    out, stack = [], list(reversed(sections))
    while stack:
        node = stack.pop()
        if not node.get("skipped"):
            out.append({key: node[key] for key in ("heading", "path", "index", "summary")})
        stack.extend(reversed(node.get("sections", [])))
    return out


@pytest.mark.parametrize("batching", [False, True])
def test_stream_by_section_sends_each_section_then_done(batching: bool) -> None:
    token = "section-token"
    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    settings = ServeSettings(batch_window_ms=5 if batching else 0, auth_token=token)
    body = {"document": DOCUMENT, "model": "lead-3", "by": "section", "max_words": 12, "stream": True}
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(registry, settings)) as client:
        assert client.post("/v1/summarize", json=body).status_code == 401  # auth applies by section too
        with client.stream("POST", "/v1/summarize", json=body, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/x-ndjson")
            events = [json.loads(line) for line in response.iter_lines() if line]
        plain = client.post("/v1/summarize", json={**body, "stream": False}, headers=headers).json()
        metrics = client.get("/metrics", headers=headers).text
    kinds = [e["event"] for e in events]
    assert kinds == ["parsed", "section", "section", "section", "summary", "done"]
    (item,) = plain["summaries"]
    assert [e["section"] for e in events if e["event"] == "section"] == _walk(item["structured"])
    assert all(e["index"] == 0 and e["instruction"] is None for e in events[1:5])
    assert events[4]["structured"] == item["structured"] and events[4]["by"] == "section"
    assert events[-1]["response"]["summaries"] == plain["summaries"]
    assert 'model="lead-3"' in metrics and 'status="200"' in metrics


def test_stream_by_section_sends_sections_before_the_rest_is_computed() -> None:
    """20 sections of one window each: the first section reaches the client after a call of its own window,
    while the second call is still held back (the summarizer waits for the test to have read one); the
    calls then grow to the batch size of 16 (issue 61, item 3)."""
    from helpers.server import running_server

    summarizer = load_summarizer("lead-3")
    calls, finished, release = [], [], threading.Event()
    windows = summarizer.summarize_windows

    def gated(batch: Any, instructions: Any = None, decoding: Any = None) -> Any:
        calls.append(len(batch))
        if len(calls) > 1:
            assert release.wait(30), "the client never saw a section event"
        out = windows(batch, instructions, decoding)
        finished.append(len(batch))
        return out

    summarizer.summarize_windows = gated  # type: ignore[method-assign]
    registry = ModelRegistry()
    registry.add(describe("lead-3", summarizer))
    document = "\n".join(f"## Part {i}\n\nSentence number {i} says something.\n" for i in range(20))
    body = {"document": document, "model": "lead-3", "by": "section", "stream": True}
    with running_server(create_app(registry, ServeSettings())) as url:
        request = urllib.request.Request(
            url + "/v1/summarize", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        kinds = []
        with urllib.request.urlopen(request, timeout=60) as response:
            for line in response:
                event = json.loads(line)
                if event["event"] == "section" and not release.is_set():
                    assert finished == [1]  # the second batch has not been computed yet
                    release.set()
                kinds.append(event["event"])
    assert calls == finished == [1, 2, 4, 8, 5]
    assert kinds == ["parsed"] + ["section"] * 20 + ["summary", "done"]


class CountingWindows:
    """Wraps a summarizer's ``summarize_windows``: records each call's windows (their first sentence) and,
    with ``gate``, holds every call until the gate opens."""

    def __init__(self, summarizer: Any, gate: threading.Event | None = None) -> None:
        self.inner = summarizer.summarize_windows
        self.calls: list[list[str]] = []
        self.gate = gate
        self.lock = threading.Lock()
        summarizer.summarize_windows = self

    def __call__(self, windows: Any, instructions: Any = None, decoding: Any = None) -> Any:
        with self.lock:
            self.calls.append([window.texts[0] for window in windows])
        if self.gate is not None and not self.gate.wait(20):
            raise RuntimeError("the test never opened the gate")
        return self.inner(windows, instructions, decoding)


def _report(name: str, parts: int) -> str:
    return f"# Report {name}\n\n" + "\n".join(
        f"## Part {i}\n\n{name} sentence {i} is about the river. The {name} bridge {i} was closed.\n"
        for i in range(parts)
    )


def test_concurrent_by_section_requests_share_window_batches() -> None:
    """Three by-section requests within one window: their windows share model calls (a call holds windows
    of several requests) and each gets exactly the answer it gets alone."""
    summarizer = load_summarizer("lead-3")
    counter = CountingWindows(summarizer)
    registry = ModelRegistry()
    registry.add(_batched_like_a_neural_model(describe("lead-3", summarizer)))
    documents = {name: _report(name, parts) for name, parts in (("alpha", 3), ("beta", 5), ("gamma", 4))}
    settings = ServeSettings(batch_window_ms=400, max_batch=16, batch_workers=1)  # not split over workers
    results: dict[str, Any] = {}
    with TestClient(create_app(registry, settings)) as client:

        def post(name: str) -> None:
            body = {"document": documents[name], "model": "lead-3", "by": "section", "max_words": 30}
            results[name] = client.post("/v1/summarize", json=body)

        threads = [threading.Thread(target=post, args=(name,)) for name in documents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        shared_calls = list(counter.calls)
        counter.calls.clear()
        with TestClient(create_app(registry, ServeSettings())) as alone_client:  # unbatched, one at a time
            for name, document in documents.items():
                body = {"document": document, "model": "lead-3", "by": "section", "max_words": 30}
                alone = alone_client.post("/v1/summarize", json=body)
                assert results[name].status_code == 200, results[name].text
                assert results[name].json()["summaries"] == alone.json()["summaries"]
    windows = sum(len(call) for call in shared_calls)
    assert windows == 3 + 5 + 4  # one window per section, each computed once
    assert len(shared_calls) < windows
    # a call held windows of more than one request (before, each request's windows ran alone)
    assert any(len({text.split()[0] for text in call}) > 1 for call in shared_calls), shared_calls


@pytest.mark.slow
def test_batched_by_section_pointer_generator_equals_unbatched() -> None:
    """The bundled model: by-section answers of concurrent requests whose windows share calls equal the
    answers each request gets alone without batching (sources and attention citations included)."""
    summarizer = load_summarizer("pointer-generator")
    counter = CountingWindows(summarizer)
    registry = ModelRegistry()
    registry.add(describe("default", summarizer))
    documents = [DOCUMENT, _report("alpha", 2), _report("beta", 3)]
    alone = []
    with TestClient(create_app(registry, ServeSettings())) as client:
        for document in documents:
            alone.append(client.post("/v1/summarize", json={"document": document, "by": "section"}).json())
    counter.calls.clear()
    results: dict[int, Any] = {}
    batched = ServeSettings(batch_window_ms=500, max_batch=16, batch_workers=1)  # not split over workers
    with TestClient(create_app(registry, batched)) as client:

        def post(i: int) -> None:
            results[i] = client.post("/v1/summarize", json={"document": documents[i], "by": "section"}).json()

        threads = [threading.Thread(target=post, args=(i,)) for i in range(len(documents))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    assert sum(len(call) for call in counter.calls) == 3 + 2 + 3
    assert max(len(call) for call in counter.calls) > 3  # a call held windows of several requests
    for i in range(len(documents)):
        assert results[i]["summaries"] == alone[i]["summaries"]


def _batched_like_a_neural_model(entry: ModelEntry) -> ModelEntry:
    # LEAD-3 stands in for a neural model here (fast and deterministic); as itself, being extractive, it
    # never waits for a batch window
    entry.info = replace(entry.info, extractive=False)
    return entry


def test_a_by_section_request_whose_client_left_is_never_computed() -> None:
    from helpers.server import running_server
    from helpers.server import wait_for as _wait_for

    gate = threading.Event()
    summarizer = load_summarizer("lead-3")
    counter = CountingWindows(summarizer, gate)
    registry = ModelRegistry()
    registry.add(_batched_like_a_neural_model(describe("lead-3", summarizer)))
    # one batch at a time: the second request's windows wait behind the held batch (with two workers they
    # would run beside it and be computed before the client leaves)
    settings = ServeSettings(batch_window_ms=10, max_batch=2, inference_threads=2, batch_workers=1)
    app = create_app(registry, settings)
    with running_server(app) as url:
        first: dict[str, Any] = {}

        def hold() -> None:
            body = {"document": _report("first", 1), "model": "lead-3", "by": "section"}
            request = urllib.request.Request(
                url + "/v1/summarize", json.dumps(body).encode(), {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                first["status"] = response.status

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            _wait_for(lambda: len(counter.calls) == 1)  # the first request's batch holds the model
            queue = app.state.batchers["lead-3"]
            body = {"document": _report("gone", 3), "model": "lead-3", "by": "section"}
            payload = json.dumps(body).encode()
            host, port = url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(
                    b"POST /v1/summarize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                _wait_for(lambda: queue.waiting(windows=True) == 1)  # its first call (one section) waits
            _wait_for(lambda: queue.waiting(windows=True) == 0)  # hung up: withdrawn
        finally:
            gate.set()
            holder.join(20)
        assert first == {"status": 200}
        time.sleep(0.3)
        assert [call[0].split()[0] for call in counter.calls] == ["first"]  # "gone" was never computed
        metrics = urllib.request.urlopen(url + "/metrics").read().decode()
        assert 'status="499"' in metrics


def test_page_by_section_outline_and_source_highlights(page: Any) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
    page.get_by_test_id("document").fill(DOCUMENT)
    page.get_by_test_id("model").select_option("lead-3")
    page.get_by_test_id("by-section").check()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("section-summary")).to_have_count(3)
    # the document summary is headed by what the document is called (its title, not a summary sentence)
    expect(page.get_by_text("Document summary: Flood report")).to_have_count(1)
    sentence = page.get_by_test_id("summary-sentence").filter(has_text="Two roads were washed away.").first
    sentence.click()
    highlight = page.get_by_test_id("source-highlight")
    expect(highlight).to_have_count(1)
    expect(highlight).to_have_text("Two roads were washed\naway.")
    page.get_by_test_id("summary-sentence").filter(has_text="Heavy rain fell for a week.").first.click()
    expect(highlight).to_have_text("Heavy rain fell for a week.")


def test_stream_sends_each_extractive_section_before_the_next_is_chosen() -> None:
    """Issue 48: salient (the default's method out of its domain) chooses one section at a time, and the
    stream sends each section as soon as it is chosen: the second section's sentences are not even encoded
    before the client has read the first section's event."""
    from helpers.server import running_server

    from synopsis.summarizers.salient import SalientSummarizer, TfidfVectors

    encoded, release = [], threading.Event()

    class Gated(TfidfVectors):
        def encode(self, texts: Any) -> Any:
            encoded.append(len(texts))
            if len(encoded) > 1:
                assert release.wait(30), "the client never saw a section event"
            return super().encode(texts)

    registry = ModelRegistry()
    registry.add(describe("salient", SalientSummarizer(k=1, vectors=Gated())))
    sentence = "The river bridge number {} was closed for repairs by the town council."
    parts = [f"## Part {i}\n\n{sentence.format(i)}" for i in range(3)]
    body = {"document": "\n\n".join(parts), "model": "salient", "by": "section", "stream": True}
    with running_server(create_app(registry, ServeSettings())) as url:
        request = urllib.request.Request(
            url + "/v1/summarize", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        kinds = []
        with urllib.request.urlopen(request, timeout=60) as response:
            for line in response:
                event = json.loads(line)
                if event["event"] == "section" and not release.is_set():
                    assert len(encoded) <= 2  # the second section waits for this event to be read
                    release.set()
                kinds.append(event["event"])
    assert kinds == ["parsed"] + ["section"] * 3 + ["summary", "done"]
