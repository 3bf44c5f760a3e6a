"""Corpus statistics: sizes of documents and references, section structure, instructions.

Words are whitespace-separated tokens (what ``Document.num_words`` counts). Document sentences are the
Document's own sentences; a reference's sentences are counted per line with the sentence splitter, since
multi-sentence references keep one sentence or highlight per line. Section depth is the depth of a
document's deepest section (0 = no headings). A document shared by several examples (QMSum queries on
one meeting) counts once per example, so every figure is an average over examples; "distinct documents"
counts document ids.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from rich.table import Table

from synopsis.data.example import Example
from synopsis.document import Document
from synopsis.text import split_sentences


def corpus_stats(examples: Iterable[Example]) -> dict[str, Any]:
    """Counts and averages over ``examples``, in one pass that keeps only numbers, never the examples."""
    doc_words: list[int] = []
    doc_sentences: list[int] = []
    depths: list[int] = []
    sections: list[int] = []
    ref_words: list[int] = []
    ref_sentences: list[int] = []
    refs_per_example: list[int] = []
    with_instruction = 0
    # Examples sharing a document (QMSum queries) come together: measure it once. Keep the document itself,
    # not its id(), which Python reuses once a streamed document has been freed.
    last: tuple[Document, tuple[int, int, int, int]] | None = None
    documents: set[str] = set()
    anonymous = 0
    for example in examples:
        if last is None or last[0] is not example.document:
            last = (example.document, _measure(example.document))
            anonymous += example.document.id is None
        words, sentences, depth, n_sections = last[1]
        if example.document.id is not None:
            documents.add(example.document.id)
        doc_words.append(words)
        doc_sentences.append(sentences)
        depths.append(depth)
        sections.append(n_sections)
        refs_per_example.append(len(example.references))
        for reference in example.references:
            ref_words.append(len(reference.split()))
            ref_sentences.append(sum(len(split_sentences(line)) for line in reference.splitlines()))
        with_instruction += example.instruction is not None
    n = len(doc_words)
    return {
        "examples": n,
        "documents": len(documents) + anonymous,
        "references": len(ref_words),
        "document_words": _summary(doc_words),
        "document_sentences": _summary(doc_sentences),
        "reference_words": _summary(ref_words),
        "reference_sentences": _summary(ref_sentences),
        "section_depth_mean": _mean(depths),
        "section_depth_max": max(depths, default=0),
        "sections_mean": _mean(sections),
        "references_per_example": _mean(refs_per_example),
        "with_instruction": with_instruction / n if n else 0.0,
    }


def _measure(document: Document) -> tuple[int, int, int, int]:
    return document.num_words(), len(document.sentences), document.max_depth, len(document.sections) - 1


def _mean(values: list[int]) -> float:
    return statistics.fmean(values) if values else 0.0


def _summary(values: list[int]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "median": 0.0, "max": 0}
    return {"mean": statistics.fmean(values), "median": statistics.median(values), "max": max(values)}


def stats_table(stats: dict[str, Any], title: str | None = None) -> Table:
    """The numbers of :func:`corpus_stats` as a rich table."""
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("statistic")
    for column in ("mean", "median", "max"):
        table.add_column(column, justify="right")
    table.add_row("examples", f"{stats['examples']:,}", "", "")
    table.add_row("distinct documents", f"{stats['documents']:,}", "", "")
    for key, label in (
        ("document_words", "words per document"),
        ("document_sentences", "sentences per document"),
        ("reference_words", "words per reference"),
        ("reference_sentences", "sentences per reference"),
    ):
        row = stats[key]
        table.add_row(label, f"{row['mean']:.1f}", f"{row['median']:g}", f"{row['max']:,}")
    table.add_row("section depth", f"{stats['section_depth_mean']:.2f}", "", str(stats["section_depth_max"]))
    table.add_row("sections per document", f"{stats['sections_mean']:.1f}", "", "")
    table.add_row("references per example", f"{stats['references_per_example']:.2f}", "", "")
    table.add_row("share with instruction", f"{stats['with_instruction']:.1%}", "", "")
    return table
