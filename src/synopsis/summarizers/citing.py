"""Citing: which of a window's sentences each summary sentence comes from, and how much of it they support
(the ``sources`` and ``support`` of :class:`~synopsis.summarizers.schema.SummarySentence`): by the model's
attention where it is read (the pointer-generator), else by lexical alignment of content words."""

from __future__ import annotations

from collections.abc import Sequence

from synopsis.summarizers.schema import Source, SummarySentence
from synopsis.summarizers.windows import Window
from synopsis.text import content_words


def support(text: str, sources: Sequence[Source]) -> float | None:
    """The share of ``text``'s content words found among the content words of ``sources`` (``None`` when
    ``text`` has no content words)."""
    return _support(content_words(text), source_words(sources))


def _support(words: Sequence[str], vocab: Sequence[set[str]]) -> float | None:
    found = set().union(*vocab)
    return sum(w in found for w in words) / len(words) if words else None


def cited_sentence(
    text: str,
    sources: Sequence[Source],
    mass: Sequence[float],
    vocab: Sequence[set[str]] | None = None,
    words: list[str] | None = None,
) -> SummarySentence:
    """A summary sentence with the sources it cites and its :func:`support`: for each of its content words,
    the source holding that word with the most ``mass`` (attention, or lexical overlap); the source of most
    mass when no word is found; in input order, each once. ``vocab`` (each source's content words) and
    ``words`` (the sentence's), when the caller has them."""
    words = content_words(text) if words is None else words
    vocab = source_words(sources) if vocab is None else vocab
    chosen: set[int] = set()
    for word in words:
        holders = [i for i, v in enumerate(vocab) if word in v]
        if holders:
            chosen.add(max(holders, key=lambda i: (mass[i], -i)))
    if not chosen and sources:
        chosen.add(max(range(len(sources)), key=lambda i: (mass[i], -i)))
    cited = sorted(chosen)
    return SummarySentence(text, [sources[i] for i in cited], _support(words, [vocab[i] for i in cited]))


def source_words(sources: Sequence[Source]) -> list[set[str]]:
    """Each source's content words (what a summary sentence's words are looked up in)."""
    return [set(content_words(s.text)) for s in sources]


def aligned_sentences(
    sentences: Sequence[str], window: Window, vocab: list[set[str]] | None = None
) -> list[SummarySentence]:
    """Summary sentences cited by lexical alignment with the window's sentences (the fallback for models
    whose attention is not read): a source's mass is the number of the summary sentence's content words it
    holds. ``vocab``: :func:`source_words` of the window's sources, when the caller has it."""
    vocab = source_words(window.sources) if vocab is None else vocab  # once per window, not per sentence
    out = []
    for text in sentences:
        words = content_words(text)
        found = set(words)
        out.append(cited_sentence(text, window.sources, [len(found & v) for v in vocab], vocab, words))
    return out
