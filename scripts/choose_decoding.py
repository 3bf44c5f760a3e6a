"""Choose a pointer-generator's decoding settings on a dev split: ROUGE and repetition for each setting.

Each setting is decoded over the whole split and scored with ``synopsis evaluate``'s function (rouge-score
with stemming, max over references) plus the repetition figures: repeated bigrams against the references'
own rate and the share of summaries with a doubled word. The chosen setting is the best mean of R-1 and R-L
among those whose repeated-bigram rate is at most twice the references' and whose doubled-word share is at
most 2% and, when some of those reach the R-1 and R-L targets given (``--target-r1``, ``--target-rl``), among
those; it is printed as the ``generation:`` block for the training config. ``--from-results`` chooses again
from a saved output without decoding.

    python scripts/choose_decoding.py --model runs/pg_scitldr/model --data ../shared/data/scitldr \
        --target-r1 37 --target-rl 31.5 --output docs/models/default_decoding.json

Selection uses the dev split only, so the scores of the chosen setting are optimistic for unseen papers.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from synopsis.data.readers import read_corpus
from synopsis.evaluation.corpus import evaluate_corpus
from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

# Each guard alone and together, then length settings with both guards on.
GRID: list[dict] = [
    {"no_repeat_ngram_size": 0, "no_immediate_repeat": False},
    {"no_repeat_ngram_size": 3, "no_immediate_repeat": False},
    {"no_repeat_ngram_size": 0, "no_immediate_repeat": True},
    {"no_repeat_ngram_size": 3, "no_immediate_repeat": True},
    {"no_repeat_ngram_size": 2, "no_immediate_repeat": True},
    {"no_repeat_ngram_size": 2, "no_immediate_repeat": True, "min_length": 15},
    {"no_repeat_ngram_size": 2, "no_immediate_repeat": True, "min_length": 15, "length_penalty": 1.5},
    {"no_repeat_ngram_size": 2, "no_immediate_repeat": True, "min_length": 20},
]


def score(summarizer: PointerGeneratorSummarizer, documents: list, references: list) -> dict:
    predictions: list[str] = []
    for start in range(0, len(documents), 32):
        predictions += summarizer.summarize(documents[start : start + 32])
    report = evaluate_corpus(predictions, references, metrics=("rouge", "repeat", "length"), bootstrap=0)
    rouge = report["rouge"]
    return {
        "rouge1": 100 * rouge["rouge1"]["fmeasure"],
        "rouge2": 100 * rouge["rouge2"]["fmeasure"],
        "rougeL": 100 * rouge["rougeL"]["fmeasure"],
        "repeated_bigrams": 100 * report["repeated_ngrams"]["2"],
        "reference_repeated_bigrams": 100 * report["reference_repeated_ngrams"]["2"],
        "doubled_words": 100 * report["doubled_words"]["predictions"],
        "words": report["length"]["prediction_words"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", type=Path, default=None, help="model directory (default: the bundled one)")
    parser.add_argument("--data", type=Path, default=Path("../shared/data/scitldr"))
    parser.add_argument("--corpus", default="scitldr")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--output", type=Path, default=None, help="write the results here (JSON)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target-r1", type=float, default=None, help="prefer settings with R-1 >= this")
    parser.add_argument("--target-rl", type=float, default=None, help="prefer settings with R-L >= this")
    parser.add_argument(
        "--from-results", type=Path, default=None, help="choose from this earlier --output (no decoding)"
    )
    args = parser.parse_args()
    print(f"{'setting':<78} {'R-1':>6} {'R-2':>6} {'R-L':>6} {'rep2%':>6} {'doubled%':>8} {'words':>6}")
    if args.from_results:
        saved = json.loads(args.from_results.read_text(encoding="utf-8"))
        model, rows = saved["model"], saved["rows"]
        for row in rows:
            print_row(row)
    else:
        model, rows = str(args.model or "bundled"), []
        torch.set_num_threads(args.threads)
        examples = list(read_corpus(args.corpus, args.data, split=args.split))
        documents = [e.document for e in examples]
        references = [e.references for e in examples]
        for setting in GRID:
            started = time.perf_counter()
            result = score(
                PointerGeneratorSummarizer.from_pretrained(args.model, **setting), documents, references
            )
            rows.append({"setting": setting, **result, "seconds": time.perf_counter() - started})
            print_row(rows[-1])
    chosen = choose(rows, args.target_r1, args.target_rl)
    print(f"references: {rows[0]['reference_repeated_bigrams']:.2f}% repeated bigrams")
    print(f"chosen: {json.dumps(chosen['setting'])}")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        targets = {"rouge1": args.target_r1, "rougeL": args.target_rl}
        payload = {"model": model, "split": args.split, "targets": targets, "rows": rows, "chosen": chosen}
        args.output.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def print_row(row: dict) -> None:
    print(
        f"{json.dumps(row['setting']):<78} {row['rouge1']:6.2f} {row['rouge2']:6.2f} {row['rougeL']:6.2f} "
        f"{row['repeated_bigrams']:6.2f} {row['doubled_words']:8.1f} {row['words']:6.1f}",
        flush=True,
    )


def choose(rows: list[dict], target_r1: float | None = None, target_rl: float | None = None) -> dict:
    """The best R-1 + R-L within the repetition limits, among the settings that reach the targets if any
    does."""
    allowed = [
        r
        for r in rows
        if r["repeated_bigrams"] <= 2 * r["reference_repeated_bigrams"] and r["doubled_words"] <= 2
    ] or rows
    on_target = [
        r
        for r in allowed
        if r["rouge1"] >= (target_r1 or 0.0) and r["rougeL"] >= (target_rl or 0.0)
    ]
    return max(on_target or allowed, key=lambda r: r["rouge1"] + r["rougeL"])


if __name__ == "__main__":
    main()
