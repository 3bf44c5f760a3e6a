"""Whether a document is in the domain of a pointer-generator: like the held-out inputs it was validated on.

A model trained on one kind of text (the bundled model: SciTLDR paper abstracts, ~175 words, no sections)
writes unreadable summaries of anything else while ROUGE still rewards its words. :class:`DomainCheck` reads
three measures of a document against the model's :class:`~synopsis.data.pointer_generator.SourceProfile`:

* length: more than twice the 99th percentile of the held-out inputs' words;
* sections: two or more headings (abstracts have none; the model reads a sectioned text as one plain text);
* vocabulary: the share of alphabetic words in the model's vocabulary (pulled towards the held-out median
  for short documents, :meth:`DomainCheck.shrunk_rate`) below ``known_word_rate_floor``, the
  0.1% quantile of a logit-normal fitted to the held-out inputs' shares (``source_profile``). The lowest
  held-out share itself (``known_word_rate_min``) is no threshold: an abstract with more rare terms than any
  of 619 validation abstracts is common enough (3 of 320 test abstracts were below it).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from synopsis.document import Document
from synopsis.text import has_letter

#: Documents longer than this many times the held-out inputs' 99th percentile are far.
LENGTH_FACTOR = 2
#: Documents with this many headings or more are far (the model reads no section tree).
MAX_HEADINGS = 2
#: Pseudo-words of the held-out median share added to a document's known-word share (a short document's
#: share says little); 20 moves a 150-word abstract's share by at most a tenth of its distance to the median.
PRIOR_WORDS = 20


@dataclass(frozen=True)
class Distance:
    """One way a document is far from the model's inputs: ``what`` for people, ``advice`` what suits it."""

    measure: str  # "length", "sections" or "vocabulary"
    brief: str  # a few words ("5,667 words")
    what: str
    advice: str


@dataclass(frozen=True)
class DomainCheck:
    """The thresholds of one model's domain (see the module docstring), from its source profile."""

    corpus: str
    words_median: int
    max_words: int
    min_known_word_rate: float
    median_known_word_rate: float

    @classmethod
    def from_profile(cls, profile: Any) -> DomainCheck:
        floor = getattr(profile, "known_word_rate_floor", None)
        return cls(
            corpus=profile.corpus,
            words_median=profile.words_median,
            max_words=LENGTH_FACTOR * profile.words_p99,
            min_known_word_rate=profile.known_word_rate_min if floor is None else floor,
            median_known_word_rate=profile.known_word_rate_median,
        )

    def shrunk_rate(self, rate: float, words: Sequence[str]) -> float:
        """The known-word share pulled towards the held-out median by :data:`PRIOR_WORDS` pseudo-words: a
        document of three words (one unknown) is no evidence of another kind of text; one of 150 is."""
        n = sum(1 for w in words if has_letter(w))
        return (rate * n + PRIOR_WORDS * self.median_known_word_rate) / (n + PRIOR_WORDS)

    def distances(
        self, document: Document, words: Sequence[str], vocab: Any, reads: int | None = None
    ) -> list[Distance]:
        """How ``document`` (read by the model as ``words``, at most ``reads`` of them) is far from the
        inputs; empty: in domain."""
        from synopsis.data.pointer_generator import known_word_rate

        out = []
        if len(words) > self.max_words:
            out.append(
                Distance(
                    "length",
                    f"{document.num_words():,} words",  # the count the API's document.words reports
                    f"{len(words):,} words (typically {self.words_median})"
                    + (f", read the first {min(reads, len(words))}" if reads else ""),
                    "--by section (every section, in windows it reads whole), a long-input model "
                    "(--method seq2seq, an LED or HIBRIDS checkpoint) or --method salient",
                )
            )
        headings = sum(1 for s in document.sections if s.heading)
        if headings >= MAX_HEADINGS:
            out.append(
                Distance(
                    "sections",
                    f"{headings} sections",
                    f"{headings} sections, read as one plain text",
                    "--by section, or HIBRIDS, which reads the section tree (docs/hibrids.md)",
                )
            )
        rate = known_word_rate(words, vocab)
        if self.shrunk_rate(rate, words) < self.min_known_word_rate:
            out.append(
                Distance(
                    "vocabulary",
                    f"{rate:.0%} of its words known",
                    f"{rate:.0%} of its words in the vocabulary (99.9% of {self.corpus} inputs: "
                    f"{self.min_known_word_rate:.0%} or more): not English, or another kind of text",
                    "--method salient, or a model trained on such text (synopsis train)",
                )
            )
        return out


class ModelScope:
    """What one model reads of each document and how far that is from its domain, computed once per document:
    a request asks up to three times (its note, the default summarizer's routing, the warning before
    decoding). Weak keys: an entry goes with its document; a new sentence list
    (:meth:`~synopsis.document.Document.reindex`) is checked again."""

    def __init__(
        self,
        check: DomainCheck | None,
        vocab: Any,
        reads: int | None,
        words: Callable[[Document], list[str]],
    ) -> None:
        """``check``: the model's domain (``None``: not recorded, every document is in it); ``words``: the
        words the model reads of a document, at most ``reads`` of them."""
        self.check, self.vocab, self.reads, self.words = check, vocab, reads, words
        self._known: weakref.WeakKeyDictionary[Document, tuple[Any, list[str], list[Distance]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def words_and_distances(self, document: Document) -> tuple[list[str], list[Distance]]:
        """The words the model reads of ``document`` and how it is far from the domain (empty: in it)."""
        sentences = document.sentences
        with self._lock:
            known = self._known.get(document)
        if known is not None and known[0] is sentences:
            return known[1], known[2]
        words = self.words(document)
        far = [] if self.check is None else self.check.distances(document, words, self.vocab, self.reads)
        with self._lock:
            self._known[document] = (sentences, words, far)
        return words, far

    def note(self, far: list[Distance]) -> str | None:
        """One line saying how a document is far (``far``) and what suits it better; ``None``: in domain."""
        if not far or self.check is None:
            return None
        return (
            f"far from the inputs this model was trained for ({self.check.corpus}): "
            f"{'; '.join(d.what for d in far)}. Better suited: {'; '.join(d.advice for d in far)}."
        )
