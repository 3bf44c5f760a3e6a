"""A bounded thread pool for inference: a fixed number of threads and a fixed number of waiting jobs.

The event loop never runs a model. A job that cannot get a thread or a waiting place is refused at once
(the caller answers 503), so a burst cannot pile up unbounded work or memory. A job whose caller gave up
(timeout, 504) is cancelled if it has not started; a started one cannot be interrupted (Python threads
cannot be killed), so it keeps its thread, and its place in the bound, until it finishes: the bound always
counts the work that is really there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class QueueFullError(RuntimeError):
    """Every thread is busy and every waiting place is taken."""


class InferencePool:
    def __init__(self, threads: int, queue_size: int) -> None:
        self.threads = threads
        self.queue_size = queue_size
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="synopsis-infer")
        self._lock = threading.Lock()
        self._in_flight = 0  # submitted and not finished (running or waiting)

    @property
    def capacity(self) -> int:
        return self.threads + self.queue_size

    def stats(self) -> dict[str, int]:
        with self._lock:
            in_flight = self._in_flight
        return {
            "threads": self.threads,
            "queue_size": self.queue_size,
            "running": min(in_flight, self.threads),
            "waiting": max(0, in_flight - self.threads),
        }

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Start ``fn`` on a pool thread, or raise :class:`QueueFullError` without queueing it."""
        with self._lock:
            if self._in_flight >= self.capacity:
                raise QueueFullError(f"server busy: {self.threads} running and {self.queue_size} waiting")
            self._in_flight += 1
        try:
            future = self._executor.submit(fn)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)  # also runs when a waiting job is cancelled
        return future

    def _release(self, _future: Future | None) -> None:
        with self._lock:
            self._in_flight -= 1

    async def run(self, fn: Callable[[], T], timeout: float) -> T:
        """``fn()`` on a pool thread, awaited for at most ``timeout`` seconds (``TimeoutError`` after)."""
        future = self.submit(fn)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except (TimeoutError, asyncio.CancelledError):
            future.cancel()  # only succeeds while the job still waits for a thread
            raise

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
