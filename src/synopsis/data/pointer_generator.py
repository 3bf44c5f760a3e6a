"""The pointer-generator's inputs (See et al., ACL 2017): the lowercased word tokens of articles and
summaries, their ids over the extended vocabulary (:func:`encode_batch`, shared by the trainer and the
summarizer), and the profile of a training corpus's held-out inputs (:class:`SourceProfile`) that a
summarizer compares a document against.

torch is imported only where a batch is built (:func:`encode_batch`): the profile and :func:`document_words`
serve the bundled model's domain check, which must not pay for torch (the default summarizer routes most
documents to an extractive method that never loads the model)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from synopsis.text import has_letter, word_tokenize

if TYPE_CHECKING:
    import torch

    from synopsis.document import Document
    from synopsis.vocab import Vocab


@dataclass
class SourceProfile:
    """What held-out inputs of the training corpus look like, so that a summarizer can say when a document
    is far from them. Written by the trainer from the validation split (which the vocabulary never saw)."""

    corpus: str
    documents: int
    words_median: int
    words_p99: int
    known_word_rate_min: float  # share of a document's alphabetic words in the vocabulary, lowest document
    known_word_rate_median: float
    #: the share below which 0.1% of held-out inputs fall, by a normal fitted to logit(share): the
    #: vocabulary threshold of :class:`~synopsis.summarizers.domain.DomainCheck` (None: not recorded)
    known_word_rate_floor: float | None = None


def known_word_rate(words: Sequence[str], vocab: Vocab) -> float:
    """Share of the alphabetic words (numbers and punctuation aside) in the vocabulary; 1.0 if none."""
    return _rate(_alphabetic_counts(words, vocab))


def _rate(counts: tuple[int, int]) -> float:
    """Known-word share of one document's (alphabetic words, known ones); 1.0 with no alphabetic word."""
    alphabetic, known = counts
    return known / alphabetic if alphabetic else 1.0


def source_profile(corpus: str, sources: Sequence[Sequence[str]], vocab: Vocab) -> SourceProfile:
    """The :class:`SourceProfile` of these tokenised documents (see :func:`document_words`)."""
    if not sources:
        raise ValueError("source_profile needs at least one document")
    lengths = sorted(len(words) for words in sources)
    counts = [_alphabetic_counts(words, vocab) for words in sources]  # one pass over each document
    rates = sorted(_rate(pair) for pair in counts)
    return SourceProfile(
        corpus=corpus,
        documents=len(sources),
        words_median=lengths[len(lengths) // 2],
        words_p99=lengths[min(len(lengths) - 1, round(0.99 * (len(lengths) - 1)))],
        known_word_rate_min=round(rates[0], 4),
        known_word_rate_median=round(rates[len(rates) // 2], 4),
        known_word_rate_floor=round(known_word_rate_floor(counts), 4),
    )


#: z of the 0.1% lower tail of a normal: :func:`known_word_rate_floor`'s quantile.
FLOOR_Z = 3.09


def _alphabetic_counts(words: Sequence[str], vocab: Vocab) -> tuple[int, int]:
    """(alphabetic words, those in the vocabulary) of one document."""
    alphabetic = [w for w in words if has_letter(w)]
    return len(alphabetic), sum(w in vocab for w in alphabetic)


def known_word_rate_floor(counts: Sequence[tuple[int, int]], z: float = FLOOR_Z) -> float:
    """The known-word share below which a fraction Phi(-z) of documents like these fall: a normal fitted to
    the empirical logits ``log((known + 0.5) / (unknown + 0.5))`` (smoothed, so a document of only known
    words has a finite logit), mean minus ``z`` standard deviations, mapped back to a share. One held-out
    document with more rare terms than the rest moves it little, unlike the minimum."""
    logits = [math.log((known + 0.5) / (n - known + 0.5)) for n, known in counts]
    if len(logits) < 2:
        return min((known / n if n else 1.0) for n, known in counts)
    floor = statistics.fmean(logits) - z * statistics.stdev(logits)
    return 1.0 / (1.0 + math.exp(-floor))


# ---------------------------------------------------------------------- preprocessing (training, inference)
def document_words(document: Document | str) -> list[str]:
    """The lowercased word tokens the model reads for an article (See et al. lowercase everything).

    The one tokenisation of both training and summarization: a :class:`~synopsis.document.Document` is read
    as its sentences joined by spaces, a string as it is."""
    text = document if isinstance(document, str) else " ".join(s.text for s in document.sentences)
    return word_tokenize(text, lower=True)


def summary_words(reference: str) -> list[str]:
    """The lowercased word tokens of a reference summary (the training target), tokenised as articles are."""
    return word_tokenize(reference, lower=True)


@dataclass
class Batch:
    """Model inputs for a batch of articles (and, for training, their summaries)."""

    input_ids: torch.Tensor  # (B, L) OOV -> UNK
    extended_ids: torch.Tensor  # (B, L)
    decoder_input_ids: torch.Tensor | None  # (B, T) [BOS] + target, or None without targets
    labels: torch.Tensor | None  # (B, T) extended ids + [EOS], pad at padding, or None without targets
    num_oovs: int
    oovs: list[list[str]]


def encode_batch(
    vocab: Vocab,
    sources: Sequence[Sequence[str]],
    targets: Sequence[Sequence[str]] | None = None,
    max_source: int | None = None,
    max_target: int | None = None,
    device: torch.device | str | None = None,
) -> Batch:
    """Ids for a batch of word-tokenised articles (and summaries): the extended vocabulary of each article,
    padding at the end. Articles are cut to ``max_source`` words; ``[BOS] + target`` and ``target + [EOS]``
    are cut to ``max_target``, so a truncated target gets no EOS (as in the authors' code)."""
    import torch

    encoded = [vocab.encode_source(list(s)[:max_source]) for s in sources]

    def pad(rows: list[list[int]]) -> torch.Tensor:
        width = max(1, max(len(r) for r in rows))
        return torch.tensor(
            [r + [vocab.pad_id] * (width - len(r)) for r in rows], dtype=torch.long, device=device
        )

    decoder_input_ids = labels = None
    if targets is not None:
        decoder_inputs, label_rows = [], []
        for target, src in zip(targets, encoded, strict=True):
            ids = vocab.encode_target(target, src.oovs)
            decoder_inputs.append(([vocab.bos_id] + ids)[:max_target])
            label_rows.append((ids + [vocab.eos_id])[:max_target])
        decoder_input_ids, labels = pad(decoder_inputs), pad(label_rows)
    return Batch(
        input_ids=pad([s.ids for s in encoded]),
        extended_ids=pad([s.extended_ids for s in encoded]),
        decoder_input_ids=decoder_input_ids,
        labels=labels,
        num_oovs=max(len(s.oovs) for s in encoded),
        oovs=[s.oovs for s in encoded],
    )
