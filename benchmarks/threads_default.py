"""The default thread count against every ``--threads`` setting, idle and under load (issue 38 item 5).

Each run is one ``synopsis summarize`` process (model load included, as a user sees it) on one document;
the settings are interleaved (default, 1, 2, ... cores) ``--repeats`` times and each one's median wall time
is reported with its ratio to the best setting. ``$OMP_NUM_THREADS`` is removed from the runs' environment,
so the default is the policy's (:func:`synopsis.config.default_threads`), not the shell's.

Under load, ``--load-per-core`` busy-looping processes per core run beside the runs; the measurement starts
once the 1-minute load average has reached that many per core (it takes a minute or two to climb), so the
default sees the load as a user's command would. Targets: default <= 1.2x the best setting idle, <= 1.5x
under load.

    python benchmarks/threads_default.py --repeats 5 --json benchmarks/results/threads_default.json
    python benchmarks/threads_default.py --phases idle --repeats 1        # a quick check that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from synopsis.config import usable_cores

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT.parent / "shared" / "data" / "scisummnet" / "A97-1030" / "Reference_XML" / "A97-1030.xml"


def busy() -> None:  # pragma: no cover - a load generator
    while True:
        pass


def run_once(document: Path, method: list[str], threads: int | None) -> float:
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    command = [sys.executable, "-m", "synopsis", "summarize", str(document), *method]
    if threads is not None:
        command += ["--threads", str(threads)]
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(document: Path, method: list[str], repeats: int) -> dict[str, float]:
    settings: list[int | None] = [None, *range(1, usable_cores() + 1)]
    times: dict[str, list[float]] = {}
    for _ in range(repeats):
        for threads in settings:
            name = "default" if threads is None else str(threads)
            times.setdefault(name, []).append(run_once(document, method, threads))
    return {name: statistics.median(values) for name, values in times.items()}


def wait_for_load(target: float, limit: float) -> float:
    start = time.monotonic()
    while os.getloadavg()[0] < target and time.monotonic() - start < limit:
        time.sleep(5)
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--document", type=Path, default=PAPER)
    parser.add_argument(
        "--method", default="pointer-generator", help="a --method, or 'default' for none (the library's)"
    )
    parser.add_argument("--phases", default="idle,load")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--load-per-core", type=float, default=2.0)
    parser.add_argument(
        "--load-wait", type=float, default=300.0, help="seconds to wait for the load to climb"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import multiprocessing

    method = [] if args.method == "default" else ["--method", args.method]
    cores = usable_cores()
    report: dict[str, dict] = {}
    for phase in args.phases.split(","):
        workers = []
        if phase == "load":
            count = round(args.load_per_core * cores)
            workers = [multiprocessing.Process(target=busy, daemon=True) for _ in range(count)]
            for worker in workers:
                worker.start()
            wait_for_load(args.load_per_core * cores, args.load_wait)
        try:
            before = os.getloadavg()[0]
            medians = measure(args.document, method, args.repeats)
            after = os.getloadavg()[0]
        finally:
            for worker in workers:
                worker.terminate()
        best = min(v for k, v in medians.items() if k != "default")
        ratios = {k: v / best for k, v in medians.items()}
        report[phase] = {"load_average": [before, after], "seconds": medians, "ratio_to_best": ratios}
        print(f"{phase}: load average {before:.1f} -> {after:.1f} on {cores} cores, {args.method}")
        for name, seconds in medians.items():
            print(f"  threads {name:>7}: {seconds:6.2f} s  {ratios[name]:.2f}x the best")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
