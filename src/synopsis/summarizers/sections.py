"""Summaries by section: every section of a long document summarized within the model's input, and a document
summary composed from them within a word budget.

:func:`summarize_by_section` (also :meth:`Summarizer.summarize_by_section`) walks each document's section
tree: each section's own sentences are cut into windows that fit the summarizer's input
(:mod:`synopsis.summarizers.windows`; one warning per run for sentences split into pieces), and the windows
of all documents of a call share batches (:meth:`Summarizer.summarize_windows`).

Every :class:`~synopsis.summarizers.schema.SummarySentence` carries its sources, sentences of its own window
(so of its own section's subtree), and its *support*: the share of its content words
(:func:`synopsis.text.content_words`) found in the sentences it cites. The document summary (:func:`compose`)
selects section-summary sentences within ``max_words``, dropping whole sentences, never cutting one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from synopsis.config import DecodingOptions
from synopsis.document import Document
from synopsis.errors import InputError, SynopsisError
from synopsis.summarizers.batches import window_batches
from synopsis.summarizers.schema import DocumentSummary, SectionSummary, SummarySentence
from synopsis.summarizers.windows import Window, plan_windows, section_paths
from synopsis.text import content_words

logger = logging.getLogger(__name__)

#: How the document summary is composed from the section summaries (see :func:`compose`).
COMPOSERS = ("coverage", "round-robin")
DEFAULT_MAX_WORDS = 150
#: Shorter summary sentences are fragments, left out of the document summary while longer ones exist.
MIN_SENTENCE_WORDS = 5
#: A document without a title is named by at most this many of its top-level headings (:func:`summary_title`).
TITLE_HEADINGS = 5


class Cancelled(SynopsisError):
    """The caller cancelled a summarize call between windows (see :func:`summarize_by_section`)."""


# ---------------------------------------------------------------------- composing the document summary
def compose(
    sections: Sequence[SummarySentence], document: Document, max_words: int, method: str = "coverage"
) -> list[SummarySentence]:
    """A document summary of at most ``max_words`` words from ``sections`` (the section summaries'
    sentences in document order), kept in that order; a sentence that does not fit is dropped, never cut.

    * ``coverage``: greedy weighted coverage of the document's content words, each weighted by its
      frequency in the document; a sentence's gain is the weight of the words it adds, per word it costs
      (the budgeted maximum coverage greedy of Khuller et al., 1999, as in Lin & Bilmes, 2011).
    * ``round-robin``: the first sentence of every section summary in order, then the second, ...

    Fragments of fewer than :data:`MIN_SENTENCE_WORDS` words ("Professor.") are left out while longer
    sentences exist."""
    if method not in COMPOSERS:
        raise InputError(f"unknown composition '{method}'; choose one of: {', '.join(COMPOSERS)}")
    candidates = [s for s in sections if MIN_SENTENCE_WORDS <= s.words <= max_words]
    if not candidates:  # only fragments: better than nothing
        candidates = [s for s in sections if 0 < s.words <= max_words]
    chosen: list[int] = []
    budget = max_words
    if method == "round-robin":
        rank: dict[int, int] = {}
        order, seen = [], {}
        for i, s in enumerate(candidates):
            key = s.sources[0].path if s.sources else ()
            seen[key] = seen.get(key, -1) + 1
            rank[i] = seen[key]
            order.append(i)
        for i in sorted(order, key=lambda i: (rank[i], i)):
            if candidates[i].words <= budget:
                chosen.append(i)
                budget -= candidates[i].words
    else:
        weight: dict[str, float] = {}
        for sentence in document.sentences:
            for word in content_words(sentence.text):
                weight[word] = weight.get(word, 0.0) + 1.0
        bags = [set(content_words(s.text)) for s in candidates]
        covered: set[str] = set()
        while True:
            best, best_gain = -1, 0.0
            for i, s in enumerate(candidates):
                if i in chosen or s.words > budget:
                    continue
                gain = sum(weight.get(w, 0.0) for w in bags[i] - covered) / s.words
                if gain > best_gain:
                    best, best_gain = i, gain
            if best < 0:
                break
            chosen.append(best)
            covered |= bags[best]
            budget -= candidates[best].words
    return [candidates[i] for i in sorted(chosen)]


# ---------------------------------------------------------------------- the walk
class SectionReader(Protocol):
    """What the walk needs of a summarizer (:class:`~synopsis.summarizers.base.Summarizer` keeps it): its
    declared capabilities and the calls that size, summarize and annotate windows."""

    needs_references: bool
    reads_section_tree: bool

    def input_capacity(self) -> int | None: ...

    def input_capacity_for(self, document: Document) -> int | None: ...

    def input_length(self, text: str) -> int: ...

    def check_batch(
        self, documents: Sequence[Document | str], instructions: Sequence[str | None] | None
    ) -> list[str | None]: ...

    def summarize_windows(
        self,
        windows: Sequence[Window],
        instructions: Sequence[str | None] | None = None,
        decoding: DecodingOptions | None = None,
    ) -> list[list[SummarySentence]]: ...

    def check_decoding(self, decoding: DecodingOptions | None) -> DecodingOptions: ...

    def notes(self, documents: Sequence[Document]) -> list[str | None]: ...


def longer_than_input(summarizer: SectionReader, document: Document) -> int | None:
    """The document's length in the summarizer's input units when it is longer than one model call reads
    (what ``--by auto`` goes by), else ``None``."""
    capacity = summarizer.input_capacity_for(document)
    if capacity is None:
        return None
    length = summarizer.input_length(" ".join(s.text for s in document.sentences))
    return length if length > capacity else None


def summarize_by_section(
    summarizer: SectionReader,
    documents: Sequence[Document],
    instructions: Sequence[str | None] | None = None,
    *,
    max_words: int = DEFAULT_MAX_WORDS,
    composer: str = "coverage",
    batch_size: int = 16,
    offsets: Sequence[Sequence[tuple[int, int] | None] | None] | None = None,
    on_section: Callable[[int, SectionSummary], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    summarize_windows: Callable[[list[Window], list[str | None]], list[list[SummarySentence]]] | None = None,
    cancelled: Callable[[], bool] | None = None,
    decoding: DecodingOptions | None = None,
) -> list[DocumentSummary]:
    """Summaries by section of ``documents`` (see the module docstring), one :class:`DocumentSummary` each.

    ``offsets[d]`` (one ``(start, end)`` per sentence of document ``d``, or ``None``) fills the sources'
    character offsets. ``on_section(d, section)`` is called as each section's summary is done (in document
    order within a document), so a caller can show it at once; ``progress(done, total)`` after every batch
    of windows. Windows of all documents share batches of ``batch_size``; ``summarize_windows`` (default:
    the summarizer's) summarizes one batch, e.g. through a queue shared with other callers (the service).
    ``cancelled()`` is asked before every batch: when it says so, :class:`Cancelled` ends the call and the
    windows left are never computed (the service's request timed out or its client left). ``decoding`` is
    every window's decoding options (a ``summarize_windows`` given here decodes with its own)."""
    if summarizer.needs_references:
        raise InputError(
            f"{type(summarizer).__name__} needs reference summaries and cannot summarize by section; "
            "use --by document"
        )
    if max_words < 1:
        raise InputError(f"max_words must be >= 1, got {max_words}")
    if composer not in COMPOSERS:
        raise InputError(f"unknown composition '{composer}'; choose one of: {', '.join(COMPOSERS)}")
    instructions = summarizer.check_batch(documents, instructions)
    if summarize_windows is None:
        checked = summarizer.check_decoding(decoding)

        def summarize_windows(batch: list[Window], asked: list[str | None]) -> list[list[SummarySentence]]:
            return summarizer.summarize_windows(batch, asked, checked)

    windows = _all_windows(summarizer, documents, offsets)
    trees = [_skeleton(document) for document in documents]
    # made once: rebuilt per batch it made many sections cost their square (40k sections: minutes)
    index_of = [{id(node): i for i, node in nodes.items()} for _, nodes, _ in trees]
    emitted = [0] * len(documents)  # sections of each document already passed to on_section
    orders = [[node for node in tree.walk()] for tree, _, _ in trees]
    left: list[dict[int, int]] = [{} for _ in documents]  # section index -> windows left
    for window in windows:
        if not window.pseudo:
            counts = left[window.document]
            counts[window.section.index] = counts.get(window.section.index, 0) + 1

    for start, stop in window_batches(windows, batch_size, streaming=on_section is not None):
        if cancelled is not None and cancelled():
            raise Cancelled(f"cancelled with {len(windows) - start} of {len(windows)} windows left")
        batch = windows[start:stop]
        results = summarize_windows(batch, [instructions[w.document] for w in batch])
        for window, sentences in zip(batch, results, strict=True):
            _, nodes, _ = trees[window.document]
            if window.pseudo:
                root = trees[window.document][0]
                words = len(" ".join(window.texts).split())
                chosen = _new_sentences([], sentences)
                node = SectionSummary(None, window.path, chosen, [], words, 1 + len(root.sections))
                root.sections.append(node)
                orders[window.document].append(node)
            else:
                node = nodes[window.section.index]
                node.summary.extend(_new_sentences(node.summary, sentences))
                left[window.document][window.section.index] -= 1
        if progress is not None:
            progress(stop, len(windows))
        if on_section is not None:
            for d in range(len(documents)):
                emitted[d] = _emit(d, orders[d], emitted[d], trees[d][0], index_of[d], left[d], on_section)

    notes = summarizer.notes(documents)
    return [
        _document_summary(d, document, tree, notes[d], max_words, composer)
        for d, (document, tree) in enumerate(zip(documents, trees, strict=True))
    ]


def _new_sentences(summary: list[SummarySentence], sentences: list[SummarySentence]) -> list[SummarySentence]:
    """``sentences`` without those a section's summary already says: a section that repeats a sentence (tqdm's
    options each end "Note that this is slow ...") holds twins, and a method may take both when nothing
    else is left; a summary never prints the same sentence twice."""
    seen = {" ".join(s.text.split()) for s in summary}
    out = []
    for sentence in sentences:
        key = " ".join(sentence.text.split())
        if key not in seen:
            seen.add(key)
            out.append(sentence)
    return out


def _all_windows(
    summarizer: SectionReader,
    documents: Sequence[Document],
    offsets: Sequence[Sequence[tuple[int, int] | None] | None] | None,
) -> list[Window]:
    """The windows of every document of a call, in order (:func:`plan_windows`); an empty document is an
    error, and the sentences split into pieces are said in one warning."""
    capacity = summarizer.input_capacity()
    windows: list[Window] = []
    split = 0
    for d, document in enumerate(documents):
        made, pieces = plan_windows(
            document,
            capacity,
            summarizer.input_length,
            position=d,
            offsets=None if offsets is None else offsets[d],
            subtrees=summarizer.reads_section_tree,
        )
        if not made:
            raise InputError(f"{document.id or f'document {d + 1}'}: document is empty; nothing to summarize")
        windows.extend(made)
        split += pieces
    if split:
        logger.warning(
            "%d sentence(s) longer than the model's input (%d units) were split into pieces to be read whole",
            split,
            capacity,
        )
    return windows


def _document_summary(
    d: int,
    document: Document,
    tree: tuple[SectionSummary, dict[int, SectionSummary], int],
    note: str | None,
    max_words: int,
    composer: str,
) -> DocumentSummary:
    """Document ``d``'s summary from its filled tree: the preface, its sections and the composed summary."""
    root, _, skipped = tree
    if skipped:
        logger.info("%s: skipped %d empty section(s)", document.id or f"document {d + 1}", skipped)
    if note:  # once, on stderr (as by document); the result carries it too
        logger.warning("%s: %s", document.id or f"document {d + 1}", note)
    _hide_empty(root)
    preface = SectionSummary(root.heading, (), root.summary, [], root.words, 0) if root.summary else None
    result = DocumentSummary(document.id, [], root.sections, skipped, preface, note, summary_title(document))
    flat = [s for section in result.walk() for s in section.summary]
    result.summary = compose(flat, document, max_words, composer)
    return result


def _hide_empty(root: SectionSummary) -> None:
    """Mark ``skipped`` every section below ``root`` with nothing to show in its subtree (no text, or none
    its summary took: a code sample, a changelog's bare list items), so that no output heads nothing."""
    for node in reversed(root.walk()):
        if node is not root and not node.summary and all(child.skipped for child in node.sections):
            node.skipped = True


def summary_title(document: Document) -> str | None:
    """What a document is called, to head its document summary: its title; else, when it opens with a
    heading (no text before the first one: a meeting's topics), its top-level headings over text (at most
    :data:`TITLE_HEADINGS`, joined by " · "), the document's own words for what it holds; else ``None``
    (its defining sentence, where it has one, leads the summary instead)."""
    if document.title:
        return document.title
    if any(s.section is document.root for s in document.sentences):
        return None
    texts = {s.section.index for s in document.sentences}
    headings = [
        c.heading.strip()
        for c in document.root.children
        if c.heading and c.heading.strip() and any(c.index <= i < c.subtree_end for i in texts)
    ]
    return " · ".join(headings[:TITLE_HEADINGS]) or None


def _skeleton(document: Document) -> tuple[SectionSummary, dict[int, SectionSummary], int]:
    """Empty SectionSummaries for every section (root first), by section index, those without text in their
    subtree marked ``skipped``, and the number of them."""
    has_text = [False] * len(document.sections)
    words_of = [0] * len(document.sections)
    for sentence in document.sentences:
        words_of[sentence.section.index] += len(sentence.text.split())
        if sentence.text.strip():
            has_text[sentence.section.index] = True
    for node in reversed(document.sections):  # a subtree has text when any of its nodes has
        if node.parent is not None and has_text[node.index]:
            has_text[node.parent.index] = True
    paths = section_paths(document)
    nodes: dict[int, SectionSummary] = {}
    skipped = 0
    for node in document.sections:
        empty = node.index > 0 and not has_text[node.index]
        skipped += empty
        words = words_of[node.index]
        heading = document.title if node.index == 0 else node.heading  # the root's text: the preface
        summary = SectionSummary(heading, paths[node.index], words=words, index=node.index, skipped=empty)
        nodes[node.index] = summary
        if node.parent is not None:
            nodes[node.parent.index].sections.append(summary)
    return nodes[0], nodes, skipped


def _emit(
    d: int,
    order: list[SectionSummary],
    emitted: int,
    root: SectionSummary,
    index_of: dict[int, int],
    left: dict[int, int],
    on_section: Callable[[int, SectionSummary], None],
) -> int:
    """Pass the sections of document ``d`` that are done, in document order, to ``on_section``; from
    ``emitted`` on, so that each section is looked at about once (``index_of``: node id -> section index)."""
    while emitted < len(order):
        node = order[emitted]
        i = index_of.get(id(node))
        if i is not None and left.get(i, 0) > 0:
            break
        if (node is not root and not node.skipped) or node.summary:
            on_section(d, node)
        emitted += 1
    return emitted
