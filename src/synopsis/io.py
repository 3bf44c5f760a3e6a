"""Safe file input/output: clear errors for missing, empty, binary or malformed files; atomic writes."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from synopsis.errors import InputError, OutputError, SynopsisError

# This only bounds how much we sniff for binary content.
_SNIFF_BYTES = 8192
#: The most any whole-file read of user input takes in (configs, vocabularies, predictions, CSV corpora);
#: readers with a tighter limit (one document, a token file) pass their own.
MAX_TEXT_BYTES = 512 * 1024 * 1024
#: The longest line of a JSONL corpus (one record); the file itself is streamed, whatever its size.
MAX_LINE_BYTES = 64 * 1024 * 1024
logger = logging.getLogger(__name__)
_UMASK = os.umask(0)
os.umask(_UMASK)


def json_problem(err: json.JSONDecodeError) -> str:
    """json's message and the column as one phrase ("Unterminated string starting at column 5")."""
    message = err.msg[: -len(" at")] if err.msg.endswith(" at") else err.msg
    return f"{message} at column {err.colno}"


def parse_json(
    text: str, where: str | Path, error: type[SynopsisError] = InputError, problem: str = "malformed JSON"
) -> Any:
    """``json.loads(text)``; bad JSON is one ``error`` naming the place and line (``a.json:3: malformed
    JSON (Expecting ',' delimiter at column 7)``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise error(f"{where}:{err.lineno}: {problem} ({json_problem(err)})") from None
    except RecursionError:
        raise error(f"{where}: {problem} (nested too deeply)") from None


_JSON_TYPES = {dict: "object", list: "array", str: "string"}


def read_json(
    path: str | Path,
    what: str = "a JSON file",
    error: type[SynopsisError] = InputError,
    expect: type | None = None,
    max_bytes: int = MAX_TEXT_BYTES,
) -> Any:
    """The JSON value stored in ``path`` (a config, a checkpoint's metadata, a vocabulary...): the one reader
    of stored JSON. Every problem is one ``error`` naming the file: missing (``dir: missing name; not
    {what}``), unreadable or not UTF-8, corrupt (``name:LINE: corrupt JSON (...)``), or, with ``expect``,
    another top-level type than ``expect``, or larger than ``max_bytes`` (refused before it is parsed)."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path.parent}: missing {path.name}; not {what}")
    try:
        text = read_text(path, allow_empty=True, max_bytes=max_bytes)
    except InputError as err:
        raise error(str(err)) from None
    except OSError as err:
        raise error(f"{path}: cannot read ({err.strerror or err})") from None
    data = parse_json(text, path, error, "corrupt JSON")
    if expect is not None and not isinstance(data, expect):
        name = _JSON_TYPES.get(expect, expect.__name__)
        raise error(f"{path}: expected a JSON {name}, got {type(data).__name__}")
    return data


# Failures of the storage itself (as opposed to a bug) while a file is being written.
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def output_error(path: str | Path, err: OSError) -> OutputError:
    """A one-line :class:`OutputError` naming ``path`` and the reason (``No space left on device``, ...)."""
    reason = err.strerror or str(err) or type(err).__name__
    if err.errno in (errno.EEXIST, errno.ENOTDIR):
        blocker = next((p for p in Path(path).parents if p.exists()), None)
        if blocker is not None and not blocker.is_dir():
            reason = f"{blocker} is a file, not a folder"
    return OutputError(f"{path}: cannot write ({reason})")


def _is_write_failure(err: BaseException, tmp: str | Path) -> bool:
    """A full disk or read-only storage, or any OS error on the temporary output itself."""
    if not isinstance(err, OSError):
        return False
    return err.errno in _STORAGE_ERRNOS or str(err.filename or "").startswith(str(tmp))


def missing_path(path: str | Path) -> InputError:
    """The error for a ``path`` that ``exists()`` calls missing: a loop of symbolic links says so."""
    if os.path.islink(path):
        try:
            os.stat(path)
        except OSError as err:
            if err.errno == errno.ELOOP:
                return InputError(f"{path}: a loop of symbolic links")
            return InputError(f"{path}: a symbolic link to a missing file ({os.readlink(path)})")
    return InputError(f"{path}: no such file or directory")


def check_file(path: str | Path, what: str = "a file") -> None:
    """Refuse a ``path`` that is missing, a directory, or a loop of symbolic links, each in one line."""
    try:
        is_dir = Path(path).is_dir()
        os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(f"{path}: a loop of symbolic links") from None
        raise InputError(f"{path}: cannot read ({err.strerror or err})") from None
    if is_dir:
        raise InputError(f"{path}: is a directory, expected {what}")


def _megabytes(size: int) -> str:
    return f"{size / 1024 / 1024:g} MB"


def read_bounded(path: str | Path, limit_bytes: int, hint: str = "") -> bytes:
    """The bytes of ``path``, reading at most ``limit_bytes + 1`` of them: a larger file is one
    :class:`InputError` (``hint`` says how to raise the limit). The file's reported size is never trusted,
    since ``/dev/zero``, FIFOs and ``/proc`` files report 0."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit_bytes:  # a regular file says its size: refuse it without reading
                raise InputError(
                    f"{path}: file is {size / 1024 / 1024:.1f} MB, larger than the "
                    f"{_megabytes(limit_bytes)} limit{hint}"
                )
            data = handle.read(limit_bytes + 1)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(f"{path}: a loop of symbolic links") from None
        raise InputError(f"{path}: cannot read ({err.strerror or err})") from None
    if len(data) > limit_bytes:
        raise InputError(f"{path}: larger than the {_megabytes(limit_bytes)} limit{hint}")
    return data


def read_text(
    path: str | Path, allow_empty: bool = False, max_bytes: int = MAX_TEXT_BYTES, hint: str = ""
) -> str:
    """Read a UTF-8 text file of at most ``max_bytes``, refusing missing, larger, binary, non-UTF-8 and
    (unless allowed) empty files."""
    path = Path(path)
    check_file(path)
    data = read_bounded(path, max_bytes, hint)
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

    The file is streamed line by line, so corpora larger than memory can be read. A line that is not valid
    JSON (or not UTF-8) raises :class:`InputError` naming file and line, or, with ``skip_bad_lines``, is
    counted in ``stats["skipped"]`` and skipped. Binary and empty files are refused outright.
    """
    path = Path(path)
    check_file(path)
    stats = stats if stats is not None else {}
    stats.setdefault("skipped", 0)
    seen_content = False
    offset = 0  # read in one pass, never rewound: a pipe or a FIFO (/dev/stdin) is read as a file is
    with path.open("rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if offset < _SNIFF_BYTES and b"\x00" in raw[: _SNIFF_BYTES - offset]:
                problem = "looks like a binary file (contains NUL bytes), expected JSON lines"
                raise InputError(f"{path}: {problem}")
            offset += len(raw)
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                # a line past the limit is not read on (it may never end: /dev/zero has no newline)
                raise InputError(f"{path}:{number}: line longer than the {_megabytes(MAX_LINE_BYTES)} limit")
            if not raw.strip():
                continue
            seen_content = True
            where = f"{path}:{number}"
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                record = json.loads(line)
            except UnicodeDecodeError:
                if not skip_bad_lines:
                    raise InputError(f"{where}: not valid UTF-8") from None
                stats["skipped"] += 1
                continue
            except (json.JSONDecodeError, RecursionError) as err:
                if not skip_bad_lines:
                    deep = isinstance(err, RecursionError)
                    problem = "nested too deeply" if deep else json_problem(err)  # type: ignore[arg-type]
                    raise InputError(f"{where}: malformed JSON ({problem})") from None
                stats["skipped"] += 1
                continue
            yield where, record
    if not seen_content:
        raise InputError(f"{path}: file is empty")


def whole_lines_to_resume(path: str | Path) -> list[str]:
    """The complete lines of an output that a killed run was appending to, for ``--resume``: a last line cut
    short is dropped from the file (with a warning), so appending goes on after whole lines. Unreadable or
    unwritable files are an :class:`~synopsis.errors.OutputError` naming ``path``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise OutputError(f"{path}: cannot read it to resume ({err.strerror or err})") from None
    whole = data.rfind(b"\n") + 1
    if whole < len(data):
        logger.warning(
            "%s: dropped a last line cut short (%d bytes; the run was killed while writing it)",
            path,
            len(data) - whole,
        )
        try:
            os.truncate(path, whole)
        except OSError as err:
            raise output_error(path, err) from None
    return data[:whole].decode("utf-8", errors="replace").split("\n")[:-1]


@contextlib.contextmanager
def open_for_atomic_write(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Write to a temporary file beside ``path`` and rename it into place only when the block succeeds.

    Whatever stops the block (an error, Ctrl-C) leaves ``path`` as it was. A failure of the storage
    (read-only directory, full disk, ...) is an :class:`~synopsis.errors.OutputError` naming ``path``.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:
        raise output_error(path, err) from None
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; give the result the usual permissions
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.replace(tmp, path)
        except OSError as err:
            raise output_error(path, err) from None
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if _is_write_failure(err, tmp):
            raise output_error(path, err) from None  # type: ignore[arg-type]
        raise


def write_json(path: str | Path, data: Any) -> None:
    with open_for_atomic_write(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


def write_directory_atomically(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Fill a temporary directory beside ``path`` with ``write(tmp)``, then rename it into place.

    An existing ``path`` is replaced only once the new directory is complete, so a kill at any moment leaves
    either the old or the new directory, never a half-written one.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
    except OSError as err:
        raise output_error(path, err) from None
    old = path.with_name(f".{path.name}.old")
    try:
        write(tmp)
        try:
            if path.exists():
                shutil.rmtree(old, ignore_errors=True)
                path.rename(old)
                tmp.rename(path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                tmp.rename(path)
        except OSError as err:
            raise output_error(path, err) from None
    except BaseException as err:
        if not path.exists() and old.exists():  # stopped between the two renames: put the old one back
            with contextlib.suppress(OSError):
                old.rename(path)
        shutil.rmtree(tmp, ignore_errors=True)
        if _is_write_failure(err, tmp):
            raise output_error(path, err) from None  # type: ignore[arg-type]
        raise
    return path
