"""The service under real traffic: oversized bodies through urllib, auth, /metrics, dynamic batching,
disconnects, streaming, and the API fuzzed by schemathesis.

Tests that depend on the HTTP server's behaviour (413 to a client that writes its whole body first, a
client that goes away) run a real uvicorn server in a thread on a free loopback port; the rest use
FastAPI's TestClient.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from helpers.fakes import FakeSummarizer
from helpers.server import running_server, wait_for

from synopsis.config import DecodingOptions
from synopsis.document import Document
from synopsis.errors import ConfigError
from synopsis.serve import ModelEntry, ModelRegistry, ServeSettings, create_app, describe
from synopsis.serve.documents import read_pasted_document
from synopsis.summarizers import load_summarizer

TEXT = "Rivers flooded the valley. Bridges were closed.\n\nOfficials expect them to reopen. A bakery won."
TOKEN = "s3cret-token"
PAPER = (Path(__file__).resolve().parents[1] / "examples" / "paper_abstract.txt").read_text()


class RecordingSummarizer(FakeSummarizer):
    """Instruction-aware fake that records each call's batch; ``gate`` (if given) holds every call. Its
    option ``k`` changes nothing (a copy with options is the same object)."""

    takes_instructions = True
    options = ("k",)

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.calls: list[list[str | None] | None] = []
        self.sizes: list[int] = []
        self.gate = gate
        self.lock = threading.Lock()

    def summarize(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None, **options: Any
    ) -> list[str]:
        with self.lock:
            self.calls.append(None if instructions is None else list(instructions))
            self.sizes.append(len(documents))
        if self.gate is not None and not self.gate.wait(10):
            raise RuntimeError("the test never opened the gate")
        instructions = instructions or [None] * len(documents)
        return [
            f"{i or 'plain'}: {d.sentences[0].text}" for d, i in zip(documents, instructions, strict=True)
        ]


class FakeCache:
    hits, misses = 3, 1


def _registry(summarizer: Any = None) -> ModelRegistry:
    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    registry.add(ModelEntry("rec", summarizer or RecordingSummarizer()))
    return registry


def _instruction_request(client: TestClient, results: dict[int, Any], i: int) -> threading.Thread:
    """A thread (not started) that posts instruction ``q{i}`` to the ``rec`` model; its response lands in
    ``results[i]``."""

    def post() -> None:
        body = {"document": TEXT, "model": "rec", "instructions": [f"q{i}"]}
        results[i] = client.post("/v1/summarize", json=body)

    return threading.Thread(target=post)


# ----------------------------------------------------------------------------- 413 that clients receive
def test_oversized_body_is_a_413_that_urllib_httpx_and_requests_receive() -> None:
    import httpx

    app = create_app(_registry(), ServeSettings(max_body_bytes=1024 * 1024))
    big = json.dumps({"document": "Word. " * (5 * 1024 * 1024 // 6), "model": "lead-3"}).encode()
    with running_server(app) as url:
        request = urllib.request.Request(
            url + "/v1/summarize", data=big, headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=30)
        assert caught.value.code == 413
        assert json.loads(caught.value.read())["error"]["code"] == "body_too_large"
        response = httpx.post(
            url + "/v1/summarize", content=big, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"
        chunked = httpx.post(
            url + "/v1/summarize", content=iter([big[i : i + 65536] for i in range(0, len(big), 65536)])
        )
        assert chunked.status_code == 413
        ok = httpx.post(url + "/v1/summarize", json={"document": TEXT, "model": "lead-3"})
        assert ok.status_code == 200
        try:
            import requests  # a dependency of transformers' hub client, not of ours
        except ImportError:
            return
        refused = requests.post(url + "/v1/summarize", data=big, headers={"Content-Type": "application/json"})
        assert refused.status_code == 413 and refused.json()["error"]["code"] == "body_too_large"


def test_a_body_that_is_not_utf8_is_a_documented_422() -> None:
    with TestClient(create_app(_registry())) as client:
        response = client.post(
            "/v1/evaluate",
            content=b'{"predictions": ["\xff\xfe"]}',
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 422, response.text
        assert "UTF-8" in response.json()["error"]["message"]


# ----------------------------------------------------------------------------- auth
def test_token_guards_v1_and_metrics_and_leaves_health_open() -> None:
    with TestClient(create_app(_registry(), ServeSettings(auth_token=TOKEN))) as client:
        good = {"Authorization": f"Bearer {TOKEN}"}
        for method, path in (("GET", "/v1/models"), ("GET", "/metrics"), ("POST", "/v1/summarize")):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
                response = client.request(method, path, headers=headers, json={"document": TEXT})
                assert response.status_code == 401, (path, headers)
                assert response.json()["error"]["code"] == "unauthorized"
                assert response.headers["www-authenticate"] == "Bearer"
        assert client.get("/health").status_code == 200
        assert client.get("/").status_code == 200  # the page loads, then asks for the token
        assert client.get("/v1/models", headers=good).status_code == 200
        assert client.get("/metrics", headers=good).status_code == 200
        ok = client.post("/v1/summarize", headers=good, json={"document": TEXT, "model": "lead-3"})
        assert ok.status_code == 200
        schema = client.get("/openapi.json").json()
        assert schema["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
        assert "401" in schema["paths"]["/v1/summarize"]["post"]["responses"]
        assert schema["paths"]["/v1/models"]["get"]["security"] == [{"bearer": []}]


def test_without_a_token_everything_is_open() -> None:
    with TestClient(create_app(_registry())) as client:
        assert client.get("/metrics").status_code == 200
        assert "securitySchemes" not in client.get("/openapi.json").json().get("components", {})


def test_auth_uses_a_constant_time_compare(monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    from synopsis.serve import middleware as app_module  # the bearer token is checked in the middleware

    seen = []
    compare = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(app_module.hmac, "compare_digest", spy)
    with TestClient(create_app(_registry(), ServeSettings(auth_token=TOKEN))) as client:
        client.get("/v1/models", headers={"Authorization": "Bearer nope"})
    assert seen == [(b"nope", TOKEN.encode())]


def test_serve_warns_on_a_public_host_without_a_token(tmp_path: Path) -> None:
    from synopsis.cli.serve import auth_token, is_loopback

    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    assert auth_token(token_file, {}) == TOKEN
    assert auth_token(None, {"SYNOPSIS_API_TOKEN": "env-token"}) == "env-token"
    assert auth_token(None, {}) is None
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        auth_token(tmp_path / "empty", {})


@pytest.fixture()
def logging_restored() -> Iterator[None]:
    """``synopsis serve`` configures logging for the process; put it back for the tests that follow."""
    import logging

    names = ("synopsis", "synopsis.serve", "uvicorn", "uvicorn.access", "py.warnings")
    saved = {
        n: (lg.handlers[:], lg.level, lg.propagate, lg.disabled)
        for n in names
        for lg in [logging.getLogger(n)]
    }
    yield
    logging.captureWarnings(False)
    for name, (handlers, level, propagate, disabled) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
        logger.disabled = disabled


@pytest.mark.parametrize("host,warned", [("0.0.0.0", True), ("127.0.0.1", False)])
def test_serve_command_warns_about_an_open_public_port(
    host: str,
    warned: bool,
    monkeypatch: pytest.MonkeyPatch,
    logging_restored: None,
) -> None:
    import uvicorn

    import synopsis.serve
    from synopsis.cli import main
    from synopsis.cli import serve as serve_command

    # What the command logs, whatever earlier tests did to the logging set-up (dictConfig keeps a logger
    # that an earlier configuration disabled disabled, and clears handlers added to child loggers).
    warned_lines: list[str] = []
    monkeypatch.setattr(serve_command.logger, "warning", lambda msg, *args: warned_lines.append(msg % args))
    served: dict[str, Any] = {}
    monkeypatch.setattr(synopsis.serve, "build_registry", lambda *a, **k: _registry())
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.update(app=app, **kwargs))
    monkeypatch.delenv("SYNOPSIS_API_TOKEN", raising=False)
    command = ["serve", "--host", host, "--batch-window-ms", "5", "--max-batch", "8", "--batch-workers", "3"]
    assert main(command) == 0
    assert any("without a token" in line for line in warned_lines) is warned
    warned_lines.clear()
    settings = served["app"].state.settings
    assert (settings.batch_window_ms, settings.max_batch, settings.auth_token) == (5, 8, None)
    assert settings.batch_workers == 3
    monkeypatch.setenv("SYNOPSIS_API_TOKEN", TOKEN)
    assert main(["serve", "--host", host]) == 0
    assert not any("without a token" in line for line in warned_lines)
    assert served["app"].state.settings.auth_token == TOKEN


def test_serve_backend_is_what_the_models_load_on(
    monkeypatch: pytest.MonkeyPatch, logging_restored: None
) -> None:
    """``synopsis serve --backend ctranslate2 --compute-type int8``: the server's default backend, what the
    registry loads its --model models on (a request's ``options.backend`` may ask for the other)."""
    import uvicorn

    import synopsis.serve
    from synopsis.cli import main

    asked: dict[str, Any] = {}
    monkeypatch.setattr(synopsis.serve, "build_registry", lambda **k: asked.update(k) or _registry())
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    assert main(["serve", "--backend", "ctranslate2", "--compute-type", "int8"]) == 0
    assert (asked["backend"], asked["compute_type"], asked["models"]) == ("ctranslate2", "int8", {})


def test_serve_threads_are_torch_threads_as_in_every_command(
    monkeypatch: pytest.MonkeyPatch, logging_restored: None
) -> None:
    """``--threads`` sets torch's intra-op threads (as in summarize, train, ...), not how many requests run at
    once: that is ``--inference-threads``. Before, ``serve --threads 1`` ran one request at a time with
    torch's default threads (a third of the throughput of two requests at once, one thread each)."""
    import torch
    import uvicorn

    import synopsis.serve
    from synopsis.cli import main
    from synopsis.serve.settings import ServeSettings

    served: dict[str, Any] = {}
    monkeypatch.setattr(synopsis.serve, "build_registry", lambda *a, **k: _registry())
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.update(app=app, **kwargs))
    before = torch.get_num_threads()
    try:
        assert main(["serve", "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1
        assert served["app"].state.settings.inference_threads == ServeSettings().inference_threads
        assert main(["serve", "--inference-threads", "3"]) == 0
        assert served["app"].state.settings.inference_threads == 3
        assert served["app"].state.pool.threads == 3
    finally:
        torch.set_num_threads(before)


# ----------------------------------------------------------------------------- /metrics
def test_metrics_count_requests_batches_queues_and_cache_hits() -> None:
    recorder = RecordingSummarizer()
    recorder.cache = FakeCache()  # type: ignore[attr-defined]
    settings = ServeSettings(batch_window_ms=20, max_batch=8, batch_workers=1)  # one worker: one call
    with TestClient(create_app(_registry(recorder), settings)) as client:
        assert client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3"}).status_code == 200
        two = client.post(
            "/v1/summarize", json={"document": TEXT, "model": "rec", "instructions": ["a", "b"]}
        )
        assert two.status_code == 200
        client.post("/v1/summarize", json={"document": TEXT, "model": "no-such-model"})
        client.get("/no/such/path")
        text = client.get("/metrics").text
    assert 'synopsis_requests_total{endpoint="/v1/summarize",model="lead-3",status="200"} 1.0' in text
    assert 'synopsis_requests_total{endpoint="/v1/summarize",model="rec",status="200"} 1.0' in text
    assert 'synopsis_requests_total{endpoint="/v1/summarize",model="-",status="404"} 1.0' in text
    assert 'synopsis_requests_total{endpoint="other",model="-",status="404"} 1.0' in text
    assert 'synopsis_request_duration_seconds_count{endpoint="/v1/summarize"} 3.0' in text
    assert 'synopsis_batch_size_bucket{le="2.0",model="rec"} 1.0' in text  # both instructions in one call
    assert 'synopsis_batch_size_count{model="rec"} 1.0' in text
    assert 'synopsis_queue_depth{queue="pool"} 0.0' in text
    assert 'synopsis_queue_depth{queue="batch"} 0.0' in text
    assert 'synopsis_instructsum_cache_hits_total{model="rec"} 3.0' in text


# ----------------------------------------------------------------------------- batching
def test_extractive_methods_never_wait_for_a_batch_window() -> None:
    settings = ServeSettings(batch_window_ms=2000, max_batch=8)
    with TestClient(create_app(_registry(), settings)) as client:
        answer = client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3"})
        text = client.get("/metrics").text
    assert answer.status_code == 200
    assert 'synopsis_batch_size_count{model="lead-3"}' not in text  # answered by the pool, not a batcher


def test_requests_within_the_window_share_one_call() -> None:
    recorder = RecordingSummarizer()
    settings = ServeSettings(batch_window_ms=300, max_batch=4, inference_threads=1)
    results: dict[int, Any] = {}
    with TestClient(create_app(_registry(recorder), settings)) as client:
        threads = [_instruction_request(client, results, i) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    assert all(results[i].status_code == 200 for i in range(6))
    for i in range(6):  # each request gets its own summary back
        (item,) = results[i].json()["summaries"]
        assert (item["instruction"], item["summary"]) == (f"q{i}", f"q{i}: Rivers flooded the valley.")
    assert sum(recorder.sizes) == 6 and max(recorder.sizes) <= 4 and len(recorder.sizes) < 6


def test_requests_with_other_options_do_not_share_a_call() -> None:
    recorder = RecordingSummarizer()
    registry = ModelRegistry()
    registry.add(
        ModelEntry("rec", recorder)  # same object, other key
    )
    settings = ServeSettings(batch_window_ms=300, max_batch=8, batch_workers=1)  # one call per key
    with TestClient(create_app(registry, settings)) as client:
        threads = [
            threading.Thread(
                target=client.post,
                args=("/v1/summarize",),
                kwargs={"json": {"document": TEXT, "model": "rec", "options": {"k": 1 + i % 2}}},
            )
            for i in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    assert sorted(recorder.sizes) == [2, 2]


def test_no_request_waits_longer_than_the_window_plus_one_batch() -> None:
    recorder = RecordingSummarizer()
    settings = ServeSettings(batch_window_ms=200, max_batch=64)
    with TestClient(create_app(_registry(recorder), settings)) as client:
        started = time.perf_counter()
        body = client.post("/v1/summarize", json={"document": TEXT, "model": "rec"}).json()
        elapsed = time.perf_counter() - started
    # alone in its window: it leaves when the window closes, not later
    assert 0.19 <= elapsed < 1.5, elapsed
    assert body["timing_ms"]["total"] < 1500


@pytest.mark.parametrize("workers", [1, 2])
def test_a_request_arriving_during_a_batch_waits_at_most_the_window_plus_that_batch(workers: int) -> None:
    """The bound holds with one batch at a time and with two; with one, the request waits for the running
    batch, with two it runs beside it (a worker is free) and waits for its window only."""
    window, batch = 0.1, 1.0  # a long batch: the two cases differ by far more than a loaded machine's jitter

    class Slow(RecordingSummarizer):
        def summarize(
            self, documents: Sequence[Document], instructions: Any = None, **options: Any
        ) -> list[str]:
            time.sleep(batch)
            return super().summarize(documents, instructions)

    settings = ServeSettings(batch_window_ms=1000 * window, max_batch=8, batch_workers=workers)
    results: dict[str, dict[str, Any]] = {}
    with TestClient(create_app(_registry(Slow()), settings)) as client:

        def post(key: str) -> None:
            started = time.perf_counter()
            body = client.post("/v1/summarize", json={"document": TEXT, "model": "rec"}).json()
            results[key] = {"seconds": time.perf_counter() - started, "body": body}

        first = threading.Thread(target=post, args=("first",))
        first.start()
        time.sleep(window + 0.2)  # the first batch is running now
        post("second")
        first.join(10)
    second = results["second"]
    own_call = second["body"]["timing_ms"]["summaries"][0] / 1000
    waited = second["seconds"] - own_call
    assert waited <= window + batch + 0.5, waited  # slack for a loaded machine
    if workers == 1:
        assert waited >= batch - (window + 0.2) - 0.05  # it did wait for the running batch (one at a time)
    else:
        assert waited < batch - (window + 0.2) - 0.05, waited  # it did not: a worker was free


def test_batches_run_concurrently_up_to_batch_workers() -> None:
    """Two workers: a batch whose window closes while another batch runs starts at once beside it (the two
    calls overlap in time), a third waits until one of them ends, and /metrics shows the batches running."""

    class Overlapping(RecordingSummarizer):
        def __init__(self) -> None:
            super().__init__(threading.Event())
            self.active = 0
            self.most = 0

        def summarize(
            self, documents: Sequence[Document], instructions: Any = None, **options: Any
        ) -> list[str]:
            with self.lock:
                self.active += 1
                self.most = max(self.most, self.active)
            try:
                return super().summarize(documents, instructions)  # held by the gate
            finally:
                with self.lock:
                    self.active -= 1

    model = Overlapping()
    assert model.gate is not None
    settings = ServeSettings(batch_window_ms=20, max_batch=8, batch_workers=2)
    results: dict[int, Any] = {}
    with TestClient(create_app(_registry(model), settings)) as client:
        threads = [_instruction_request(client, results, i) for i in range(3)]
        try:
            threads[0].start()
            wait_for(lambda: model.active == 1)  # the first batch runs (held)
            threads[1].start()
            wait_for(lambda: model.active == 2)  # the second window closed: its batch runs beside it
            metrics = client.get("/metrics").text
            assert 'synopsis_batches_running{model="rec"} 2.0' in metrics
            threads[2].start()
            wait_for(lambda: client.app.state.batchers["rec"].waiting() == 1)
            time.sleep(0.3)  # its window (20 ms) is long closed: it waits for a worker, not for the window
            assert model.active == 2 and len(model.calls) == 2
        finally:
            model.gate.set()
            for thread in threads:
                thread.join(20)
        assert 'synopsis_batches_running{model="rec"} 0.0' in client.get("/metrics").text
    assert [results[i].status_code for i in range(3)] == [200, 200, 200]
    assert model.most == 2 and sorted(model.sizes) == [1, 1, 1]
    assert [results[i].json()["summaries"][0]["summary"] for i in range(3)] == [
        f"q{i}: Rivers flooded the valley." for i in range(3)
    ]


@pytest.mark.parametrize("workers,sizes", [(1, [4]), (2, [2, 2]), (3, [1, 1, 2])])
def test_what_is_ready_is_split_over_the_free_workers(workers: int, sizes: list[int]) -> None:
    """Four summaries in one window: one call with one worker, two calls of two at once with two (both
    cores busy instead of one), and with three, a third of what is ready each, rounded up."""
    gate = threading.Event()
    recorder = RecordingSummarizer(gate)
    settings = ServeSettings(batch_window_ms=1000, max_batch=8, batch_workers=workers)  # all four in it
    results: dict[int, Any] = {}
    with TestClient(create_app(_registry(recorder), settings)) as client:
        threads = [_instruction_request(client, results, i) for i in range(4)]
        try:
            for thread in threads:
                thread.start()
            wait_for(lambda: len(recorder.sizes) == len(sizes))  # these calls run at once (held)
            assert sorted(recorder.sizes) == sizes
        finally:
            gate.set()
            for thread in threads:
                thread.join(20)
    assert sorted(recorder.sizes) == sizes
    assert [results[i].json()["summaries"][0]["summary"] for i in range(4)] == [
        f"q{i}: Rivers flooded the valley." for i in range(4)
    ]


def test_a_failing_batch_is_retried_item_by_item() -> None:
    class PickySummarizer(RecordingSummarizer):
        def summarize(
            self, documents: Sequence[Document], instructions: Any = None, **options: Any
        ) -> list[str]:
            if any("poison" in d.sentences[0].text for d in documents):
                raise RuntimeError("bad document")
            return super().summarize(documents, instructions)

    settings = ServeSettings(batch_window_ms=300, max_batch=8)
    results: dict[str, int] = {}
    with TestClient(create_app(_registry(PickySummarizer()), settings)) as client:

        def post(text: str) -> None:
            results[text] = client.post("/v1/summarize", json={"document": text, "model": "rec"}).status_code

        threads = [threading.Thread(target=post, args=(t,)) for t in (TEXT, "A poison pill. Indeed.")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    assert results == {TEXT: 200, "A poison pill. Indeed.": 500}


def _documents() -> list[Document]:
    paragraphs = [p for p in PAPER.split("\n\n") if p.strip()]
    texts = [PAPER, TEXT, " ".join(paragraphs[:1]), PAPER[: len(PAPER) // 2]]
    return [read_pasted_document(text)[0] for text in texts]


@pytest.mark.slow
def test_batched_pointer_generator_summaries_equal_unbatched_ones() -> None:
    summarizer = load_summarizer("pointer-generator")
    documents = _documents()
    alone = [summarizer.summarize([d])[0] for d in documents]
    assert summarizer.summarize(documents) == alone
    # and through the service: the same summaries with batching on as off
    registry = ModelRegistry()
    registry.add(describe("default", summarizer))
    texts = [PAPER, TEXT, PAPER[: len(PAPER) // 2]]
    with TestClient(create_app(registry, ServeSettings(batch_window_ms=500, max_batch=8))) as client:
        results: dict[int, str] = {}

        def post(i: int) -> None:
            results[i] = client.post("/v1/summarize", json={"document": texts[i]}).json()["summaries"][0][
                "summary"
            ]

        threads = [threading.Thread(target=post, args=(i,)) for i in range(len(texts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        calls = client.app.state.batchers["default"].calls
    assert calls < len(texts)
    assert [results[i] for i in range(len(texts))] == [
        summarizer.summarize([read_pasted_document(t)[0]])[0] for t in texts
    ]


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    from helpers.tiny_models import save_tiny_bart

    return save_tiny_bart(tmp_path_factory.mktemp("bart"), shared_data / "tokenizers")


@pytest.mark.slow
def test_batched_seq2seq_summaries_equal_unbatched_ones(bart_dir: Path) -> None:
    summarizer = load_summarizer(None, bart_dir)
    decoding = DecodingOptions(num_beams=2, max_length=12)
    documents = _documents()
    instructions = [None, "Why?", None, "Who?"]
    alone = [
        summarizer.summarize([d], [i], decoding=decoding)[0]
        for d, i in zip(documents, instructions, strict=True)
    ]
    assert summarizer.summarize(documents, instructions, decoding=decoding) == alone


# ----------------------------------------------------------------------------- disconnects
def _send_and_hang_up(url: str, body: dict[str, Any]) -> None:
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/summarize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        time.sleep(0.3)  # queued by now


@pytest.mark.parametrize("batching", [False, True])
def test_a_request_whose_client_left_is_never_computed(batching: bool) -> None:
    gate = threading.Event()
    recorder = RecordingSummarizer(gate)
    # one batch at a time: the second request waits behind the held one (two workers would compute it)
    settings = ServeSettings(
        inference_threads=1, batch_window_ms=10 if batching else 0, max_batch=1, batch_workers=1
    )
    app = create_app(_registry(recorder), settings)
    with running_server(app) as url:
        first: dict[str, int] = {}

        def hold() -> None:
            body = json.dumps({"document": TEXT, "model": "rec", "instructions": ["first"]}).encode()
            request = urllib.request.Request(
                url + "/v1/summarize", data=body, headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                first["status"] = response.status

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            wait_for(lambda: len(recorder.calls) == 1)
            _send_and_hang_up(url, {"document": TEXT, "model": "rec", "instructions": ["gone"]})

            def withdrawn() -> bool:
                health = json.loads(urllib.request.urlopen(url + "/health").read())
                return (
                    health["pool"]["waiting"] == 0 and sum(len(b) for b in app.state.batchers.values()) == 0
                )

            wait_for(withdrawn)
        finally:
            gate.set()
            holder.join(20)
        assert first == {"status": 200}
        time.sleep(0.3)
        assert recorder.calls == [["first"]]  # the second was never computed
        metrics = urllib.request.urlopen(url + "/metrics").read().decode()
        assert 'status="499"' in metrics


# ----------------------------------------------------------------------------- streaming
@pytest.mark.parametrize("batching", [False, True])
def test_stream_answers_ndjson_events_then_done(batching: bool) -> None:
    settings = ServeSettings(batch_window_ms=5 if batching else 0)
    with TestClient(create_app(_registry(), settings)) as client:
        body = {"document": TEXT, "model": "rec", "instructions": ["a", "b"], "stream": True}
        with client.stream("POST", "/v1/summarize", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/x-ndjson")
            events = [json.loads(line) for line in response.iter_lines() if line]
        plain = client.post("/v1/summarize", json={**body, "stream": False}).json()
        bad = client.post("/v1/summarize", json={"document": "   ", "model": "rec", "stream": True})
    kinds = [e["event"] for e in events]
    assert kinds == ["parsed", "summary", "summary", "done"]
    assert events[0]["document"]["sentences"] == 4 and events[0]["sections"]["depth"] == 0
    assert sorted(e["summary"] for e in events[1:3]) == [
        "a: Rivers flooded the valley.",
        "b: Rivers flooded the valley.",
    ]
    done = events[-1]["response"]
    assert done["summaries"] == plain["summaries"]
    assert set(done) == set(plain)
    assert bad.status_code == 422  # a bad document is an HTTP error before the stream starts


def test_stream_reports_a_failure_as_an_error_event() -> None:
    class Broken(FakeSummarizer):
        def summarize(self, documents: Any, instructions: Any = None, **options: Any) -> list[str]:
            raise RuntimeError("model exploded")

    registry = ModelRegistry()
    registry.add(ModelEntry("broken", Broken()))
    with TestClient(create_app(registry)) as client:
        with client.stream(
            "POST", "/v1/summarize", json={"document": TEXT, "model": "broken", "stream": True}
        ) as r:
            events = [json.loads(line) for line in r.iter_lines() if line]
    assert [e["event"] for e in events] == ["parsed", "error"]
    assert events[-1]["status"] == 500 and events[-1]["error"]["code"] == "internal_error"


# ----------------------------------------------------------------------------- schemathesis
_BIN = Path(sys.executable).parent
ST = next((str(p) for p in (_BIN / "st", _BIN / "schemathesis") if p.is_file()), None) or shutil.which("st")


@pytest.mark.skipif(ST is None, reason="schemathesis is not installed (pip install 'synopsis[dev]')")
@pytest.mark.parametrize("auth", [False, True])
def test_schemathesis_finds_no_failures(auth: bool, tmp_path: Path) -> None:
    settings = ServeSettings(auth_token=TOKEN if auth else None, batch_window_ms=5 if auth else 0)
    with running_server(create_app(_registry(), settings)) as url:
        command = [
            str(ST),
            "run",
            url + "/openapi.json",
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--max-examples",
            "15",
            "--request-timeout",
            "120",
            "--workers",
            "1",
            "--seed",
            "1",
        ]
        if auth:
            command += ["-H", f"Authorization: Bearer {TOKEN}"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]


def test_the_batcher_serves_threads_directly_and_never_computes_a_withdrawn_item() -> None:
    """Items come from any thread and go straight back to it; an item withdrawn within its window never
    reaches the model; ``limit`` refuses a request's items whole; a closed batcher refuses all."""
    from synopsis.serve.batching import Batcher
    from synopsis.serve.pool import QueueFullError

    model = RecordingSummarizer()
    batcher = Batcher("rec", window_s=0.3, max_batch=8, concurrency=1)
    documents = [Document.from_text(f"Sentence {i} here.") for i in range(3)]
    futures: list[Any] = []
    submitter = threading.Thread(
        target=lambda: futures.extend(batcher.submit(documents, ["a", "b", "c"], model, ()))
    )
    submitter.start()
    submitter.join(5)
    assert futures[1].cancel()  # withdrawn while its window is open
    assert [futures[0].result(5).summary, futures[2].result(5).summary] == [
        "a: Sentence 0 here.",
        "c: Sentence 2 here.",
    ]
    assert model.calls == [["a", "c"]] and futures[0].result().batch_size == 2
    gate = threading.Event()
    held = RecordingSummarizer(gate)
    running = batcher.submit(documents[:1], [None], held, ("held",))
    wait_for(lambda: held.calls == [None])  # the only worker is busy: what comes next waits
    batcher.submit(documents[:2], [None, None], model, ())
    with pytest.raises(QueueFullError, match="2 summaries waiting"):
        batcher.submit(documents, [None] * 3, model, (), limit=4)
    assert batcher.waiting() == 2
    gate.set()
    assert running[0].result(5).summary == "plain: Sentence 0 here."
    batcher.close()
    with pytest.raises(QueueFullError, match="shutting down"):
        batcher.submit(documents, [None] * 3, model, ())


def test_the_workers_batches_even_out_over_the_items_in_flight() -> None:
    """Two workers. With a batch running, what is ready leaves at once (not at its window's end) once it
    holds its share of the items in flight, and takes no more than that share (1 running and 6 ready: 4);
    a worker that has just finished waits for more while fewer than its share are ready, so the 2 left
    ride with the next arrivals instead of making a batch of their own. Without these rules, clients that
    wait for their answers fall into lasting cohorts of uneven, smaller batches (docs/serve.md)."""
    from synopsis.serve.batching import Batcher

    class Held(RecordingSummarizer):
        """Each call waits for its own release."""

        def __init__(self) -> None:
            super().__init__()
            self.releases: list[threading.Event] = []

        def summarize(
            self, documents: Sequence[Document], instructions: Any = None, **options: Any
        ) -> list[str]:
            release = threading.Event()
            with self.lock:
                self.releases.append(release)
            out = super().summarize(documents, instructions)
            if not release.wait(10):
                raise RuntimeError("the test never released the call")
            return out

    model = Held()
    window = 2.0  # far longer than any step below takes on a loaded machine
    batcher = Batcher("rec", window_s=window, max_batch=16, concurrency=2)
    document = Document.from_text("Rivers flooded the valley.")
    try:
        batcher.submit([document], ["x"], model, ())
        wait_for(lambda: model.sizes == [1])  # alone: it waited for its window
        started = time.monotonic()
        ys = batcher.submit([document] * 6, [f"y{i}" for i in range(6)], model, ())
        wait_for(lambda: len(model.sizes) == 2)
        assert time.monotonic() - started < window / 2  # it did not wait for its window
        assert model.calls[1] == ["y0", "y1", "y2", "y3"]  # its share of 7 in flight on 2 workers
        model.releases[0].set()  # the first worker is free; 2 wait, fewer than its share (3 of 6)
        time.sleep(0.1)
        assert len(model.sizes) == 2  # it waits for more
        batcher.submit([document] * 2, ["r0", "r1"], model, ())
        wait_for(lambda: len(model.sizes) == 3)
        assert model.calls[2] == ["y4", "y5", "r0", "r1"]
        assert time.monotonic() - started < window  # at once: the 4 hold their share (4 of 8)
    finally:
        for release in model.releases:
            release.set()
        wait_for(lambda: all(future.done() for future in ys))
        batcher.close()
    summaries = [future.result().summary for future in ys]
    assert summaries == [f"y{i}: Rivers flooded the valley." for i in range(6)]


def test_a_running_batch_with_other_options_makes_no_batch_leave_before_its_window() -> None:
    """The share counts only what could share the call: one summary with other options running lets a
    lone summary wait out its window for company, as without a batch running."""
    from synopsis.serve.batching import Batcher

    gate = threading.Event()
    model = RecordingSummarizer(gate)
    window = 0.5
    batcher = Batcher("rec", window_s=window, max_batch=16, concurrency=2)
    document = Document.from_text("Rivers flooded the valley.")
    try:
        batcher.submit([document], ["b"], model, ("other",))
        wait_for(lambda: model.sizes == [1])  # held: it runs on one worker, the other is free
        batcher.submit([document], ["a"], model, ())
        time.sleep(window / 2)
        assert model.sizes == [1]  # the lone "a" still waits for its window
        futures = batcher.submit([document], ["a2"], model, ())
        wait_for(lambda: len(model.sizes) == 2)
        assert model.calls[1] == ["a", "a2"]
    finally:
        gate.set()
        batcher.close()
    assert futures[0].result(5).summary == "a2: Rivers flooded the valley."


def test_a_batch_awaited_from_an_event_loop_wakes_it_once_and_closing_answers_what_waits() -> None:
    """Six requests awaiting one batch are answered in one wake-up of their loop (one per item spread the
    answers, and so the clients' next requests, over more than a window); a batcher closed while items
    wait answers them (the server is shutting down) instead of leaving them waiting."""
    import asyncio

    from synopsis.serve.batching import Batcher, SharedCalls
    from synopsis.serve.pool import QueueFullError

    model = RecordingSummarizer()
    documents = [Document.from_text(f"Sentence {i} here.") for i in range(6)]

    async def requests(batcher: Batcher) -> tuple[list[Any], int]:
        loop = asyncio.get_running_loop()
        wakes = 0
        threadsafe = loop.call_soon_threadsafe

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return threadsafe(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        calls = [SharedCalls(batcher, model, (), windows=False) for _ in documents]
        done = await asyncio.gather(
            *(c.call_async([d], [f"q{i}"]) for i, (c, d) in enumerate(zip(calls, documents, strict=True)))
        )
        return done, wakes

    batcher = Batcher("rec", window_s=0.2, max_batch=8, concurrency=1)
    done, wakes = asyncio.run(requests(batcher))
    assert [summary for (summary,) in done] == [f"q{i}: Sentence {i} here." for i in range(6)]
    assert model.sizes == [6] and wakes == 1

    gate = threading.Event()
    held = RecordingSummarizer(gate)
    closing = Batcher("held", window_s=0.01, max_batch=8, concurrency=1)

    async def waiting_when_closed() -> None:
        first, second = (SharedCalls(closing, m, (), windows=False) for m in (held, model))
        running = asyncio.ensure_future(first.call_async(documents[:1], None))
        await asyncio.to_thread(wait_for, lambda: held.calls == [None])  # the only worker is busy
        queued = asyncio.ensure_future(second.call_async(documents[1:2], None))
        await asyncio.to_thread(wait_for, lambda: closing.waiting() == 1)
        closing.close()
        with pytest.raises(QueueFullError, match="shutting down"):
            await asyncio.wait_for(queued, 5)
        gate.set()
        assert await asyncio.wait_for(running, 5) == ["plain: Sentence 0 here."]

    asyncio.run(waiting_when_closed())


def test_serve_trusts_forwarded_headers_only_from_the_given_proxies_and_checks_hosts_without_a_token(
    monkeypatch: pytest.MonkeyPatch, logging_restored: None
) -> None:
    """Issue 50: uvicorn trusted X-Forwarded-For from every loopback peer, and a server without a token
    answered any Host."""
    import uvicorn

    import synopsis.serve
    from synopsis.cli import main

    served: dict[str, Any] = {}
    monkeypatch.setattr(synopsis.serve, "build_registry", lambda *a, **k: _registry())
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: served.update(app=app, **kwargs))
    monkeypatch.delenv("SYNOPSIS_API_TOKEN", raising=False)
    assert main(["serve", "--allowed-hosts", "My.Box."]) == 0
    assert served["proxy_headers"] is False
    assert served["app"].state.settings.allowed_hosts == ("localhost", "my.box")
    assert main(["serve", "--host", "summaries.lan", "--forwarded-allow-ips", "10.0.0.1,10.0.0.2"]) == 0
    assert (served["proxy_headers"], served["forwarded_allow_ips"]) == (True, "10.0.0.1,10.0.0.2")
    assert served["app"].state.settings.allowed_hosts == ("localhost", "summaries.lan")
    monkeypatch.setenv("SYNOPSIS_API_TOKEN", TOKEN)
    assert main(["serve"]) == 0
    assert served["app"].state.settings.allowed_hosts is None  # with a token nothing changes
