"""Issue 40's service bounds under load: thousands of half-open connections, and documents of many sections.

``slow-clients``: starts ``synopsis serve`` (the built-in models) with ``--header-timeout`` and
``--max-connections``, opens CONNECTIONS sockets that send a partial request and wait, while a probe asks
``GET /health`` every 100 ms; reports how the probes fared, the server's open file descriptors at the peak,
and how many half-open connections are still open one second after the header timeout.

``sections``: a Markdown document of N tiny sections (``# S<i>`` / one sentence each, as in the issue's
probe), parsed and summarized by section with lead-3 the way the service does it (``on_section`` after
every batch of 16 windows), then the whole request (``POST /v1/summarize``, ``"by": "section"``) through the
service in this process, for each N; the cost per section shows whether it grows with N.

``slow-bodies`` (issue 50): starts ``synopsis serve`` (defaults, built-in models; ``--token``: with a token)
and opens CONNECTIONS sockets that send complete headers with ``Content-Length: 1000000`` (``GET /health``
or, unauthenticated, ``POST /v1/summarize``), then one body byte every 2 s each, while a probe asks
``GET /health`` every 100 ms and an authenticated lead-3 summary every 0.5 s, for ``--window`` seconds
(``--reconnect``: a connection the server closes is opened again at once, as a persistent attacker would);
reports the share of probes answered, the server's descriptors at the peak and when the slow connections
were all closed. ``--src DIR`` runs the server from another source tree (an earlier commit) to compare.

``large-body``: POSTs the issue's Markdown of 1.2 million one-word headings (``"#\\nw.\\n"``, 8.4 MB) to
``/v1/summarize`` on a fresh server (``--concurrent N`` at once) and reports the time to the answer, its
status and the server's peak resident memory (``VmHWM``) before and after.

    python benchmarks/serve_hardening.py slow-clients [--connections 5000] [--header-timeout 3]
    python benchmarks/serve_hardening.py sections [--sizes 1250,5000,10000,20000]
    python benchmarks/serve_hardening.py slow-bodies --connections 1100,5000 [--token] [--window 30]
    python benchmarks/serve_hardening.py large-body [--concurrent 1]
    python benchmarks/serve_hardening.py regex [--size 50000] [--src DIR]
    python benchmarks/serve_hardening.py variants --model DIR [--src DIR] [--serve-options="--max-variants 2"]

``regex`` (issue 58, item 1): POSTs the issue's three inputs that were quadratic in the readers (a numbered
heading's line of spaces, a run of ``[``, a token of quotes), each SIZE characters long, to ``/v1/outline``
of a fresh server while a probe asks ``GET /health`` every 100 ms (5 s timeout); reports each answer's
status and time and how the probes fared meanwhile.

``variants`` (issue 58, item 6): serves the Hugging Face checkpoint DIR alone (``--model tiny=DIR``, torch)
and asks for a lead summary on torch and on CTranslate2 with each compute type (float32, int8,
int8_float32), three times round; reports each answer's status and the server's resident memory
(``VmRSS``) after it: unbounded, every variant stayed loaded.

Results are appended under the run's name to benchmarks/results/serve_hardening.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


TOKEN = "bench-token"
SLOW_HEAD = {
    "GET": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n",
    "POST": b"POST /v1/summarize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 1000000\r\n\r\n",
}


@contextmanager
def _server(src: str | None, token: bool, *options: str) -> Iterator[tuple[int, subprocess.Popen]]:
    """``synopsis serve`` (from ``src`` when given) on a free port; yields the port and the process."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("SYNOPSIS_API_TOKEN", None)
    if token:
        env["SYNOPSIS_API_TOKEN"] = TOKEN
    if src is not None:
        env["PYTHONPATH"] = src
    command = [
        sys.executable,
        "-m",
        "synopsis",
        "serve",
        "--port",
        str(port),
        "--log-level",
        "error",
        *options,
    ]
    server = subprocess.Popen(command, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 180
        while _health(port) is None:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the server did not start")
            time.sleep(0.2)
        yield port, server
    finally:
        server.terminate()
        server.wait(60)


def _summary(port: int, token: bool) -> bool:
    """Whether an authenticated lead-3 summary came back (10 s timeout)."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {TOKEN}"} if token else {})}
    body = json.dumps(
        {"document": "Rivers flooded the valley. Bridges closed. A bakery won.", "model": "lead-3"}
    )
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/summarize", body, headers)
        ok = connection.getresponse().status == 200
        connection.close()
    except OSError:
        return False
    return ok


def _probing(port: int, token: bool, stop: threading.Event) -> tuple[list[threading.Thread], dict[str, list]]:
    seen: dict[str, list] = {"health": [], "summaries": []}

    def health() -> None:
        while not stop.is_set():
            seen["health"].append(_health(port))
            time.sleep(0.1)

    def summaries() -> None:
        while not stop.is_set():
            seen["summaries"].append(_summary(port, token))
            time.sleep(0.5)

    threads = [threading.Thread(target=health), threading.Thread(target=summaries)]
    for thread in threads:
        thread.start()
    return threads, seen


def slow_bodies(
    port: int, pid: int, connections: int, method: str, token: bool, window: float, reconnect: bool
) -> dict[str, Any]:
    """One slow-body run against a running server (module docstring): CONNECTIONS slow clients opened, for
    ``window`` seconds (with ``reconnect`` one that the server closes is opened again at once), then the
    rest are timed until the server has closed them all (at most 60 s more)."""
    stop = threading.Event()
    probes, seen = _probing(port, token, stop)
    selector = selectors.DefaultSelector()
    opened: dict[socket.socket, float] = {}
    lifetimes: list[float] = []
    answers: dict[str, int] = {}
    answered: set[socket.socket] = set()
    counts = {"refused_while_opening": 0, "opened": 0, "peak_fds": 0}
    started = time.monotonic()

    def open_one() -> None:
        try:
            client = socket.create_connection(("127.0.0.1", port), timeout=5)
            client.sendall(SLOW_HEAD[method] + b"x")
        except OSError:
            counts["refused_while_opening"] += 1
            return
        client.setblocking(False)
        selector.register(client, selectors.EVENT_READ)
        opened[client] = time.monotonic()
        counts["opened"] += 1

    for i in range(connections):
        open_one()
        if i % 250 == 0:
            counts["peak_fds"] = max(counts["peak_fds"], _fds(pid))
    opened_in = time.monotonic() - started
    next_byte, stopped_at = time.monotonic() + 2, None
    while opened and time.monotonic() - started < window + 60:
        attacking = time.monotonic() - started < window
        if not attacking and stopped_at is None:
            stopped_at = time.monotonic()
        for key, _ in selector.select(timeout=0.2):
            client = key.fileobj
            try:
                data = client.recv(4096)
            except OSError:
                data = b""
            if data.startswith(b"HTTP/1.1 "):  # answered; the server may still hold the connection open
                status = data[9:12].decode("ascii", "replace")
                answers[status] = answers.get(status, 0) + 1
                answered.add(client)
            if data:
                continue
            if client not in answered:
                answers["closed unanswered"] = answers.get("closed unanswered", 0) + 1
            lifetimes.append(time.monotonic() - opened.pop(client))
            selector.unregister(client)
            client.close()
            if attacking and reconnect:
                open_one()
        if time.monotonic() >= next_byte:  # one body byte every 2 s from each connection still open
            for client in list(opened):
                try:
                    client.send(b"x")
                except OSError:
                    pass
            next_byte += 2
            counts["peak_fds"] = max(counts["peak_fds"], _fds(pid))
        if stopped_at is None and time.monotonic() - started >= window:
            stop.set()  # the probes measure the attack's window only
    drained = time.monotonic()
    stop.set()
    for thread in probes:
        thread.join()
    for client in opened:
        client.close()
    health = [p for p in seen["health"] if p is not None]
    return {
        "connections": connections,
        "method": method,
        "token": token,
        "reconnect": reconnect,
        "window_s": window,
        "opened_in_s": round(opened_in, 2),
        "opened_in_all": counts["opened"],
        "refused_while_opening": counts["refused_while_opening"],
        "server_fds_at_peak": counts["peak_fds"],
        "answers": answers,
        "lifetime_s_median": round(statistics.median(lifetimes), 2) if lifetimes else None,
        "lifetime_s_max": round(max(lifetimes), 2) if lifetimes else None,
        "still_open_60s_after_the_attack_stopped": len(opened),
        "all_closed_s_from_the_start": None if opened else round(drained - started, 2),
        "all_closed_s_after_the_attack_stopped": None
        if opened or stopped_at is None
        else round(max(0.0, drained - stopped_at), 2),
        "health_answered": f"{len(health)}/{len(seen['health'])}",
        "health_share": round(len(health) / max(1, len(seen["health"])), 3),
        "health_ms_median": round(1000 * statistics.median(health), 1) if health else None,
        "summaries_answered": f"{sum(seen['summaries'])}/{len(seen['summaries'])}",
    }


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _peak_rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return round(
        int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) / 1024, 1
    )


def large_body(src: str | None, concurrent: int) -> dict[str, Any]:
    """The issue's 8.4 MB of one-word headings, ``concurrent`` at once, against a fresh server."""
    document = "#\nw.\n" * 1_200_000
    body = json.dumps({"document": document, "model": "lead-3"})
    with _server(src, False, "--timeout", "600") as (port, server):
        before = _peak_rss_mb(server.pid)
        results: list[dict[str, Any]] = []

        def post() -> None:
            started = time.perf_counter()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
            connection.request("POST", "/v1/summarize", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = response.read()
            results.append(
                {
                    "status": response.status,
                    "seconds": round(time.perf_counter() - started, 2),
                    "message": json.loads(answer).get("error", {}).get("message") if answer else None,
                }
            )

        threads = [threading.Thread(target=post) for _ in range(concurrent)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        health = _health(port)
        return {
            "body_mb": round(len(body) / 1e6, 2),
            "concurrent": concurrent,
            "answers": results,
            "server_peak_rss_mb_before": before,
            "server_peak_rss_mb_after": _peak_rss_mb(server.pid),
            "health_ms_after": None if health is None else round(1000 * health, 1),
        }


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    kilobytes = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))
    return round(int(kilobytes) / 1024, 1)


def _post(port: int, path: str, body: dict[str, Any], timeout: float = 900) -> tuple[int, dict, float]:
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read() or b"{}")
    connection.close()
    return response.status, answer, round(time.perf_counter() - started, 2)


#: The issue's inputs that the readers' regexes took quadratic time on, SIZE characters of the run each.
REGEX_ATTACKS = {
    "numbered heading of spaces": lambda n: "Intro text here.\n\n1. A" + " " * n + "b\n",
    "brackets": lambda n: "Some text.\n" + "[" * n,
    "a token of quotes": lambda n: "Hello world.\nFoo bar.\n\n    a" + '"' * n + "x\n",
}


def regex_attacks(src: str | None, size: int) -> dict[str, Any]:
    """Each of :data:`REGEX_ATTACKS` through ``/v1/outline`` while ``/health`` is probed (see the module)."""
    runs = []
    with _server(src, False, "--timeout", "600") as (port, _):
        for name, make in REGEX_ATTACKS.items():
            stop = threading.Event()
            probes: list[float | None] = []

            def probe(stop: threading.Event = stop, probes: list[float | None] = probes) -> None:
                while not stop.is_set():
                    probes.append(_health(port))
                    time.sleep(0.1)

            prober = threading.Thread(target=probe)
            prober.start()
            status, answer, seconds = _post(port, "/v1/outline", {"document": make(size)})
            stop.set()
            prober.join()
            answered = [p for p in probes if p is not None]
            runs.append({
                "attack": name, "chars": size, "status": status, "seconds": seconds,
                "error": answer.get("error", {}).get("message") if status != 200 else None,
                "health_answered": f"{len(answered)}/{len(probes)}",
                "health_ms_max": round(1000 * max(answered), 1) if answered else None,
            })  # fmt: skip
            print(json.dumps(runs[-1]), flush=True)
    return {"src": src or "this tree", "runs": runs}


def variants(src: str | None, model: str, options: list[str], rounds: int = 3) -> dict[str, Any]:
    """Summaries on every backend and compute type of one checkpoint, ``rounds`` times round (see the
    module)."""
    types = ("float32", "int8", "int8_float32")  # what a request's compute_type takes
    asked = [{}, *({"backend": "ctranslate2", "compute_type": compute} for compute in types)]
    runs = []
    text = "Rivers flooded the valley after a week of rain. Bridges were closed. Engineers expect it to fall."
    serve = ("--no-builtin", "--model", f"tiny={model}", "--batch-window-ms", "0", "--timeout", "600",
             *options)  # fmt: skip
    with _server(src, False, *serve) as (port, server):
        started_mb = _rss_mb(server.pid)
        for round_ in range(1, rounds + 1):
            for choice in asked:
                body = {"document": text, "model": "tiny", "options": {**choice, "max_length": 8}}
                status, answer, seconds = _post(port, "/v1/summarize", body)
                runs.append({
                    "round": round_, "options": choice or {"backend": "torch"}, "status": status,
                    "seconds": seconds, "rss_mb_after": _rss_mb(server.pid),
                    "error": answer.get("error", {}).get("message") if status != 200 else None,
                })  # fmt: skip
                print(json.dumps(runs[-1]), flush=True)
        return {"src": src or "this tree", "serve_options": options, "rss_mb_at_start": started_mb,
                "rss_mb_peak": _peak_rss_mb(server.pid), "runs": runs}  # fmt: skip


def _slow_body_runs(args: argparse.Namespace) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the clients need a descriptor each
    runs = []
    with _server(args.src, args.token) as (port, server):
        for count in (int(n) for n in args.connections.split(",")):
            for method in args.methods.split(","):
                runs.append(
                    slow_bodies(port, server.pid, count, method, args.token, args.window, args.reconnect)
                )
                print(json.dumps(runs[-1]), flush=True)
                time.sleep(3)  # what is left of one run closes before the next
    return {"src": args.src or "this tree", "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    modes = ["slow-clients", "sections", "slow-bodies", "large-body", "regex", "variants"]
    parser.add_argument("what", choices=modes)
    parser.add_argument("--size", type=int, default=50_000, help="regex: characters of each attack")
    parser.add_argument("--model", default=None, help="variants: a Hugging Face checkpoint folder")
    parser.add_argument("--serve-options", default="", help="variants: more `synopsis serve` options")
    parser.add_argument("--token", action="store_true", help="slow-bodies: the server has a token")
    parser.add_argument("--window", type=float, default=30.0)
    parser.add_argument("--reconnect", action="store_true", help="slow-bodies: reopen what the server closes")
    parser.add_argument("--methods", default="GET,POST")
    parser.add_argument("--src", default=None, help="Run the server from this source tree (PYTHONPATH).")
    parser.add_argument("--concurrent", type=int, default=1)
    parser.add_argument("--connections", default="5000", help="slow-bodies: a comma-separated list")
    parser.add_argument("--header-timeout", type=float, default=3.0)
    parser.add_argument("--max-connections", type=int, default=1000)
    parser.add_argument("--sizes", default="1250,5000,10000,20000")
    parser.add_argument("--name", default=None, help="Key of this run in the results (default: WHAT).")
    args = parser.parse_args()
    if args.what == "slow-clients":
        result = slow_clients(int(args.connections), args.header_timeout, args.max_connections)
    elif args.what == "slow-bodies":
        result = _slow_body_runs(args)
    elif args.what == "large-body":
        result = large_body(args.src, args.concurrent)
    elif args.what == "regex":
        result = regex_attacks(args.src, args.size)
    elif args.what == "variants":
        if args.model is None:
            raise SystemExit("variants needs --model DIR (a Hugging Face seq2seq checkpoint)")
        result = variants(args.src, args.model, args.serve_options.split())
    else:
        result = sections([int(n) for n in args.sizes.split(",")])
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()}
    print(json.dumps(result, indent=2))
    stored = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    stored[args.name or args.what] = result
    RESULTS.write_text(json.dumps(stored, indent=2) + "\n")


if __name__ == "__main__":
    main()
