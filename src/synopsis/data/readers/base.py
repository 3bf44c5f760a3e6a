"""Helpers shared by the readers: size limits, split folders, JSON loading, skipping bad records."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from synopsis.document import Section
from synopsis.errors import InputError
from synopsis.io import missing_path, read_text

T = TypeVar("T")

# Corpora disagree on the name of the validation split (SciTLDR "dev", QMSum "val", Cohan "val").
_SPLIT_ALIASES = {"dev": ("dev", "val", "valid", "validation"), "val": ("val", "dev", "valid", "validation")}


def read_input(path: str | Path, max_mb: float | None = None) -> str:
    """:func:`read_text` of user input: one-line InputErrors for everything, and at most ``max_mb``
    megabytes (one document; None: the limit of any whole-file read) read before refusing."""
    if max_mb is None:
        return read_text(path)
    return read_text(
        path,
        max_bytes=int(max_mb * 1024 * 1024),
        hint=" for one document (raise it with --max-input-mb)",
    )


def require(record: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """``record[key]``, checked to be of ``kind``; the error names the place and the field."""
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if key not in record:
        raise InputError(f"{where}: missing field '{key}'")
    value = record[key]
    if not isinstance(value, kind):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise InputError(f"{where}: field '{key}' must be {names}, got {type(value).__name__}")
    return value


def string_list(value: Any, where: str, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{where}: field '{field}' must be a list of strings")
    return value


def resolve_split(path: Path, split: str | None, suffixes: tuple[str, ...]) -> Path:
    """The file (or folder, when ``suffixes`` holds ``""``) of ``split`` inside the corpus folder ``path``.

    A file given directly needs no split. ``dev`` and ``val`` stand for each other, since corpora name
    their validation split differently.
    """
    if not path.exists():
        raise missing_path(path)
    if not path.is_dir():
        if split is not None:
            raise InputError(f"{path}: is a file; --split only applies when the input is a corpus folder")
        return path
    available = sorted(
        {
            p.name[: len(p.name) - len(s)] if s else p.name
            for s in suffixes
            for p in path.iterdir()
            if _is(p, s)
        }
    )
    if split is None:
        listed = ", ".join(available) or "none found"
        raise InputError(f"{path}: is a folder; choose a split with --split ({listed})")
    for name in _SPLIT_ALIASES.get(split, (split,)):
        for suffix in suffixes:
            candidate = path / f"{name}{suffix}"
            if _is(candidate, suffix):
                return candidate
    raise InputError(f"{path}: no split '{split}' (available: {', '.join(available) or 'none'})")


def _is(path: Path, suffix: str) -> bool:
    return path.is_dir() if suffix == "" else path.is_file() and path.name.endswith(suffix)


def guarded(
    items: Iterable[T],
    parse: Callable[[T], Iterable[Any]],
    skip_bad_lines: bool,
    stats: dict[str, int],
) -> Iterator[Any]:
    """Parse each raw record into examples; a bad record raises, or is counted in ``stats["skipped"]``."""
    for item in items:
        try:
            parsed = list(parse(item))
        except InputError:
            if not skip_bad_lines:
                raise
            stats["skipped"] += 1
            continue
        yield from parsed


_SECTION_NUMBER = re.compile(r"^(\d{1,2}(?:\.\d{1,2})*)\.?(?:\s+|$)")


def split_numbered_title(title: str) -> tuple[str | None, str | None]:
    """Number and heading: ``"2.1 Data"`` -> ``("2.1", "Data")``, ``"2."`` -> ``("2", None)``,
    ``"Data"`` -> ``(None, "Data")``."""
    match = _SECTION_NUMBER.match(title)
    if not match:
        return None, title or None
    return match.group(1), title[match.end() :].strip() or None


class NumberedTree:
    """Attach sections under a container so that numbered titles nest by their number.

    "2.1" goes under the nearest "2" (and "2.1.1" under "2.1", or under "2" when there is no "2.1"), but
    only along the most recent branch, so the document order of the text is never changed. Unnumbered
    sections, and numbers with no open ancestor, become direct children of the container.
    """

    def __init__(self, container: Section) -> None:
        self.container = container
        self._path: list[tuple[tuple[int, ...], Section]] = []  # the rightmost numbered branch

    def add(self, section: Section) -> Section:
        if section.number is None:
            self._path = []
            return self.container.add(section)
        number = tuple(int(part) for part in section.number.split("."))
        while self._path and not _is_prefix(self._path[-1][0], number):
            self._path.pop()
        parent = self._path[-1][1] if self._path else self.container
        self._path.append((number, section))
        return parent.add(section)


def _is_prefix(prefix: tuple[int, ...], number: tuple[int, ...]) -> bool:
    return len(prefix) < len(number) and number[: len(prefix)] == prefix
