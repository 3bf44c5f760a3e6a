"""Start-up cost of the CLI against the torch import alone (issue 52, item 4).

Target: summarizing one abstract (``synopsis summarize FILE``, the bundled pointer-generator, the default
method for a paper abstract) costs at most the torch import (``python -c "import torch"``) plus 1 s; and
``synopsis --version`` about 0.25 s of CPU, with neither torch nor numpy imported. Each command runs as a
fresh process, the commands take turns (``--repeats`` rounds, the order reversed every other round), and each
run's wall time and CPU time (user + sys, from ``getrusage`` of the child) are recorded; the summary is the
median. On a shared machine the CPU time is the steadier figure: wall time waits for other processes' turns.

    python benchmarks/startup.py --repeats 7 --json benchmarks/results/startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SYNOPSIS_SHARED_DATA", ROOT.parent / "shared" / "data"))


def commands(abstract: Path) -> dict[str, list[str]]:
    """The commands compared, by name."""
    synopsis = [sys.executable, "-m", "synopsis"]
    return {
        "import torch": [sys.executable, "-c", "import torch"],
        "synopsis --version": [*synopsis, "--version"],
        "synopsis summarize (one abstract)": [*synopsis, "summarize", str(abstract)],
    }


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + sys) of one run of ``command``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def first_abstract(directory: Path) -> Path:
    """The first SciTLDR dev abstract as a plain-text file."""
    record = json.loads((SHARED / "scitldr" / "dev.jsonl").read_text().splitlines()[0])
    path = directory / "abstract.txt"
    path.write_text(" ".join(record["source"]) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    env_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        runs = commands(first_abstract(Path(tmp)))
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
        for round_ in range(args.repeats):
            for name in list(runs) if round_ % 2 == 0 else list(runs)[::-1]:
                times[name].append(timed(runs[name]))
    rows = {
        name: {
            "wall_median_s": round(statistics.median(w for w, _ in values), 3),
            "cpu_median_s": round(statistics.median(c for _, c in values), 3),
            "wall_s": [round(w, 3) for w, _ in values],
            "cpu_s": [round(c, 3) for _, c in values],
        }
        for name, values in times.items()
    }
    torch_row, summarize = rows["import torch"], rows["synopsis summarize (one abstract)"]
    result = {
        "command": "python benchmarks/startup.py " + " ".join(sys.argv[1:]),
        "load_average_before": env_before,
        "load_average_after": os.getloadavg(),
        "rows": rows,
        "summarize_minus_torch_cpu_s": round(summarize["cpu_median_s"] - torch_row["cpu_median_s"], 3),
        "summarize_minus_torch_wall_s": round(summarize["wall_median_s"] - torch_row["wall_median_s"], 3),
    }
    for name, row in rows.items():
        print(f"{name:36s} wall {row['wall_median_s']:6.3f} s  CPU {row['cpu_median_s']:6.3f} s (medians)")
    print(
        f"summarize minus import torch: CPU {result['summarize_minus_torch_cpu_s']:+.3f} s, "
        f"wall {result['summarize_minus_torch_wall_s']:+.3f} s (target: at most +1 s)"
    )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
