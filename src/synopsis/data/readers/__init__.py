"""Readers for single documents and for every supported corpus, behind two entry points.

* :func:`read_document` reads one file (text, Markdown, reStructuredText, our Document JSON, SciSummNet XML,
  CNN ``.story``, one arXiv/PubMed record, one QMSum meeting) into a :class:`~synopsis.document.Document`.
* :func:`read_corpus` reads a corpus into :class:`~synopsis.data.example.Example` objects, lazily.

Every problem with the input (missing, empty, binary or non-UTF-8 files, malformed records, files over
the size limit) is an :class:`~synopsis.errors.InputError` whose one-line message names the file, line or
field. With ``skip_bad_lines`` a corpus reader skips bad records (lines, or files in per-file corpora)
and counts them in ``stats["skipped"]``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import regex

from synopsis.data.example import Example, read_examples
from synopsis.data.qs import read_qmsum_qs, read_qmsum_qs_childq
from synopsis.data.readers.base import guarded, read_input, resolve_split
from synopsis.data.readers.cnn import parse_story, read_cnn
from synopsis.data.readers.cohan import parse_cohan, read_cohan
from synopsis.data.readers.documents import parse_json_document, parse_markdown, parse_rst, parse_text
from synopsis.data.readers.hf import read_hf
from synopsis.data.readers.qmsum import meeting_document, read_qmsum
from synopsis.data.readers.scisummnet import parse_scisummnet, read_scisummnet
from synopsis.data.readers.scitldr import read_scitldr
from synopsis.data.readers.tabular import read_csv, read_jsonl
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.io import MAX_LINE_BYTES, check_file, missing_path, parse_json

__all__ = [
    "CORPORA", "DOCUMENT_FORMATS", "SPANNED_FORMATS", "detect_corpus", "parse_document", "read_corpus",
    "read_document", "sniff_format",
]  # fmt: skip


def _parse_qmsum_meeting(text: str, path: Path) -> Document:
    return meeting_document(parse_json(text, path), str(path), path.stem)


# name -> parser(text, path) -> Document
DOCUMENT_FORMATS: dict[str, Callable[[str, Path], Document]] = {
    "text": parse_text,
    "markdown": parse_markdown,
    "rst": parse_rst,
    "json": parse_json_document,
    "scisummnet": parse_scisummnet,
    "story": parse_story,
    "arxiv": parse_cohan,
    "qmsum": _parse_qmsum_meeting,
}

# Extensions that decide the format; ``.txt``/``.text`` do not, so their content decides between text and
# Markdown (a ``.txt`` with ``#`` headings is Markdown), as for pasted text.
_EXTENSIONS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".rest": "rst",
    ".xml": "scisummnet",
    ".story": "story",
}
_TEXT_EXTENSIONS = (".txt", ".text")


def _read_synopsis(
    path: Path, *, split: str | None = None, skip_bad_lines: bool = False, stats: dict[str, int]
) -> Iterator[Example]:
    yield from read_examples(resolve_split(path, split, (".jsonl",)), skip_bad_lines, stats)


def _read_documents(
    path: Path,
    *,
    split: str | None = None,
    skip_bad_lines: bool = False,
    stats: dict[str, int],
    format: str = "auto",  # noqa: A002
    max_mb: float = 20.0,
) -> Iterator[Example]:
    """Document files without references (one file, or every file in a folder), e.g. to summarize them."""
    if split is not None:
        raise InputError(f"{path}: a folder of documents has no splits; leave out --split")
    files = (
        sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        if path.is_dir()
        else [path]
    )
    if not files:
        raise InputError(f"{path}: the folder holds no files")

    def parse(file: Path) -> list[Example]:
        document = read_document(file, format, max_mb)
        return [Example(id=document.id or file.stem, document=document)]

    yield from guarded(files, parse, skip_bad_lines, stats)


# name -> reader(path, *, split, skip_bad_lines, stats, **options) -> Iterator[Example]
CORPORA: dict[str, Callable[..., Iterator[Example]]] = {
    "synopsis": _read_synopsis,
    "documents": _read_documents,
    "scitldr": read_scitldr,
    "scisummnet": read_scisummnet,
    "qmsum": read_qmsum,
    "qmsum-qs": read_qmsum_qs,  # QS hierarchies built from QMSum: QSGen-Hier (synopsis.data.qs)
    "qmsum-qs-childq": read_qmsum_qs_childq,  # ... and QSGen-ChildQ
    "cnn": read_cnn,
    "arxiv": read_cohan,
    "pubmed": read_cohan,
    "jsonl": read_jsonl,
    "csv": read_csv,
    "hf": read_hf,  # Hugging Face datasets: save_to_disk folders, parquet, arrow
}


def read_document(path: str | Path, format: str = "auto", max_mb: float = 20.0) -> Document:  # noqa: A002
    """Read one document; ``format="auto"`` goes by the extension, then by the content.

    Files over ``max_mb`` megabytes are refused after reading ``max_mb`` and one byte of them (whatever size
    the file reports). A document without any text is an error.
    """
    path = Path(path)
    check_file(path, "a document file")
    document, _ = parse_document(read_input(path, max_mb), format, path)
    return document


def parse_document(
    text: str, format: str = "auto", path: Path | None = None  # noqa: A002
) -> tuple[Document, str]:
    """``text`` (a file's content at ``path``, or pasted text when ``path`` is None) as a Document, and the
    format it was read as: ``format``, or with ``"auto"`` the one :func:`sniff_format` picks."""
    if format != "auto" and format not in DOCUMENT_FORMATS:
        raise InputError(
            f"unknown document format '{format}' (choose from auto, {', '.join(DOCUMENT_FORMATS)})"
        )
    used = sniff_format(text, path) if format == "auto" else format
    document = DOCUMENT_FORMATS[used](text, path or _PASTED)
    if document.is_empty():
        raise InputError(f"{path or 'the document'}: no text found (read as {used})")
    if used in SPANNED_FORMATS:  # their sentences' spans index ``text``: a model reads it as written
        document.source = text
    return document, used


#: The formats whose readers give each sentence its span in the text they read.
SPANNED_FORMATS = ("text", "markdown", "rst")
# The readers name documents after their file; pasted text has none.
_PASTED = Path("document")
_ATX_HEADING = regex.compile(r"^ {0,3}+#{1,6}+(?:[ \t]|$)")
# Markdown of its own beside headings: a fenced code block opened by backticks (a line of tildes underlines a
# plain-text heading) or a tilde fence naming its language, and an inline link to a URL, anchor or path.
# Linear in the text (issue 58: "[" * 100000 took a minute): a link's text holds no "[" (the search finds
# the link from the last "[" before its "]" instead) and its target none either (an unencoded "[" is rare in
# a URL), so no run of the text is scanned from two starts; possessive quantifiers never give one back.
_MARKDOWN_MARKUP = regex.compile(
    r"^ {0,3}+(?:```|~~~++[ \t]*+[A-Za-z])|\[[^\[\]\n]++\]\((?:https?://|#|\.{0,2}/)[^)\s\[]*+\)",
    regex.MULTILINE,
)


def _has_markdown_headings(text: str) -> bool:
    """Whether ``#`` lines behave like Markdown headings: one that stands alone, after a blank line (or the
    start) and not beside another ``#`` line. A run of ``#`` lines is comments, as in a shell or a C++
    sample quoted in plain text."""
    lines = text.splitlines()
    hashed = [bool(_ATX_HEADING.match(line)) for line in lines]
    for i, is_heading in enumerate(hashed):
        if not is_heading:
            continue
        after_blank = i == 0 or not lines[i - 1].strip()
        alone = (i + 1 == len(lines) or not hashed[i + 1]) and (i == 0 or not hashed[i - 1])
        if after_blank and alone:
            return True
    return False


def sniff_format(text: str, path: Path | None = None) -> str:
    """The one format sniffer (``synopsis summarize`` and the service): a decisive extension (``.md``,
    ``.rst``, ``.rest``, ``.xml``, ``.story``) wins; otherwise the content decides: a JSON object (QMSum
    meeting, arXiv/PubMed record or our Document JSON), SciSummNet XML, a CNN story, Markdown when its ``#``
    lines behave like headings (:func:`_has_markdown_headings`) or it has a code fence or an inline link,
    else text (whose reader reads underlined, numbered and capital headings too).
    A file with any other extension than ``.txt``, ``.text`` or none is refused rather than guessed."""
    suffix = path.suffix.lower() if path is not None else ""
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    if suffix == ".jsonl":
        raise InputError(f"{path}: is a JSONL corpus, not one document; read it with `synopsis data convert`")
    head = text.lstrip()[:2000]
    if suffix == ".json" or head.startswith("{"):
        record = parse_json(text, path or _PASTED)
        if isinstance(record, dict) and "meeting_transcripts" in record:
            return "qmsum"
        if isinstance(record, dict) and ("section_names" in record or "article_text" in record):
            return "arxiv"
        return "json"
    if head.startswith("<PAPER") or head.startswith("<?xml"):
        return "scisummnet"
    if "\n@highlight" in text:
        return "story"
    if suffix not in ("", ".txt", ".text"):
        raise InputError(
            f"{path}: cannot tell the format from the extension '{suffix}' or the content; "
            f"pass --format ({', '.join(DOCUMENT_FORMATS)})"
        )
    # Underlined headings are read by both readers; plain text decides for a file without Markdown's own.
    if _has_markdown_headings(text) or _MARKDOWN_MARKUP.search(text):
        return "markdown"
    return "text"


def read_corpus(
    name: str,
    path: str | Path,
    *,
    split: str | None = None,
    skip_bad_lines: bool = False,
    stats: dict[str, int] | None = None,
    **options: Any,
) -> Iterator[Example]:
    """Examples of corpus ``name`` at ``path`` (a file, or the corpus folder with ``split``), read lazily.

    ``options`` are the reader's own keywords (QMSum ``queries``/``relevant_span_only``, the column mapping
    of ``jsonl``/``csv``); an option the reader does not take is an error naming it. ``name="auto"`` detects
    the corpus from the files (:func:`detect_corpus`). Names, options and the path are checked at once;
    problems inside the files surface while iterating.
    """
    path = Path(path)
    if name == "auto":
        name = detect_corpus(path)
    if name not in CORPORA:
        raise InputError(f"unknown corpus '{name}' (choose from {', '.join(CORPORA)})")
    reader = CORPORA[name]
    accepted = inspect.signature(reader).parameters
    for option in options:
        if option not in accepted or option in ("path", "split", "skip_bad_lines", "stats"):
            takes = [p for p in accepted if p not in ("path", "split", "skip_bad_lines", "stats")]
            raise InputError(
                f"corpus '{name}' has no option '{option}' (options: {', '.join(takes) or 'none'})"
            )
    if not path.exists():
        raise missing_path(path)
    stats = stats if stats is not None else {}
    stats.setdefault("skipped", 0)
    return reader(path, split=split, skip_bad_lines=skip_bad_lines, stats=stats, **options)


def detect_corpus(path: str | Path) -> str:
    """Guess the corpus of a file or folder from its layout and first record."""
    path = Path(path)
    if not path.exists():
        raise missing_path(path)
    if path.is_dir():
        if (path / "Reference_XML").is_dir() or any(path.glob("*/Reference_XML")):
            return "scisummnet"
        if any(path.glob("*.story")):
            return "cnn"
        if any(path.glob("*.json")) or any(path.glob("*/*.json")):
            return "qmsum"
        if any(path.glob("*.jsonl")):
            first = next(iter(sorted(path.glob("*.jsonl"))))
            return _detect_jsonl(first)
        if any(p.suffix.lower() in (*_EXTENSIONS, *_TEXT_EXTENSIONS) for p in path.iterdir()):
            return "documents"
        raise InputError(f"{path}: cannot tell which corpus this folder holds; pass --corpus")
    if not path.is_file():  # a pipe or a FIFO: what detection read would be gone for the reader
        raise InputError(f"{path}: not a regular file (a pipe?), read once: name its corpus with --corpus")
    suffix = path.suffix.lower()
    if suffix == ".story":
        return "cnn"
    if suffix in _EXTENSIONS or suffix in _TEXT_EXTENSIONS:
        return "documents"
    if suffix in (".csv", ".tsv"):
        return "csv"
    if suffix == ".json":
        return "qmsum"
    return _detect_jsonl(path)


def _detect_jsonl(path: Path) -> str:
    check_file(path)
    first = ""
    with open(path, "rb") as handle:
        # bounded lines: a file without newlines (/dev/zero) must not be read to its end
        for raw in iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""):
            if raw.strip():
                first = raw.decode("utf-8", errors="replace")
                break
    try:
        record = parse_json(first, path)
    except InputError:
        raise InputError(
            f"{path}: cannot tell which corpus this is (first line is not JSON); pass --corpus"
        ) from None
    keys = set(record) if isinstance(record, dict) else set()
    if {"id", "document"} <= keys:
        return "synopsis"
    if {"source", "target", "paper_id"} <= keys:
        return "scitldr"
    if {"abstract_text", "article_text"} & keys:
        return "arxiv"
    raise InputError(
        f"{path}: cannot tell which corpus this is (keys: {', '.join(sorted(keys))}); pass --corpus"
    )
