"""Issue 58 (hardening, round three), its last group: a client that hangs up mid-stream is logged and counted
as a 499, bidi controls are escaped on a terminal, and a new connection is not closed for room while a slow
body lags (the rest: test_hardening_round3.py). Each test failed before its fix."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from helpers.server import lead3_app


# ----------------------------------------------------------------------------- 7: 499, bidi, /health
def test_a_client_that_hangs_up_mid_stream_is_logged_and_counted_as_499(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import json
    import logging

    from synopsis.summarizers.extractive import LeadSummarizer

    original = LeadSummarizer.summarize_windows

    def slow(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.2)  # the summaries take a while: the client leaves after the first line
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LeadSummarizer, "summarize_windows", slow)
    app = lead3_app()
    document = "".join(f"# Part {i}\n\nSection {i} has a sentence. And one more.\n\n" for i in range(30))
    body = json.dumps({"document": document, "model": "lead-3", "by": "section", "stream": True}).encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v1/summarize", "raw_path": b"/v1/summarize", "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
    }  # fmt: skip

    async def exchange() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        first_line = asyncio.Event()
        requested = False

        async def receive() -> dict[str, Any]:
            nonlocal requested
            if not requested:
                requested = True
                return {"type": "http.request", "body": body, "more_body": False}
            await first_line.wait()  # the client reads the first line, then hangs up
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message["type"] == "http.response.body" and message.get("body"):
                first_line.set()

        await app(scope, receive, send)
        return sent

    with caplog.at_level(logging.INFO, logger="synopsis.serve.access"):
        sent = asyncio.run(exchange())
    assert sent[0]["status"] == 200  # the stream had started
    assert not any(m["type"] == "http.response.body" and not m.get("more_body") for m in sent)
    lines = [r.getMessage() for r in caplog.records if r.name == "synopsis.serve.access"]
    assert len(lines) == 1 and '"POST /v1/summarize" 499 ' in lines[0], lines
    from prometheus_client import generate_latest

    metrics = generate_latest(app.state.service.metrics.registry).decode()
    assert 'status="499"' in metrics and 'status="200"' not in metrics, metrics


def test_bidi_controls_are_escaped_on_a_terminal_and_kept_in_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.cli import run_cli

    from synopsis.cli import output

    document = tmp_path / "doc.txt"
    document.write_text("Invoice for \u202eexe.pdf\u202c is due. Pay it soon. The \u2067end\u2069 is near.\n")
    monkeypatch.setattr(output, "on_terminal", lambda: True)
    code, out, err = run_cli(capsys, "summarize", document, "--method", "lead-3")
    assert code == 0, err
    assert "\u202e" not in out and "\u2067" not in out and "\\u202e" in out and "\\u2067" in out, out
    saved = tmp_path / "out.txt"
    code, _, err = run_cli(capsys, "summarize", document, "--method", "lead-3", "-o", saved)
    assert code == 0 and "\u202e" in saved.read_text()  # a file holds the text as it is


class _FakeConnection:
    """What the room reads of a connection: its transport, its loop's time and when its body lags."""

    def __init__(self, lags_at: float = 0.0) -> None:
        from types import SimpleNamespace

        self.transport = SimpleNamespace(is_closing=lambda: False)
        self.loop = SimpleNamespace(time=lambda: 0.0)
        self.lags_at = lags_at

    def _lags_at(self) -> float:
        return self.lags_at


def test_a_new_connection_is_not_closed_for_room_while_a_slow_body_lags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from synopsis.serve import connections

    monkeypatch.setattr(connections.GuardedH11Protocol, "_lags_at", _FakeConnection._lags_at)
    room = connections._Room()
    idle = _FakeConnection()
    room.track(idle, connections._WAITING, 5.0)  # type: ignore[arg-type]  # kept alive, idle
    slow = [_FakeConnection(lags_at=float(i)) for i in range(3)]  # a reconnecting attacker's bodies
    for body in slow:
        room.track(body, connections._RECEIVING, 6.0)  # type: ignore[arg-type]
    probe, newcomer = _FakeConnection(), _FakeConnection()
    room.track(probe, connections._WAITING, 10.0)  # type: ignore[arg-type]  # its request not read yet
    assert room.victim(newcomer, 10.1) is idle  # type: ignore[arg-type]  # waiting a while: first to go
    room.track(idle, None)  # type: ignore[arg-type]
    assert room.victim(newcomer, 10.1) is slow[0]  # type: ignore[arg-type]  # then the most lagging body
    for body in slow:
        room.track(body, None)  # type: ignore[arg-type]
    assert room.victim(newcomer, 10.2) is probe  # type: ignore[arg-type]  # nothing else: the new one
