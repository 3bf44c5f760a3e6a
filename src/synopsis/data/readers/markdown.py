"""Markdown into a :class:`~synopsis.document.Document`: sections from headings, blocks with their kinds,
and every sentence's character span in the input, carried from markdown-it-py's tokens.

Block tokens carry their line ranges (``map``); inline tokens do not carry offsets, so the text of each
inline run is rebuilt child token by child token while a cursor walks the source lines of its block: a text
token is its source's own characters, an entity or a backslash escape maps to its markup, and a link's
destination and title, an image's source, inline HTML and footnote references are stepped over, so no text
is ever searched for inside them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.html_blocks import block_names
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from synopsis.document import Document, Paragraph, Section, budget_tick, current_budget
from synopsis.text import SourceMap

#: HTML elements that may stand inline (the block-level names come from markdown-it's CommonMark list). A
#: tag of another name, such as the GPL's ``<year>`` or ``<name of author>``, is a placeholder meant as
#: text, and is kept in the sentence.
_INLINE_ELEMENTS = frozenset(
    """a abbr acronym audio b bdi bdo big br button canvas cite code data del dfn em embed font i iframe img
    input ins kbd label map mark meter noscript object output picture progress q ruby rp rt s samp script
    select slot small span strike strong sub sup svg template textarea time tt u var video wbr math
    path""".split()
)
_HTML_ELEMENTS = _INLINE_ELEMENTS | frozenset(block_names)
_TAG_NAME = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)")
_CONTAINERS = {
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "quote",
    "footnote_open": "footnote",
}
_CLOSERS = {"bullet_list_close", "ordered_list_close", "blockquote_close", "footnote_close"}


#: Block rules whose every match is a section, or a block (a paragraph holds at least one sentence):
#: counted against the :class:`~synopsis.document.ParseBudget` in force as markdown-it finds them.
_COUNTED_RULES = {
    "heading": "section",
    "lheading": "section",
    "paragraph": "block",
    "code": "block",
    "fence": "block",
    "html_block": "block",
    "table": "block",
}


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark").enable("table").use(front_matter_plugin).use(footnote_plugin)
    # Escapes and entities stay tokens of their own (text_special), so each maps to its own markup.
    parser.disable("text_join")
    for rule in parser.block.ruler.__rules__:
        if rule.name in _COUNTED_RULES:
            parser.block.ruler.at(rule.name, _counted(rule.fn, _COUNTED_RULES[rule.name]), {"alt": rule.alt})
    # Inline parsing makes no block for a long run ("[" * 100000 took 4 s): the budget's clock runs there too.
    parser.inline.ruler.before("text", "budget", _ticked)
    return parser


def _ticked(state: Any, silent: bool) -> bool:
    budget_tick()
    return False  # never matches: the next rule reads the position


def _counted(rule: Any, what: str) -> Any:
    """``rule`` counting each block it makes against the budget in force, which stops the block parser at
    a limit: before, a document of a million empty headings was tokenized whole (minutes, gigabytes)
    before the service's section limit applied."""

    def counted(state: Any, start: int, end: int, silent: bool) -> bool:
        found = rule(state, start, end, silent)
        if found and not silent:
            budget = current_budget()
            budget.section() if what == "section" else budget.block()
        return found

    return counted


def is_html_markup(html: str) -> bool:
    """Whether inline or block HTML is markup (a known element, a comment, ``<!DOCTYPE>``, a processing
    instruction) rather than angle-bracketed text such as ``<year>``."""
    match = _TAG_NAME.match(html.lstrip())
    return match is None or match.group(1).lower() in _HTML_ELEMENTS


class _Lines:
    """Character offsets of the source's lines (markdown-it counts ``\\r\\n``, ``\\r`` and ``\\n`` alike)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def start(self, line: int) -> int:
        return self.starts[line] if line < len(self.starts) else len(self.text)

    def span(self, line_range: list[int]) -> tuple[int, int]:
        """The lines' characters without the final line end and trailing whitespace."""
        start, end = self.start(line_range[0]), self.start(line_range[1])
        return start, start + len(self.text[start:end].rstrip())


class _InlineMapper:
    """Rebuilds an inline run's text into a :class:`SourceMap` over ``source[start:end]``."""

    def __init__(self, source: str, start: int, end: int) -> None:
        self.source, self.cursor, self.end = source, start, end
        self.mapped = SourceMap()
        self.links = 0  # how many links the cursor is inside
        self.only_links = True  # no word outside a link so far (a table of contents' entry, a link list)
        #: where markup opened before the next text ("[", "**", "`", "<"), so that a sentence that starts
        #: with a link, emphasis or a code span starts its span at the markup's first character
        self.opening: int | None = None

    def open(self, markup: str) -> None:
        """Markup opening before text: the next text's first character starts at it (at the outermost
        markup, for ``**[text](...)**``)."""
        found = self.find(markup)
        if found >= 0 and self.opening is None:
            self.opening = found

    def _opened(self, count: int) -> None:
        """The first of the ``count`` characters just added starts at the markup that opened before it."""
        if self.opening is not None:
            self.mapped.start_at(len(self.mapped) - count, self.opening)
            self.opening = None

    def find(self, needle: str) -> int:
        return self.source.find(needle, self.cursor, self.end) if needle else -1

    def add_text(self, text: str) -> None:
        if not self.links and any(char.isalnum() for char in text):
            self.only_links = False
        found = self.find(text)
        if found >= 0:
            self.mapped.add(text, found)
            self.cursor = found + len(text)
            if text:
                self._opened(len(text))
            return
        # Text the parser normalised (an autolink's decoded URL, a code span's line ends): character by
        # character, whitespace mapped to where the cursor stands.
        for char in text:
            at = -1 if char.isspace() else self.find(char)
            if at < 0:
                self.mapped.add(char, self.cursor, self.cursor)
            else:
                self.mapped.add(char, at)
                self.cursor = at + 1

    def skip(self, markup: str) -> None:
        found = self.find(markup)
        if found >= 0:
            self.cursor = found + len(markup)

    def skip_link_end(self) -> None:
        """Step over ``](destination "title")``, ``][label]`` or ``]`` after a link's or an image's text."""
        source, at = self.source, self.find("]")
        if at < 0:
            return
        at += 1
        if at < self.end and source[at] == "(":
            depth, quote, i = 0, None, at
            while i < self.end:
                char = source[i]
                if char == "\\":
                    i += 2
                    continue
                if quote:
                    quote = None if char == quote else quote
                elif char in "\"'" and depth == 1:
                    quote = char
                elif char == "(":
                    depth += 1
                elif char == ")":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            at = i + 1
        elif at < self.end and source[at] == "[":
            close = source.find("]", at, self.end)
            at = close + 1 if close >= 0 else at
        self.cursor = min(at, self.end)

    def feed(self, children: Iterable[Token]) -> None:
        for child in children:
            kind = child.type
            if kind == "text":
                self.add_text(child.content)
            elif kind == "text_special":  # an entity or a backslash escape: its characters map to its markup
                found = self.find(child.markup)
                if found < 0:
                    self.add_text(child.content)
                else:
                    self.mapped.add(child.content, found, found + len(child.markup))
                    self.cursor = found + len(child.markup)
                    self._opened(len(child.content))
            elif kind in ("strong_open", "em_open"):
                self.open(child.markup)
            elif kind == "code_inline":
                self.open(child.markup)
                self.skip(child.markup)
                self.add_text(child.content)
                self.skip(child.markup)
            elif kind in ("softbreak", "hardbreak"):
                self.mapped.add(" ", self.cursor, self.cursor)
            elif kind == "html_inline":
                if is_html_markup(child.content):
                    self.skip(child.content)
                else:
                    self.add_text(child.content)
            elif kind == "image":
                self.open("![")
                self.skip("![")
                self.feed(child.children or [])
                self.skip_link_end()
            elif kind == "link_open":
                self.links += 1
                self.open("<" if child.markup == "autolink" else "[")
                if child.markup == "autolink":
                    self.skip("<")
            elif kind == "link_close":
                self.links -= 1
                if child.markup == "autolink":
                    self.skip(">")
                else:
                    self.skip_link_end()
            elif kind == "footnote_ref":
                self.skip(f"[^{child.meta['label']}]")


def _inline_map(token: Token, lines: _Lines) -> SourceMap:
    """The inline run's text (whitespace collapsed, markup dropped) with its source spans."""
    return _mapper(token, lines).mapped.collapse_whitespace()


def _mapper(token: Token, lines: _Lines) -> _InlineMapper:
    start, end = (lines.start(token.map[0]), lines.start(token.map[1])) if token.map else (0, len(lines.text))
    mapper = _InlineMapper(lines.text, start, end)
    mapper.feed(token.children or [])
    return mapper


def _inline_paragraph(token: Token, lines: _Lines, container: str) -> Paragraph | None:
    """An inline run as a paragraph of its container's kind; a list item made only of links (a table of
    contents' entry) is navigation, never summarized."""
    mapper = _mapper(token, lines)
    only_links = container == "list" and mapper.only_links and mapper.mapped.text.strip()
    return Paragraph.from_map(mapper.mapped.collapse_whitespace(), "navigation" if only_links else container)


def _whole(text: str, span: tuple[int, int], kind: str) -> Paragraph | None:
    """A block kept whole (code, a table, HTML, front matter): one "sentence", never split."""
    return Paragraph([text], kind, [span]) if text.strip() else None


def parse_markdown_text(text: str, document_id: str | None = None) -> Document:
    """Markdown: ATX and setext headings build the section tree; each block becomes a :class:`Paragraph`
    of its kind with every sentence's span in ``text``.

    A heading nests under the nearest preceding heading of a smaller level, so a jump from ``#`` to ``###``
    nests directly under the ``#`` node. When the document opens with a level-1 heading (before any text,
    front matter aside) and it is the only level-1 heading, it is the document's title and ``##`` headings
    are the top-level sections. Paragraphs are prose, or list items, quotes and footnotes by their innermost
    container; they are sentence-split. Code blocks, tables, HTML blocks and front matter are kept whole.
    """
    budget = current_budget()
    tokens = _parser().parse(text)  # stops at a limit of the budget (_counted)
    lines = _Lines(text)
    root = Section()
    first = next((i for i, t in enumerate(tokens) if t.type != "front_matter"), len(tokens))
    h1_count = sum(1 for t in tokens if t.type == "heading_open" and t.tag == "h1")
    title = None
    if first < len(tokens) and tokens[first].type == "heading_open" and tokens[first].tag == "h1":
        if h1_count == 1:
            title = _inline_map(tokens[first + 1], lines).text or None
            tokens = tokens[:first] + tokens[first + 3 :]  # heading_open, inline, heading_close
    stack: list[tuple[int, Section]] = [(1 if title is not None else 0, root)]
    containers: list[str] = []
    footnotes: list[Paragraph] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        current = stack[-1][1]
        paragraph = None
        if token.type == "heading_open":
            level = int(token.tag[1])
            while stack[-1][0] >= level:
                stack.pop()
            heading = _inline_map(tokens[i + 1], lines).text or None
            section = stack[-1][1].add(Section(heading=heading, heading_span=lines.span(token.map)))
            stack.append((level, section))
            i += 3
            continue
        if token.type in _CONTAINERS:
            containers.append(_CONTAINERS[token.type])
        elif token.type in _CLOSERS:
            containers.pop()
        elif token.type == "table_open":
            close = next(j for j in range(i, len(tokens)) if tokens[j].type == "table_close")
            span = lines.span(token.map)
            paragraph = _whole(text[span[0] : span[1]], span, "table")
            i = close
        elif token.type == "inline":
            paragraph = _inline_paragraph(token, lines, containers[-1] if containers else "prose")
        elif token.type in ("fence", "code_block"):
            paragraph = _whole(token.content.strip("\n"), lines.span(token.map), "code")
        elif token.type == "front_matter":
            paragraph = _whole(token.content, lines.span(token.map), "front_matter")
        elif token.type == "html_block":
            if is_html_markup(token.content):
                paragraph = _whole(token.content.strip(), lines.span(token.map), "html")
            else:  # angle-bracketed text at a line start (``<year>  <name of author>``) is text
                inline = _parser().parseInline(token.content)[0]
                inline.map = token.map
                paragraph = _inline_paragraph(inline, lines, containers[-1] if containers else "prose")
        budget.paragraph(paragraph)  # its words, against the budget in force
        if paragraph is not None and paragraph.kind == "footnote":
            footnotes.append(paragraph)
        elif paragraph is not None:
            current.paragraphs.append(paragraph)
        i += 1
    # The parser lists footnotes in the order they are referenced; they close the document in source order.
    stack[-1][1].paragraphs.extend(sorted(footnotes, key=lambda p: p.spans[0][0]))
    return Document(root, title=title, id=document_id)
