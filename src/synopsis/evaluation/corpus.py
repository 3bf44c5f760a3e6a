"""Score a corpus of predictions: every metric, corpus averages, bootstrap intervals, the settings used.

Long corpora: ``progress`` wraps each per-example loop (the CLI shows a bar, or plain lines in logs), and
``threads`` > 1 scores ROUGE and METEOR in that many worker processes (the scores do not change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from synopsis.errors import ConfigError, InputError
from synopsis.evaluation import metrics as m
from synopsis.evaluation.bootstrap import bootstrap_cis, rouge155_bootstrap
from synopsis.evaluation.rouge import (
    ROUGE_TYPES,
    TOKENIZERS,
    RougeScorer,
    Score,
    check_corpus,
    first_non_latin,
)

if TYPE_CHECKING:
    from synopsis.sharding import Shard

METRICS = ("rouge", "bleu", "meteor", "novel", "repeat", "length")
T = TypeVar("T")
#: ``progress(items, description, total)`` yields ``items`` while showing how far it got
Progress = Callable[[Iterable[Any], str, int], Iterable[Any]]

logger = logging.getLogger(__name__)

_CHUNK = 500  # examples per task sent to a worker process
_PARALLEL_MIN = 2 * _CHUNK  # fewer examples are scored in this process


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
    progress: bool | Progress = False,
    tokenizer: str = "ascii",
    threads: int = 1,
    shard: Shard | None = None,
) -> dict[str, Any]:
    """Evaluate ``predictions[i]`` against the references ``references[i]`` (and ``sources[i]`` if given).

    Returns a JSON-ready report: ``settings`` (printable descriptions of every convention used), then one
    entry per metric. ROUGE and METEOR are per-example scores averaged over examples, with bootstrap
    ``confidence`` intervals over examples (``bootstrap`` resamples, 0 to skip). Novel n-gram rates need
    ``sources`` and are skipped (with a note in ``settings``) without them.

    Text in a non-Latin script is refused with ``tokenizer="ascii"`` (rouge-score's tokenizer would drop
    every letter and score 0); ``tokenizer="unicode"`` scores it. An empty reference is an error: it would
    score 0 whatever the prediction. Empty predictions are scored 0 and counted in a warning.

    ``shard`` (a :class:`~synopsis.sharding.Shard` of a ``torchrun`` launch) splits the per-example scores
    (ROUGE, METEOR, novel n-grams) across the processes: each scores one contiguous block, and every
    process gets all scores back in input order, so that the averages, BLEU, lengths and the bootstrap
    (the same resamples) are exactly those of one process. Every process calls this with the same examples
    and the same per-example metrics (the processes meet at each of them); the others may leave out the
    rest (``bleu``, ``repeat``, ``length``, ``bootstrap=0``), as ``synopsis evaluate`` does.
    """
    _check_inputs(predictions, references, sources, metrics, aggregate, tokenizer, threads)
    empty = sum(not p.strip() for p in predictions)
    if empty:
        logger.warning("%d of %d predictions are empty (each scores 0)", empty, len(predictions))
    run = _Scoring(
        predictions,
        references,
        sources,
        aggregate,
        tokenizer,
        threads,
        _tracker(progress, len(predictions)),
        shard,
    )
    if "rouge" in metrics:
        run.rouge(mode, use_stemmer, split_summaries, wordnet_exceptions, bootstrap, confidence)
    if "bleu" in metrics:
        run.bleu()
    if "meteor" in metrics:
        run.meteor()
    if "novel" in metrics:
        run.novel()
    if "repeat" in metrics:
        run.repeat()
    if "novel" in metrics or "repeat" in metrics or "length" in metrics:
        run.describe_words()
    if "length" in metrics:
        run.length()
    if bootstrap > 0 and run.per_example:
        run.bootstrap(bootstrap, confidence, seed)
    return run.report


def _check_inputs(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    sources: Sequence[str] | None,
    metrics: Sequence[str],
    aggregate: str,
    tokenizer: str,
    threads: int,
) -> None:
    """Refuse, in one line, what :func:`evaluate_corpus` cannot score honestly."""
    unknown = [name for name in metrics if name not in METRICS]
    if unknown:
        raise ConfigError(f"unknown metric(s) {', '.join(unknown)}: choose from {', '.join(METRICS)}")
    check_corpus(predictions, references, aggregate, "predictions")
    for i, refs in enumerate(references):
        if isinstance(refs, str) or not refs:
            raise InputError(f"example {i + 1}: needs a non-empty list of references")
        for k, ref in enumerate(refs):
            if not ref.strip():
                raise InputError(
                    f"example {i + 1}: reference {k + 1} is empty (it would score 0 whatever the prediction)"
                )
    if sources is not None and len(sources) != len(predictions):
        raise InputError(f"{len(predictions)} predictions but {len(sources)} sources")
    if tokenizer not in TOKENIZERS:
        raise ConfigError(f"unknown tokenizer '{tokenizer}': choose from {', '.join(TOKENIZERS)}")
    if tokenizer == "ascii":
        check_latin(predictions, references)
    if threads < 1:
        raise ConfigError(f"threads must be >= 1, got {threads}")


class _Scoring:
    """One :func:`evaluate_corpus` call: the examples, how they are scored, and the report it fills.

    Each metric method adds its entry to ``report`` and its convention to ``report["settings"]``; the
    per-example scores the bootstrap resamples collect in ``per_example``.
    """

    def __init__(
        self,
        predictions: Sequence[str],
        references: Sequence[Sequence[str]],
        sources: Sequence[str] | None,
        aggregate: str,
        tokenizer: str,
        threads: int,
        track: Progress,
        shard: Shard | None,
    ) -> None:
        self.predictions, self.references, self.sources = predictions, references, sources
        self.aggregate, self.tokenizer, self.threads = aggregate, tokenizer, threads
        self.track, self.shard = track, shard
        self.words = m.word_function(tokenizer)
        self.pairs = list(zip(predictions, references, strict=True))
        self.orders = [str(n) for n in m.NGRAM_ORDERS]
        self.report: dict[str, Any] = {"num_examples": len(predictions), "settings": {"aggregate": aggregate}}
        self.settings: dict[str, Any] = self.report["settings"]
        self.per_example: dict[str, list[float]] = {}

    def scores_of(
        self, function: Callable[[Any, Any], T], settings: Any, items: list[Any], what: str
    ) -> list[T]:
        """``function(settings, item)`` for every item, split across a launch's processes when sharded."""
        if self.shard is None or not self.shard.distributed:
            return _map(function, settings, items, self.threads, self.track, what)
        block = self.shard.block(len(items))
        mine = _map(function, settings, items[block.start : block.stop], self.threads, self.track, what)
        return self.shard.gather(mine)

    def rouge(
        self,
        mode: str,
        use_stemmer: bool,
        split_summaries: bool,
        wordnet_exceptions: bool,
        bootstrap: int,
        confidence: float,
    ) -> None:
        """Average ROUGE P/R/F; with ``mode="perl"``, the averages and F intervals ROUGE-1.5.5 prints."""
        rouge_settings = {
            "rouge_types": ROUGE_TYPES,
            "use_stemmer": use_stemmer,
            "mode": mode,
            "split_summaries": split_summaries,
            "wordnet_exceptions": wordnet_exceptions,
            "tokenizer": self.tokenizer,
        }
        self.settings["rouge"] = RougeScorer(**rouge_settings).describe()
        scores = self.scores_of(_rouge_one, (rouge_settings, self.aggregate), self.pairs, "ROUGE")
        perl_intervals = mode == "perl" and bootstrap > 0
        self.report["rouge"] = {}
        for rouge_type in ROUGE_TYPES:
            values = [s[rouge_type] for s in scores]
            self.report["rouge"][rouge_type] = {
                field: sum(getattr(v, field) for v in values) / len(values)
                for field in ("precision", "recall", "fmeasure")
            }
            if perl_intervals:
                self.report["rouge"][rouge_type].update(_rouge155_averages(values, bootstrap, confidence))
            else:
                self.per_example[f"rouge/{rouge_type}"] = [v.fmeasure for v in values]
        if perl_intervals:
            self.settings["rouge"] += (
                f"; averages and F intervals as ROUGE-1.5.5 prints them (mean of its {bootstrap} "
                "srand-seeded resample means, example i = eval ID i+1)"
            )

    def bleu(self) -> None:
        """sacrebleu's corpus BLEU-4 (one pass over the corpus, no per-example scores)."""
        for _ in self.track([None], "BLEU (one pass over the corpus)", 1):
            self.report["bleu"] = m.corpus_bleu(self.predictions, self.references, self.tokenizer)
        self.settings["bleu"] = f"sacrebleu corpus BLEU-4, {self.report['bleu']['signature']}"
        if self.tokenizer == "unicode":
            self.settings["bleu"] += " (tokens: synopsis' Unicode words and punctuation, case kept)"

    def meteor(self) -> None:
        """NLTK's METEOR per example, averaged."""
        m._meteor_resources()  # load WordNet here once, before any worker process is forked
        meteor = self.scores_of(_meteor_one, (self.aggregate, self.tokenizer), self.pairs, "METEOR")
        self.per_example["meteor"] = meteor
        self.report["meteor"] = {"score": sum(meteor) / len(meteor)}
        self.settings["meteor"] = (
            "NLTK meteor_score (alpha 0.9, beta 3, gamma 0.5), WordNet 3.0 from Debian, "
            + ("lower-cased Unicode words" if self.tokenizer == "unicode" else "lower-cased word tokens")
        )

    def novel(self) -> None:
        """Share of summary n-grams absent from the source (skipped, with a note, without sources)."""
        if self.sources is None:
            self.settings["novel"] = "skipped: no sources given"
            return
        with_sources = list(zip(self.predictions, self.sources, strict=True))
        self.report["novel_ngrams"] = {
            n: _mean_defined(
                self.scores_of(_novel_one, (int(n), self.tokenizer), with_sources, f"novel {n}-grams")
            )
            for n in self.orders
        }
        self.settings["novel"] = "share of summary n-grams absent from the source, averaged over summaries"

    def repeat(self) -> None:
        """Repeated n-gram rates and doubled words, of the predictions and of the references."""
        predictions, words, orders = self.predictions, self.words, self.orders
        self.report["repeated_ngrams"] = {
            n: _mean_defined(m.repeated_ngram_rate(p, int(n), words) for p in predictions) for n in orders
        }
        # The references' own rates, for a "no more than k times the human rate" reading.
        all_references = [r for refs in self.references for r in refs]
        self.report["reference_repeated_ngrams"] = {
            n: _mean_defined(m.repeated_ngram_rate(r, int(n), words) for r in all_references) for n in orders
        }
        self.report["doubled_words"] = {
            "predictions": sum(m.has_doubled_word(p, words) for p in predictions) / len(predictions),
            "references": sum(m.has_doubled_word(r, words) for r in all_references) / len(all_references),
        }
        self.settings["repeat"] = (
            "share of summary n-grams repeating an earlier one in it, averaged over summaries (references: "
            "over all references); doubled words: share of summaries with a word directly repeated"
        )

    def describe_words(self) -> None:
        """The word and sentence conventions of the novel, repeat and length metrics."""
        self.settings["words"] = (
            "lower-cased Unicode words (one per character in unspaced scripts)"
            if self.tokenizer == "unicode"
            else "lower-cased [a-z0-9] runs"
        ) + ", unstemmed; sentences: Punkt per line"

    def length(self) -> None:
        """Length statistics of the predictions against the references."""
        for _ in self.track([None], "lengths", 1):
            self.report["length"] = m.length_stats(self.predictions, self.references, self.words)

    def bootstrap(self, resamples: int, confidence: float, seed: int) -> None:
        """Percentile intervals over resampled examples for every per-example score collected."""
        for _ in self.track([None], f"bootstrap ({resamples} resamples)", 1):
            intervals = bootstrap_cis(self.per_example, n_samples=resamples, confidence=confidence, seed=seed)
        key = f"ci{round(confidence * 100)}"
        for name, interval in intervals.items():
            if name.startswith("rouge/"):
                self.report["rouge"][name.split("/", 1)[1]][f"fmeasure_{key}"] = list(interval)
            else:
                self.report[name][key] = list(interval)
        self.settings["bootstrap"] = (
            f"{resamples} resamples of the examples, {confidence:.0%} percentile intervals, seed {seed}"
        )


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


def check_latin(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> None:
    """Refuse text in a non-Latin script, which the ASCII tokenizer would silently score 0."""
    for what, texts in (("prediction", predictions), ("reference", [r for refs in references for r in refs])):
        index = first_non_latin(texts)
        if index is not None:
            raise InputError(
                f"{what} {index + 1} is mostly in a non-Latin script ({texts[index][:20]!r}...): the "
                "rouge-score tokenizer keeps only a-z and 0-9 and would score it 0; "
                "use the Unicode tokenizer (--tokenizer unicode)"
            )


def _tracker(progress: bool | Progress, total: int) -> Progress:
    if callable(progress):
        return progress
    if not progress or total < 200:
        return lambda items, description, count: items

    def reported(items: Iterable[T], description: str, count: int) -> Iterable[T]:
        from synopsis.progress import track

        return track(items, description, count)

    return reported


def _rouge_one(settings: tuple[dict[str, Any], str], pair: tuple[str, Sequence[str]]) -> dict[str, Score]:
    scorer_settings, aggregate = settings
    return _scorer(tuple(sorted(scorer_settings.items()))).score_multi(pair[1], pair[0], aggregate)


_SCORERS: dict[tuple, RougeScorer] = {}


def _scorer(key: tuple) -> RougeScorer:
    if key not in _SCORERS:
        _SCORERS[key] = RougeScorer(**dict(key))
    return _SCORERS[key]


def _meteor_one(settings: tuple[str, str], pair: tuple[str, Sequence[str]]) -> float:
    aggregate, tokenizer = settings
    return m.meteor(pair[0], pair[1], aggregate, tokenizer)


def _novel_one(settings: tuple[int, str], pair: tuple[str, str]) -> float | None:
    order, tokenizer = settings
    return m.novel_ngram_rate(pair[0], pair[1], order, m.word_function(tokenizer))


def _chunk(task: tuple[Callable[[Any, Any], T], Any, list[Any]]) -> list[T]:
    function, settings, items = task
    return [function(settings, item) for item in items]


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle


def _map(
    function: Callable[[Any, Any], T],
    settings: Any,
    items: list[Any],
    threads: int,
    track: Progress,
    description: str,
) -> list[T]:
    """``[function(settings, item) for item in items]``, in ``threads`` processes for long lists."""
    if threads <= 1 or len(items) < _PARALLEL_MIN:
        return list(track((function(settings, item) for item in items), description, len(items)))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # fork: the workers start at once, with this process's caches (stems, WordNet); they only compute
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    pool = ProcessPoolExecutor(threads, mp_context=context, initializer=_ignore_sigint)
    try:
        chunks = [(function, settings, items[i : i + _CHUNK]) for i in range(0, len(items), _CHUNK)]
        results: Iterator[T] = (r for chunk in pool.map(_chunk, chunks) for r in chunk)
        return list(track(results, f"{description} ({threads} processes)", len(items)))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.terminate()


#: How ROUGE-Lsum finds the sentences of summaries: ``auto`` keeps newlines when any prediction holds one
#: and otherwise splits with Punkt (as Hugging Face's ``run_summarization.py`` does with nltk).
SENTENCE_POLICIES = ("auto", "newline", "punkt")


def lsum_sentences(predictions: list[str], policy: str = "auto") -> tuple[bool, str]:
    """(split summaries into sentences?, the settings line that says which splitting ROUGE-Lsum saw)."""
    if policy not in SENTENCE_POLICIES:
        raise ConfigError(f"sentences must be one of {', '.join(SENTENCE_POLICIES)}, got {policy!r}")
    split = policy == "punkt" or (policy == "auto" and not any("\n" in p for p in predictions))
    how = "Punkt (and 。！？)" if split else "newlines"
    why = {
        "auto": "auto: " + ("no prediction holds a newline" if split else "predictions hold newlines"),
        "newline": "--sentences newline",
        "punkt": "--sentences punkt",
    }[policy]
    return split, f"ROUGE-Lsum sentences split at {how} ({why})"
