"""Dynamic batching: summaries for one model that arrive within a short window run as one batched call.

Every summarizer takes a batch (``summarize(documents, instructions)``, one summary per document); the
pointer-generator decodes a batch in one beam search and a seq2seq model in one ``generate()``, so a batch
of B costs far less than B calls. A :class:`Batcher` per model collects items (one document and one
instruction each) on the event loop: the first item of a batch opens a window of ``window_s``; the batch
leaves when the window closes or ``max_batch`` items with the same options are waiting, and runs on the
batch pool (one thread per batch); what is ready is split evenly over the free workers. Items with other
options wait for a batch of their own (options decide the decoding, so they cannot share a call).

Bounds: at most ``concurrency`` batches of one model run at a time (``--batch-workers``), each on a
thread of its own (torch releases the GIL in its ops, so batches of one torch thread each run on cores of
their own); an item leaves the queue within its window once a slot is free, so with a free slot no item
waits longer than the window plus the batch it rides in (and with every slot busy, plus the first of the
running batches to end). An item whose request gave up (client gone, timeout) is cancelled and never
computed. If a batched call fails, its items are retried alone, so one bad document fails only its own
request.

A request's runner (:class:`~synopsis.summarizers.runner.SummarizeRunner`) runs on a thread of its own and
hands its documents, or by section its windows, to the model's batcher through :class:`SharedWindows`.
By section, the items are windows (:class:`~synopsis.summarizers.sections.Window`, one part of one
section each) and a batch is one ``summarize_windows`` call: a request's by-section job runs on a thread of
its own and hands each batch of its windows to the model's batcher through :class:`SharedWindows`, so the
windows of several requests share calls within the same window and ``max_batch``. Windows and whole
documents never share a call (different calls).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from synopsis.document import Document
from synopsis.serve.pool import InferencePool, QueueFullError
from synopsis.summarizers import Summarizer
from synopsis.summarizers.sections import Window

logger = logging.getLogger("synopsis.serve")


@dataclass
class BatchResult:
    """One item's summary (a string, or a window's summary sentences), the wall time of the call that
    produced it and that call's batch size."""

    summary: Any
    ms: float
    batch_size: int


@dataclass(eq=False)
class BatchItem:
    document: Document | Window  # a window by section (``windows``)
    instruction: str | None
    summarizer: Summarizer  # the request's copy (options applied); items of one batch share ``key``
    key: Hashable  # the request's options and ``windows``: only equal keys share a call
    future: asyncio.Future[BatchResult]
    windows: bool = False
    arrived: float = field(default_factory=time.monotonic)


class Batcher:
    """The batching queue of one model (see the module docstring)."""

    def __init__(
        self,
        name: str,
        pool: InferencePool,
        window_s: float,
        max_batch: int,
        concurrency: int,
        observe: Callable[[str, int], None] | None = None,
    ) -> None:
        self.name = name
        self.pool = pool
        self.window_s = window_s
        self.max_batch = max_batch
        self.concurrency = concurrency
        self._slots = asyncio.Semaphore(concurrency)
        self._queue: deque[BatchItem] = deque()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._observe = observe  # (model, batch size) for the metrics
        self.calls = 0  # batched calls made (for tests and logs)
        self.running = 0  # batches running now (at most ``concurrency``; a /metrics gauge)

    def __len__(self) -> int:
        return sum(not item.future.done() for item in self._queue)

    def waiting(self, windows: bool = False) -> int:
        """The whole documents (or, with ``windows``, the windows) waiting for a batch."""
        return sum(item.windows == windows and not item.future.done() for item in self._queue)

    def submit(
        self,
        document: Document | Window,
        instruction: str | None,
        summarizer: Summarizer,
        key: Hashable,
        windows: bool = False,
    ) -> asyncio.Future[BatchResult]:
        """Queue one summary (of a window with ``windows``); await the future (cancel it to withdraw the item
        if it has not run yet)."""
        loop = asyncio.get_running_loop()
        item = BatchItem(document, instruction, summarizer, (windows, key), loop.create_future(), windows)
        self._queue.append(item)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name=f"batcher-{self.name}")
        self._wake.set()
        return item.future

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for item in self._queue:
            item.future.cancel()
        self._queue.clear()

    # ------------------------------------------------------------------ the loop
    def _drop_cancelled(self) -> None:
        self._queue = deque(item for item in self._queue if not item.future.done())

    def _ready(self, key: Hashable) -> int:
        return sum(1 for item in self._queue if item.key == key and not item.future.done())

    async def _wait(self, seconds: float) -> None:
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except TimeoutError:
            pass

    async def _run(self) -> None:
        while True:
            self._drop_cancelled()
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._slots.acquire()  # a batch slot first: items keep arriving while we wait
            try:
                self._drop_cancelled()
                if not self._queue:
                    self._slots.release()
                    continue
                first = self._queue[0]
                deadline = first.arrived + self.window_s  # the window counts from the first item's arrival
                while self._ready(first.key) < self.max_batch and not first.future.done():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    await self._wait(left)
                ready = [item for item in self._queue if item.key == first.key and not item.future.done()]
                # Split what is ready over this worker and the other free ones: 16 summaries and two free
                # workers make two batches of 8 on two cores, not one of 16 on one core and an idle one.
                # The rest stays queued with its window closed, so the next free worker takes it at once.
                parts = 1 + max(0, self.concurrency - self.running - 1)
                batch = ready[: min(self.max_batch, -(-len(ready) // parts))]
                taken = set(map(id, batch))
                self._queue = deque(item for item in self._queue if id(item) not in taken)
            except BaseException:
                self._slots.release()
                raise
            if not batch:
                self._slots.release()
                continue
            self.running += 1  # now, not when the task starts: the next batch's split counts this one
            asyncio.get_running_loop().create_task(self._execute(batch))

    async def _execute(self, batch: list[BatchItem]) -> None:
        try:
            self.calls += 1
            if self._observe is not None:
                self._observe(self.name, len(batch))
            try:
                summaries, ms = await self._call(batch)
            except QueueFullError as err:
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(err)
                return
            except Exception as err:
                if len(batch) == 1:
                    if not batch[0].future.done():
                        batch[0].future.set_exception(err)
                    return
                logger.warning(
                    "batch of %d for %s failed (%s); retrying its items alone", len(batch), self.name, err
                )
                for item in batch:
                    if item.future.done():
                        continue
                    try:
                        (summary,), alone_ms = await self._call([item])
                        if not item.future.done():
                            item.future.set_result(BatchResult(summary, alone_ms, 1))
                    except Exception as item_err:
                        if not item.future.done():
                            item.future.set_exception(item_err)
                return
            for item, summary in zip(batch, summaries, strict=True):
                if not item.future.done():
                    item.future.set_result(BatchResult(summary, ms, len(batch)))
        finally:
            self.running -= 1
            self._slots.release()
            self._wake.set()

    async def _call(self, batch: list[BatchItem]) -> tuple[list[Any], float]:
        documents: list[Any] = [item.document for item in batch]
        instructions: list[str | None] | None = [item.instruction for item in batch]
        summarizer = batch[0].summarizer
        if batch[0].windows:  # as summarize_by_section calls it: one instruction (or None) per window
            summarize: Callable[[], list[Any]] = partial(
                summarizer.summarize_windows, documents, instructions
            )
        else:
            if all(instruction is None for instruction in instructions):
                instructions = None  # as the CLI passes plain summaries
            summarize = partial(summarizer.summarize, documents, instructions)

        def job() -> tuple[list[Any], float]:
            begin = time.perf_counter()
            out = summarize()
            return out, round(1000 * (time.perf_counter() - begin), 2)

        # Not bounded by a request's timeout: each waiting request has its own, and a started call cannot
        # be interrupted anyway.
        return await asyncio.wrap_future(self.pool.submit(job))


def options_key(options: dict[str, Any]) -> Hashable:
    return tuple(sorted(options.items()))


class SharedWindows:
    """One request's documents (``windows=False``) or windows, summarized through the model's
    :class:`Batcher` for a runner whose job runs on a thread off the event loop: each call queues its items
    (where they may share calls with other requests' items) and blocks until their summaries are back. More
    than ``limit`` documents waiting is :class:`QueueFullError`. :meth:`cancel` (client gone, timeout)
    withdraws the items still waiting, and every later call fails, so the job ends without computing them.

    The job must not run on the batch pool: it waits for batches that run there."""

    def __init__(
        self,
        batcher: Batcher,
        summarizer: Summarizer,
        key: Hashable,
        loop: asyncio.AbstractEventLoop,
        *,
        windows: bool = True,
        limit: int | None = None,
    ) -> None:
        self._batcher = batcher
        self._summarizer = summarizer
        self._key = key
        self._loop = loop
        self._windows = windows
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting: set[concurrent.futures.Future[list[BatchResult]]] = set()
        self._cancelled = False
        self.largest = 0  # the largest call this request's items were part of
        self.call_ms = 0.0  # the model call of the last items back (not their wait for a batch)

    def __call__(self, items: Sequence[Any], instructions: Sequence[str | None] | None) -> list[Any]:
        wanted = list(instructions) if instructions is not None else [None] * len(items)
        with self._lock:
            if self._cancelled:
                raise concurrent.futures.CancelledError()
            waiting = asyncio.run_coroutine_threadsafe(self._gather(items, wanted), self._loop)
            self._waiting.add(waiting)
        try:
            results = waiting.result()
        finally:
            with self._lock:
                self._waiting.discard(waiting)
        self.largest = max([self.largest, *(result.batch_size for result in results)])
        self.call_ms = max(result.ms for result in results)
        return [result.summary for result in results]

    async def _gather(self, items: Sequence[Any], instructions: Sequence[str | None]) -> list[BatchResult]:
        queue = self._batcher
        if self._limit is not None and queue.waiting(self._windows) + len(items) > self._limit:
            raise QueueFullError(f"server busy: {queue.waiting(self._windows)} summaries waiting for a batch")
        futures = [
            queue.submit(item, instruction, self._summarizer, self._key, windows=self._windows)
            for item, instruction in zip(items, instructions, strict=True)
        ]
        try:
            return list(await asyncio.gather(*futures))
        finally:
            for future in futures:
                future.cancel()  # a failure or a cancel: the request's other items leave the queue

    def cancel(self) -> None:
        """Withdraw the items still waiting for a batch; later calls fail."""
        with self._lock:
            self._cancelled = True
            for waiting in self._waiting:
                waiting.cancel()
