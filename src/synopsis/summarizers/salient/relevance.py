"""How relevant each sentence is to an instruction: lexical match (BM25) and meaning (sentence embeddings),
read under each sentence's heading, and, in a meeting transcript, together with the neighbouring turns.

A question names the words of its answer less often than a search query does ("What did the group think
about the belief net?" against "So, the Bayes net would have these nodes ..."), and a keyword match alone
picks any sentence that repeats the question's words ("Yet another PowerPoint presentation."); an embedding
alone misses the rare term that settles it. So relevance is the sum of both, each min-max scaled per
document: Okapi BM25 (Robertson and Zaragoza, 2009; the ``bm25s`` implementation, Lucene's variant) over
Porter-stemmed content words, speaker labels included (questions name "the Professor"), and the cosine of
all-MiniLM-L6-v2 embeddings. In a transcript the answer is usually discussed over several turns, so each
sentence also gains :data:`TURN_WEIGHT` times the mean of the best relevance in its turn and in the turns
either side. The weights were chosen on QMSum's specific queries (docs/results/default_quality.md).

A general request ("Summarize the whole meeting", "What was discussed?") names nothing to look for: it gets
the general summary (:func:`is_general`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache

import numpy as np

from synopsis.summarizers.salient.centrality import SentenceVectors, normalised
from synopsis.text import content_words

#: Share of a sentence's relevance that the best relevance of its turn and the turns either side add.
TURN_WEIGHT = 0.5
#: Words that a request for the general summary is made of ("Summarize the whole meeting.", "What were the
#: main discussion points of the meeting?"): with content words beyond these it asks for something.
GENERAL_WORDS = frozenset(
    """summarize summarise summary summarization overview overall whole entire general main key points topics
    gist meeting meetings document text article paper report discussion discussions discussed discuss talk
    talked said say covered happened content focus everything please give write short brief""".split()
)


def is_general(instruction: str) -> bool:
    """Whether an instruction asks for the general summary: none of its content words names what to look
    for (:data:`GENERAL_WORDS`)."""
    named = [w for w in content_words(instruction) if len(w) > 1 and w not in GENERAL_WORDS]  # not "’s"
    return not named


@cache
def _stem(word: str) -> str:
    return _porter().stem(word)


@cache
def _porter():  # noqa: ANN202 - nltk's stemmer
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


def terms(text: str) -> list[str]:
    """BM25's terms of a text: its Porter-stemmed content words."""
    return [_stem(w) for w in content_words(text)]


def bm25_scores(texts: Sequence[str], query: str) -> np.ndarray:
    """Okapi BM25 of each text (a sentence, its speaker label included) against ``query`` (``bm25s``,
    ``k1 = 1.5, b = 0.75``; the texts are the collection); zeros when the query has no content word."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG on import: its steps on the screen
    asked = terms(query)
    if not asked or not texts:
        return np.zeros(len(texts))
    index = bm25s.BM25()
    index.index([terms(t) or ["\x00"] for t in texts], show_progress=False)
    return np.asarray(index.get_scores(asked), dtype=float)


def neighbouring_turns(scores: np.ndarray, turns: np.ndarray) -> np.ndarray:
    """Each sentence's score plus :data:`TURN_WEIGHT` times the mean, over its turn and the turns either
    side, of each turn's best sentence score (``turns[i]``: the turn of sentence ``i``, numbered in order)."""
    if not len(scores):
        return scores
    best = np.zeros(int(turns.max()) + 1)
    np.maximum.at(best, turns, scores)
    padded = np.concatenate([[0.0], best, [0.0]])
    around = (padded[:-2] + padded[1:-1] + padded[2:]) / 3
    return scores + TURN_WEIGHT * around[turns]


def relevance(
    texts: Sequence[str],
    plain: Sequence[str],
    instruction: str,
    vectors: SentenceVectors,
    headed: Sequence[str] = (),
    heading_weight: np.ndarray | None = None,
    turns: np.ndarray | None = None,
) -> np.ndarray:
    """Each text's relevance to ``instruction`` in [0, 2 + TURN_WEIGHT]: BM25 over ``texts`` (speaker labels
    kept) plus the embedding cosine of ``plain`` (the words said), each min-max scaled; with ``headed``
    (each text under its heading, "Termination: ..."), the cosine mixes in the headed text's by
    ``heading_weight`` (a question often names the topic a heading names); with ``turns`` (a transcript),
    the neighbouring turns add theirs (:func:`neighbouring_turns`)."""
    encoded = vectors.encode([*plain, *headed, instruction])
    meaning = encoded[: len(plain)] @ encoded[-1]
    if headed:
        weight = np.full(len(plain), 0.5) if heading_weight is None else heading_weight
        under = encoded[len(plain) : len(plain) + len(headed)] @ encoded[-1]
        meaning = (1 - weight) * meaning + weight * under
    scores = normalised(bm25_scores(texts, instruction)) + normalised(meaning)
    return scores if turns is None else neighbouring_turns(scores, turns)
