"""Predictions streamed to a file as they are made: whole lines only, flushed after every batch, resumable.

Formats: ``.jsonl`` holds one ``{"id", "prediction"}`` object per line (a summary's sentences separated by
``"\\n"`` inside the string); any other name holds one prediction per line, its sentences joined by a space
(``synopsis evaluate`` splits them again for ROUGE-Lsum, as Hugging Face's ``run_summarization.py`` does).

A batch is written with one ``write`` while Ctrl-C and SIGTERM are held back, so an interrupted run leaves
only whole lines. ``resume=True`` keeps what the file holds and reports which examples to skip: by id for
JSONL, by count for plain lines. A last line cut short by ``kill -9`` (or a full disk) is dropped with a
warning first, so an interrupted run and its resumed run write the same file as one uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from synopsis.cli.runtime import deferred_signals
from synopsis.errors import OutputError
from synopsis.io import output_error, whole_lines_to_resume

log = logging.getLogger("synopsis.cli")


def as_line(prediction: str) -> str:
    """A prediction on one line: its sentences (one per line in extractive summaries) joined by a space."""
    return " ".join(prediction.replace("\r", "\n").split("\n"))


def render_lines(ids: Sequence[str], predictions: Sequence[str | dict], jsonl: bool) -> list[str]:
    """The lines of a predictions file: ``{"id", "prediction"}`` objects, or one prediction per line. A
    prediction may be a whole record (a summary by section: ``{"prediction", "summary", "sections"}``), whose
    other fields the JSONL line keeps."""
    records = [p if isinstance(p, dict) else {"prediction": p} for p in predictions]
    if jsonl:
        return [
            json.dumps({"id": i, **{k: v for k, v in r.items() if k != "id"}}, ensure_ascii=False) + "\n"
            for i, r in zip(ids, records, strict=True)
        ]
    return [as_line(r["prediction"]) + "\n" for r in records]


def is_jsonl(path: Path) -> bool:
    """Whether a predictions file at ``path`` holds JSONL (by its name)."""
    return path.suffix.lower() == ".jsonl"


class PredictionWriter:
    """See the module docstring. ``written`` counts the predictions the file holds (kept and new)."""

    def __init__(self, path: Path, resume: bool = False) -> None:
        self.path = path
        self.jsonl = is_jsonl(path)
        self.done_ids: Counter[str] = Counter()
        self.done_lines = 0
        if resume and path.exists():
            self._recover()
        elif resume:
            log.info("%s does not exist yet: nothing to resume, starting from the first example", path)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if resume else os.O_TRUNC)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(path, flags, 0o666)
        except OSError as err:
            raise output_error(path, err) from None
        self.written = self.done_lines

    def _recover(self) -> None:
        lines = whole_lines_to_resume(self.path)
        self.done_lines = len(lines)
        if not self.jsonl:
            return
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
                self.done_ids[str(record["id"])] += 1
            except (json.JSONDecodeError, KeyError, TypeError):
                raise OutputError(
                    f"{self.path}:{number}: not a line of predictions ({{'id', 'prediction'}}); "
                    "--resume continues a predictions file written by synopsis summarize"
                ) from None

    def skipped(self, ids: Sequence[str]) -> list[bool]:
        """Which of ``ids`` (the run's examples, in order) the file already holds."""
        if not self.jsonl:
            return [i < self.done_lines for i in range(len(ids))]
        remaining = Counter(self.done_ids)
        out = []
        for example_id in ids:
            out.append(remaining[example_id] > 0)
            remaining[example_id] -= 1
        return out

    def write(self, ids: Sequence[str], predictions: Sequence[str | dict]) -> None:
        """Append one batch as whole lines, in one write that a signal cannot cut."""
        self._append(render_lines(ids, predictions, self.jsonl))

    def _append(self, lines: Sequence[str]) -> None:
        data = memoryview("".join(lines).encode("utf-8"))
        assert self._fd is not None, "write after close"
        with deferred_signals():
            try:
                start: int | None = os.lseek(self._fd, 0, os.SEEK_END)
            except OSError:  # a pipe
                start = None
            try:
                while data:
                    data = data[os.write(self._fd, data) :]
            except OSError as err:
                if start is not None:  # no half line left behind (a full disk, say)
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, start)
                raise output_error(self.path, err) from None
        self.written += len(lines)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            except OSError:
                pass  # some special files (pipes, /dev/stdout) cannot be synced
            finally:
                os.close(fd)


class PartWriter(PredictionWriter):
    """One process's part file of a sharded run (:mod:`synopsis.sharding`): appended to, whole lines only,
    each record with the example's position in the input."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, resume=path.exists())  # the main process has already cut any half line

    def write_records(self, indices: Sequence[int], ids: Sequence[str], predictions: Sequence[str]) -> None:
        from synopsis.sharding import part_record

        self._append([part_record(i, d, p) for i, d, p in zip(indices, ids, predictions, strict=True)])
