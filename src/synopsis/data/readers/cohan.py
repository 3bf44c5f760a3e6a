"""The arXiv / PubMed long-document format of Cohan et al. (2018): one JSON record per line.

Fields: ``article_id``, ``article_text`` (sentences), ``abstract_text`` (sentences wrapped in ``<S>``
and ``</S>``), ``section_names`` and ``sections`` (a list of sentence lists, one per name). The sentences
are already split (and lower-cased, tokenised) by the dataset authors; we keep them as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from synopsis.data.example import Example
from synopsis.data.readers.base import guarded, require, resolve_split, string_list
from synopsis.document import Document, Section
from synopsis.errors import InputError
from synopsis.io import iter_jsonl, parse_json

_SENTENCE_TAGS = re.compile(r"</?S>")
_LATEX_LABEL = re.compile(r"^\[[^\]]*\]")  # arXiv names such as "[sec:intro]introduction"


def cohan_document(record: Any, where: str) -> Document:
    """Sections and their names become top-level sections; without sections, ``article_text`` is the body."""
    article_id = require(record, "article_id", (str, int), where)
    sections = require(record, "sections", list, where) if "sections" in record else []
    names = string_list(record.get("section_names", []), where, "section_names")
    if len(names) != len(sections):
        raise InputError(f"{where}: {len(names)} section_names but {len(sections)} sections")
    root = Section()
    for s, (name, sentences) in enumerate(zip(names, sections, strict=True)):
        sentences = [" ".join(x.split()) for x in string_list(sentences, where, f"sections[{s}]")]
        heading = _LATEX_LABEL.sub("", name).strip() or None
        root.add(Section(heading=heading, paragraphs=[[x for x in sentences if x]]))
    if not sections:
        text = [
            " ".join(x.split()) for x in string_list(record.get("article_text", []), where, "article_text")
        ]
        root.paragraphs.append([x for x in text if x])
    document = Document(root, id=str(article_id))
    if document.is_empty():
        raise InputError(f"{where}: article {article_id} has no text")
    return document


def cohan_abstract(record: Any, where: str) -> str:
    """The abstract with ``<S>`` tags removed, one sentence per line."""
    sentences = string_list(require(record, "abstract_text", list, where), where, "abstract_text")
    cleaned = [" ".join(_SENTENCE_TAGS.sub(" ", s).split()) for s in sentences]
    abstract = "\n".join(s for s in cleaned if s)
    if not abstract:
        raise InputError(f"{where}: field 'abstract_text' is empty")
    return abstract


def parse_cohan(text: str, path: Path) -> Document:
    """One Cohan-format record stored as a ``.json`` file."""
    return cohan_document(parse_json(text, path), str(path))


def read_cohan(
    path: Path, *, split: str | None = None, skip_bad_lines: bool = False, stats: dict[str, int]
) -> Iterator[Example]:
    """A Cohan JSONL file, or the dataset folder with ``train.txt`` / ``val.txt`` (as distributed)."""
    file = resolve_split(path, split, (".jsonl", ".txt", ".json"))

    def parse(item: tuple[str, Any]) -> list[Example]:
        where, record = item
        document = cohan_document(record, where)
        return [Example(id=document.id, document=document, references=[cohan_abstract(record, where)])]

    yield from guarded(iter_jsonl(file, skip_bad_lines, stats), parse, skip_bad_lines, stats)
