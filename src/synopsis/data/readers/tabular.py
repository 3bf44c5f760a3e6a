"""Generic JSONL and CSV/TSV datasets with a column mapping, as in ``run_summarization.py --text_column``.

The text column may hold a string (split into paragraphs at blank lines, then sentences), a list of
strings (taken as sentences), or an object in our Document JSON. A summary column may hold a string or a
list of strings; with several summary columns the references are collected from each in order. CSV cells
are always strings. Without an id column option, a record's ``id`` field is its id if it has one, else the id
is ``<file stem>-<n>`` with ``n`` the record's 0-based position in the file, which a skipped bad record does
not shift.
"""

from __future__ import annotations

import csv
import inspect
import io
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from synopsis.data.example import Example
from synopsis.data.readers.base import guarded, read_input, resolve_split
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.io import iter_jsonl

# CSV's default field limit (128 KiB) is below a long document; raise it (once, process-wide) to 2 GiB.
_CSV_FIELD_LIMIT = 2**31 - 1


class Columns:
    """The column mapping, validated once, that turns one record into an Example."""

    def __init__(
        self,
        text_column: str = "text",
        summary_column: str | Sequence[str] | None = "summary",
        id_column: str | None = None,
        instruction_column: str | None = None,
        title_column: str | None = None,
        attribute_columns: Sequence[str] = (),
    ) -> None:
        self.text = text_column
        if summary_column is None:
            self.summaries: list[str] = []
        elif isinstance(summary_column, str):
            self.summaries = [summary_column]
        else:
            self.summaries = list(summary_column)
        self.id = id_column
        self.instruction = instruction_column
        self.title = title_column
        self.attributes = list(attribute_columns)

    def example(self, record: Any, where: str, number: int, stem: str) -> Example:
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
        text = self._get(record, self.text, where, "--text-column")
        document = _document(text, where, self.text)
        references: list[str] = []
        for column in self.summaries:
            value = self._get(record, column, where, "--summary-column")
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InputError(f"{where}: column '{column}' must hold a string or a list of strings")
            references.extend(v.strip() for v in value if v.strip())
        if self.summaries and not references:
            raise InputError(f"{where}: the summary column(s) {', '.join(self.summaries)} are empty")
        if self.id:
            example_id = str(self._get(record, self.id, where, "--id-column"))
        elif isinstance(record.get("id"), str | int) and str(record["id"]).strip():
            example_id = str(record["id"]).strip()  # an "id" field is used without being asked for
        else:
            example_id = f"{stem}-{number}"
        document.id = document.id or example_id
        if self.title:
            document.title = (
                " ".join(self._string(record, self.title, where, "--title-column").split()) or None
            )
        instruction = None
        if self.instruction:
            instruction = self._string(record, self.instruction, where, "--instruction-column") or None
        attributes = {c: self._string(record, c, where, "--attribute-column") for c in self.attributes}
        return Example(example_id, document, references, instruction, attributes)

    def _get(self, record: dict[str, Any], column: str, where: str, option: str) -> Any:
        if column not in record:
            names = ", ".join(record) or "none"
            raise InputError(f"{where}: no column '{column}' ({option}); the record has: {names}")
        return record[column]

    def _string(self, record: dict[str, Any], column: str, where: str, option: str) -> str:
        value = self._get(record, column, where, option)
        if not isinstance(value, str):
            raise InputError(f"{where}: column '{column}' must hold a string, got {type(value).__name__}")
        return value.strip()


def _document(value: Any, where: str, column: str) -> Document:
    if isinstance(value, str):
        document = Document.from_text(value)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        document = Document.from_sentences([" ".join(v.split()) for v in value])
    elif isinstance(value, dict):
        document = Document.from_dict(value, f"{where}: column '{column}'")
    else:
        raise InputError(
            f"{where}: column '{column}' must hold text, a list of sentences or a document object"
        )
    if document.is_empty():
        raise InputError(f"{where}: column '{column}' is empty")
    return document


ColumnRows = Callable[[Path, str | None, bool, dict[str, int], Columns], Iterator[Example]]


def column_reader(read: ColumnRows) -> Callable[..., Iterator[Example]]:
    """The corpus reader of ``read(path, split, skip_bad_lines, stats, mapping)``: it takes the column
    options of :class:`Columns` as keywords (its signature lists them, which is what ``read_corpus`` checks
    options against) and passes them on as one :class:`Columns`."""

    def reader(
        path: Path,
        *,
        split: str | None = None,
        skip_bad_lines: bool = False,
        stats: dict[str, int],
        **columns: Any,
    ) -> Iterator[Example]:
        yield from read(path, split, skip_bad_lines, stats, Columns(**columns))

    own = [p for p in inspect.signature(reader).parameters.values() if p.kind is not p.VAR_KEYWORD]
    options = list(inspect.signature(Columns).parameters.values())
    reader.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*own, *(option.replace(kind=option.KEYWORD_ONLY) for option in options)]
    )
    reader.__name__ = reader.__qualname__ = read.__name__
    reader.__doc__ = read.__doc__
    return reader


@column_reader
def read_jsonl(
    path: Path, split: str | None, skip_bad_lines: bool, stats: dict[str, int], mapping: Columns
) -> Iterator[Example]:
    """Any JSONL file, one example per line, mapped by the column options (see :class:`Columns`)."""
    file = resolve_split(path, split, (".jsonl", ".json"))

    def parse(item: tuple[str, Any]) -> list[Example]:
        where, record = item
        # Default ids come from the line (0-based), so they stay put when bad lines are skipped.
        number = int(where.rsplit(":", 1)[1]) - 1
        return [mapping.example(record, where, number, file.stem)]

    yield from guarded(iter_jsonl(file, skip_bad_lines, stats), parse, skip_bad_lines, stats)


@column_reader
def read_csv(
    path: Path, split: str | None, skip_bad_lines: bool, stats: dict[str, int], mapping: Columns
) -> Iterator[Example]:
    """A CSV file with a header row (``.tsv``: tab-separated), mapped like :func:`read_jsonl`."""
    file = resolve_split(path, split, (".csv", ".tsv"))
    stats.setdefault("skipped", 0)

    def parse(item: tuple[list[str], list[str], str, int]) -> list[Example]:
        header, row, where, number = item
        if len(row) != len(header):
            raise InputError(f"{where}: expected {len(header)} fields as in the header, found {len(row)}")
        return [mapping.example(dict(zip(header, row, strict=True)), where, number, file.stem)]

    yield from guarded(_csv_rows(file), parse, skip_bad_lines, stats)


def _csv_rows(file: Path) -> Iterator[tuple[list[str], list[str], str, int]]:
    """``(header, row, "file:line", row number)`` for every non-blank row after the header."""
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    delimiter = "\t" if file.suffix == ".tsv" else ","
    reader = csv.reader(io.StringIO(read_input(file), newline=""), delimiter=delimiter)
    try:
        header = next(reader)
        for number, row in enumerate(reader):
            if any(cell.strip() for cell in row):
                yield header, row, f"{file}:{reader.line_num}", number
    except csv.Error as err:
        raise InputError(f"{file}:{reader.line_num}: malformed CSV ({err})") from None
