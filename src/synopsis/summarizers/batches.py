"""How many documents or windows go into one model call: the one place batches are cut.

* :data:`DEFAULT_BATCH_SIZE`: the calls' size when the caller does not say (``synopsis summarize``'s
  ``--batch-size`` for a neural model, the runner's, the library's ``Summarizer.summarize``).
* :func:`length_batches`: many documents of one library call sorted by length into calls, so that each call
  pads to lengths near its own (one call of 50 abstracts padded to the longest took 48 s against 31 s).
* :func:`batch_size_in_force`: a caller that made its own batch (the runner, the service's batcher, a batch of
  windows) keeps it as one call, and a summarizer that hands documents on (the default) keeps its size.
* :func:`window_batches`: by section, calls that finish sections in order, so that the first section
  streams early.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from synopsis.errors import InputError
from synopsis.summarizers.windows import Window

#: Documents per model call when the caller does not say (``synopsis summarize``'s ``--batch-size`` for a
#: neural model, the runner's, the library's :meth:`Summarizer.summarize`).
DEFAULT_BATCH_SIZE = 16
#: The batch size in force (:func:`batch_size_in_force`), for the :meth:`Summarizer.summarize` calls made
#: within it.
_BATCH_SIZE: ContextVar[int | None] = ContextVar("batch_size", default=None)


@contextmanager
def batch_size_in_force(batch_size: int) -> Iterator[None]:
    """Within the block, :meth:`Summarizer.summarize` calls that do not say read ``batch_size`` documents per
    model call: a caller that made its own batch (the runner, the service's batcher, a batch of windows)
    keeps it as one call, and a summarizer that hands documents on (the default) keeps the caller's size."""
    token = _BATCH_SIZE.set(batch_size)
    try:
        yield
    finally:
        _BATCH_SIZE.reset(token)


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Positions ``0..len(lengths)-1`` in batches of at most ``batch_size``, longest first (ties in order):
    each batch pads to lengths close to its own, and a batch too large for memory fails first."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


def batch_size_wanted() -> int | None:
    """The batch size in force here (:func:`batch_size_in_force`; ``None``: none)."""
    return _BATCH_SIZE.get()


def window_batches(windows: Sequence[Window], batch_size: int, streaming: bool) -> list[tuple[int, int]]:
    """``(start, stop)`` of each model call over ``windows``: ``batch_size`` at a time, or, when sections are
    ``streaming`` to a caller, calls that grow from the first section's windows (at most ``batch_size``),
    each at most twice the one before: the first section is done after a call of its own windows, not after
    a full batch that holds the next sections too, and the calls reach ``batch_size`` after a few (a document
    of 8 sections of 2-3 windows: calls of 3, 6 and 11 windows, not 16 and 4). The trade: a few more, smaller
    calls (docs/serve.md, "Streaming")."""
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    if not streaming:
        starts = range(0, len(windows), batch_size)
        return [(start, min(start + batch_size, len(windows))) for start in starts]
    out: list[tuple[int, int]] = []
    start, limit = 0, 1
    while start < len(windows):
        end = start + 1  # the next pending section's windows (each pseudo-section is one window)
        first = windows[start]
        while end < len(windows) and not first.pseudo and _same_section(windows[end], first):
            end += 1
        size = min(batch_size, max(limit, end - start), len(windows) - start)
        out.append((start, start + size))
        start, limit = start + size, min(batch_size, 2 * size)
    return out


def _same_section(window: Window, other: Window) -> bool:
    return window.document == other.document and window.section is other.section and not window.pseudo
