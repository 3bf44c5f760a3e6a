"""Build the bundled model's style check (``src/synopsis/resources/pointer_generator/style.json``): is a
document a paper abstract like the model's training inputs?

Fitted on the ``fit`` half of ``benchmarks/domain_data.py`` only (SciTLDR train against CNN stories, MASC,
QMSum train chunks, the first half of SciSummNet's sections and half of the READMEs); the threshold is the
3rd percentile of the training abstracts' out-of-fold scores, so about 97% of abstracts like them pass.
Candidates compared on the same split (out-of-fold on the fit half; the ``report`` half only printed):

* ``knn``: TF-IDF cosine similarity to the 5 nearest training abstracts (IDF from them, no negatives);
* ``lr-unigram``: logistic regression over unigram frequencies and a length bin;
* ``lr-bigram``: the same with bigrams (the one written), paper sections weighted ``--hard-weight``.

    python benchmarks/build_style_check.py [--write] [--candidates] [--hard-weight 10] [--max-features 30000]

Needs scikit-learn (the ``dev`` extra); the summarizer reads only the JSON it writes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from domain_data import groups
from sklearn.feature_extraction import DictVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from synopsis.data.pointer_generator import document_words
from synopsis.summarizers.domain import STYLE_FILE, style_features, style_tokens

RESOURCE = Path(__file__).resolve().parents[1] / "src" / "synopsis" / "resources" / "pointer_generator"
LENGTH_BINS = (50, 100, 150, 250, 350, 500, 700)
PASS_QUANTILE = 0.03  # the threshold: this share of training abstracts (out of fold) falls below it
C = 30.0  # inverse L2 strength (features are frequencies: small values need a weak penalty)
#: Weight of a paper section (the hard negative, close to abstracts) against another negative: chosen on
#: the fit half's out-of-fold share of sections passing (1: 6.6%, 3: 2.7%, 6: 1.4%, 10: 1.1%).
HARD_WEIGHT = 10.0
HARD_GROUP = "SciSummNet"


def tokens(documents: list) -> list[list[str]]:
    return [style_tokens(document_words(d)) for d in documents]


def fit_lr(
    rows: list[dict[str, float]], labels: np.ndarray, weights: np.ndarray, min_df: int = 3
) -> tuple[DictVectorizer, Any]:
    df: dict[str, int] = {}
    for row in rows:
        for name in row:
            df[name] = df.get(name, 0) + 1
    keep = {name for name, n in df.items() if n >= min_df or name.startswith("<len:")}
    vectorizer = DictVectorizer()
    x = vectorizer.fit_transform([{k: v for k, v in row.items() if k in keep} for row in rows])
    model = LogisticRegression(C=C, class_weight="balanced", max_iter=3000)
    model.fit(x, labels, sample_weight=weights)
    return vectorizer, model


def lr_scores(fit_rows, labels, weights, other_rows) -> tuple[np.ndarray, list[np.ndarray], Any]:
    """Out-of-fold scores of the fit rows, the full model's scores of each list in ``other_rows``."""
    oof = np.zeros(len(fit_rows))
    for train, test in StratifiedKFold(5, shuffle=True, random_state=0).split(fit_rows, labels):
        vectorizer, model = fit_lr([fit_rows[i] for i in train], labels[train], weights[train])
        oof[test] = model.predict_proba(vectorizer.transform([fit_rows[i] for i in test]))[:, 1]
    vectorizer, model = fit_lr(fit_rows, labels, weights)
    others = [model.predict_proba(vectorizer.transform(rows))[:, 1] for rows in other_rows]
    return oof, others, (vectorizer, model)


def knn_scores(train_tokens, fit_tokens, labels, other_tokens, k: int = 5) -> tuple[np.ndarray, list]:
    """TF-IDF cosine to the ``k`` nearest training abstracts (a training abstract's own vector left out)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    tfidf = TfidfVectorizer(analyzer=lambda t: t, sublinear_tf=True)
    abstracts = tfidf.fit_transform(train_tokens)

    def score(rows, leave_one_out: bool) -> np.ndarray:
        sims = (tfidf.transform(rows) @ abstracts.T).toarray()
        if leave_one_out:
            sims[np.isclose(sims, 1.0)] = 0.0
        return np.sort(sims, axis=1)[:, -k:].mean(axis=1)

    positives = np.array(labels) == 1
    oof = np.zeros(len(fit_tokens))
    oof[positives] = score([t for t, p in zip(fit_tokens, positives, strict=True) if p], True)
    oof[~positives] = score([t for t, p in zip(fit_tokens, positives, strict=True) if not p], False)
    return oof, [score(rows, False) for rows in other_tokens]


def table(name: str, oof, fit_names, fit_sizes, labels, others, report_names) -> float:
    threshold = float(np.quantile(oof[labels == 1], PASS_QUANTILE))
    print(f"\n{name}: threshold {threshold:.4f}")
    start = 0
    for group, size in zip(fit_names, fit_sizes, strict=True):
        part = oof[start : start + size]
        start += size
        print(f"  fit (out of fold) {group}: {np.mean(part >= threshold):.1%} pass of {size}")
    for group, scores in zip(report_names, others, strict=True):
        print(f"  report {group}: {np.mean(scores >= threshold):.1%} pass of {len(scores)}")
    return threshold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {STYLE_FILE} into the bundled model")
    parser.add_argument("--max-features", type=int, default=30000)
    parser.add_argument("--candidates", action="store_true", help="compare knn and lr-unigram too")
    parser.add_argument("--hard-weight", type=float, default=HARD_WEIGHT)
    args = parser.parse_args()
    data = groups()
    fit_names, report_names = list(data["fit"]), list(data["report"]) + list(data["extra"])
    fit_docs = [d for name in fit_names for d in data["fit"][name]]
    fit_sizes = [len(data["fit"][name]) for name in fit_names]
    labels = np.array([1] * fit_sizes[0] + [0] * (len(fit_docs) - fit_sizes[0]))
    weights = np.concatenate(
        [
            np.full(size, args.hard_weight if HARD_GROUP in name else 1.0)
            for name, size in zip(fit_names, fit_sizes, strict=True)
        ]
    )
    fit_tokens = tokens(fit_docs)
    other_tokens = [tokens({**data["report"], **data["extra"]}[n]) for n in report_names]

    def rows(token_lists, bigrams: bool = True) -> list[dict[str, float]]:
        out = [style_features(t, LENGTH_BINS) for t in token_lists]
        return out if bigrams else [{k: v for k, v in r.items() if " " not in k} for r in out]

    if args.candidates:
        oof, others = knn_scores(fit_tokens[: fit_sizes[0]], fit_tokens, labels, other_tokens)
        name = "knn (TF-IDF, 5 nearest training abstracts)"
        table(name, oof, fit_names, fit_sizes, labels, others, report_names)
        oof, others, _ = lr_scores(
            rows(fit_tokens, False), labels, weights, [rows(t, False) for t in other_tokens]
        )
        table("lr-unigram", oof, fit_names, fit_sizes, labels, others, report_names)
    oof, others, (vectorizer, model) = lr_scores(
        rows(fit_tokens), labels, weights, [rows(t) for t in other_tokens]
    )
    threshold = table("lr-bigram", oof, fit_names, fit_sizes, labels, others, report_names)

    weights = dict(zip(vectorizer.get_feature_names_out(), model.coef_[0], strict=True))
    kept = sorted(weights, key=lambda n: -abs(weights[n]))[: args.max_features]
    train_in = float(np.mean(oof[labels == 1] >= threshold))
    resource = {
        "format": 1,
        "corpus": "scitldr",
        "method": "logistic regression over unigram and bigram frequencies and a length bin "
        "(benchmarks/build_style_check.py)",
        "threshold": round(threshold, 4),
        "bias": round(float(model.intercept_[0]), 4),
        "length_bins": list(LENGTH_BINS),
        "info": {
            "train_in": f"{train_in:.0%}",
            "fitted_on": {name: size for name, size in zip(fit_names, fit_sizes, strict=True)},
            "hard_weight": args.hard_weight,
        },
        "weights": {name: round(float(weights[name]), 3) for name in sorted(kept)},
    }
    text = json.dumps(resource, ensure_ascii=False, separators=(",", ":"))
    print(f"\n{len(kept)} of {len(weights)} features kept; {len(text.encode()) / 1e3:.0f} kB")
    if args.write:
        (RESOURCE / STYLE_FILE).write_text(text + "\n", encoding="utf-8")
        print(f"wrote {RESOURCE / STYLE_FILE}")


if __name__ == "__main__":
    main()
