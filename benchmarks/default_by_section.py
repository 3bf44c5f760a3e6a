"""The default by section against the pointer-generator by section on a long meeting (issue 48 item 4), side
by side: the same document read once, each summarizer loaded and warmed before timing, runs alternated
(``--pairs``) so that load on a shared machine falls on both alike.

Per run: the wall time of ``summarize_by_section`` (the whole document, its document summary included), the
time to the first section passed to ``on_section`` (what a reader waits for before anything shows), and the
sections emitted. The default (``load_summarizer()``) sends a meeting, far from its abstracts, to the salient
method, section after section; ``--method pointer-generator`` is the bundled model on every window, in
batches of 16.

    nice python benchmarks/default_by_section.py ../shared/data/qmsum/val/Bmr005.json --pairs 3 \\
        --json benchmarks/results/default_by_section.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from synopsis.pipeline import read_source
from synopsis.summarizers import load_summarizer


def run_once(summarizer: Any, parsed: Any) -> dict[str, float]:
    """One summary by section of the document: wall seconds, seconds to the first section, sections."""
    begin = time.perf_counter()
    emitted: list[float] = []
    summarizer.summarize_by_section(
        [parsed.document],
        offsets=[parsed.offsets],
        on_section=lambda _, section: emitted.append(time.perf_counter() - begin),
    )
    return {
        "seconds": time.perf_counter() - begin,
        "first_section_seconds": emitted[0] if emitted else float("nan"),
        "sections": len(emitted),
    }


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("document", type=Path, help="a long document, e.g. a QMSum meeting (.json)")
    parser.add_argument("--pairs", type=int, default=3, help="alternated runs of each summarizer")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    args = parser.parse_args()

    parsed = read_source(args.document)
    systems = {"default": load_summarizer(), "pointer-generator": load_summarizer("pointer-generator")}
    for summarizer in systems.values():  # load lazy parts (the embedder) and warm both up, untimed
        summarizer.prepare()
        summarizer.summarize_by_section([parsed.document.__class__.from_text("A warm-up sentence here.")])
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in systems}
    for pair in range(args.pairs):
        order = list(systems) if pair % 2 == 0 else list(reversed(systems))
        for name in order:
            runs[name].append(run_once(systems[name], parsed))
            print(f"pair {pair + 1} {name}: {runs[name][-1]}", flush=True)
    summary: dict[str, Any] = {}
    for name, measured in runs.items():
        summary[name] = {
            "median_seconds": round(statistics.median(r["seconds"] for r in measured), 2),
            "median_first_section_seconds": round(
                statistics.median(r["first_section_seconds"] for r in measured), 2
            ),
            "sections": measured[0]["sections"],
            "runs": measured,
        }
    ratio = summary["default"]["median_seconds"] / summary["pointer-generator"]["median_seconds"]
    result = {
        "document": str(args.document),
        "words": parsed.document.num_words(),
        "machine": f"{platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}",
        "systems": summary,
        "default_over_pointer_generator": round(ratio, 3),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "systems"}, indent=1))
    for name, data in summary.items():
        print(name, {k: v for k, v in data.items() if k != "runs"})
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
