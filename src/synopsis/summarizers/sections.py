"""Summaries by section: every section of a long document summarized within the model's input, every summary
sentence citing the input sentences it came from, and a document summary composed within a word budget.

:func:`summarize_by_section` (also :meth:`Summarizer.summarize_by_section`) walks each document's section
tree. A section's *own* sentences (its paragraphs, not its subsections') are cut at sentence boundaries into
:class:`Window` s that fit the summarizer's input (:meth:`Summarizer.input_capacity`, counted with
:meth:`Summarizer.input_length`); paragraphs stay together where they fit. Nothing is dropped: a sentence
longer than a whole window is split into window-sized pieces (one warning per run). A document without
headings (plain text) is grouped into windows by paragraph, each reported as a section with a null heading.
The windows of all documents of a call share batches (:meth:`Summarizer.summarize_windows`).
A summarizer that reads the section tree (``reads_section_tree``: HIBRIDS) reads every section below the
root as its subtree instead: its windows hold its own and its descendants' sentences, each given to the model
in its own section of a Document whose tree is the section's subtree (:func:`window_document`).

Every :class:`SummarySentence` carries its :class:`Source` s, sentences of its own window (so of its own
section's subtree), and its *support*: the share of its content words (:func:`synopsis.text.content_words`)
found in the sentences it cites. The document summary (:func:`compose`) selects section-summary sentences
within ``max_words``, dropping whole sentences, never cutting one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from synopsis.document import Document, Paragraph, Section
from synopsis.errors import InputError, SynopsisError
from synopsis.summarizers.batches import window_batches
from synopsis.text import content_words

logger = logging.getLogger(__name__)

#: How the document summary is composed from the section summaries (see :func:`compose`).
COMPOSERS = ("coverage", "round-robin")
DEFAULT_MAX_WORDS = 150
#: Shorter summary sentences are fragments, left out of the document summary while longer ones exist.
MIN_SENTENCE_WORDS = 5
#: Words per window of a document without headings for methods that read any length (extractive ones): its
#: paragraphs are grouped into parts of about this size, each summarized as a section.
PLAIN_TEXT_WINDOW = 400
#: A document without a title is named by at most this many of its top-level headings (:func:`summary_title`).
TITLE_HEADINGS = 5


class Cancelled(SynopsisError):
    """The caller cancelled a summarize call between windows (see :func:`summarize_by_section`)."""


# ---------------------------------------------------------------------- the result tree
@dataclass(frozen=True)
class Source:
    """An input sentence: ``path`` indexes the section tree from the root (``sections[i].sections[j]``),
    ``sentence`` counts that section's own sentences (paragraphs in order; ``None`` for a list item that a
    chosen lead-in brings, which is not one of them); ``start``/``end`` are character offsets into the
    input file when it is one text or Markdown file, else ``None``."""

    path: tuple[int, ...]
    sentence: int | None
    text: str
    start: int | None = None
    end: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": list(self.path),
            "sentence": self.sentence,
            "text": self.text,
            "start": self.start,
            "end": self.end,
        }


@dataclass
class SummarySentence:
    """One summary sentence, the input sentences it cites, and the share of its content words they hold
    (``None`` for a sentence without content words)."""

    text: str
    sources: list[Source]
    support: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "sources": [s.to_dict() for s in self.sources],
            "support": None if self.support is None else round(self.support, 4),
        }

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class SectionSummary:
    """A section's summary (of its own text; empty for a section whose text is all in its subsections) and
    its subsections'. ``words`` counts the section's own input words; ``index`` is the section's position in
    a pre-order walk of the document's tree (``Document.sections``; the root is 0); ``skipped``: nothing to
    show in its subtree (no text, so nothing to summarize; or, once the run is done, no sentence its
    summaries took); it stays in the tree, so that ``path`` indexes ``sections``."""

    heading: str | None
    path: tuple[int, ...]
    summary: list[SummarySentence] = field(default_factory=list)
    sections: list[SectionSummary] = field(default_factory=list)
    words: int = 0
    index: int | None = None
    skipped: bool = False

    def walk(self) -> list[SectionSummary]:
        """This section and its descendants, in document order."""
        out, stack = [], [self]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.sections))
        return out

    def _fields(self) -> dict[str, Any]:
        return {"heading": self.heading, "path": list(self.path), "index": self.index,
                "skipped": self.skipped, "summary": [s.to_dict() for s in self.summary]}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        # Iterative, so a 50-level tree cannot overflow the stack (nor json's encoder, which gets dicts).
        out = {**self._fields(), "sections": []}
        stack = [(self, out)]
        while stack:
            node, data = stack.pop()
            for child in node.sections:
                child_data = {**child._fields(), "sections": []}
                data["sections"].append(child_data)
                stack.append((child, child_data))
        return out


@dataclass
class DocumentSummary:
    """The result of :func:`summarize_by_section` for one document (the JSON schema of ``synopsis
    summarize --output-format json``, one JSONL line of a corpus run, and the service's ``structured``).

    ``sections[i].sections[j]`` is the section at path ``(i, j)``: every section below the root is in the
    tree at its own position, those without text as ``skipped`` with an empty summary, so a source's ``path``
    always finds its section. The root's own text (before the first heading) is ``preface`` (path ``()``,
    the document's title as heading; ``None`` when there is none). By document, ``sections`` is empty."""

    id: str | None
    summary: list[SummarySentence]
    sections: list[SectionSummary]
    skipped_sections: int = 0  # sections without any text in their subtree
    preface: SectionSummary | None = None
    #: one line on how this document was summarized when the reader should know (e.g. extractive because the
    #: default model is not made for it, or how the model is far from its inputs); None: nothing to say
    note: str | None = None
    #: what the document is called (:func:`summary_title`), shown as the document summary's heading, not as
    #: one of its sentences (so not in ``prediction`` nor counted in ``max_words``); None: it has no name
    title: str | None = None
    #: the method that wrote it (:meth:`~synopsis.summarizers.base.Summarizer.methods`: the default names
    #: the one it chose for this document)
    method: str | None = None

    @property
    def prediction(self) -> str:
        """The document summary as ``evaluate`` reads it: sentences joined by newlines."""
        return "\n".join(s.text for s in self.summary)

    def walk(self) -> list[SectionSummary]:
        """The preface, then every section in document order (not the skipped ones)."""
        nodes = (node for top in self.sections for node in top.walk() if not node.skipped)
        return [*([self.preface] if self.preface else []), *nodes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "note": self.note,
            "method": self.method,
            "prediction": self.prediction,
            "summary": [s.to_dict() for s in self.summary],
            "preface": None if self.preface is None else self.preface._fields(),
            "sections": [s.to_dict() for s in self.sections],
        }


# ---------------------------------------------------------------------- windows
@dataclass
class Window:
    """Consecutive own sentences of one section, fed to the model together. ``texts[i]`` is what the model
    reads of ``sources[i]`` (the whole sentence, or a piece of a sentence longer than a window)."""

    document: int  # position in the call's batch
    section: Section
    path: tuple[int, ...]
    sources: list[Source]
    texts: list[str]
    pseudo: bool = False  # a paragraph group of a document without headings: reported as its own section
    #: ``nodes[i]``: the section holding ``sources[i]`` (``section`` or, for a subtree window, a descendant)
    nodes: list[Section] = field(default_factory=list)
    subtree: bool = False  # read as its section's subtree (:func:`window_document`), not as a flat text
    #: the text its document was read from, which its sources' ``start``/``end`` index (``None``: unknown)
    source: str | None = None


def flat_document(window: Window) -> Document:
    """The window as one paragraph of its sentences, each with its span where the source is known, so that a
    model reads the whitespace between them as written (:meth:`Document.written_gap`)."""
    spans = [
        (s.start, s.end) if s.start is not None and s.end is not None and text == s.text else None
        for s, text in zip(window.sources, window.texts, strict=True)
    ]
    if window.source is None or not any(spans):
        return Document.from_sentences(window.texts)
    return Document(Section(paragraphs=[Paragraph(window.texts, spans=spans)]), source=window.source)


def window_document(window: Window) -> Document:
    """The window as a Document whose section tree is its section's subtree: the window's section is the
    root (with its heading), each sentence stays in its own section, and the sections on the way down to
    them keep their headings, so a model that reads the tree (HIBRIDS' PathLen and LvlDiff, Cao & Wang,
    2022, section 3) sees the subtree's relations. Sections without a sentence of the window are left out."""
    nodes = window.nodes or [window.section] * len(window.texts)
    wanted = {window.section.index: window.section}
    for node in nodes:
        while node is not None and node.index not in wanted:
            wanted[node.index] = node
            node = node.parent
    copies: dict[int, Section] = {}
    for index in sorted(wanted):  # pre-order: a parent is copied before its children
        node = wanted[index]
        copy = Section(heading=node.heading, number=node.number)
        if index != window.section.index:
            copies[node.parent.index].add(copy)
        copies[index] = copy
    previous = None
    for node, text in zip(nodes, window.texts, strict=True):
        paragraphs = copies[node.index].paragraphs
        if node is not previous or not paragraphs:
            paragraphs.append([])
        paragraphs[-1].append(text)
        previous = node
    return Document(copies[window.section.index])


def section_paths(document: Document) -> dict[int, tuple[int, ...]]:
    """``{section.index: path}``: each node's child positions from the root."""
    paths: dict[int, tuple[int, ...]] = {0: ()}
    for node in document.sections:
        for i, child in enumerate(node.children):
            paths[child.index] = (*paths[node.index], i)
    return paths


def section_sources(
    document: Document, offsets: Sequence[tuple[int, int] | None] | None = None
) -> dict[int, list[list[Source]]]:
    """``{section.index: paragraphs of Sources}`` for every section's own sentences
    (:attr:`Document.sentences`: the ones a summary may choose, so no code, table or HTML). ``offsets``
    (one per document sentence, in order, e.g. from :func:`synopsis.data.readers.sentence_offsets`) fill
    ``start``/``end``."""
    paths = section_paths(document)
    out: dict[int, list[list[Source]]] = {node.index: [] for node in document.sections}
    counts = [0] * len(document.sections)
    previous = None
    for sentence in document.sentences:
        node = sentence.section
        span = offsets[sentence.index] if offsets is not None else None
        source = Source(paths[node.index], counts[node.index], sentence.text, *(span or (None, None)))
        counts[node.index] += 1
        if (node.index, sentence.paragraph) != previous:
            out[node.index].append([])
            previous = (node.index, sentence.paragraph)
        out[node.index][-1].append(source)
    return out


def plan_windows(
    document: Document,
    capacity: int | None,
    length: Callable[[str], int],
    position: int = 0,
    offsets: Sequence[tuple[int, int] | None] | None = None,
    subtrees: bool = False,
) -> tuple[list[Window], int]:
    """The windows of one document (in document order) and the number of sentences split into pieces.

    A section's own text of ``n`` units (``length``) goes into ``ceil(n / capacity)`` windows of about equal
    size; a paragraph starts a new window when it would not fit in the current one but fits in one of its own.
    ``capacity=None`` (extractive methods) gives one window per section, or windows of
    :data:`PLAIN_TEXT_WINDOW` words for a document without headings.

    ``subtrees`` (for a model that reads the section tree): every section below the root is read as its
    subtree, its own sentences and its descendants' in document order, so its windows may span several
    sections (:func:`window_document`); a sentence is then read once per section above it. A heading's
    length counts with its section's first sentence, as the model reads it there."""
    windows: list[Window] = []
    split = 0
    pseudo = not document.root.children
    if pseudo and capacity is None:
        capacity, length = PLAIN_TEXT_WINDOW, lambda text: len(text.split())
    own = section_sources(document, offsets)
    sections = document.sections
    paths = section_paths(document)
    for node in sections:
        members = [node]
        if subtrees and node.index and not pseudo:
            members = sections[node.index : node.subtree_end]
        paragraphs, owners = [], []  # the (sub)tree's paragraphs of Sources, and each one's section
        for member in members:
            paragraphs += own[member.index]
            owners += [member] * len(own[member.index])
        if not paragraphs:
            continue
        path = paths[node.index]
        subtree = len(members) > 1
        if capacity is None:
            flat = [s for p in paragraphs for s in p]
            nodes = [o for o, p in zip(owners, paragraphs, strict=True) for _ in p]
            texts = [s.text for s in flat]
            windows.append(Window(position, node, path, flat, texts, pseudo, nodes, subtree, document.source))
            continue
        sizes = [[max(1, length(s.text)) for s in p] for p in paragraphs]
        room = capacity
        if subtree:  # headings are read before a section's first sentence (its ancestors' too, at worst)
            room = max(1, capacity - length(node.heading or "") - 1)
            for i, owner in enumerate(owners):
                if i == 0 or owners[i - 1] is not owner:
                    up = owner
                    while up is not None and up is not node:
                        sizes[i][0] += length(up.heading or "") + 1
                        up = up.parent
        made, pieces = _pack(
            paragraphs, sizes, owners, room,
            lambda: Window(position, node, path, [], [], pseudo, [], subtree, document.source),  # noqa: B023
        )  # fmt: skip
        windows += made
        split += pieces
    return windows, split


def _pack(
    paragraphs: list[list[Source]],
    sizes: list[list[int]],
    owners: list[Section],
    room: int,
    new_window: Callable[[], Window],
) -> tuple[list[Window], int]:
    """One section's windows (:func:`plan_windows`): paragraphs of ``sizes`` in windows of about equal size
    within ``room``, a paragraph starting a new window when it would not fit in the current one but fits in
    one of its own; a sentence longer than ``room`` in room-sized pieces (counted)."""
    windows: list[Window] = []
    split = 0
    total = sum(map(sum, sizes))
    limit = min(room, math.ceil(total / math.ceil(total / room)) + room // 10)
    current: Window | None = None
    used = 0

    def close() -> None:
        nonlocal current, used
        if current is not None and current.sources:
            windows.append(current)
        current, used = None, 0

    for paragraph, paragraph_sizes, owner in zip(paragraphs, sizes, owners, strict=True):
        whole = sum(paragraph_sizes)
        if used and used + whole > limit and whole <= limit:
            close()
        for source, size in zip(paragraph, paragraph_sizes, strict=True):
            if size > room:  # one sentence longer than a window: window-sized pieces of it
                close()
                split += 1
                words = source.text.split()
                step = max(1, len(words) * room // size)
                for start in range(0, len(words), step):
                    piece = new_window()
                    piece.sources.append(source)
                    piece.texts.append(" ".join(words[start : start + step]))
                    piece.nodes.append(owner)
                    windows.append(piece)
                continue
            if used + size > limit and used:
                close()
            if current is None:
                current = new_window()
            current.sources.append(source)
            current.texts.append(source.text)
            current.nodes.append(owner)
            used += size
    close()
    return windows, split


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
        self, windows: Sequence[Window], instructions: Sequence[str | None] | None = None
    ) -> list[list[SummarySentence]]: ...

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
) -> list[DocumentSummary]:
    """Summaries by section of ``documents`` (see the module docstring), one :class:`DocumentSummary` each.

    ``offsets[d]`` (one ``(start, end)`` per sentence of document ``d``, or ``None``) fills the sources'
    character offsets. ``on_section(d, section)`` is called as each section's summary is done (in document
    order within a document), so a caller can show it at once; ``progress(done, total)`` after every batch
    of windows. Windows of all documents share batches of ``batch_size``; ``summarize_windows`` (default:
    the summarizer's) summarizes one batch, e.g. through a queue shared with other callers (the service).
    ``cancelled()`` is asked before every batch: when it says so, :class:`Cancelled` ends the call and the
    windows left are never computed (the service's request timed out or its client left)."""
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
    summarize_windows = summarize_windows or summarizer.summarize_windows
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
            document, capacity, summarizer.input_length, d, None if offsets is None else offsets[d],
            summarizer.reads_section_tree,
        )  # fmt: skip
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
