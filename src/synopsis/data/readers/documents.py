"""Single-document formats: plain text, Markdown and our own Document JSON.

Each parser takes the file's text (already checked for size, encoding and emptiness by
:func:`synopsis.data.readers.read_document`) and the path, used for the id and for error messages.
"""

from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

from synopsis.document import Document, Section
from synopsis.io import parse_json
from synopsis.text import split_sentences


def parse_text(text: str, path: Path) -> Document:
    """Plain text: paragraphs are separated by blank lines, then sentence-split."""
    return Document.from_text(text, id=path.stem)


def parse_json_document(text: str, path: Path) -> Document:
    """Our Document JSON (``Document.to_dict``); reading and writing it again gives the same JSON."""
    document = Document.from_dict(parse_json(text, path), str(path))
    if document.id is None:
        document.id = path.stem
    return document


def parse_markdown(text: str, path: Path) -> Document:
    """Markdown: ATX and setext headings build the section tree.

    A heading nests under the nearest preceding heading of a smaller level, so a jump from ``#`` to ``###``
    nests directly under the ``#`` node. When the document opens with a level-1 heading (before any text)
    and it is the only level-1 heading, it is the document's title and ``##`` headings are the top-level
    sections. Paragraphs, list items and block quotes become sentence-split paragraphs; a code block is one
    paragraph holding the code as a single "sentence" (splitting code into sentences is meaningless).
    """
    tokens = MarkdownIt("commonmark").parse(text)
    h1_count = sum(1 for t in tokens if t.type == "heading_open" and t.tag == "h1")
    title = None
    if tokens and tokens[0].type == "heading_open" and tokens[0].tag == "h1" and h1_count == 1:
        title = _inline_text(tokens[1]) or None
        tokens = tokens[3:]  # heading_open, inline, heading_close
    root = Section()
    stack: list[tuple[int, Section]] = [(1 if title is not None else 0, root)]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.type == "heading_open":
            level = int(token.tag[1])
            while stack[-1][0] >= level:
                stack.pop()
            section = stack[-1][1].add(Section(heading=_inline_text(tokens[i + 1]) or None))
            stack.append((level, section))
            i += 3
            continue
        current = stack[-1][1]
        if token.type == "inline":  # paragraphs, list items, quotes: all reach us as inline runs
            sentences = split_sentences(_inline_text(token))
            if sentences:
                current.paragraphs.append(sentences)
        elif token.type in ("fence", "code_block") and token.content.strip():
            current.paragraphs.append([token.content.strip("\n")])
        elif token.type == "html_block" and not token.content.lstrip().startswith("<!--"):
            current.paragraphs.extend(s for s in [split_sentences(token.content)] if s)
        i += 1
    return Document(root, title=title, id=path.stem)


def _inline_text(token: Token) -> str:
    """The plain text of an inline token: emphasis and link markup dropped, link and image text kept."""
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(_inline_text(child))
    return " ".join("".join(parts).split())
