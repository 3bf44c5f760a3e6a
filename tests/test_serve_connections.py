"""Issue 40, item 2: slow clients cannot take the service down. A real ``synopsis serve`` (uvicorn with
:mod:`synopsis.serve.connections`) on a short header timeout: hundreds of half-open connections are closed
while ``/health`` keeps answering; beyond ``--max-connections`` the oldest waiting ones make room."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

PARTIAL = b"GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: "  # the headers never end


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _request(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        payload = None if body is None else json.dumps(body)
        connection.request(method, path, payload, {"Content-Type": "application/json"} if body else {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@contextmanager
def _serving(log: Path, *options: str) -> Iterator[int]:
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "synopsis",
        "serve",
        "--port",
        str(port),
        "--log-level",
        "warning",
        *options,
    ]
    with open(log, "wb") as stderr:
        process = subprocess.Popen(command, stderr=stderr, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if _request(port, "GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the server did not start: {Path(log).read_text()[-2000:]}")
            time.sleep(0.2)
        yield port
    finally:
        process.terminate()
        process.wait(30)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with _serving(log, "--header-timeout", "1", "--max-sections", "3", "--timeout", "2") as port:
        yield port


def _half_open(port: int, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        client.sendall(PARTIAL)
        sockets.append(client)
    return sockets


def _closed_by_server(client: socket.socket) -> bool:
    client.settimeout(0.05)
    try:
        return client.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def test_half_open_connections_are_closed_while_health_answers(server: int) -> None:
    sockets = _half_open(server, 300)
    try:
        started = time.monotonic()
        assert _request(server, "GET", "/health")[0] == 200  # with 300 half-open connections
        deadline = started + 10
        open_ones = list(sockets)
        while open_ones and time.monotonic() < deadline:
            time.sleep(0.25)
            open_ones = [s for s in open_ones if not _closed_by_server(s)]
        assert not open_ones, f"{len(open_ones)} of 300 half-open connections still open"
        assert _request(server, "GET", "/health")[0] == 200
    finally:
        for s in sockets:
            s.close()


def test_beyond_max_connections_the_oldest_waiting_ones_make_room(tmp_path: Path) -> None:
    with _serving(tmp_path / "serve.log", "--header-timeout", "60", "--max-connections", "100") as port:
        sockets = _half_open(port, 150)
        try:
            assert _request(port, "GET", "/health")[0] == 200
            time.sleep(0.3)
            oldest = sum(_closed_by_server(s) for s in sockets[:40])
            newest = sum(_closed_by_server(s) for s in sockets[-40:])
            assert oldest == 40 and newest == 0, (oldest, newest)
        finally:
            for s in sockets:
                s.close()


def test_a_document_over_the_section_limit_is_a_422_naming_the_flag(server: int) -> None:
    document = "\n\n".join(f"# Part {i}\n\nSentence {i} of the text." for i in range(5))
    status, body = _request(server, "POST", "/v1/outline", {"document": document})
    error = json.loads(body)["error"]
    assert status == 422 and error["field"] == "document", body
    assert (
        "more than 3 sections" in error["message"] and "--max-sections" in error["message"]  # counted as read
    )


def test_a_body_that_trickles_is_a_408_within_the_request_timeout(server: int) -> None:
    client = socket.create_connection(("127.0.0.1", server), timeout=10)
    try:
        head = (
            b"POST /v1/outline HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        )
        client.sendall(head + b'{"document": "')  # 86 bytes never come
        started = time.monotonic()
        answer = b""
        while chunk := client.recv(4096):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        # the body stopped: below the minimum rate once the header timeout (1 s) has passed, before the 2 s
        assert b"slower than 500 bytes/s" in answer or b"did not arrive within 2 s" in answer
        assert time.monotonic() - started < 5
    finally:
        client.close()


# ----------------------------------------------------------------------------- issue 50: slow bodies
# A server in this process (lead-3, uvicorn in a thread) with the protocol's own limits: fast to start.


@contextmanager
def _guarded(limits: Any, **config: Any) -> Iterator[int]:
    from helpers.server import running_server

    from synopsis.serve import ModelRegistry, ServeSettings, create_app, describe
    from synopsis.serve.connections import GuardedH11Protocol
    from synopsis.summarizers import load_summarizer

    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    settings = ServeSettings(request_timeout_s=limits.request_timeout_s, **config.pop("settings", {}))
    protocol = GuardedH11Protocol.with_limits(limits)
    with running_server(create_app(registry, settings), http=protocol, **config) as url:
        yield int(url.rsplit(":", 1)[1])


def _limits(**given: Any) -> Any:
    from synopsis.serve.connections import ConnectionLimits

    return ConnectionLimits(**given)


def _answer(client: socket.socket, within: float = 10.0) -> bytes:
    client.settimeout(within)
    answer = b""
    try:
        while chunk := client.recv(4096):
            answer += chunk
    except (TimeoutError, ConnectionError):
        pass
    return answer


_SLOW_POST = (
    b"POST /v1/outline HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
)


def test_a_body_on_a_route_that_takes_none_is_refused_at_once() -> None:
    """Before, ``GET /health`` with ``Content-Length: 1000000`` was answered and its connection then read
    the body for as long as the client trickled it (one was open after 400 s)."""
    with _guarded(_limits(header_timeout_s=30, request_timeout_s=30)) as port:
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            started = time.monotonic()
            client.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\nx")
            answer = _answer(client)
            assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
            assert b"takes no request body" in answer
            assert time.monotonic() - started < 2  # and closed: _answer read to the end
        finally:
            client.close()


def test_a_body_below_the_minimum_rate_is_a_408() -> None:
    """Before, a POST body had the whole request timeout (60 s by default) however slowly it came."""
    limits = _limits(header_timeout_s=0.5, request_timeout_s=30, min_body_rate=100)
    with _guarded(limits) as port:
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            client.sendall(_SLOW_POST + b'{"document": "')
            started = time.monotonic()
            answer = b""
            while not answer and time.monotonic() - started < 5:  # a byte every 0.2 s: 5 bytes/s
                client.sendall(b"a")
                answer = _answer(client, 0.2)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert b"slower than 100 bytes/s" in answer
            assert time.monotonic() - started < 5
        finally:
            client.close()


def test_the_whole_request_has_a_deadline_for_any_method() -> None:
    """A body that keeps the minimum rate still ends at the request's deadline, counted from its first byte
    (headers included), on a route whose application never reads it."""
    limits = _limits(header_timeout_s=0.3, request_timeout_s=1.5, min_body_rate=10)
    with _guarded(limits) as port:
        for head in (_SLOW_POST, _SLOW_POST.replace(b"/v1/outline", b"/v1/nowhere")):
            client = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                started = time.monotonic()
                client.sendall(head)
                answer = b""
                while time.monotonic() - started < 4 and not answer:
                    client.sendall(b"x" * 20)  # 100 bytes/s
                    client.settimeout(0.2)
                    try:
                        answer = client.recv(4096)
                    except TimeoutError:
                        pass
                assert answer.startswith((b"HTTP/1.1 408", b"HTTP/1.1 400")), answer[:200]
                if answer.startswith(b"HTTP/1.1 408"):
                    assert b"did not arrive within 1.5 s" in answer
                    assert 1.4 < time.monotonic() - started < 3
            finally:
                client.close()


def test_when_full_the_slowest_bodies_make_room_and_health_answers() -> None:
    """Before, a connection whose headers were complete was never closed to make room: 20 slow bodies on a
    server of 20 connections kept every other client out."""
    limits = _limits(header_timeout_s=30, request_timeout_s=30, min_body_rate=1, max_connections=20)
    with _guarded(limits) as port:
        slow = []
        for i in range(20):
            client = socket.create_connection(("127.0.0.1", port), timeout=10)
            client.sendall(_SLOW_POST + b"x" * (20 - i))  # the first ones sent the least: the slowest
            slow.append(client)
        try:
            time.sleep(0.3)
            for _ in range(3):
                assert _request(port, "GET", "/health")[0] == 200
            time.sleep(0.2)
            refused = [_answer(client, 0.05).startswith(b"HTTP/1.1 503") for client in slow]
            # one made room (the probes came one after another), the one that had sent the least
            assert refused[0] and sum(refused) == 1, refused
        finally:
            for client in slow:
                client.close()


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /health HTTP/1.1\nHost: t\n\n",  # bare LF line ends
        b"GET /health HTTP/1.1\r\nHost: t\r\nX-A: b\r\n c\r\n\r\n",  # an obsolete folded line
    ],
)
def test_bare_lf_and_folded_headers_are_refused(request_bytes: bytes) -> None:
    with _guarded(_limits()) as port:
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            client.sendall(request_bytes)
            assert _answer(client).startswith(b"HTTP/1.1 400")
        finally:
            client.close()
        assert _request(port, "GET", "/health")[0] == 200  # CRLF, unfolded
