"""Reading speed of every corpus reader on the shared data, and how much of it is sentence splitting.

Usage: ``python benchmarks/bench_readers.py [--data ../shared/data] [--json runs/bench_readers.json]``

Prints a table (examples, seconds, examples/s, share of time in the Punkt sentence splitter) and writes the
same numbers as JSON. Run it with one thread on a quiet machine; it reads every example once.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import synopsis.data.readers.cnn as cnn_module
import synopsis.data.readers.documents as documents_module
import synopsis.data.readers.qmsum as qmsum_module
import synopsis.document as document_module
from synopsis.data.readers import read_corpus
from synopsis.text import split_sentences

CASES = [
    ("scitldr", "scitldr", {"split": "train"}),
    ("scitldr", "scitldr", {"split": "dev"}),
    ("scisummnet", "scisummnet", {}),
    ("qmsum", "qmsum", {"split": "train"}),
    ("qmsum", "qmsum", {"split": "val"}),
    ("cnn", "cnndm_stories", {}),
    ("arxiv", "arxiv_pubmed_sample/arxiv.jsonl", {}),
    ("pubmed", "arxiv_pubmed_sample/pubmed.jsonl", {}),
]


class SplitTimer:
    """Wraps ``split_sentences`` where the readers look it up, adding up the time spent inside."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self, text: str) -> list[str]:
        start = time.perf_counter()
        try:
            return split_sentences(text)
        finally:
            self.seconds += time.perf_counter() - start


def install(timer: Callable[[str], list[str]]) -> None:
    for module in (document_module, qmsum_module, documents_module, cnn_module):
        module.split_sentences = timer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
    parser.add_argument("--json", type=Path, default=Path("runs/bench_readers.json"))
    args = parser.parse_args()
    split_sentences("Load the Punkt model before timing.")
    rows = []
    for name, relative, options in CASES:
        timer = SplitTimer()
        install(timer)
        start = time.perf_counter()
        count = sum(1 for _ in read_corpus(name, args.data / relative, **options))
        seconds = time.perf_counter() - start
        rows.append(
            {
                "corpus": name,
                "split": options.get("split"),
                "examples": count,
                "seconds": round(seconds, 3),
                "examples_per_second": round(count / seconds, 1),
                "sentence_split_share": round(timer.seconds / seconds, 3),
            }
        )
    install(split_sentences)
    table = Table(title="Corpus readers on ../shared/data")
    for column in ("corpus", "split", "examples", "seconds", "examples/s", "time in sentence splitter"):
        table.add_column(column, justify="left" if column in ("corpus", "split") else "right")
    for row in rows:
        table.add_row(
            row["corpus"],
            row["split"] or "-",
            f"{row['examples']:,}",
            f"{row['seconds']:.2f}",
            f"{row['examples_per_second']:,.1f}",
            f"{row['sentence_split_share']:.0%}",
        )
    Console().print(table)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
