"""Metrics beside ROUGE: BLEU-4 (sacrebleu), METEOR (NLTK + WordNet), novel and repeated n-grams, lengths.

Word-level statistics (n-gram rates, lengths) use ROUGE's words without stemming: lower-cased runs of
``[a-z0-9]``, so punctuation never counts as a novel or repeated n-gram. With ``tokenizer="unicode"`` every
metric reads the words of any script instead (:func:`synopsis.evaluation.rouge.unicode_words`; BLEU the same
tokens with punctuation, case kept).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from synopsis.evaluation.rouge import RougeScorer, unicode_tokens, unicode_words
from synopsis.text import split_sentences, word_tokenize

_WORDS = RougeScorer(("rouge1",), use_stemmer=False).tokenize
NGRAM_ORDERS = (1, 2, 3, 4)


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words (ROUGE's tokenisation, unstemmed)."""
    return _WORDS(text)


def word_function(tokenizer: str = "ascii") -> Callable[[str], list[str]]:
    """The words the n-gram and length statistics count for a ROUGE ``tokenizer`` ("ascii" or "unicode")."""
    return unicode_words if tokenizer == "unicode" else words


def _ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return list(zip(*(tokens[k:] for k in range(n)), strict=False))


def novel_ngram_rate(
    summary: str, source: str, n: int, tokenize: Callable[[str], list[str]] = words
) -> float | None:
    """Share of the summary's n-grams (with repeats) that never occur in the source; None if it has none."""
    grams = _ngrams(tokenize(summary), n)
    if not grams:
        return None
    source_grams = set(_ngrams(tokenize(source), n))
    return sum(g not in source_grams for g in grams) / len(grams)


def repeated_ngram_rate(summary: str, n: int, tokenize: Callable[[str], list[str]] = words) -> float | None:
    """Share of the summary's n-grams that repeat an earlier n-gram of the same summary (See et al. 2017)."""
    grams = _ngrams(tokenize(summary), n)
    if not grams:
        return None
    return 1.0 - len(set(grams)) / len(grams)


def has_doubled_word(summary: str, tokenize: Callable[[str], list[str]] = words) -> bool:
    """Whether a word directly follows itself ("learning learning"), the failure of an attention that stays
    on the source word it has just copied."""
    tokens = tokenize(summary)
    return any(a == b for a, b in zip(tokens, tokens[1:], strict=False))


def sentence_count(text: str) -> int:
    """Sentences in a summary: Punkt sentences of each newline-separated line."""
    return sum(len(split_sentences(line)) for line in text.split("\n"))


def corpus_bleu(
    predictions: Sequence[str], references: Sequence[Sequence[str]], tokenizer: str = "ascii"
) -> dict[str, Any]:
    """Corpus BLEU-4, sacrebleu defaults (13a tokens, exp smoothing); the number of references may vary.

    ``tokenizer="unicode"``: texts are tokenized by :func:`~synopsis.evaluation.rouge.unicode_tokens`
    first (sacrebleu then splits on spaces only), so that Chinese or Japanese are not one token a sentence.
    """
    from sacrebleu.metrics import BLEU

    line = _one_line if tokenizer != "unicode" else lambda text: " ".join(unicode_tokens(text))
    width = max(len(refs) for refs in references)
    # sacrebleu takes one stream per reference position; None marks a missing reference.
    streams = [[line(refs[k]) if k < len(refs) else None for refs in references] for k in range(width)]
    bleu = BLEU(tokenize="none") if tokenizer == "unicode" else BLEU()
    result = bleu.corpus_score([line(p) for p in predictions], streams)
    return {
        "score": result.score,
        "precisions": list(result.precisions),
        "brevity_penalty": result.bp,
        "length_ratio": result.sys_len / result.ref_len if result.ref_len else 0.0,
        "signature": str(bleu.get_signature()),
    }


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


def meteor_scores(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    aggregate: str = "max",
    tokenizer: str = "ascii",
) -> list[float]:
    """Per-example METEOR (NLTK, WordNet 3.0 from Debian); several references by max or mean.

    NLTK matches exact words, then Porter stems, then WordNet synonyms of the words left over, which it
    looks up in their stemmed form: synonyms are found for words that are their own stem (car/auto).
    """
    return [meteor(p, refs, aggregate, tokenizer) for p, refs in zip(predictions, references, strict=True)]


def meteor(
    prediction: str, references: Sequence[str], aggregate: str = "max", tokenizer: str = "ascii"
) -> float:
    """METEOR of one prediction (see ``meteor_scores``)."""
    from nltk.translate.meteor_score import meteor_score, single_meteor_score

    stemmer, wordnet = _meteor_resources()
    tokenize = unicode_words if tokenizer == "unicode" else lambda text: word_tokenize(text, lower=True)
    hypothesis = tokenize(prediction)
    ref_tokens = [tokenize(r) for r in references]
    if aggregate == "max":
        return meteor_score(ref_tokens, hypothesis, stemmer=stemmer, wordnet=wordnet)
    per_ref = [single_meteor_score(r, hypothesis, stemmer=stemmer, wordnet=wordnet) for r in ref_tokens]
    return sum(per_ref) / len(per_ref)


class _Memoized:
    """Wraps one method of an NLTK object with a cache; METEOR re-stems and re-looks-up the same words."""

    def __init__(self, method_name: str, target: Any) -> None:
        setattr(self, method_name, lru_cache(maxsize=1 << 18)(getattr(target, method_name)))


@lru_cache(maxsize=1)
def _meteor_resources() -> tuple[Any, Any]:
    """(stemmer, wordnet) for NLTK's METEOR, which only calls ``stem(word)`` and ``synsets(word)`` on them."""
    from nltk.stem.porter import PorterStemmer

    from synopsis.evaluation.wordnet import load_wordnet

    return _Memoized("stem", PorterStemmer()), _Memoized("synsets", load_wordnet())


def length_stats(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    tokenize: Callable[[str], list[str]] = words,
) -> dict[str, float]:
    """Mean words and sentences of predictions and references; ratio of mean prediction to reference words."""
    pred_words = [len(tokenize(p)) for p in predictions]
    ref_words = [sum(len(tokenize(r)) for r in refs) / len(refs) for refs in references]
    count = len(predictions)
    mean_pred, mean_ref = sum(pred_words) / count, sum(ref_words) / count
    return {
        "prediction_words": mean_pred,
        "reference_words": mean_ref,
        "prediction_sentences": sum(map(sentence_count, predictions)) / count,
        "reference_sentences": sum(sum(map(sentence_count, refs)) / len(refs) for refs in references) / count,
        "length_ratio": mean_pred / mean_ref if mean_ref else 0.0,
        "empty_predictions": sum(n == 0 for n in pred_words),
    }
