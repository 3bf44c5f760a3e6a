"""Documents with a section tree.

A :class:`Document` is a title plus a tree of :class:`Section` nodes. The root (depth 0) holds text that
comes before any heading; top-level sections have depth 1, their subsections depth 2, and so on. Every
section holds paragraphs, and every paragraph is a list of sentences, so each :class:`Sentence` knows its
section node, its depth and its position in document order.

Tree relations follow HIBRIDS (Cao & Wang, ACL 2022, section 3): for sections ``x`` and ``y``

* ``PathLen(x, y)`` is the length of the shortest tree path between them, positive when ``y`` comes after
  ``x`` in document order (pre-order), negative when before, 0 for the same node;
* ``LvlDiff(x, y) = depth(y) - depth(x)``.

The reverse pair therefore gets ``(-p, -l)``. :meth:`Document.tree_relations` computes both for all pairs
of sections in O(S^2) (one vector operation per section), never per token pair.

Every paragraph is a :class:`Paragraph`: a block of the source with its kind (:data:`BLOCK_KINDS`: prose,
list item, quote, code, table, HTML, front matter, footnote, navigation: a list item made only of links)
and, where the reader parsed the text itself, each sentence's character span in the reader's input.
:attr:`Document.sentences` holds only the sentences a summary may choose: prose, and the list items and
quotes of a section without prose. The other blocks keep their place and spans (:attr:`Document.blocks`)
but are never summarized; code, tables, HTML and front matter are one "sentence" each, never split.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from synopsis.errors import InputError
from synopsis.text import SourceMap, paragraph_maps, split_sentences

#: The kinds of block a reader marks. Prose is always summarized; list items and quotes only in a section
#: without prose; the others keep their place and spans but are never summarized.
BLOCK_KINDS = ("prose", "list", "quote", "code", "table", "html", "front_matter", "footnote", "navigation")
SECONDARY_KINDS = frozenset({"list", "quote"})
UNSUMMARIZED_KINDS = frozenset(BLOCK_KINDS) - {"prose"} - SECONDARY_KINDS

Span = tuple[int, int]


class Paragraph(list[str]):
    """A block's sentences (a ``list`` of strings, so plain lists still work wherever a paragraph is
    expected), with the block's ``kind`` and, when known, each sentence's ``(start, end)`` character span
    in the reader's input (``spans[i]`` for ``self[i]``; ``None`` where the reader rebuilt the text)."""

    def __init__(
        self, sentences: Sequence[str] = (), kind: str = "prose", spans: Sequence[Span | None] | None = None
    ) -> None:
        super().__init__(sentences)
        if kind not in BLOCK_KINDS:
            raise InputError(f"unknown block kind '{kind}' (choose from {', '.join(BLOCK_KINDS)})")
        self.kind = kind
        self.spans: list[Span | None] | None = None if spans is None else [
            None if span is None else (int(span[0]), int(span[1])) for span in spans
        ]
        if self.spans is not None and len(self.spans) != len(self):
            raise InputError(f"a paragraph of {len(self)} sentences has {len(self.spans)} spans")

    @classmethod
    def from_map(cls, mapped: SourceMap, kind: str = "prose", spans: bool = True) -> Paragraph | None:
        """The sentences of rebuilt text (:class:`~synopsis.text.SourceMap`), with their spans in its source
        when ``spans``; ``None`` when it holds no sentence."""
        pieces = mapped.sentences()
        if not pieces:
            return None
        sentences, found = zip(*pieces, strict=True)
        return cls(sentences, kind, found if spans else None)


@dataclass
class ParseBudget:
    """The most a reader may build of one document, counted as it goes, so that a document over a limit
    stops its parser at the limit rather than after the whole document is parsed (a megabyte of empty
    headings took a minute and gigabytes before the limit applied). Readers count sections
    (:meth:`section`), blocks (:meth:`block`: each paragraph, list item, code block or table, at least one
    sentence each, before it is split) and the words of each paragraph (:meth:`paragraph`); each count also
    looks at ``cancelled``, so the work of a request that has ended stops there, and at ``seconds``: the
    CPU time (of the reading thread, since the budget was made) the reading may take, so a document that is
    slow to read stops its thread even when its request is still waiting (issue 58: a reader's worst case
    held a server's thread for minutes). ``flags`` name each limit in the error (the service's
    ``--max-sections``...). None: no limit. Readers find the budget in force with :func:`parse_budget`;
    outside one, nothing is counted."""

    sections: int | None = None
    blocks: int | None = None
    words: int | None = None
    flags: dict[str, str] = field(default_factory=dict)
    cancelled: Callable[[], bool] | None = None
    counted: dict[str, int] = field(default_factory=lambda: {"sections": 0, "blocks": 0, "words": 0})
    seconds: float | None = None
    started: float = field(default_factory=time.thread_time)
    ticks: int = 0

    def tick(self) -> None:
        """A step of a parser that makes no block for a while (markdown-it's inline rules, run once per
        position): every 1024th looks at ``cancelled`` and ``seconds``, so a long inline run stops too."""
        self.ticks += 1
        if not self.ticks & 1023:
            self._check_ended()

    def section(self) -> None:
        self._count("sections", 1, self.sections)

    def block(self) -> None:
        self._count("blocks", 1, self.blocks)

    def paragraph(self, paragraph: Sequence[str] | None) -> None:
        if paragraph is not None:
            self._count("words", sum(len(sentence.split()) for sentence in paragraph), self.words)

    def paragraphs(self, paragraphs: Iterable[Paragraph | None]) -> Iterator[Paragraph | None]:
        """``paragraphs``, each counted as a block and for its words as it is made."""
        for paragraph in paragraphs:
            if paragraph is not None:
                self.block()
                self.paragraph(paragraph)
            yield paragraph

    def _count(self, what: str, amount: int, limit: int | None) -> None:
        self.counted[what] += amount
        if limit is not None and self.counted[what] > limit:
            flag = self.flags.get(what)
            raise InputError(
                f"the document has more than {limit} {_NAMES[what]}: stopped at the limit"
                + (f" ({flag})" if flag else "")
            )
        self._check_ended()

    def _check_ended(self) -> None:
        if self.cancelled is not None and self.cancelled():
            raise InputError("reading the document stopped: its request ended")
        if self.seconds is not None and time.thread_time() - self.started > self.seconds:
            flag = self.flags.get("seconds")
            raise InputError(
                f"reading the document took more than {self.seconds:g} s of CPU: stopped"
                + (f" ({flag})" if flag else "")
            )


_NAMES = {"sections": "sections", "blocks": "sentences or blocks", "words": "words"}
_BUDGET: ContextVar[ParseBudget | None] = ContextVar("parse_budget", default=None)


def current_budget() -> ParseBudget:
    """The :class:`ParseBudget` readers count against here (none set: a new one without limits)."""
    return _BUDGET.get() or ParseBudget()


def budget_tick() -> None:
    """:meth:`ParseBudget.tick` of the budget in force, if any (cheap: called once per inline position)."""
    budget = _BUDGET.get()
    if budget is not None:
        budget.tick()


@contextmanager
def parse_budget(budget: ParseBudget) -> Iterator[ParseBudget]:
    """Readers within the block count against ``budget`` (in this thread or task)."""
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def _kind(paragraph: Sequence[str]) -> str:
    return getattr(paragraph, "kind", "prose")


def _span(paragraph: Sequence[str], i: int) -> Span | None:
    spans = getattr(paragraph, "spans", None)
    return None if spans is None else spans[i]


@dataclass(eq=False)
class Section:
    """A node of the section tree. ``paragraphs`` is a list of paragraphs (:class:`Paragraph`, or plain
    lists of sentences, read as prose without spans)."""

    heading: str | None = None
    paragraphs: list[list[str]] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)
    number: str | None = None  # the source's own numbering ("2.1"), when it has one
    heading_span: Span | None = None  # the heading line's characters in the reader's input, when known
    # Set by Document when the tree is indexed; not part of the serialised form.
    parent: Section | None = field(default=None, repr=False)
    index: int = field(default=-1, repr=False)  # pre-order position, root = 0
    depth: int = field(default=0, repr=False)
    subtree_end: int = field(default=-1, repr=False)  # one past the last pre-order index of the subtree

    def add(self, child: Section) -> Section:
        self.children.append(child)
        return child

    def walk(self) -> Iterator[Section]:
        """Pre-order traversal (document order), iterative so deep trees cannot overflow the stack."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def is_ancestor_of(self, other: Section) -> bool:
        return self.index < other.index < self.subtree_end

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; ``kinds`` and ``spans`` (parallel to ``paragraphs``) only when a paragraph has
        a kind other than prose or a known span, so documents without them read and write as before."""
        out: dict[str, Any] = {"heading": self.heading, "paragraphs": [list(p) for p in self.paragraphs]}
        if any(_kind(p) != "prose" for p in self.paragraphs):
            out["kinds"] = [_kind(p) for p in self.paragraphs]
        if any(getattr(p, "spans", None) is not None for p in self.paragraphs):
            spans = [getattr(p, "spans", None) for p in self.paragraphs]
            out["spans"] = [None if s is None else [None if x is None else list(x) for x in s] for s in spans]
        if self.number is not None:
            out["number"] = self.number
        if self.heading_span is not None:
            out["heading_span"] = list(self.heading_span)
        out["sections"] = [c.to_dict() for c in self.children]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "section", depth: int = 0) -> Section:
        """The section of :meth:`to_dict`'s JSON, counted against the :class:`ParseBudget` in force, its
        subsections at most :data:`MAX_SECTION_DEPTH` deep; every string UTF-8 text."""
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected an object, got {type(data).__name__}")
        if depth > MAX_SECTION_DEPTH:
            raise InputError(f"{where}: sections nested too deeply (at most {MAX_SECTION_DEPTH} levels)")
        budget = current_budget()
        if depth:
            budget.section()
        paragraphs = data.get("paragraphs", [])
        if not isinstance(paragraphs, list) or not all(
            isinstance(p, list) and all(isinstance(s, str) for s in p) for p in paragraphs
        ):
            raise InputError(f"{where}.paragraphs: expected a list of lists of sentence strings")
        for i, paragraph in enumerate(paragraphs):
            budget.block()
            budget.paragraph(paragraph)
            for j, sentence in enumerate(paragraph):
                check_text(sentence, f"{where}.paragraphs[{i}][{j}]")
        heading = data.get("heading")
        if heading is not None and not isinstance(heading, str):
            raise InputError(f"{where}.heading: expected a string or null")
        check_text(heading, f"{where}.heading")
        children = data.get("sections", [])
        if not isinstance(children, list):
            raise InputError(f"{where}.sections: expected a list")
        kinds = data.get("kinds", ["prose"] * len(paragraphs))
        if not isinstance(kinds, list) or len(kinds) != len(paragraphs):
            raise InputError(f"{where}.kinds: expected a list of one block kind per paragraph")
        spans = data.get("spans", [None] * len(paragraphs))
        if not isinstance(spans, list) or len(spans) != len(paragraphs) or not all(
            p is None or (isinstance(p, list) and all(s is None or _is_span(s) for s in p)) for p in spans
        ):
            raise InputError(f"{where}.spans: expected one list of [start, end] (or null) per paragraph")
        try:
            built = [Paragraph(p, kind, span) for p, kind, span in zip(paragraphs, kinds, spans, strict=True)]
        except InputError as err:
            raise InputError(f"{where}: {err}") from None
        heading_span = data.get("heading_span")
        if heading_span is not None and not _is_span(heading_span):
            raise InputError(f"{where}.heading_span: expected [start, end] or null")
        number = data.get("number")
        if number is not None and not isinstance(number, str):
            raise InputError(f"{where}.number: expected a string or null, got {type(number).__name__}")
        check_text(number, f"{where}.number")
        return cls(
            heading=heading,
            paragraphs=built,
            children=[cls.from_dict(c, f"{where}.sections[{i}]", depth + 1) for i, c in enumerate(children)],
            number=number,
            heading_span=None if heading_span is None else (heading_span[0], heading_span[1]),
        )


#: The deepest a Document JSON's sections may nest, checked as they are read (the runner checks every
#: document against the same 100 after reading: pipeline.reading.MAX_DEPTH).
MAX_SECTION_DEPTH = 100


def check_text(value: Any, where: str) -> None:
    """Refuse a string that holds a lone surrogate (JSON's ``"\\ud800"``): no UTF-8 text holds one, so
    neither could an output, a log line or a summary that repeats it; the error names the field."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            code = ord(value[err.start])
            problem = f"holds a lone surrogate (U+{code:04X}) at character {err.start}"
            raise InputError(f"{where}: {problem}") from None


def _is_span(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        and value[0] <= value[1]
    )


@dataclass(frozen=True)
class Block:
    """One paragraph of the source in document order, summarized or not, with its kind and the span of its
    characters in the reader's input (``None`` when unknown)."""

    section: Section
    paragraph: int
    kind: str
    text: str
    start: int | None
    end: int | None


@dataclass(frozen=True, eq=False)
class Sentence:
    text: str
    index: int  # position among all sentences of the document
    section: Section = field(repr=False)
    paragraph: int  # paragraph index within its section
    kind: str = "prose"
    #: characters ``[start, end)`` of the sentence in the reader's input text (``None`` when the reader
    #: rebuilt the text, e.g. from JSON or XML); whitespace and inline markup may lie inside
    start: int | None = None
    end: int | None = None

    @property
    def depth(self) -> int:
        return self.section.depth


class SectionTree:
    """A tree of :class:`Section` s indexed in pre-order (parent links, depths, indices, subtree ranges) and
    the HIBRIDS relations between its sections (see the module docstring); :class:`Document` adds the text."""

    def __init__(self, root: Section | None = None) -> None:
        self.root = root if root is not None else Section()
        self.reindex()

    def reindex(self) -> None:
        """Recompute parent links, depths and pre-order indices after edits."""
        self.root.parent = None
        self.root.depth = 0
        self._sections: list[Section] = []
        for node in self.root.walk():
            node.index = len(self._sections)
            self._sections.append(node)
            for child in node.children:
                child.parent = node
                child.depth = node.depth + 1
        for node in reversed(self._sections):
            node.subtree_end = max([c.subtree_end for c in node.children], default=node.index + 1)

    @property
    def sections(self) -> list[Section]:
        """All section nodes in document (pre-order) order, the root first."""
        return self._sections

    @property
    def max_depth(self) -> int:
        return max(node.depth for node in self._sections)

    def tree_relations(self) -> tuple[np.ndarray, np.ndarray]:
        """Signed PathLen and LvlDiff for every ordered pair of sections, each an (S, S) int64 array.

        ``path[x, y]`` and ``level[x, y]`` use the sections' pre-order indices. Distances are built row by
        row: a child's row is its parent's row plus one, minus two inside the child's own subtree (a
        contiguous pre-order range), so the whole table costs O(S^2).
        """
        n = len(self._sections)
        dist = np.zeros((n, n), dtype=np.int64)
        if n > 1:
            dist[0] = [node.depth for node in self._sections]
        for node in self._sections[1:]:
            row = dist[node.parent.index] + 1
            row[node.index : node.subtree_end] -= 2
            dist[node.index] = row
        order = np.arange(n)
        sign = np.sign(order[None, :] - order[:, None])
        depth = np.array([node.depth for node in self._sections], dtype=np.int64)
        return dist * sign, depth[None, :] - depth[:, None]

    def relation(self, x: Section | Sentence, y: Section | Sentence) -> tuple[int, int]:
        """(PathLen, LvlDiff) between two sections (or the sections of two sentences), by walking the tree."""
        a = x.section if isinstance(x, Sentence) else x
        b = y.section if isinstance(y, Sentence) else y
        ancestors = {}
        node, steps = a, 0
        while node is not None:
            ancestors[node.index] = steps
            node, steps = node.parent, steps + 1
        node, steps = b, 0
        while node.index not in ancestors:
            node, steps = node.parent, steps + 1
        length = ancestors[node.index] + steps
        sign = (b.index > a.index) - (b.index < a.index)
        return sign * length, b.depth - a.depth


class Document(SectionTree):
    """A titled tree of sections (:class:`SectionTree`) and the sentences a summary may choose; see the
    module docstring for the tree conventions."""

    def __init__(
        self,
        root: Section | None = None,
        title: str | None = None,
        id: str | None = None,  # noqa: A002 - "id" is the natural field name in every corpus
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
    ) -> None:
        self.title = title
        self.id = id
        self.metadata = dict(metadata or {})
        #: the text the reader read, which the sentences' spans index (``None``: unknown or rebuilt); a model
        #: reads the whitespace between sentences as written there (:meth:`written_gap`); not serialised
        self.source = source
        super().__init__(root)

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_paragraphs(cls, paragraphs: Sequence[str | Sequence[str]], **kwargs: Any) -> Document:
        """Paragraphs given as strings are sentence-split; given as lists they are taken as sentences."""
        split = [
            split_sentences(p) if isinstance(p, str) else [s for s in p if s.strip()] for p in paragraphs
        ]
        return cls(Section(paragraphs=[p for p in split if p]), **kwargs)

    @classmethod
    def from_sentences(cls, sentences: Sequence[str], **kwargs: Any) -> Document:
        return cls.from_paragraphs([list(sentences)], **kwargs)

    @classmethod
    def from_text(cls, text: str, *, spans: bool = False, **kwargs: Any) -> Document:
        """Plain text: paragraphs are separated by blank lines, then sentence-split. With ``spans`` each
        sentence keeps its character span in ``text`` (for a reader whose input is ``text`` itself)."""
        built = (Paragraph.from_map(mapped, spans=spans) for mapped in paragraph_maps(text))
        if spans:
            kwargs.setdefault("source", text)
        return cls(Section(paragraphs=[p for p in built if p is not None]), **kwargs)

    def reindex(self) -> None:
        """Recompute parent links, depths, pre-order indices and the sentence list after edits."""
        super().reindex()
        self._sentences: list[Sentence] = []
        self._paragraphs: list[list[str]] = []
        for node in self._sections:
            has_prose = any(_kind(p) == "prose" and p for p in node.paragraphs)
            for p, paragraph in enumerate(node.paragraphs):
                kind = _kind(paragraph)
                if kind in UNSUMMARIZED_KINDS or (kind in SECONDARY_KINDS and has_prose):
                    continue
                for i, text in enumerate(paragraph):
                    span = _span(paragraph, i) or (None, None)
                    self._sentences.append(Sentence(text, len(self._sentences), node, p, kind, *span))
                if paragraph:
                    self._paragraphs.append(list(paragraph))

    # ----------------------------------------------------------------- views
    @property
    def sentences(self) -> list[Sentence]:
        """The sentences a summary may choose, in document order: prose, and the list items and quotes of
        sections without prose (see the module docstring)."""
        return self._sentences

    @property
    def paragraphs(self) -> list[list[str]]:
        """The paragraphs of :attr:`sentences`."""
        return self._paragraphs

    @property
    def blocks(self) -> list[Block]:
        """Every paragraph in document order, summarized or not (code, tables, HTML included)."""
        out = []
        for node in self._sections:
            for p, paragraph in enumerate(node.paragraphs):
                spans = getattr(paragraph, "spans", None) or []
                known = [s for s in spans if s is not None]
                start, end = (known[0][0], known[-1][1]) if known else (None, None)
                out.append(Block(node, p, _kind(paragraph), " ".join(paragraph), start, end))
        return out

    @property
    def text(self) -> str:
        """The body text: sentences joined by spaces, paragraphs by blank lines (headings excluded)."""
        return "\n\n".join(" ".join(p) for p in self.paragraphs)

    def written(self, sentence: Sentence) -> str:
        """``sentence`` as its source writes it when the two differ only in whitespace (a line break inside
        it, where the reader joined lines with a space), else its text (markup lies inside the span)."""
        if self.source is None or sentence.start is None or sentence.end is None:
            return sentence.text
        span = self.source[sentence.start : sentence.end]
        return span if span != sentence.text and span.split() == sentence.text.split() else sentence.text

    def written_gap(self, before: Sentence, after: Sentence) -> str | None:
        """The source's characters between two sentences when they are whitespace only (two spaces, a line
        break, a blank line), as a tokenizer given the text reads them; ``None`` when not known or when
        anything else lies between them (a heading, markup, a code block)."""
        if self.source is None or before.end is None or after.start is None or before.end > after.start:
            return None
        gap = self.source[before.end : after.start]
        return gap if gap and gap.isspace() else None

    def num_words(self) -> int:
        return sum(len(s.text.split()) for s in self._sentences)

    def is_empty(self) -> bool:
        return not any(s.text.strip() for s in self._sentences)

    def __len__(self) -> int:
        return len(self._sentences)

    def __repr__(self) -> str:
        return (
            f"Document(id={self.id!r}, title={self.title!r}, sections={len(self._sections)}, "
            f"sentences={len(self._sentences)})"
        )

    # ----------------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "title": self.title}
        out.update(self.root.to_dict())
        del out["heading"]
        out.pop("number", None)
        if self.metadata:
            out["metadata"] = self.metadata
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "document") -> Document:
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected an object, got {type(data).__name__}")
        title = data.get("title")
        if title is not None and not isinstance(title, str):
            raise InputError(f"{where}.title: expected a string or null")
        check_text(title, f"{where}.title")
        check_text(data.get("id"), f"{where}.id")
        metadata = data.get("metadata", {})
        if not isinstance(metadata, dict):
            raise InputError(f"{where}.metadata: expected an object")
        check_text(json.dumps(metadata, ensure_ascii=False), f"{where}.metadata")
        try:
            root = Section.from_dict({**data, "heading": None}, where)
        except RecursionError:
            raise InputError(f"{where}.sections: nested too deeply") from None
        doc_id = data.get("id")
        return cls(root, title=title, id=None if doc_id is None else str(doc_id), metadata=metadata)
