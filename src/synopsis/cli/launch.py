"""Commands under ``torchrun`` / ``accelerate launch``: each process's shard, and who speaks.

:func:`launched` gives this process's :class:`~synopsis.sharding.Shard` (the one-process ``Shard()``
without a launcher, at no cost). Under a launcher the main process (rank 0) shows progress, writes the
outputs and prints the results; the others log warnings and errors only (or errors only).
:func:`errors_from_main_only` wraps the steps every process takes alike (reading the same inputs, loading
the same model): an error there would be the same N times, so only the main process prints it and the
others exit with the same status silently.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import typer

from synopsis.errors import SynopsisError
from synopsis.sharding import Shard, current_shard

log = logging.getLogger("synopsis.cli")


@contextlib.contextmanager
def launched(others: int = logging.WARNING) -> Iterator[Shard]:
    """This process's shard, for the length of a command; then it leaves the process group.

    Under a launcher, the processes other than the main one log at level ``others`` and above only:
    warnings about their own share of the work, or (``logging.ERROR``, for a command whose warnings every
    process would repeat) errors only; ``synopsis -v`` keeps all their messages."""
    shard = current_shard()
    if shard.distributed and not shard.is_main:
        package = logging.getLogger("synopsis")
        if package.getEffectiveLevel() > logging.DEBUG:
            package.setLevel(max(package.getEffectiveLevel(), others))
    if shard.distributed:
        log.info(
            "%d processes, each computing its share; the main one on %s", shard.world, shard.device or "cpu"
        )
    try:
        yield shard
    finally:
        shard.close()


@contextlib.contextmanager
def errors_from_main_only(shard: Shard) -> Iterator[None]:
    """Errors every process meets alike are printed once, by the main process (see the module docstring)."""
    try:
        yield
    except SynopsisError:
        if shard.is_main or not shard.distributed:
            raise
        raise typer.Exit(2) from None
