"""Issue 40's service bounds under load: thousands of half-open connections, and documents of many sections.

``slow-clients``: starts ``synopsis serve`` (the built-in models) with ``--header-timeout`` and
``--max-connections``, opens CONNECTIONS sockets that send a partial request and wait, while a probe asks
``GET /health`` every 100 ms; reports how the probes fared, the server's open file descriptors at the peak,
and how many half-open connections are still open one second after the header timeout.

``sections``: a Markdown document of N tiny sections (``# S<i>`` / one sentence each, as in the issue's
probe), parsed and summarized by section with lead-3 the way the service does it (``on_section`` after
every batch of 16 windows), then the whole request (``POST /v1/summarize``, ``"by": "section"``) through the
service in this process, for each N; the cost per section shows whether it grows with N.

    python benchmarks/serve_hardening.py slow-clients [--connections 5000] [--header-timeout 3]
    python benchmarks/serve_hardening.py sections [--sizes 1250,5000,10000,20000]

Results are appended under the run's name to benchmarks/results/serve_hardening.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "serve_hardening.json"
PARTIAL = b"GET /health HTTP/1.1\r\nHost: bench\r\nX-Slow: "


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _health(port: int) -> float | None:
    """Seconds for GET /health, or None when it failed."""
    started = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/health")
        ok = connection.getresponse().status == 200
        connection.close()
    except OSError:
        return None
    return time.perf_counter() - started if ok else None


def slow_clients(connections: int, header_timeout: float, max_connections: int) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the clients need a descriptor each
    port = _free_port()
    command = [
        sys.executable, "-m", "synopsis", "serve", "--port", str(port), "--log-level", "warning",
        "--header-timeout", str(header_timeout), "--max-connections", str(max_connections),
    ]  # fmt: skip
    server = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while _health(port) is None:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the server did not start")
            time.sleep(0.2)
        probes: list[float | None] = []
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                probes.append(_health(port))
                time.sleep(0.1)

        prober = threading.Thread(target=probe)
        prober.start()
        sockets, refused = [], 0
        started = time.monotonic()
        peak_fds = 0
        for i in range(connections):
            try:
                client = socket.create_connection(("127.0.0.1", port), timeout=5)
                client.sendall(PARTIAL)
                sockets.append(client)
            except OSError:
                refused += 1
            if i % 250 == 0:
                peak_fds = max(peak_fds, len(os.listdir(f"/proc/{server.pid}/fd")))
        opened_in = time.monotonic() - started
        peak_fds = max(peak_fds, len(os.listdir(f"/proc/{server.pid}/fd")))
        # the last connections may wait in the listen backlog: poll until the server has closed them all
        open_ones, waited = list(sockets), time.monotonic()
        while open_ones and time.monotonic() - waited < 60:
            time.sleep(0.5)
            open_ones = [client for client in open_ones if not _closed(client)]
        all_closed_after = time.monotonic() - started
        for client in sockets:
            client.close()
        stop.set()
        prober.join()
        answered = [p for p in probes if p is not None]
        return {
            "connections": connections,
            "header_timeout_s": header_timeout,
            "max_connections": max_connections,
            "opened_in_s": round(opened_in, 2),
            "refused_by_the_os": refused,
            "server_fds_at_peak": peak_fds,
            "still_open_after_60s_more": len(open_ones),
            "all_closed_s_after_the_first_opened": round(all_closed_after, 2),
            "health_probes": len(probes),
            "health_failed": len(probes) - len(answered),
            "health_ms_median": round(1000 * statistics.median(answered), 1) if answered else None,
            "health_ms_max": round(1000 * max(answered), 1) if answered else None,
        }
    finally:
        server.terminate()
        server.wait(30)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _closed(client: socket.socket) -> bool:
    client.settimeout(0.001)
    try:
        return client.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def sections(sizes: list[int]) -> dict[str, Any]:
    from synopsis.serve.documents import parse_document
    from synopsis.summarizers import load_summarizer
    from synopsis.summarizers.sections import summarize_by_section

    lead = load_summarizer("lead-3")
    client = _service_client()
    rows = []
    for size in sizes:
        markdown = "\n".join(f"# S{i}\nw." for i in range(size))
        started = time.perf_counter()
        document, _ = parse_document(markdown, "markdown", *_no_limits())
        parsed = time.perf_counter()
        summarize_by_section(lead, [document], batch_size=16, on_section=lambda *_: None)
        done = time.perf_counter()
        request = {"document": markdown, "model": "lead-3", "by": "section"}
        response = client.post("/v1/summarize", json=request)
        answered = time.perf_counter()
        assert response.status_code == 200, response.text[:300]
        rows.append(
            {
                "sections": size,
                "parse_s": round(parsed - started, 2),
                "by_section_s": round(done - parsed, 2),
                "by_section_ms_per_section": round(1000 * (done - parsed) / size, 3),
                "service_request_s": round(answered - done, 2),
                "response_mb": round(len(response.content) / 1e6, 2),
            }
        )
        print(rows[-1], flush=True)
    return {"runs": rows}


def _service_client() -> Any:
    """The service (lead-3) in this process, without limits on the document, through FastAPI's TestClient."""
    from fastapi.testclient import TestClient

    from synopsis.serve import ModelRegistry, ServeSettings, create_app, describe
    from synopsis.summarizers import load_summarizer

    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    unbounded = {"max_body_bytes": 10**9, "request_timeout_s": 3600.0}
    if "max_sections" in ServeSettings.__dataclass_fields__:
        unbounded.update(max_sections=10**9, max_sentences=10**9, max_document_words=10**9)
    return TestClient(create_app(registry, ServeSettings(**unbounded)))


def _no_limits() -> list[Any]:
    """No document limits (none at all before the service had them: the code before issue 40 runs too)."""
    try:
        from synopsis.serve.settings import DocumentLimits
    except ImportError:
        return []
    return [DocumentLimits(sections=10**9, sentences=10**9, words=10**9)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["slow-clients", "sections"])
    parser.add_argument("--connections", type=int, default=5000)
    parser.add_argument("--header-timeout", type=float, default=3.0)
    parser.add_argument("--max-connections", type=int, default=1000)
    parser.add_argument("--sizes", default="1250,5000,10000,20000")
    parser.add_argument("--name", default=None, help="Key of this run in the results (default: WHAT).")
    args = parser.parse_args()
    if args.what == "slow-clients":
        result = slow_clients(args.connections, args.header_timeout, args.max_connections)
    else:
        result = sections([int(n) for n in args.sizes.split(",")])
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()}
    print(json.dumps(result, indent=2))
    stored = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    stored[args.name or args.what] = result
    RESULTS.write_text(json.dumps(stored, indent=2) + "\n")


if __name__ == "__main__":
    main()
