"""Pasted documents: read by the library (one sniffer, one reader); the outline of their section tree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from synopsis.document import Document, ParseBudget, parse_budget
from synopsis.errors import InputError
from synopsis.pipeline import ParsedDocument, read_source
from synopsis.serve.settings import DocumentLimits


def read_pasted(
    text: str,
    format: str = "auto",  # noqa: A002
    limits: DocumentLimits | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> ParsedDocument:
    """A pasted document as the library reads it (:func:`synopsis.pipeline.read_source`), within
    ``limits`` (default: :class:`DocumentLimits`' defaults): the reader counts sections, blocks and words as
    it goes and stops at a limit (:class:`~synopsis.document.ParseBudget`), and the document read is checked
    once more before any of its work is queued; :class:`InputError` for unusable input, a document over
    them, or ``cancelled()`` turning true (its request ended) while it is read."""
    limits = limits or DocumentLimits()
    with parse_budget(budget_of(limits, cancelled)):
        parsed = read_source(text, format)
    check_limits(parsed.document, limits)
    return parsed


def budget_of(limits: DocumentLimits, cancelled: Callable[[], bool] | None = None) -> ParseBudget:
    """What a reader may build under ``limits``; every block holds at least a sentence, so the sentence
    limit bounds the blocks (paragraphs, list items, code blocks, tables)."""
    flags = {
        "sections": "--max-sections",
        "blocks": "--max-sentences",
        "words": "--max-document-words",
        "seconds": "--max-parse-seconds",
    }
    # made on the thread that reads: its CPU time counts from here
    return ParseBudget(
        limits.sections, limits.sentences, limits.words, flags, cancelled, seconds=limits.seconds
    )


def read_pasted_document(
    text: str,
    format: str = "auto",  # noqa: A002
    limits: DocumentLimits | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[Document, str]:
    """:func:`read_pasted`'s document and the format it was read as."""
    parsed = read_pasted(text, format, limits, cancelled)
    return parsed.document, parsed.format


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
