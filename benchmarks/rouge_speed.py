"""Speed of our ROUGE scorer against Google's rouge-score on real pairs, with identical scores required.

Pairs come from SciTLDR (train + dev, ../shared/data): every abstract sentence against the paper's first
TLDR, plus the newline-joined first three sentences against every TLDR (multi-sentence rougeLsum). Both
scorers compute rouge1, rouge2, rougeL and rougeLsum on every pair; the work is interleaved in chunks so that
load from other processes hits both alike. Our stem cache starts empty (nothing is scored before).

    python benchmarks/rouge_speed.py [--data ../shared/data] [--limit N] [--output OUT.json]

Results go to benchmarks/results/rouge_speed.json by default.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
CHUNK = 500


def load_pairs(data: Path, limit: int | None) -> list[tuple[str, str]]:
    """(target, prediction) pairs from SciTLDR train and dev."""
    pairs = []
    for split in ("train", "dev"):
        for line in (data / "scitldr" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
            example = json.loads(line)
            pairs += [(example["target"][0], sentence) for sentence in example["source"]]
            pairs += [(target, "\n".join(example["source"][:3])) for target in example["target"]]
    return pairs[:limit] if limit else pairs


def run(pairs: list[tuple[str, str]], use_stemmer: bool, progress: Progress) -> dict[str, float]:
    from rouge_score import rouge_scorer

    from synopsis.evaluation.rouge import RougeScorer

    theirs = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=use_stemmer)
    ours = RougeScorer(ROUGE_TYPES, use_stemmer=use_stemmer)
    time_theirs = time_ours = 0.0
    max_diff = 0.0
    task = progress.add_task(f"stemming={use_stemmer}", total=len(pairs))
    for start in range(0, len(pairs), CHUNK):
        chunk = pairs[start : start + CHUNK]
        t0 = time.perf_counter()
        reference = [theirs.score(target, prediction) for target, prediction in chunk]
        t1 = time.perf_counter()
        candidate = [ours.score(target, prediction) for target, prediction in chunk]
        t2 = time.perf_counter()
        time_theirs += t1 - t0
        time_ours += t2 - t1
        for a, b in zip(reference, candidate, strict=True):
            for rouge_type in ROUGE_TYPES:
                for x, y in zip(a[rouge_type], b[rouge_type], strict=True):
                    max_diff = max(max_diff, abs(x - y))
        progress.advance(task, len(chunk))
    return {
        "use_stemmer": use_stemmer,
        "pairs": len(pairs),
        "rouge_score_seconds": time_theirs,
        "ours_seconds": time_ours,
        "rouge_score_pairs_per_second": len(pairs) / time_theirs,
        "ours_pairs_per_second": len(pairs) / time_ours,
        "speedup": time_theirs / time_ours,
        "max_abs_diff": max_diff,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=None, help="Use only the first N pairs.")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "rouge_speed.json")
    args = parser.parse_args(argv)
    console = Console()
    if not (args.data / "scitldr").is_dir():
        console.print(f"[red]error:[/] SciTLDR not found under {args.data} (use --data)")
        return 2

    import nltk.stem.porter  # noqa: F401 - import NLTK (~1 s) before timing; both scorers use it

    pairs = load_pairs(args.data, args.limit)
    with Progress(console=console, transient=True) as progress:
        results = [run(pairs, use_stemmer, progress) for use_stemmer in (True, False)]

    table = Table(title=f"ROUGE-1/2/L/Lsum, {len(pairs)} SciTLDR pairs")
    for column in ("stemming", "rouge-score s", "ours s", "ours pairs/s", "speedup", "max |diff|"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            str(r["use_stemmer"]),
            f"{r['rouge_score_seconds']:.2f}",
            f"{r['ours_seconds']:.2f}",
            f"{r['ours_pairs_per_second']:.0f}",
            f"{r['speedup']:.1f}x",
            f"{r['max_abs_diff']:.1e}",
        )
    console.print(table)
    identical = all(r["max_abs_diff"] <= 1e-9 for r in results)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "command": "python benchmarks/rouge_speed.py" + (f" --limit {args.limit}" if args.limit else ""),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "identical_scores": identical,
        "results": results,
    }
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {args.output}")
    if not identical:
        console.print("[red]scores differ from rouge-score[/]")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
