"""Pasted documents: read by the library (one sniffer, one reader); the outline of their section tree."""

from __future__ import annotations

from typing import Any

from synopsis.document import Document
from synopsis.summarizers.runner import read_source


def parse_document(text: str, format: str = "auto") -> tuple[Document, str]:  # noqa: A002
    """A pasted document and the format it was read as (:func:`synopsis.summarizers.runner.read_source`)."""
    parsed = read_source(text, format)
    return parsed.document, parsed.format


def outline(document: Document) -> dict[str, Any]:
    """The section tree without the text: heading, number, depth, sentences (own and with subsections).

    The root (depth 0) holds the text before the first heading and has the document's title as heading.
    Built bottom-up without recursion.
    """
    nodes: dict[int, dict[str, Any]] = {}
    for section in reversed(document.sections):  # children before parents
        own = sum(len(paragraph) for paragraph in section.paragraphs)
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
