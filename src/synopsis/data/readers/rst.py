"""reStructuredText into a :class:`~synopsis.document.Document`, parsed by docutils: sections from its
section tree, blocks with their kinds, and every sentence's character span in the input.

docutils gives each block its line (``node.line``) and each inline element its markup (``rawsource``:
````tqdm````, ```wiki <url>`__``, ``|badge|``) but no offsets, so, as the Markdown reader does, the text of
a paragraph is rebuilt element by element while a cursor walks its source lines: a text node is found at
the cursor, an inline element's markup is found whole and only its text is kept, so a link's URL or a
substitution's name never lands in a sentence and never moves the cursor past later text.

The tree is read as parsed, before docutils' transforms: substitutions stay where they stand (an image
badge is dropped, a ``replace::`` substitution is its text mapped to ``|name|``), and the document title is
found here, as for Markdown. Directives docutils knows are read by what they make (``code``: a code block,
``note``/``warning``: quoted text, ``raw``: HTML, ``image``: nothing); unknown ones (Sphinx's) and
``include`` (file insertion is off: a document never reads other files) are skipped.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from synopsis.data.readers.markdown import _InlineMapper, _Lines
from synopsis.document import Document, Paragraph, Section, current_budget
from synopsis.errors import InputError

#: Blocks whose paragraphs take the container's kind ("list", "quote", "footnote").
_LISTS = (
    nodes.bullet_list, nodes.enumerated_list, nodes.definition_list, nodes.field_list, nodes.option_list,
)  # fmt: skip
_QUOTES = (nodes.block_quote, nodes.Admonition, nodes.line_block)
_FOOTNOTES = (nodes.footnote, nodes.citation)
#: Labels and markup that are not the block's text: a definition's term, a field's name, an option, a
#: footnote's label, a generic admonition's or a topic's title (a section's title is its heading).
_LABELS = (
    nodes.term, nodes.classifier, nodes.field_name, nodes.option_group, nodes.label, nodes.title,
    nodes.rubric, nodes.caption, nodes.legend, nodes.attribution,
)  # fmt: skip
_SKIPPED = (
    nodes.comment, nodes.substitution_definition, nodes.target, nodes.system_message, nodes.pending,
    nodes.transition, nodes.image, nodes.figure, nodes.problematic, nodes.decoration, nodes.docinfo,
)  # fmt: skip
_CODE = (nodes.literal_block, nodes.doctest_block, nodes.math_block)
#: Inline elements dropped with their markup: references to notes, inline targets without text, raw markup.
_DROPPED_INLINE = (nodes.footnote_reference, nodes.citation_reference, nodes.raw, nodes.image)
#: An unknown role's markup (Sphinx's ``:func:`name```, ```text <target>`:ref:``): the text it shows.
_ROLE = re.compile(r"^(?::[\w.:+-]+:)?`(?P<text>.*?)(?:\s*<[^<>]*>)?`(?::[\w.:+-]+:)?$", re.DOTALL)
#: A text node's pieces: an escaped character (docutils marks the backslash as "\x00"), spaces, words.
_PIECES = re.compile(r"\x00[\s\S]?|\s+|[^\s\x00]+")


@lru_cache(maxsize=1)
def _settings() -> Any:
    settings = get_default_settings(Parser)
    settings.report_level = 5  # nothing is printed; problems stay system_message nodes, which are skipped
    settings.halt_level = 5
    settings.warning_stream = False
    settings.file_insertion_enabled = False  # ``include`` and ``raw :file:``/``:url:`` read nothing
    settings.syntax_highlight = "none"
    return settings


def parse_rst_text(text: str, document_id: str | None = None) -> Document:
    """reStructuredText: sections from its section tree (a lone top-level section that opens the document,
    before any text, is its title); paragraphs are prose, or list items, quotes (block quotes, admonitions
    such as ``.. note::``) and footnotes by their innermost container, each sentence with its span in
    ``text``. Literal blocks (``::``, ``.. code::``), doctest and math blocks are code, tables are tables,
    ``.. raw:: html`` is HTML, all kept whole; a list item made only of links is navigation."""
    tree = new_document("<rst>", _settings())
    try:
        Parser().parse(text, tree)
    except RecursionError:
        raise
    except Exception as err:  # docutils' own failures on malformed input: one line, no traceback
        problem = f"{type(err).__name__}: {err}".splitlines()[0]
        raise InputError(f"cannot read the document as reStructuredText ({problem})") from None
    reader = _Reader(text, tree)
    root = Section()
    body = [c for c in tree.children if not isinstance(c, _SKIPPED)]
    sections = [c for c in body if isinstance(c, nodes.section)]
    title = None
    if len(sections) == 1 and not any(reader.has_text(c) for c in body[: body.index(sections[0])]):
        # One top-level section and no text before it: its title is the document's, its body the root's.
        reader.blocks(body[: body.index(sections[0])], root, "prose")
        title = reader.heading(sections[0])[0]
        reader.blocks(sections[0].children, root, "prose")
    else:
        reader.blocks(tree.children, root, "prose")
    return Document(root, title=title, id=document_id)


class _Reader:
    """Walks the doctree in document order, building sections and paragraphs with their spans."""

    def __init__(self, text: str, tree: nodes.document) -> None:
        self.text = text
        self.lines = _Lines(text)
        self.cursor = 0  # where the last block's text ended: a block without a line is looked for after it
        self.budget = current_budget()
        #: each substitution's text, by name as references normalise it: a ``replace::``'s text, an image's
        #: alternative text or, as docutils' HTML writer does, its name (a badge: |GitHub-Status|)
        self.replacements = {
            nodes.fully_normalize_name(name): _shown(name, definition)
            for name, definition in tree.substitution_defs.items()
        }
        self.own_text = False  # whether the paragraph being read has words of its own, not substitutions

    # ------------------------------------------------------------------ blocks
    def blocks(self, children: list[nodes.Node], section: Section, kind: str) -> None:
        for child in children:
            if isinstance(child, nodes.section):
                heading, span = self.heading(child)
                self.budget.section()
                self.blocks(child.children, section.add(Section(heading=heading, heading_span=span)), "prose")
            elif isinstance(child, _SKIPPED + _LABELS):
                continue
            elif isinstance(child, (nodes.paragraph, nodes.line)):
                self.add(section, self.paragraph(child, kind))
            elif isinstance(child, _CODE):
                self.add(section, self.whole(child, "code"))
            elif isinstance(child, nodes.table):
                self.add(section, self.whole(child, "table"))
            elif isinstance(child, nodes.raw):
                if "html" in child.get("format", "").split():
                    self.add(section, self.whole(child, "html"))
            elif isinstance(child, _LISTS):
                self.blocks(child.children, section, "list")
            elif isinstance(child, _QUOTES):
                self.blocks(child.children, section, "list" if kind == "list" else "quote")
            elif isinstance(child, _FOOTNOTES):
                self.blocks(child.children, section, "footnote")
            elif isinstance(child, nodes.Element):  # list items, definitions, fields, topics, containers
                self.blocks(child.children, section, kind)

    def add(self, section: Section, paragraph: Paragraph | None) -> None:
        if paragraph is None:
            return
        self.budget.block()
        self.budget.paragraph(paragraph)
        section.paragraphs.append(paragraph)

    def has_text(self, node: nodes.Node) -> bool:
        """Whether a block shows text (a paragraph of badges, a comment or a target does not)."""
        if isinstance(node, _SKIPPED):
            return False
        if isinstance(node, (nodes.paragraph, nodes.line)):
            self.own_text = False
            self._mapper(node)
            return self.own_text
        return isinstance(node, nodes.Element) and any(self.has_text(c) for c in node.children)

    def heading(self, section: nodes.section) -> tuple[str | None, tuple[int, int] | None]:
        """A section's title text and its span (docutils gives the underline's line: the title is looked
        for from two lines above it, and never before the text already read)."""
        title = next((c for c in section.children if isinstance(c, nodes.title)), None)
        if title is None:
            return None, None
        line = (title.line or 1) - 1
        mapper = self._mapper(title, max(self.cursor, self.lines.start(max(0, line - 2))), line + 1)
        mapped = mapper.mapped.collapse_whitespace()
        if not len(mapped):
            return None, None
        self.cursor = max(self.cursor, mapper.cursor)
        return mapped.text, mapped.span(0, len(mapped))

    def paragraph(self, node: nodes.Element, kind: str) -> Paragraph | None:
        """A paragraph's sentences with their spans; a list item made only of links is navigation, a
        paragraph made only of substitutions (a row of badges) is nothing."""
        self.own_text = False
        mapper = self._mapper(node)
        self.cursor = max(self.cursor, mapper.cursor)
        if not self.own_text:
            return None
        only_links = kind == "list" and mapper.only_links and mapper.mapped.text.strip()
        return Paragraph.from_map(mapper.mapped.collapse_whitespace(), "navigation" if only_links else kind)

    def whole(self, node: nodes.Element, kind: str) -> Paragraph | None:
        """A block kept whole, one "sentence", its span from its first line's text to its last's (found
        after the text already read: a ``.. code::`` block's line is its last)."""
        content = node.astext().strip("\n")
        lines = [line.strip() for line in content.splitlines() if line.strip()]
        if not lines:
            return None
        near = self.cursor + 4 * len(content) + 4096  # a block not found is not looked for to the end
        first = self.text.find(lines[0], self.cursor, near)
        after = first + len(lines[0]) if len(lines) > 1 else first
        last = self.text.find(lines[-1], after, near) if first >= 0 else -1
        if first < 0 or last < 0:
            return Paragraph([content], kind, [None])
        self.cursor = last + len(lines[-1])
        return Paragraph([content], kind, [(first, self.cursor)])

    # ------------------------------------------------------------------ inline text
    def _mapper(
        self, node: nodes.Element, start: int | None = None, line: int | None = None
    ) -> _InlineMapper:
        """The node's text mapped onto its source lines: from its line (or ``start``) over as many lines as
        its markup has, and one more (a directive's paragraph starts on the directive's line)."""
        first = node.line - 1 if node.line else None
        if start is None:
            start = self.lines.start(first) if first is not None else self.cursor
        base = line if line is not None else first
        count = node.rawsource.count("\n") + 2 if node.rawsource else 2
        # without a line, looked for near the text already read (a search to the end for each block would
        # make a long document cost its square)
        near = start + 4 * len(node.rawsource or node.astext()) + 4096
        end = self.lines.start(base + count) if base is not None else min(len(self.text), near)
        mapper = _InlineMapper(self.text, start, max(end, start))
        self._feed(mapper, node)
        return mapper

    def _feed(self, mapper: _InlineMapper, node: nodes.Element) -> None:
        for child in node.children:
            if isinstance(child, nodes.Text):
                for piece in _PIECES.findall(str(child)):
                    if piece.startswith("\x00"):  # docutils' mark of a backslash escape: "\*" in the source
                        at = mapper.find("\\")
                        if at >= 0 and piece[1:].strip():
                            mapper.mapped.add(piece[1:], at, at + 2)
                            mapper._opened(1)
                        mapper.cursor = at + 2 if at >= 0 else mapper.cursor
                    elif piece.isspace():
                        mapper.mapped.add(" ", mapper.cursor, mapper.cursor)
                    else:
                        self.own_text = self.own_text or any(char.isalnum() for char in piece)
                        mapper.add_text(piece)
            elif isinstance(child, nodes.Element):
                self._inline(mapper, child)

    def _inline(self, mapper: _InlineMapper, node: nodes.Element) -> None:
        """An inline element: its markup found whole at the cursor (else its text is looked for as text),
        its text kept (none for a reference to a note, a badge), the cursor moved past its markup."""
        raw = node.rawsource
        if isinstance(node, nodes.target) and not node.astext():
            return  # an inline target of a link, already read with its link
        at = mapper.find(raw) if raw else -1
        if at < 0:
            if not isinstance(node, _DROPPED_INLINE + (nodes.substitution_reference,)):
                self._feed(mapper, node)
            return
        end, outer_end, opening, before = at + len(raw), mapper.end, mapper.opening, len(mapper.mapped)
        if opening is None:
            mapper.opening = at  # a sentence that starts with markup starts its span at the markup
        if isinstance(node, nodes.substitution_reference):
            replacement = self.replacements.get(nodes.fully_normalize_name(node.get("refname", "")))
            if replacement:
                mapper.mapped.add(replacement, at, end)
                mapper._opened(len(replacement))
        elif isinstance(node, nodes.problematic):  # an unknown role: the text it shows, without the role
            shown = _ROLE.match(raw)
            if shown:
                mapper.cursor, mapper.end = at + shown.start("text"), at + shown.end("text")
                mapper.add_text(shown.group("text"))
        elif not isinstance(node, _DROPPED_INLINE):
            reference = isinstance(node, nodes.reference)
            mapper.links += reference
            mapper.cursor, mapper.end = at, end
            self._feed(mapper, node)
            mapper.links -= reference
        if len(mapper.mapped) == before:
            mapper.opening = opening  # nothing shown: the next text does not start at this markup
            if end < mapper.end and not self.text[end].isspace():
                mapper.mapped.drop_trailing_space()  # "no dependencies [#]_." reads "no dependencies."
        mapper.cursor, mapper.end = end, outer_end


def _shown(name: str, definition: nodes.substitution_definition) -> str:
    """What a substitution shows in text: a ``replace::``'s text, an image's ``:alt:``, else its name."""
    image = next(iter(definition.findall(nodes.image)), None)
    if image is not None:
        return str(image.get("alt") or name)
    return " ".join(definition.astext().split())
