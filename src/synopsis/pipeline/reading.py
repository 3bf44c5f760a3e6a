"""Reading a document once for a summarize request: a file or pasted text into a :class:`ParsedDocument`
(the Document, the format it was read as, and every sentence's character offsets in the text it was read
from: :func:`sentence_offsets`, the one place they are computed)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from synopsis.data.readers import SPANNED_FORMATS, parse_document
from synopsis.data.readers.base import read_input
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.io import check_file
from synopsis.summarizers.citing import source_words
from synopsis.summarizers.windows import Window, section_sources

#: Only our Document JSON nests without bound; deeper trees are refused rather than risking the recursion
#: limits of the JSON parser and encoder.
MAX_DEPTH = 100

Offsets = list[tuple[int, int] | None]


@dataclass(frozen=True)
class ParsedDocument:
    """A document as read once: the Document, the format it was read as, and each sentence's character
    offsets ``(start, end)`` in the text it was read from (``None``: a format whose text the reader
    rebuilds, or a sentence not found)."""

    document: Document
    format: str
    offsets: Offsets | None

    @cached_property
    def citable(self) -> tuple[Window, list[set[str]]]:
        """What a summary of the whole document cites (:func:`cited_summary`): every sentence as a source
        of one window, and each source's content words; computed once, however many summaries cite it."""
        document = self.document
        by_section = section_sources(document, self.offsets).values()
        sources = [source for paragraphs in by_section for paragraph in paragraphs for source in paragraph]
        whole = Window(0, document.root, (), sources, [s.text for s in sources])
        return whole, source_words(sources)


def sentence_offsets(document: Document, format: str) -> Offsets | None:  # noqa: A002
    """The character offsets of ``document``'s sentences in the text it was read from, for text, Markdown
    and reStructuredText: the spans the reader carried from parsing (:attr:`synopsis.document.Sentence.start`;
    other formats rebuild their text, so they have none)."""
    if format not in SPANNED_FORMATS:
        return None
    return [None if s.start is None or s.end is None else (s.start, s.end) for s in document.sentences]


def read_source(
    source: Path | str | bytes,
    format: str = "auto",  # noqa: A002
    max_mb: float | None = None,
) -> ParsedDocument:
    """Read a document once: a file (``Path``; refused after ``max_mb`` megabytes and one byte, whatever size
    it reports), or pasted text (``str``, ``bytes`` in UTF-8). ``format="auto"``:
    :func:`~synopsis.data.readers.sniff_format`."""
    path: Path | None = None
    if isinstance(source, Path):
        path = source
        check_file(path, "a document file")
        text = read_input(path, max_mb)
    elif isinstance(source, bytes):
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"the document is not UTF-8 text (byte {err.start})") from None
    else:
        text = source
    if not text.strip():
        raise InputError(f"{path}: the document is empty" if path else "the document is empty")
    try:
        document, used = parse_document(text, format, path)
    except RecursionError:
        raise InputError(f"the document nests too deeply (at most {MAX_DEPTH} levels)") from None
    if document.max_depth > MAX_DEPTH:
        raise InputError(f"sections nest {document.max_depth} deep; at most {MAX_DEPTH} levels are accepted")
    return ParsedDocument(document, used, sentence_offsets(document, used))
