"""SciTLDR (Cachola et al., 2020): abstracts as sentence lists with one or more one-sentence TLDRs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from synopsis.data.example import Example
from synopsis.data.readers.base import guarded, require, resolve_split, string_list
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.io import iter_jsonl


def read_scitldr(
    path: Path, *, split: str | None = None, skip_bad_lines: bool = False, stats: dict[str, int]
) -> Iterator[Example]:
    """``source`` sentences are kept as given (no re-splitting); ``target`` TLDRs are the references."""
    file = resolve_split(path, split, (".jsonl",))

    def parse(item: tuple[str, Any]) -> list[Example]:
        where, record = item
        paper_id = str(require(record, "paper_id", (str, int), where))
        source = string_list(require(record, "source", list, where), where, "source")
        targets = [t.strip() for t in string_list(require(record, "target", list, where), where, "target")]
        title = record.get("title")
        title = " ".join(title.split()) if isinstance(title, str) else ""
        document = Document.from_sentences(
            [" ".join(s.split()) for s in source], id=paper_id, title=title or None
        )
        if document.is_empty():
            raise InputError(f"{where}: paper {paper_id} has an empty 'source'")
        if not any(targets):
            raise InputError(f"{where}: paper {paper_id} has no 'target' summary")
        return [Example(id=paper_id, document=document, references=[t for t in targets if t])]

    yield from guarded(iter_jsonl(file, skip_bad_lines, stats), parse, skip_bad_lines, stats)
