"""Load test of ``synopsis serve``: concurrent clients on loopback against a real server process.

Starts ``synopsis serve`` (the full built-in registry) on a free 127.0.0.1 port, then for each run sends
CLIENTS x REQUESTS ``POST /v1/summarize`` requests (each client a thread with its own keep-alive
connection, one request at a time) and measures latency percentiles, throughput and errors (any non-200
status or transport failure). The server's resident memory is sampled from ``/proc/<pid>/status`` every
100 ms during each run, to show whether it stays flat. The server's log is read afterwards to check that
it wrote exactly one line per request.

    python benchmarks/serve_load.py [--run lead-3:16x100] [--run default:4x50] [--output OUT.json]

A run ``MODEL:CLIENTSxREQUESTS:section`` asks for summaries by section (``"by": "section"``) of
``--section-document`` (default: the abstract with a Markdown heading every two sentences, so each
request has several windows). ``--peer-arg`` (repeatable) starts a second server with those extra
arguments (e.g. ``--peer-arg=--batch-window-ms=10 --peer-arg=--max-batch=16``) and sends every run to both,
one after the other, with the peer/base ratios in the table (``--peer`` starts it with no extra arguments,
and ``--base-arg`` gives the base server arguments of its own: today's defaults against an earlier
checkout's ``--batch-window-ms 20`` is ``--base-source OLD --base-arg=--batch-window-ms=20 --peer``);
``--peer2-arg`` starts a third server the same
way (e.g. the peer with ``--batch-workers=1``), so two batching settings are compared in one run. Each
run records the load average before and
after (the machine may be shared) and the server's own timings (``timing_ms``: waiting for a thread,
parsing, the model call, the total from arrival), to see where a request's time goes. ``--ceiling N``
measures, in this process and before the servers start, N documents summarized one call each against one
call of N (whole documents, windows by section, and by-section requests: each request's windows in one call
against all requests' windows in calls of N): what batching can gain at most here (``--ceiling-only``: just
that). The ceiling also takes N different abstracts of SciTLDR's dev set (``../shared/data``, when present),
whose summaries end at different steps: one call each against one call of N.

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
SCITLDR_DEV = ROOT.parent / "shared" / "data" / "scitldr" / "dev.jsonl"
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (all its threads), from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


class Server:
    """``synopsis serve`` in a subprocess; its log goes to a temporary file read after the runs."""

    def __init__(self, extra_args: list[str], source: Path | None = None, threads: int | None = None) -> None:
        """``source``: a checkout whose ``src`` the server imports instead of this one's (an earlier commit's
        worktree); ``threads``: its ``OMP_NUM_THREADS`` instead of this process's (default 1)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115
        omp = str(threads) if threads else os.environ.get("OMP_NUM_THREADS", "1")
        env = {**os.environ, "OMP_NUM_THREADS": omp, "HF_HUB_OFFLINE": "1"}
        if source is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source / "src"), env.get("PYTHONPATH")]))
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


def sectioned(text: str, every: int = 2) -> str:
    """``text`` as Markdown, a heading before every ``every`` sentences: a document of several sections."""
    from synopsis.text import split_sentences

    sentences = split_sentences(" ".join(text.split()))
    parts = [" ".join(sentences[i : i + every]) for i in range(0, len(sentences), every)]
    return "# Document\n\n" + "\n\n".join(f"## Part {i + 1}\n\n{part}" for i, part in enumerate(parts))


def request_body(model: str, document: str, by: str) -> dict[str, Any]:
    return {"document": document, "model": model, **({"by": by} if by != "document" else {})}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def batch_counts(server: Server, model: str) -> tuple[float, float]:
    """The server's ``synopsis_batch_size`` histogram for ``model``: (calls, summaries in them)."""
    text = httpx.get(server.url + "/metrics").text
    found = {}
    for kind in ("count", "sum"):
        match = re.search(rf'^synopsis_batch_size_{kind}{{model="{re.escape(model)}"}} (\S+)$', text, re.M)
        found[kind] = float(match.group(1)) if match else 0.0
    return found["count"], found["sum"]


def run_load(
    server: Server, model: str, clients: int, requests: int, document: str, by: str = "document"
) -> dict[str, Any]:
    body = request_body(model, document, by)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    statuses: list[dict[str, int]] = [{} for _ in range(clients)]
    timings: list[list[dict[str, Any]]] = [[] for _ in range(clients)]  # the server's timing_ms of each 200
    barrier = threading.Barrier(clients + 1)

    def client(index: int) -> None:
        with httpx.Client(base_url=server.url, timeout=300) as http:
            barrier.wait()
            for _ in range(requests):  # bounded: exactly `requests` per client
                begin = time.perf_counter()
                try:
                    response = http.post("/v1/summarize", json=body)
                    status = str(response.status_code)
                except httpx.HTTPError as err:
                    status, response = type(err).__name__, None
                latencies[index].append(1000 * (time.perf_counter() - begin))
                statuses[index][status] = statuses[index].get(status, 0) + 1
                if response is not None and response.status_code == 200 and "timing_ms" in response.json():
                    timings[index].append(response.json()["timing_ms"])

    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample_memory() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), rss_mb(server.process.pid)))
            done.wait(0.1)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    load_before = load_average()
    calls_before, items_before = batch_counts(server, model)
    for thread in threads:
        thread.start()
    rss_before = rss_mb(server.process.pid)
    sampler = threading.Thread(target=sample_memory)
    sampler.start()
    barrier.wait()
    started = time.perf_counter()
    server_cpu, client_cpu = cpu_seconds(server.process.pid), time.process_time()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    server_cpu = cpu_seconds(server.process.pid) - server_cpu
    client_cpu = time.process_time() - client_cpu
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
    spent = [t for per_client in timings for t in per_client]
    calls_after, items_after = batch_counts(server, model)
    calls, items = calls_after - calls_before, items_after - items_before

    def mean_ms(values: list[float]) -> float | None:
        return round(statistics.fmean(values), 1) if values else None

    return {
        "model": model,
        "by": by,
        "load_average": {"before": load_before, "after": load_average()},
        "clients": clients,
        "requests_per_client": requests,
        "requests": len(all_latencies),
        "errors": sum(count for status, count in status_counts.items() if status != "200"),
        "status_counts": status_counts,
        "duration_s": round(elapsed, 3),
        "throughput_rps": round(len(all_latencies) / elapsed, 2),
        # Where the machine's CPU went during the run: the server process (all its threads) and this one
        # (the client threads and the memory sampler), in CPU seconds and per request.
        "cpu": {
            "server_s": round(server_cpu, 2),
            "clients_s": round(client_cpu, 2),
            "server_ms_per_request": round(1000 * server_cpu / max(1, len(all_latencies)), 1),
            "clients_ms_per_request": round(1000 * client_cpu / max(1, len(all_latencies)), 1),
            "busy_cores": round((server_cpu + client_cpu) / elapsed, 2),
        },
        "latency_ms": {
            "mean": round(statistics.fmean(all_latencies), 2),
            "p50": round(percentile(all_latencies, 50), 2),
            "p90": round(percentile(all_latencies, 90), 2),
            "p95": round(percentile(all_latencies, 95), 2),
            "p99": round(percentile(all_latencies, 99), 2),
            "max": round(max(all_latencies), 2),
        },
        # Where a request's time goes, as the server saw it (means over the 200 answers): waiting for a thread
        # to parse, parsing, the model call it rode in (batched: the whole batch's call), and the total from
        # its arrival; the client's latency minus that total is HTTP, JSON and the client's own threads.
        "server_timing_ms": {
            "queue": mean_ms([t["queue"] for t in spent]),
            "parse": mean_ms([t["parse"] for t in spent]),
            "model_call": mean_ms([sum(t["summaries"]) for t in spent]),
            "total": mean_ms([t["total"] for t in spent]),
            "client_latency": round(statistics.fmean(all_latencies), 1),
        },
        # With batching: the batched calls made during the run and the summaries (documents or windows) in
        # them, from the server's /metrics (none without batching).
        "batches": {"calls": int(calls), "mean_size": round(items / calls, 2) if calls else None},
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


def ceiling(document: str, section_document: str, n: int) -> dict[str, Any]:
    """The bundled model in this process: ``n`` documents one call each against one call of ``n`` (whole
    documents), and the same for the windows of ``n`` by-section documents (``summarize_windows``), with
    the torch threads the server gets (its ``OMP_NUM_THREADS``)."""
    import torch

    from synopsis.serve.documents import parse_document
    from synopsis.summarizers import load_summarizer
    from synopsis.summarizers.windows import plan_windows

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    summarizer = load_summarizer("pointer-generator")
    parsed = parse_document(document)[0]
    summarizer.summarize([parsed])  # warm-up
    windows, _ = plan_windows(
        parse_document(section_document, "markdown")[0], summarizer.input_capacity(), summarizer.input_length
    )
    out: dict[str, Any] = {
        "n": n,
        "torch_threads": torch.get_num_threads(),
        "windows_per_document": len(windows),
    }

    def timed(call: Any) -> float:
        begin = time.perf_counter()
        call()
        return time.perf_counter() - begin

    alone = sum(timed(lambda: summarizer.summarize([parsed])) for _ in range(n))
    together = timed(lambda: summarizer.summarize([parsed] * n))
    many = windows * n
    windows_alone = sum(timed(lambda w=w: summarizer.summarize_windows([w], [None])) for w in many)
    windows_together = sum(
        timed(lambda i=i: summarizer.summarize_windows(many[i : i + n], [None] * len(many[i : i + n])))
        for i in range(0, len(many), n)
    )
    out["documents"] = {
        "alone_s": round(alone, 2),
        "batched_s": round(together, 2),
        "speedup": round(alone / together, 2),
    }
    out["windows"] = {
        "count": len(many),
        "alone_s": round(windows_alone, 2),
        "batched_s": round(windows_together, 2),
        "speedup": round(windows_alone / windows_together, 2),
    }
    # By-section requests as the service runs them: unbatched, each request's windows in one call of their
    # own; batched, the windows of all n requests in calls of n.
    sectioned_document = parse_document(section_document, "markdown")[0]
    requests_alone = sum(
        timed(lambda: summarizer.summarize_by_section([sectioned_document])) for _ in range(n)
    )
    requests_together = timed(lambda: summarizer.summarize_by_section([sectioned_document] * n, batch_size=n))
    out["by_section_requests"] = {
        "alone_s": round(requests_alone, 2),
        "batched_s": round(requests_together, 2),
        "speedup": round(requests_alone / requests_together, 2),
    }
    if SCITLDR_DEV.exists():  # different documents: their summaries end at different steps
        with SCITLDR_DEV.open(encoding="utf-8") as lines:
            sources = [" ".join(json.loads(line)["source"]) for line, _ in zip(lines, range(n), strict=False)]
        varied = [parse_document(source)[0] for source in sources]
        varied_alone = sum(timed(lambda d=d: summarizer.summarize([d])) for d in varied)
        varied_together = timed(lambda: summarizer.summarize(varied))
        out["scitldr_dev_documents"] = {
            "count": len(varied),
            "alone_s": round(varied_alone, 2),
            "batched_s": round(varied_together, 2),
            "speedup": round(varied_alone / varied_together, 2),
        }
    out["load_average"] = load_average()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run",
        action="append",
        help=f"MODEL:CLIENTSxREQUESTS[:section] (repeatable; default: {', '.join(DEFAULT_RUNS)})",
    )
    parser.add_argument("--document", type=Path, default=ROOT / "examples" / "paper_abstract.txt")
    parser.add_argument(
        "--section-document", type=Path, help="document of the :section runs (default: see the docstring)"
    )
    parser.add_argument("--server-arg", action="append", default=[], help="extra argument for synopsis serve")
    parser.add_argument(
        "--peer-arg", action="append", default=[], help="extra argument of a second server run side by side"
    )
    parser.add_argument(
        "--peer2-arg", action="append", default=[], help="extra argument of a third server run side by side"
    )
    parser.add_argument(
        "--base-source",
        type=Path,
        help="checkout (a worktree of an earlier commit) whose src/ the base server runs instead of this one",
    )
    parser.add_argument("--base-threads", type=int, help="OMP_NUM_THREADS of the base server only")
    parser.add_argument(
        "--base-arg", action="append", default=[], help="extra argument of the base server only"
    )
    parser.add_argument(
        "--peer", action="store_true", help="start the second server even without --peer-arg (its defaults)"
    )
    parser.add_argument("--ceiling", type=int, default=0, help="measure N in one call vs N calls in-process")
    parser.add_argument("--ceiling-only", action="store_true", help="print the --ceiling figures and stop")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "serve_load.json")
    args = parser.parse_args()
    runs = []
    for spec in args.run or DEFAULT_RUNS:
        match = re.fullmatch(r"(.+?):(\d+)x(\d+)(?::(section|document))?", spec)
        if not match:
            parser.error(f"--run {spec!r}: expected MODEL:CLIENTSxREQUESTS[:section]")
        runs.append((match.group(1), int(match.group(2)), int(match.group(3)), match.group(4) or "document"))
    document = args.document.read_text(encoding="utf-8")
    if args.section_document is not None:
        section_document = args.section_document.read_text(encoding="utf-8")
    else:
        section_document = sectioned(document)
    console = Console(width=170)
    limits = ceiling(document, section_document, args.ceiling) if args.ceiling else None
    if limits:
        console.print(f"in-process ceiling: {limits}")
    if args.ceiling_only:
        return

    servers = {"base": Server(args.server_arg + args.base_arg, args.base_source, args.base_threads)}
    if args.peer_arg or args.peer:
        servers["peer"] = Server(args.server_arg + args.peer_arg)
    if args.peer2_arg:
        servers["peer2"] = Server(args.server_arg + args.peer2_arg)
    logs: dict[str, str] = {}
    results = []
    ready: dict[str, float] = {}
    health: dict[str, Any] = {}
    try:
        for name, server in servers.items():
            ready[name] = server.wait_ready()
            health[name] = httpx.get(server.url + "/health").json()
            console.print(
                f"{name} server pid {server.process.pid} ready in {ready[name]:.1f} s: {health[name]}"
            )
        for model, clients, requests, by in runs:
            text = section_document if by == "section" else document
            for name, server in servers.items():
                warm = httpx.post(
                    server.url + "/v1/summarize", json=request_body(model, text, by), timeout=300
                )
                warm.raise_for_status()
                console.print(f"run {model} by {by} on {name}: {clients} clients x {requests} requests ...")
                results.append({"server": name, **run_load(server, model, clients, requests, text, by)})
        time.sleep(0.5)  # let the last log lines reach the file
        logs = {name: server.log_text() for name, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()

    table = Table(title="synopsis serve on loopback (latency in ms, RSS in MB; ratio: peer(s) / base req/s)")
    columns = ["server", "model", "by", "clients x req", "errors", "req/s", "ratio", "p50", "p95", "p99"]
    columns += ["max", "model call", "server total", "mean batch", "CPU ms/req server+clients", "RSS max"]
    columns += ["load before/after"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("server", "model", "by") else "right")
    base_rps: dict[tuple[str, str, int, int], float] = {}
    for r in results:
        lat, rss, spent = r["latency_ms"], r["server_rss_mb"], r["server_timing_ms"]
        key = (r["model"], r["by"], r["clients"], r["requests_per_client"])
        if r["server"] == "base":
            base_rps[key] = r["throughput_rps"]
            r["ratio_to_base"] = None
        else:
            r["ratio_to_base"] = round(r["throughput_rps"] / base_rps[key], 2) if base_rps.get(key) else None
        load = r["load_average"]
        table.add_row(
            r["server"],
            r["model"],
            r["by"],
            f"{r['clients']} x {r['requests_per_client']}",
            str(r["errors"]),
            f"{r['throughput_rps']:.2f}",
            "" if r["ratio_to_base"] is None else f"{r['ratio_to_base']:.2f}x",
            f"{lat['p50']:.0f}",
            f"{lat['p95']:.0f}",
            f"{lat['p99']:.0f}",
            f"{lat['max']:.0f}",
            f"{spent['model_call']}",
            f"{spent['total']}",
            str(r["batches"]["mean_size"] or ""),
            f"{r['cpu']['server_ms_per_request']}+{r['cpu']['clients_ms_per_request']}",
            f"{rss['max']:.1f}",
            f"{load['before'][0]:.2f}/{load['after'][0]:.2f}",
        )
    console.print(table)
    access = {name: count_access_lines(log) for name, log in logs.items()}
    one_line_each = {}
    for name in servers:
        expected = sum(r["requests"] for r in results if r["server"] == name) + len(runs)  # + warm-ups
        logged = access[name].get("POST /v1/summarize", 0)
        one_line_each[name] = logged == expected
        console.print(f"{name} server access log: {logged} lines for {expected} summarize requests")
    report = {
        "benchmark": "serve_load",
        "command": "python benchmarks/serve_load.py " + " ".join(sys.argv[1:]),
        "document": {"path": str(args.document.relative_to(ROOT)), "words": len(document.split())},
        "section_document": {
            "path": str(args.section_document) if args.section_document else "sectioned(document)",
            "words": len(section_document.split()),
        },
        "servers": {
            name: {"startup_s": round(ready[name], 1), "health": health[name], "extra_args": server_args}
            for name, server_args in (
                ("base", args.server_arg + args.base_arg),
                ("peer", args.server_arg + args.peer_arg),
                ("peer2", args.server_arg + args.peer2_arg),
            )
            if name in servers
        },
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus_available": len(os.sched_getaffinity(0)),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        },
        "base_source": None
        if args.base_source is None
        else {
            "path": str(args.base_source),
            "commit": subprocess.run(
                ["git", "-C", str(args.base_source), "rev-parse", "HEAD"], capture_output=True, text=True
            ).stdout.strip(),
            "omp_num_threads": args.base_threads,
        },
        "ceiling": limits,
        "runs": results,
        "access_log_lines": access,
        "one_log_line_per_request": one_line_each,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
