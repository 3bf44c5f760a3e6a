"""Single-document formats: plain text, Markdown and our own Document JSON.

Each parser takes the file's text (already checked for size, encoding and emptiness by
:func:`synopsis.data.readers.read_document`) and the path, used for the id and for error messages.
"""

from __future__ import annotations

from pathlib import Path

from synopsis.data.readers.markdown import parse_markdown_text
from synopsis.document import Document, Paragraph, Section, current_budget
from synopsis.io import parse_json
from synopsis.text import text_blocks


def parse_text(text: str, path: Path) -> Document:
    """Plain text: paragraphs are separated by blank lines, then sentence-split; a block of bullet or numbered
    lines is a list, one paragraph per item (:func:`synopsis.text.text_blocks`). Each sentence keeps its span
    in ``text``."""
    built = (Paragraph.from_map(mapped, kind) for kind, mapped in text_blocks(text))
    built = current_budget().paragraphs(built)  # counted as they are made (synopsis.document.ParseBudget)
    return Document(Section(paragraphs=[p for p in built if p is not None]), id=path.stem)


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
