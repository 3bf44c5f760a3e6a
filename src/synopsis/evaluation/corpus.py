"""Score a corpus of predictions: every metric, corpus averages, bootstrap intervals, the settings used."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from synopsis.errors import ConfigError, InputError
from synopsis.evaluation import metrics as m
from synopsis.evaluation.bootstrap import bootstrap_cis, rouge155_bootstrap
from synopsis.evaluation.rouge import AGGREGATES, ROUGE_TYPES, RougeScorer, Score

METRICS = ("rouge", "bleu", "meteor", "novel", "repeat", "length")


def evaluate_corpus(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    sources: Sequence[str] | None = None,
    *,
    metrics: Sequence[str] = METRICS,
    mode: str = "rouge-score",
    use_stemmer: bool = True,
    aggregate: str = "max",
    split_summaries: bool = False,
    wordnet_exceptions: bool = False,
    bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Evaluate ``predictions[i]`` against the references ``references[i]`` (and ``sources[i]`` if given).

    Returns a JSON-ready report: ``settings`` (printable descriptions of every convention used), then one
    entry per metric. ROUGE and METEOR are per-example scores averaged over examples, with bootstrap
    ``confidence`` intervals over examples (``bootstrap`` resamples, 0 to skip). Novel n-gram rates need
    ``sources`` and are skipped (with a note in ``settings``) without them.
    """
    unknown = [name for name in metrics if name not in METRICS]
    if unknown:
        raise ConfigError(f"unknown metric(s) {', '.join(unknown)}: choose from {', '.join(METRICS)}")
    if aggregate not in AGGREGATES:
        raise ConfigError(f"unknown aggregate '{aggregate}': choose from {', '.join(AGGREGATES)}")
    if len(predictions) != len(references):
        raise InputError(f"{len(predictions)} predictions but {len(references)} reference sets")
    if not predictions:
        raise InputError("nothing to evaluate: no predictions")
    for i, refs in enumerate(references):
        if isinstance(refs, str) or not refs:
            raise InputError(f"example {i + 1}: needs a non-empty list of references")
    if sources is not None and len(sources) != len(predictions):
        raise InputError(f"{len(predictions)} predictions but {len(sources)} sources")

    report: dict[str, Any] = {"num_examples": len(predictions), "settings": {"aggregate": aggregate}}
    settings = report["settings"]
    per_example: dict[str, list[float]] = {}

    if "rouge" in metrics:
        scorer = RougeScorer(
            ROUGE_TYPES,
            use_stemmer=use_stemmer,
            mode=mode,
            split_summaries=split_summaries,
            wordnet_exceptions=wordnet_exceptions,
        )
        settings["rouge"] = scorer.describe()
        scores = [
            scorer.score_multi(refs, pred, aggregate)
            for pred, refs in _progress(
                zip(predictions, references, strict=True), progress, "ROUGE", len(predictions)
            )
        ]
        report["rouge"] = {}
        for rouge_type in ROUGE_TYPES:
            values = [s[rouge_type] for s in scores]
            report["rouge"][rouge_type] = {
                field: sum(getattr(v, field) for v in values) / len(values)
                for field in ("precision", "recall", "fmeasure")
            }
            if mode == "perl" and bootstrap > 0:
                report["rouge"][rouge_type].update(_rouge155_averages(values, bootstrap, confidence))
            else:
                per_example[f"rouge/{rouge_type}"] = [v.fmeasure for v in values]
        if mode == "perl" and bootstrap > 0:
            settings["rouge"] += (
                f"; averages and F intervals as ROUGE-1.5.5 prints them (mean of its {bootstrap} "
                "srand-seeded resample means, example i = eval ID i+1)"
            )

    if "bleu" in metrics:
        report["bleu"] = m.corpus_bleu(predictions, references)
        settings["bleu"] = f"sacrebleu corpus BLEU-4, {report['bleu']['signature']}"

    if "meteor" in metrics:
        meteor = [
            m.meteor(pred, refs, aggregate)
            for pred, refs in _progress(
                zip(predictions, references, strict=True), progress, "METEOR", len(predictions)
            )
        ]
        per_example["meteor"] = meteor
        report["meteor"] = {"score": sum(meteor) / len(meteor)}
        settings["meteor"] = (
            "NLTK meteor_score (alpha 0.9, beta 3, gamma 0.5), WordNet 3.0 from Debian, "
            "lower-cased word tokens"
        )

    orders = [str(n) for n in m.NGRAM_ORDERS]
    if "novel" in metrics:
        if sources is None:
            settings["novel"] = "skipped: no sources given"
        else:
            report["novel_ngrams"] = {
                n: _mean_defined(
                    m.novel_ngram_rate(p, s, int(n)) for p, s in zip(predictions, sources, strict=True)
                )
                for n in orders
            }
            settings["novel"] = "share of summary n-grams absent from the source, averaged over summaries"
    if "repeat" in metrics:
        report["repeated_ngrams"] = {
            n: _mean_defined(m.repeated_ngram_rate(p, int(n)) for p in predictions) for n in orders
        }
        settings["repeat"] = (
            "share of summary n-grams repeating an earlier one in it, averaged over summaries"
        )
    if "novel" in metrics or "repeat" in metrics or "length" in metrics:
        settings["words"] = "lower-cased [a-z0-9] runs, unstemmed; sentences: Punkt per line"
    if "length" in metrics:
        report["length"] = m.length_stats(predictions, references)

    if bootstrap > 0 and per_example:
        intervals = bootstrap_cis(per_example, n_samples=bootstrap, confidence=confidence, seed=seed)
        key = f"ci{round(confidence * 100)}"
        for name, interval in intervals.items():
            if name.startswith("rouge/"):
                report["rouge"][name.split("/", 1)[1]][f"fmeasure_{key}"] = list(interval)
            else:
                report[name][key] = list(interval)
        settings["bootstrap"] = (
            f"{bootstrap} resamples of the examples, {confidence:.0%} percentile intervals, seed {seed}"
        )
    return report


def _rouge155_averages(values: list[Score], resamples: int, confidence: float) -> dict[str, Any]:
    """ROUGE-1.5.5's printed Average_P/R/F and F confidence interval for these per-summary scores."""
    out: dict[str, Any] = {}
    for field in ("precision", "recall", "fmeasure"):
        average, low, high = rouge155_bootstrap(
            [getattr(v, field) for v in values], resamples, round(confidence * 100, 9)
        )
        out[field] = average
        if field == "fmeasure":
            out[f"fmeasure_ci{round(confidence * 100)}"] = [low, high]
    return out


def _mean_defined(values) -> float | None:  # noqa: ANN001 - any iterable of float | None
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def _progress(items, enabled: bool, label: str, total: int):  # noqa: ANN001, ANN202
    if not enabled or total < 200:
        return items
    from rich.console import Console
    from rich.progress import track

    return track(items, description=label, total=total, console=Console(stderr=True), transient=True)
