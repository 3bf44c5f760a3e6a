"""Safe file input/output: clear errors for missing, empty, binary or malformed files; atomic writes."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from synopsis.errors import InputError

# Larger files are read all the same; this only bounds how much we sniff for binary content.
_SNIFF_BYTES = 8192
_UMASK = os.umask(0)
os.umask(_UMASK)


def read_text(path: str | Path, allow_empty: bool = False) -> str:
    """Read a UTF-8 text file, refusing missing, binary, non-UTF-8 and (unless allowed) empty files."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a file")
    data = path.read_bytes()
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise InputError(f"{path}: looks like a binary file (contains NUL bytes), expected UTF-8 text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InputError(f"{path}: line {line}: not valid UTF-8 (byte offset {err.start})") from None
    if not allow_empty and not text.strip():
        raise InputError(f"{path}: file is empty")
    return text


def iter_jsonl(
    path: str | Path, skip_bad_lines: bool = False, stats: dict[str, int] | None = None
) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, record)`` per non-blank line; ``where`` is ``"file:line"`` for error messages.

    A line that is not valid JSON raises :class:`InputError` naming file and line, or, with
    ``skip_bad_lines``, is counted in ``stats["skipped"]`` and skipped.
    """
    stats = stats if stats is not None else {}
    stats.setdefault("skipped", 0)
    text = read_text(path)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            yield where, json.loads(line)
        except json.JSONDecodeError as err:
            if not skip_bad_lines:
                raise InputError(f"{where}: malformed JSON ({err.msg} at column {err.colno})") from None
            stats["skipped"] += 1


@contextlib.contextmanager
def open_for_atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place only when the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; give the result the usual permissions
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | Path, data: Any) -> None:
    with open_for_atomic_write(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
