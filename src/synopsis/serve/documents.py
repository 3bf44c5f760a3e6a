"""Pasted documents: pick the format, parse with the library's readers, and outline the section tree."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from synopsis.data.readers.documents import parse_json_document, parse_markdown, parse_text
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.serve.settings import DocumentLimits

FORMATS = ("auto", "text", "markdown", "json")
_PARSERS = {"text": parse_text, "markdown": parse_markdown, "json": parse_json_document}
# Only our Document JSON nests without bound; deeper trees than this are refused rather than
# risking the recursion limits of the JSON parser and encoder.
MAX_DEPTH = 100
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)", re.MULTILINE)
_SETEXT_HEADING = re.compile(r"^ {0,3}\S[^\n]*\n {0,3}(?:=+|-{2,})[ \t]*$", re.MULTILINE)
# The readers name documents after their file; a pasted one has no file.
_PASTED = Path("document")


def detect_format(text: str) -> str:
    """``json`` for a JSON object, ``markdown`` when it has a heading, else ``text``."""
    if text.lstrip().startswith("{"):
        return "json"
    if _ATX_HEADING.search(text) or _SETEXT_HEADING.search(text):
        return "markdown"
    return "text"


def parse_document(
    text: str,
    format: str = "auto",  # noqa: A002
    limits: DocumentLimits | None = None,
) -> tuple[Document, str]:
    """The parsed document and the format used; :class:`InputError` for unusable input and for a document
    over ``limits`` (default: :class:`DocumentLimits`' defaults)."""
    if format not in FORMATS:
        raise InputError(f"unknown format '{format}' (choose from {', '.join(FORMATS)})")
    if not text.strip():
        raise InputError("the document is empty")
    used = detect_format(text) if format == "auto" else format
    try:
        document = _PARSERS[used](text, _PASTED)
    except RecursionError:
        raise InputError(f"the document nests too deeply (at most {MAX_DEPTH} levels)") from None
    if document.is_empty():
        raise InputError(f"no text found in the document (read as {used})")
    if document.max_depth > MAX_DEPTH:
        raise InputError(f"sections nest {document.max_depth} deep; at most {MAX_DEPTH} levels are accepted")
    check_limits(document, limits or DocumentLimits())
    return document, used


def check_limits(document: Document, limits: DocumentLimits) -> None:
    """Refuse a document with more sections, sentences or words than ``limits``, naming the limit."""
    sizes = [
        ("sections", len(document.sections) - 1, limits.sections, "--max-sections"),  # the root is not one
        ("sentences", len(document.sentences), limits.sentences, "--max-sentences"),
        ("words", document.num_words(), limits.words, "--max-document-words"),
    ]
    for name, size, limit, flag in sizes:
        if size > limit:
            raise InputError(
                f"the document has {size} {name}, more than the {limit} this server takes ({flag})"
            )


def outline(document: Document) -> dict[str, Any]:
    """The section tree without the text: heading, number, depth, sentences (own and with subsections).

    The root (depth 0) holds the text before the first heading and has the document's title as heading.
    Built bottom-up without recursion.
    """
    own_sentences = [0] * len(document.sections)  # the sentences a summary may choose (no code or tables)
    for sentence in document.sentences:
        own_sentences[sentence.section.index] += 1
    nodes: dict[int, dict[str, Any]] = {}
    for section in reversed(document.sections):  # children before parents
        own = own_sentences[section.index]
        children = [nodes.pop(id(child)) for child in section.children]
        nodes[id(section)] = {
            "heading": document.title if section is document.root else section.heading,
            "number": section.number,
            "depth": section.depth,
            "sentences": own,
            "total_sentences": own + sum(child["total_sentences"] for child in children),
            "children": children,
        }
    return nodes[id(document.root)]


def document_stats(document: Document, used_format: str) -> dict[str, Any]:
    return {
        "format": used_format,
        "title": document.title,
        "sections": len(document.sections) - 1,  # the root is not a section of its own
        "sentences": len(document.sentences),
        "words": document.num_words(),
    }
