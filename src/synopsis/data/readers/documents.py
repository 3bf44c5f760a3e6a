"""Single-document formats: plain text, Markdown, reStructuredText and our own Document JSON.

Each parser takes the file's text (already checked for size, encoding and emptiness by
:func:`synopsis.data.readers.read_document`) and the path, used for the id and for error messages.
"""

from __future__ import annotations

from pathlib import Path

from synopsis.data.readers.markdown import parse_markdown_text
from synopsis.data.readers.plaintext import parse_plain_text
from synopsis.data.readers.rst import parse_rst_text
from synopsis.document import Document
from synopsis.io import parse_json


def parse_text(text: str, path: Path) -> Document:
    """Plain text (:func:`synopsis.data.readers.plaintext.parse_plain_text`): sections from underlined,
    numbered and capital headings, code and console output as code blocks; paragraphs are separated by blank
    lines, then sentence-split; a block of bullet or numbered lines is a list, one paragraph per item. Each
    sentence keeps its span in ``text``."""
    return parse_plain_text(text, path.stem)


def parse_json_document(text: str, path: Path) -> Document:
    """Our Document JSON (``Document.to_dict``); reading and writing it again gives the same JSON."""
    document = Document.from_dict(parse_json(text, path), str(path))
    if document.id is None:
        document.id = path.stem
    return document


def parse_markdown(text: str, path: Path) -> Document:
    """Markdown (:func:`synopsis.data.readers.markdown.parse_markdown_text`): sections from headings, blocks
    with their kinds, sentences with their spans in ``text``."""
    return parse_markdown_text(text, path.stem)


def parse_rst(text: str, path: Path) -> Document:
    """reStructuredText (:func:`synopsis.data.readers.rst.parse_rst_text`), parsed by docutils: sections,
    blocks with their kinds, sentences with their spans in ``text``."""
    return parse_rst_text(text, path.stem)
