"""Where the bundled model's domain check (:func:`synopsis.summarizers.domain.bundled_domain_check`) sends
documents: the confusion table of issue 57 on the report half of ``benchmarks/domain_data.py`` (SciTLDR dev
abstracts against news, QMSum, SciSummNet sections, the arXiv/PubMed sample and READMEs, none of them used
to fit the style classifier), beside the check before it (length, sections, vocabulary only), and the time
the check takes per document.

    python benchmarks/domain_check.py [--fit]   # --fit: the fitting half too (in-sample)
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import Counter

from domain_data import groups

from synopsis.document import Document
from synopsis.summarizers.domain import ModelScope, bundled_domain_check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true", help="also the documents the classifier was fitted on")
    args = parser.parse_args()
    new = bundled_domain_check()
    assert new.check is not None and new.check.style is not None, "the bundled model has no style.json"
    style = new.check.style
    old = ModelScope(dataclasses.replace(new.check, style=None), new.vocab, new.reads, new.words)
    data = groups()
    parts = ["report", "extra"] + (["fit"] if args.fit else [])
    print(
        f"style threshold {style.threshold:.4f} ({style.info.get('train_in')} of training abstracts out of "
        f"fold); vocabulary floor {new.check.min_known_word_rate:.4f}; length > {new.check.max_words} words"
    )
    print(
        "| documents | n | to the bundled model, old check | to the bundled model | far by length | sections "
        "| vocabulary | style | old measures only (style would pass) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for part in parts:
        for name, documents in data[part].items():
            counts: Counter[str] = Counter()
            routed = routed_old = only_old = 0
            for document in documents:
                words, far_old = old.words_and_distances(document)
                far = new.distances(document)
                routed_old += not far_old
                routed += not far
                counts.update(d.measure for d in far_old)
                passes_style = style.score(words) >= style.threshold
                counts["style"] += not passes_style
                only_old += bool(far_old) and passes_style
            n = len(documents)
            kind = "fitted on" if part == "fit" else "not counted"
            label = name if part == "report" else f"{name} ({kind})"
            print(
                f"| {label} | {n} | {routed_old} ({routed_old / n:.1%}) | **{routed} ({routed / n:.1%})** "
                f"| {counts['length']} | {counts['sections']} | {counts['vocabulary']} | {counts['style']} "
                f"| {only_old} |"
            )
            sys.stdout.flush()
    articles = [d for d in data["report"]["news (REALSumm CNN/DM)"] if 500 <= d.num_words() <= 700]
    texts = [" ".join(s.text for s in d.sentences) for d in articles]
    times = []
    for _ in range(5):  # the fastest of 5 passes: the machine's other work is not the check's cost
        fresh = [Document.from_text(t) for t in texts]  # not yet in the check's per-document cache
        start = time.perf_counter()
        for document in fresh:
            new.distances(document)
        times.append((time.perf_counter() - start) / len(fresh))
    print(
        f"\ncheck time: {min(times) * 1e3:.2f} ms per news article of 500-700 words (the words the model "
        f"reads and all four measures; {len(texts)} articles, fastest of 5 passes)"
    )

if __name__ == "__main__":
    main()
