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
  of 619 validation abstracts is common enough (3 of 320 test abstracts were below it);
* style (a model with a ``style.json``: the bundled one): is it a paper abstract like the training inputs?
  (:class:`StyleModel`; the three measures above let news, meeting chunks and paper sections through).

:func:`bundled_domain_check` is the bundled model's check read from its JSON and text files alone, so a
document can be routed without torch or the weights. How it was fitted and what it lets through:
docs/models/default.md.
"""

from __future__ import annotations

import functools
import math
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synopsis.document import Document
from synopsis.errors import CheckpointError
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

    measure: str  # "length", "sections", "vocabulary" or "style"
    brief: str  # a few words ("5,667 words")
    what: str
    advice: str


# ------------------------------------------------------------------------------------------ style
#: A model directory's style classifier (the bundled model's: ``scripts/build_style_check.py``).
STYLE_FILE = "style.json"
#: PTB bracket tokens as :func:`~synopsis.text.word_tokenize` splits them ("-lrb-" -> "-", "lrb", "-").
_PTB_BRACKETS = {"lrb": "(", "rrb": ")", "lsb": "[", "rsb": "]", "lcb": "{", "rcb": "}"}
#: Words beyond these are not read for style (a longer document is far by length already).
STYLE_MAX_WORDS = 1000


def style_tokens(words: Sequence[str]) -> list[str]:
    """The tokens the style classifier reads: the model's words, a word with a digit as ``<num>``, PTB
    escapes (`` -LRB-) as the characters they stand for, so that tokenized and raw text read alike. Not
    the model's vocabulary: it was built from the training abstracts, so its known-word share would tell
    training abstracts from all others, unseen abstracts included."""
    out: list[str] = []
    n = min(len(words), STYLE_MAX_WORDS)
    i = 0
    while i < n:
        w = words[i]
        if w == "-" and i + 2 < n and words[i + 2] == "-" and words[i + 1] in _PTB_BRACKETS:
            out.append(_PTB_BRACKETS[words[i + 1]])
            i += 3
            continue
        if w == "`":
            w = "'"
        elif not w.isalpha() and any(c.isdigit() for c in w):
            w = "<num>"
        out.append(w)
        i += 1
    return out


def style_features(tokens: Sequence[str], length_bins: Sequence[int]) -> dict[str, float]:
    """Unigram and bigram frequencies (count / tokens) and a one-hot length bin ``<len:k>`` (k: how many
    of ``length_bins`` the token count reaches): the inputs of :class:`StyleModel`, at fitting time too."""
    counts = Counter(tokens)
    counts.update(f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False))
    n = max(1, len(tokens))
    features = {name: count / n for name, count in counts.items()}
    features[f"<len:{sum(len(tokens) >= b for b in length_bins)}>"] = 1.0
    return features


@dataclass(frozen=True)
class StyleModel:
    """Is this a paper abstract like the model's training inputs? A logistic regression over
    :func:`style_features`, fitted (``scripts/build_style_check.py``) on the training abstracts against
    other text (news, meetings, paper sections, READMEs, MASC); ``threshold`` on its probability was set on
    out-of-fold training scores. Reads a JSON file, so it needs neither torch nor the model's weights."""

    weights: dict[str, float]
    bias: float
    threshold: float
    length_bins: tuple[int, ...]
    corpus: str = "scitldr"
    info: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def load(cls, directory: str | Path) -> StyleModel | None:
        """The style model saved in ``directory`` (:data:`STYLE_FILE`); ``None``: the model has none."""
        from synopsis.io import read_json

        path = Path(directory) / STYLE_FILE
        if not path.is_file():
            return None
        data = read_json(path, "a style classifier", CheckpointError, dict)
        try:
            return cls(
                weights={str(k): float(v) for k, v in data["weights"].items()},
                bias=float(data["bias"]),
                threshold=float(data["threshold"]),
                length_bins=tuple(int(b) for b in data["length_bins"]),
                corpus=str(data.get("corpus", "scitldr")),
                info=dict(data.get("info", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise CheckpointError(f"{path}: not a style classifier ({type(err).__name__}: {err})") from None

    def score(self, words: Sequence[str]) -> float:
        """The probability that words (as the model reads a document) are an abstract of its corpus."""
        weights = self.weights
        z = self.bias + sum(
            weights.get(name, 0.0) * value
            for name, value in style_features(style_tokens(words), self.length_bins).items()
        )
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


@dataclass(frozen=True)
class DomainCheck:
    """The thresholds of one model's domain (see the module docstring), from its source profile."""

    corpus: str
    words_median: int
    max_words: int
    min_known_word_rate: float
    median_known_word_rate: float
    #: the bundled model's "is it a paper abstract?" test (None: a model without one, e.g. one you trained)
    style: StyleModel | None = None

    @classmethod
    def from_profile(cls, profile: Any, style: StyleModel | None = None) -> DomainCheck:
        floor = getattr(profile, "known_word_rate_floor", None)
        return cls(
            corpus=profile.corpus,
            words_median=profile.words_median,
            max_words=LENGTH_FACTOR * profile.words_p99,
            min_known_word_rate=profile.known_word_rate_min if floor is None else floor,
            median_known_word_rate=profile.known_word_rate_median,
            style=style,
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
        if self.style is not None and not out:  # a far document needs no further reason
            score = self.style.score(words)
            if score < self.style.threshold:
                out.append(
                    Distance(
                        "style",
                        f"not a paper abstract (score {score:.2f}, abstracts >= {self.style.threshold:.2f})",
                        f"not like its training abstracts (style score {score:.2f}; "
                        f"{self.style.info.get('train_in', 'nearly all')} of {self.corpus} abstracts score "
                        f"{self.style.threshold:.2f} or more)",
                        "--method salient (the document's own sentences), or a model trained on such text "
                        "(--model facebook/bart-large-cnn for news, synopsis train)",
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

    def distances(self, document: Document) -> list[Distance]:
        """How ``document`` is far from the model's domain; empty: in it (computed once per document)."""
        return self.words_and_distances(document)[1]

    def note(self, far: list[Distance]) -> str | None:
        """One line saying how a document is far (``far``) and what suits it better; ``None``: in domain."""
        if not far or self.check is None:
            return None
        return (
            f"far from the inputs this model was trained for ({self.check.corpus}): "
            f"{'; '.join(d.what for d in far)}. Better suited: {'; '.join(d.advice for d in far)}."
        )


# ---------------------------------------------------------------------- the bundled model's, without it
def bundled_model_dir() -> Path:
    """Where the bundled pointer-generator's files are (``synopsis/resources/pointer_generator``)."""
    from importlib import resources

    return Path(str(resources.files("synopsis") / "resources" / "pointer_generator"))


@functools.cache
def bundled_domain_check() -> ModelScope:
    """The bundled model's domain check (length, sections, vocabulary, style), read from its JSON and text
    files only: no torch, no weights, so that a caller can route a document before deciding to load the
    model. ``distances(document)`` is empty for a document in its domain. Cached: one per process."""
    from synopsis.data.pointer_generator import SourceProfile, document_words
    from synopsis.io import read_json
    from synopsis.vocab import Vocab

    directory = bundled_model_dir()
    config = read_json(directory / "config.json", "a pointer-generator config", CheckpointError, dict)
    try:
        profile = SourceProfile(**config["source_profile"])
    except (KeyError, TypeError) as err:
        raise CheckpointError(f"{directory / 'config.json'}: no usable source_profile ({err})") from None
    reads = None
    generation = directory / "generation_config.json"
    if generation.is_file():
        reads = read_json(generation, "a generation config", CheckpointError, dict).get("max_source_tokens")
    vocab = Vocab.load(directory / "vocab.txt")
    check = DomainCheck.from_profile(profile, StyleModel.load(directory))
    return ModelScope(check, vocab, reads, document_words)
