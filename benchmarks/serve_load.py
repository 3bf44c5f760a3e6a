"""Load test of ``synopsis serve``: concurrent clients on loopback against a real server process.

Starts ``synopsis serve`` (the full built-in registry) on a free 127.0.0.1 port, then for each run sends
CLIENTS x REQUESTS ``POST /v1/summarize`` requests (each client a thread with its own keep-alive
connection, one request at a time) and measures latency percentiles, throughput and errors (any non-200
status or transport failure). The server's resident memory is sampled from ``/proc/<pid>/status`` every
100 ms during each run, to show whether it stays flat. The server's log is read afterwards to check that
it wrote exactly one line per request.

    python benchmarks/serve_load.py [--run lead-3:16x100] [--run default:4x50] [--output OUT.json]

Results go to benchmarks/results/serve_load.json by default. Clients and server share this machine's CPU,
so the figures are for the pair, not the server alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUNS = ("lead-3:16x100", "default:4x50")
ACCESS_LINE = re.compile(r'synopsis\.serve\.access: \S+ "(GET|POST) (\S+)" (\d{3}) ')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


class Server:
    """``synopsis serve`` in a subprocess; its log goes to a temporary file read after the runs."""

    def __init__(self, extra_args: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1"}
        command = [
            sys.executable,
            "-c",
            "import sys; from synopsis.cli import main; sys.exit(main())",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *extra_args,
        ]
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self, seconds: float = 180) -> float:
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return time.monotonic() - start
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"server not ready after {seconds} s:\n{self.log_text()}")

    def log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def run_load(server: Server, model: str, clients: int, requests: int, document: str) -> dict[str, Any]:
    body = {"document": document, "model": model}
    latencies: list[list[float]] = [[] for _ in range(clients)]
    statuses: list[dict[str, int]] = [{} for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)

    def client(index: int) -> None:
        with httpx.Client(base_url=server.url, timeout=300) as http:
            barrier.wait()
            for _ in range(requests):  # bounded: exactly `requests` per client
                begin = time.perf_counter()
                try:
                    status = str(http.post("/v1/summarize", json=body).status_code)
                except httpx.HTTPError as err:
                    status = type(err).__name__
                latencies[index].append(1000 * (time.perf_counter() - begin))
                statuses[index][status] = statuses[index].get(status, 0) + 1

    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample_memory() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), rss_mb(server.process.pid)))
            done.wait(0.1)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    rss_before = rss_mb(server.process.pid)
    sampler = threading.Thread(target=sample_memory)
    sampler.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    rss_after = rss_mb(server.process.pid)

    all_latencies = [x for per_client in latencies for x in per_client]
    status_counts: dict[str, int] = {}
    for per_client in statuses:
        for status, count in per_client.items():
            status_counts[status] = status_counts.get(status, 0) + count
    rss = [mb for _, mb in samples]
    half = len(rss) // 2
    return {
        "model": model,
        "clients": clients,
        "requests_per_client": requests,
        "requests": len(all_latencies),
        "errors": sum(count for status, count in status_counts.items() if status != "200"),
        "status_counts": status_counts,
        "duration_s": round(elapsed, 3),
        "throughput_rps": round(len(all_latencies) / elapsed, 2),
        "latency_ms": {
            "mean": round(statistics.fmean(all_latencies), 2),
            "p50": round(percentile(all_latencies, 50), 2),
            "p90": round(percentile(all_latencies, 90), 2),
            "p95": round(percentile(all_latencies, 95), 2),
            "p99": round(percentile(all_latencies, 99), 2),
            "max": round(max(all_latencies), 2),
        },
        "server_rss_mb": {
            "before": round(rss_before, 1),
            "after": round(rss_after, 1),
            "min": round(min(rss), 1),
            "max": round(max(rss), 1),
            "first_half_median": round(statistics.median(rss[:half] or rss), 1),
            "second_half_median": round(statistics.median(rss[half:]), 1),
            "growth_second_vs_first_half": round(
                statistics.median(rss[half:]) - statistics.median(rss[:half] or rss), 1
            ),
            "samples": len(rss),
            # RSS at each tenth of the run, to see a plateau (or a leak) rather than two numbers.
            "deciles": [round(rss[min(len(rss) - 1, len(rss) * i // 10)], 1) for i in range(1, 11)],
        },
    }


def count_access_lines(log: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for method, path, _status in ACCESS_LINE.findall(log):
        key = f"{method} {path}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run",
        action="append",
        help=f"MODEL:CLIENTSxREQUESTS (repeatable; default: {', '.join(DEFAULT_RUNS)})",
    )
    parser.add_argument("--document", type=Path, default=ROOT / "examples" / "paper_abstract.txt")
    parser.add_argument("--server-arg", action="append", default=[], help="extra argument for synopsis serve")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "serve_load.json")
    args = parser.parse_args()
    runs = []
    for spec in args.run or DEFAULT_RUNS:
        match = re.fullmatch(r"(.+):(\d+)x(\d+)", spec)
        if not match:
            parser.error(f"--run {spec!r}: expected MODEL:CLIENTSxREQUESTS")
        runs.append((match.group(1), int(match.group(2)), int(match.group(3))))
    document = args.document.read_text(encoding="utf-8")
    console = Console(width=150)

    server = Server(args.server_arg)
    try:
        ready_s = server.wait_ready()
        health = httpx.get(server.url + "/health").json()
        console.print(f"server pid {server.process.pid} ready in {ready_s:.1f} s, {server.url}: {health}")
        results = []
        for model, clients, requests in runs:
            warm = httpx.post(
                server.url + "/v1/summarize", json={"document": document, "model": model}, timeout=300
            )
            warm.raise_for_status()
            console.print(f"run {model}: {clients} clients x {requests} requests ...")
            results.append(run_load(server, model, clients, requests, document))
        time.sleep(0.5)  # let the last log lines reach the file
        log = server.log_text()
    finally:
        server.stop()

    access = count_access_lines(log)
    expected_posts = sum(r["requests"] for r in results) + len(results)  # plus one warm-up per run
    table = Table(title="synopsis serve on loopback (latency in ms, RSS in MB)")
    for column in (
        "model",
        "clients x req",
        "errors",
        "req/s",
        "p50",
        "p95",
        "p99",
        "max",
        "RSS before",
        "RSS max",
        "RSS after",
    ):
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in results:
        lat, rss = r["latency_ms"], r["server_rss_mb"]
        table.add_row(
            r["model"],
            f"{r['clients']} x {r['requests_per_client']}",
            str(r["errors"]),
            f"{r['throughput_rps']:.1f}",
            f"{lat['p50']:.1f}",
            f"{lat['p95']:.1f}",
            f"{lat['p99']:.1f}",
            f"{lat['max']:.1f}",
            f"{rss['before']:.1f}",
            f"{rss['max']:.1f}",
            f"{rss['after']:.1f}",
        )
    console.print(table)
    logged = access.get("POST /v1/summarize", 0)
    console.print(f"server access log: {logged} lines for {expected_posts} summarize requests")
    report = {
        "benchmark": "serve_load",
        "command": "python benchmarks/serve_load.py " + " ".join(sys.argv[1:]),
        "document": {"path": str(args.document.relative_to(ROOT)), "words": len(document.split())},
        "server": {"startup_s": round(ready_s, 1), "health": health, "extra_args": args.server_arg},
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus_available": len(os.sched_getaffinity(0)),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        },
        "runs": results,
        "access_log_lines": access,
        "one_log_line_per_request": access.get("POST /v1/summarize", 0) == expected_posts,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
