"""Windows: the consecutive sentences of one section that one model call reads, and the Documents a model
is given of them.

:func:`plan_windows` cuts a section's *own* sentences (its paragraphs, not its subsections') at sentence
boundaries into :class:`Window` s that fit the summarizer's input (:meth:`Summarizer.input_capacity`, counted
with :meth:`Summarizer.input_length`); paragraphs stay together where they fit. Nothing is dropped: a
sentence longer than a whole window is split into window-sized pieces. A document without headings (plain
text) is grouped into windows by paragraph, each reported as a section with a null heading. A summarizer that
reads the section tree (HIBRIDS) reads every section below the root as its subtree instead: its windows hold
its own and its descendants' sentences, each given to the model in its own section of a Document whose tree
is the section's subtree (:func:`window_document`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from synopsis.document import Document, Paragraph, Section
from synopsis.summarizers.schema import Source

#: Words per window of a document without headings for methods that read any length (extractive ones): its
#: paragraphs are grouped into parts of about this size, each summarized as a section.
PLAIN_TEXT_WINDOW = 400


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
        def new_window(node: Section = node, path: tuple[int, ...] = path, subtree: bool = subtree) -> Window:
            return Window(
                document=position,
                section=node,
                path=path,
                sources=[],
                texts=[],
                pseudo=pseudo,
                subtree=subtree,
                source=document.source,
            )

        made, pieces = _pack(paragraphs, sizes, owners, room, new_window)
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
