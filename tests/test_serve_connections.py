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
        "5 sections" in error["message"] and "3" in error["message"] and "--max-sections" in error["message"]
    )


def test_a_body_that_trickles_is_a_408_within_the_request_timeout(server: int) -> None:
    client = socket.create_connection(("127.0.0.1", server), timeout=10)
    try:
        head = (
            b"POST /v1/outline HTTP/1.1\r\nHost: t\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        )
        client.sendall(head + b'{"document": "')  # 86 bytes never come
        started = time.monotonic()
        answer = b""
        while chunk := client.recv(4096):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"did not arrive within 2 s" in answer
        assert time.monotonic() - started < 5
    finally:
        client.close()
