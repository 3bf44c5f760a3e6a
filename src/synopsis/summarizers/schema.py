"""The one schema of every summary synopsis writes, by document or by section: the JSON of ``synopsis
summarize --output-format json``, one JSONL line of a corpus run, and the service's ``structured``.

A :class:`DocumentSummary` holds the document summary's :class:`SummarySentence` s, each citing the input
sentences it came from (:class:`Source`), and by section the tree of :class:`SectionSummary` s. Pure data:
every path that writes or reads a summary imports this module, and it imports nothing of synopsis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Source:
    """An input sentence: ``path`` indexes the section tree from the root (``sections[i].sections[j]``),
    ``sentence`` counts that section's own sentences (paragraphs in order; ``None`` for a list item that a
    chosen lead-in brings, which is not one of them); ``start``/``end`` are character offsets into the
    input file when it is one text or Markdown file, else ``None``."""

    path: tuple[int, ...]
    sentence: int | None
    text: str
    start: int | None = None
    end: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": list(self.path),
            "sentence": self.sentence,
            "text": self.text,
            "start": self.start,
            "end": self.end,
        }


@dataclass
class SummarySentence:
    """One summary sentence, the input sentences it cites, and the share of its content words they hold
    (``None`` for a sentence without content words)."""

    text: str
    sources: list[Source]
    support: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "sources": [s.to_dict() for s in self.sources],
            "support": None if self.support is None else round(self.support, 4),
        }

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass
class SectionSummary:
    """A section's summary (of its own text; empty for a section whose text is all in its subsections) and
    its subsections'. ``words`` counts the section's own input words; ``index`` is the section's position in
    a pre-order walk of the document's tree (``Document.sections``; the root is 0); ``skipped``: nothing to
    show in its subtree (no text, so nothing to summarize; or, once the run is done, no sentence its
    summaries took); it stays in the tree, so that ``path`` indexes ``sections``."""

    heading: str | None
    path: tuple[int, ...]
    summary: list[SummarySentence] = field(default_factory=list)
    sections: list[SectionSummary] = field(default_factory=list)
    words: int = 0
    index: int | None = None
    skipped: bool = False

    def walk(self) -> list[SectionSummary]:
        """This section and its descendants, in document order."""
        out, stack = [], [self]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.sections))
        return out

    def _fields(self) -> dict[str, Any]:
        return {
            "heading": self.heading,
            "path": list(self.path),
            "index": self.index,
            "skipped": self.skipped,
            "summary": [s.to_dict() for s in self.summary],
        }

    def to_dict(self) -> dict[str, Any]:
        # Iterative, so a 50-level tree cannot overflow the stack (nor json's encoder, which gets dicts).
        out = {**self._fields(), "sections": []}
        stack = [(self, out)]
        while stack:
            node, data = stack.pop()
            for child in node.sections:
                child_data = {**child._fields(), "sections": []}
                data["sections"].append(child_data)
                stack.append((child, child_data))
        return out


@dataclass
class DocumentSummary:
    """The result of :func:`summarize_by_section` for one document (the JSON schema of ``synopsis
    summarize --output-format json``, one JSONL line of a corpus run, and the service's ``structured``).

    ``sections[i].sections[j]`` is the section at path ``(i, j)``: every section below the root is in the
    tree at its own position, those without text as ``skipped`` with an empty summary, so a source's ``path``
    always finds its section. The root's own text (before the first heading) is ``preface`` (path ``()``,
    the document's title as heading; ``None`` when there is none). By document, ``sections`` is empty."""

    id: str | None
    summary: list[SummarySentence]
    sections: list[SectionSummary]
    skipped_sections: int = 0  # sections without any text in their subtree
    preface: SectionSummary | None = None
    #: one line on how this document was summarized when the reader should know (e.g. extractive because the
    #: default model is not made for it, or how the model is far from its inputs); None: nothing to say
    note: str | None = None
    #: what the document is called (:func:`summary_title`), shown as the document summary's heading, not as
    #: one of its sentences (so not in ``prediction`` nor counted in ``max_words``); None: it has no name
    title: str | None = None
    #: the method that wrote it (:meth:`~synopsis.summarizers.base.Summarizer.methods`: the default names
    #: the one it chose for this document)
    method: str | None = None

    @property
    def prediction(self) -> str:
        """The document summary as ``evaluate`` reads it: sentences joined by newlines."""
        return "\n".join(s.text for s in self.summary)

    def walk(self) -> list[SectionSummary]:
        """The preface, then every section in document order (not the skipped ones)."""
        nodes = (node for top in self.sections for node in top.walk() if not node.skipped)
        return [*([self.preface] if self.preface else []), *nodes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "note": self.note,
            "method": self.method,
            "prediction": self.prediction,
            "summary": [s.to_dict() for s in self.summary],
            "preface": None if self.preface is None else self.preface._fields(),
            "sections": [s.to_dict() for s in self.sections],
        }
