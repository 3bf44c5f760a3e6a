"""The one progress reporter of every long loop: trainers, experiments, summarize and evaluate.

:class:`ProgressReporter` shows a rich bar with rate and ETA when stderr is a terminal, and otherwise (a file
or a pipe) logs a plain ``description: done/total unit (pct), rate, ETA`` line every
``$SYNOPSIS_PROGRESS_INTERVAL`` seconds (default 30) through :mod:`logging`, so that a piped run's log says
how far it is without escape codes. Nothing is shown when the ``synopsis`` loggers are quieter than INFO
(``-q``). Reporters opened inside one another (an experiment's runs, each run's epochs) share one bar
display, each with its own line.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from rich.console import Console

T = TypeVar("T")
log = logging.getLogger("synopsis.progress")
_LIVE: list[Any] = []  # the rich Progress on screen, shared by nested reporters (at most one)


def stderr_is_terminal() -> bool:
    return Console(stderr=True).is_terminal


def progress_enabled() -> bool:
    """Progress is shown unless ``-q`` (the ``synopsis`` loggers then speak at ERROR only)."""
    return logging.getLogger("synopsis").isEnabledFor(logging.INFO)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def plain_interval() -> float:
    """Seconds between plain progress lines (``$SYNOPSIS_PROGRESS_INTERVAL``, default 30)."""
    try:
        return max(0.0, float(os.environ.get("SYNOPSIS_PROGRESS_INTERVAL", "30")))
    except ValueError:
        return 30.0


def _bar() -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TextColumn("{task.fields[note]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    return Progress(*columns, console=Console(stderr=True), transient=True)


class ProgressReporter:
    """Progress of ``total`` items (``None``: unknown): a rich bar with rate and ETA on a terminal, plain
    ``description: done/total unit (pct), rate, ETA`` lines every :func:`plain_interval` seconds otherwise.

    ``note`` (``loss 2.31``) is shown after the rate; :meth:`update` starts a new phase (an epoch, the
    coverage phase) on the same line."""

    def __init__(
        self,
        description: str,
        total: int | None,
        unit: str = "items",
        completed: int = 0,
        enabled: bool | None = None,
        announce: bool = False,
    ) -> None:
        self.description, self.total, self.unit = description, total, unit
        self.announce = announce
        self.completed = self._start = completed
        self.enabled = progress_enabled() if enabled is None else enabled
        self.note = ""
        self._bar: Any = None
        self._owner = False
        self._task: Any = None
        self._started = self._last_line = time.monotonic()

    def __enter__(self) -> ProgressReporter:
        if self.enabled and stderr_is_terminal():
            self._owner = not _LIVE
            if self._owner:
                _LIVE.append(_bar())
                _LIVE[0].__enter__()
            self._bar = _LIVE[0]
            self._task = self._bar.add_task(
                self.description, total=self.total, completed=self.completed, rate="", note=""
            )
        elif self.enabled and self.announce:
            log.info("%s", self.line())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is None:
            return
        if self._owner:
            self._bar.__exit__(*exc)
            _LIVE.clear()
        else:
            self._bar.remove_task(self._task)
        self._bar = None

    def rate(self) -> float:
        elapsed = time.monotonic() - self._started
        return (self.completed - self._start) / elapsed if elapsed > 0 else 0.0

    def speed(self) -> str:
        """``2.7 documents/s``, or ``14.8 s/document`` when slower than one a second."""
        rate = self.rate()
        if rate <= 0:
            return ""
        if rate >= 1:
            return f"{rate:,.1f} {self.unit}/s"
        return f"{1 / rate:,.1f} s/{self.unit[:-1] if self.unit.endswith('s') else self.unit}"

    def line(self) -> str:
        """``summarizing: 40/619 documents (6%), 2.7 documents/s, ETA 3m34s`` (and ``, note``)."""
        rate = self.rate()
        done = f"{self.completed:,}"
        speed = f", {self.speed()}" if rate > 0 else ""
        note = f", {self.note}" if self.note else ""
        if self.total == 1:  # one long step
            return f"{self.description}: {'done' if self.completed else 'running'}{note}"
        if self.total is None:
            return f"{self.description}: {done} {self.unit}{speed}{note}"
        share = self.completed / self.total if self.total else 1.0
        eta = (self.total - self.completed) / rate if rate > 0 else math.inf
        counts = f"{done}/{self.total:,} {self.unit} ({share:.0%})"
        return f"{self.description}: {counts}{speed}, ETA {_duration(eta)}{note}"

    def advance(self, count: int = 1, note: str | None = None) -> None:
        self.completed += count
        if note is not None:
            self.note = note
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.completed, rate=self.speed(), note=self.note)
            return
        now = time.monotonic()
        if now - self._last_line >= plain_interval():
            self._last_line = now
            log.info("%s", self.line())

    def update(
        self,
        description: str | None = None,
        total: int | None = None,
        completed: int | None = None,
        note: str | None = None,
    ) -> None:
        """A new phase on the same line: another description, total or position (the rate restarts when
        the position is set)."""
        if description is not None:
            self.description = description
        if total is not None:
            self.total = total
        if completed is not None:
            self.completed = self._start = completed
            self._started = time.monotonic()
        if note is not None:
            self.note = note
        if self._bar is not None:
            self._bar.update(
                self._task,
                description=self.description,
                total=self.total,
                completed=self.completed,
                note=self.note,
            )


def track(
    items: Iterable[T], description: str, total: int | None, unit: str = "examples", announce: bool = False
) -> Iterator[T]:
    """``items`` with a :class:`ProgressReporter` (the progress hook the library's long loops take)."""
    with ProgressReporter(description, total, unit, announce=announce) as progress:
        for item in items:
            yield item
            progress.advance()
