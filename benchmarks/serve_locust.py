"""Load figures for ``synopsis serve`` with locust (headless, loopback only): batching off vs on.

Starts two ``synopsis serve`` processes on free 127.0.0.1 ports with the bundled pointer-generator alone
(``--no-builtin --model default=<bundled>``): one without batching, one with ``--batch-window-ms W
--max-batch B``. Then, for each user count, runs locust (``benchmarks/serve_locustfile.py``) against one
server, then the other, ROUNDS times, interleaved, so that both configurations see the same background
load on a shared machine; ratios between neighbouring runs are the figures to trust. Each run is bounded
in time (``--run-time``) and in requests (``--requests`` per user). The servers' RSS is sampled from
``/proc/<pid>/status`` every 200 ms. ``--memory-minutes M`` adds a final run of M minutes at the highest
user count against the batching server, with its RSS over time.

    python benchmarks/serve_locust.py [--users 16 --users 64] [--rounds 2] [--run-time 40]
        [--batch-window-ms 10] [--max-batch 16] [--memory-minutes 10] [--output OUT.json]

Results: benchmarks/results/serve_locust.json. Locust, the servers and any other jobs share this machine's
CPUs, so absolute figures are for the whole machine at the time.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from serve_load import free_port, rss_mb  # the sibling benchmark script (its folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = ROOT / "benchmarks" / "serve_locustfile.py"


class Server:
    def __init__(self, name: str, extra: list[str], log_dir: Path) -> None:
        from synopsis.summarizers.pointer_generator import bundled_model_dir

        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (log_dir / f"{name}.log").open("w")
        command = [
            sys.executable, "-m", "synopsis", "serve", "--host", "127.0.0.1", "--port", str(self.port),
            "--no-builtin", "--model", f"default={bundled_model_dir()}", "--log-level", "warning", *extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds: float = 300) -> None:
        import urllib.request

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server {self.name} exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"server {self.name} did not start in {seconds} s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


class RssSampler:
    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            self.samples.append((round(time.monotonic() - start, 2), round(rss_mb(self.pid), 1)))
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        self._thread.join()


def run_locust(server: Server, users: int, run_time: int, requests: int, work: Path) -> dict[str, Any]:
    prefix = work / f"{server.name}-{users}-{time.monotonic_ns()}"
    env = {**os.environ, "SYNOPSIS_LOCUST_REQUESTS": str(requests)}
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", server.url,
        "-u", str(users), "-r", str(users), "--run-time", f"{run_time}s", "--stop-timeout", "120",
        "--csv", str(prefix), "--only-summary", "--loglevel", "WARNING",
    ]  # fmt: skip
    with RssSampler(server.process.pid) as rss:
        started = time.monotonic()
        subprocess.run(
            command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
        )
        wall = time.monotonic() - started
    with open(f"{prefix}_stats.csv", newline="") as handle:
        row = next(r for r in csv.DictReader(handle) if r["Name"] == "Aggregated")
    count, failures = int(row["Request Count"]), int(row["Failure Count"])
    return {
        "server": server.name,
        "users": users,
        "requests": count,
        "errors": failures,
        "rps": round(float(row["Requests/s"]), 2),
        "p50_ms": float(row["50%"]),
        "p95_ms": float(row["95%"]),
        "p99_ms": float(row["99%"]),
        "max_ms": round(float(row["Max Response Time"]), 1),
        "wall_s": round(wall, 1),
        "rss_mb": {
            "before": rss.samples[0][1],
            "max": max(v for _, v in rss.samples),
            "after": rss.samples[-1][1],
        },
        "rss_samples": rss.samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, action="append", help="users per run (repeat; default 16, 64)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--run-time", type=int, default=40, help="seconds per locust run")
    parser.add_argument("--requests", type=int, default=200, help="requests per user at most")
    parser.add_argument("--batch-window-ms", type=float, default=10.0)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--memory-minutes", type=float, default=0.0)
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "serve_locust.json")
    args = parser.parse_args(argv)
    users = args.users or [16, 64]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        servers = [
            Server("batching-off", ["--queue-size", "128"], work),
            Server(
                "batching-on",
                ["--queue-size", "128", "--batch-window-ms", f"{args.batch_window_ms:g}", "--max-batch",
                 str(args.max_batch)],
                work,
            ),
        ]  # fmt: skip
        try:
            for server in servers:
                server.wait_ready()
            for server in servers:  # warm-up, not reported
                run_locust(server, 4, 10, 5, work)
            runs = []
            for n in users:
                for round_ in range(args.rounds):
                    order = servers if round_ % 2 == 0 else servers[::-1]  # alternate who goes first
                    for server in order:
                        result = run_locust(server, n, args.run_time, args.requests, work)
                        result["round"] = round_
                        runs.append(result)
                        print(json.dumps({k: v for k, v in result.items() if k != "rss_samples"}), flush=True)
            memory = None
            if args.memory_minutes > 0:
                seconds = int(args.memory_minutes * 60)
                memory = run_locust(servers[1], max(users), seconds, 10**6, work)
                memory["minutes"] = args.memory_minutes
                print(json.dumps({k: v for k, v in memory.items() if k != "rss_samples"}), flush=True)
            logs = {s.name: (work / f"{s.name}.log").read_text()[-4000:] for s in servers}
        finally:
            for server in servers:
                server.stop()
    summary = {}
    for n in users:
        pairs = [
            (on["rps"] / off["rps"])
            for off, on in zip(
                [r for r in runs if r["users"] == n and r["server"] == "batching-off"],
                [r for r in runs if r["users"] == n and r["server"] == "batching-on"],
                strict=True,
            )
            if off["rps"] > 0
        ]
        summary[str(n)] = {"rps_ratio_on_off": [round(p, 2) for p in pairs],
                           "median_ratio": round(statistics.median(pairs), 2) if pairs else None}  # fmt: skip
    report = {
        "command": "python benchmarks/serve_locust.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg": os.getloadavg()},
        "settings": vars(args) | {"output": str(args.output), "users": users},
        "runs": runs,
        "ratios": summary,
        "memory": memory,
        "server_log_tails": logs,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    for run in [*runs, *([memory] if memory else [])]:  # one RSS sample per second is plenty on disk
        run["rss_samples"] = run["rss_samples"][::5]
    args.output.write_text(json.dumps(report, separators=(",", ":")) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
