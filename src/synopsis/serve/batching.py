"""Dynamic batching: summaries for one model that arrive within a short window run as one batched call.

Every summarizer takes a batch (``summarize(documents, instructions)``, one summary per document); the
pointer-generator decodes a batch in one beam search and a seq2seq model in one ``generate()``, so a batch
of B costs far less than B calls. A :class:`Batcher` per model collects items (one document or one window,
and one instruction each) from the requests' threads: the first item of a batch opens a window of
``window_s``; the batch leaves when the window closes or ``max_batch`` items with the same key are waiting.
Items with other keys wait for a batch of their own: the key is the request's options as one frozen value
(:class:`~synopsis.serve.registry.RequestOptions`: the backend, the one ``DecodingOptions`` and the model's
other options, checked once at the edge and compared here as they are, never re-validated), since options
decide the decoding and cannot share a call; windows and whole documents are different calls.

The batcher's workers are threads of its own (``concurrency`` of them, started on first use): a free worker
waits for the window, takes the batch, runs it and hands each item's summary to the thread that waits for it.
Items go from a request's thread to a worker and back without passing through the event loop, so a summary
costs two thread switches (in and out) and the event loop only sees the request's events. What is ready when
a window closes is split evenly over the free workers (16 summaries and two free workers make two batches of 8
on two cores; torch releases the GIL in its ops, so batches of one torch thread each run on cores of their
own), and no batch takes more than its share of the items in flight (waiting or running, over the workers).
While another batch with its key runs, a batch that holds its share leaves at once: waiting longer would
only idle its core. A worker that has just finished a batch waits up to one more window while fewer than its
share are ready, for the answers it gave come back as the next requests of clients that wait on them (see
:meth:`Batcher._take`). ``slots`` bounds the batches of all models running at once.

Bounds: while a worker is idle, no item waits longer than the window plus the batch it rides in (with every
worker busy, plus the first running batch to end and one more window). An item whose request gave up (client
gone, timeout) is cancelled and never computed. If a batched call fails, its items are retried alone, so one
bad document fails only its own request.

A request's runner (:class:`~synopsis.pipeline.SummarizeRunner`) runs on a request thread and
hands its documents, or by section each batch of its windows, to the model's batcher through
:class:`SharedCalls`, which blocks that thread until the summaries are back; by document, once the request's
thread has read the document, the event loop hands its summaries to the batcher and awaits them
(:meth:`SharedCalls.call_async`): a finished batch wakes the loop once for all its items, so a batch's
summaries are answered in one turn of the loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import CancelledError, Future
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from synopsis.config import NO_DECODING, DecodingOptions
from synopsis.document import Document
from synopsis.serve.pool import QueueFullError
from synopsis.summarizers import Summarizer
from synopsis.summarizers.batches import batch_size_in_force
from synopsis.summarizers.windows import Window

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
    key: Hashable  # ``(windows, the request's RequestOptions)``: only equal keys share a call
    windows: bool = False
    decoding: DecodingOptions = NO_DECODING  # the call's decoding options (a part of ``key``)
    #: the event loop that awaits the item and what to call there once it is done (see ``_answer``)
    wake: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None
    future: Future[BatchResult] = field(default_factory=Future)
    arrived: float = field(default_factory=time.monotonic)


class Batcher:
    """The batching queue and the workers of one model (see the module docstring)."""

    def __init__(
        self,
        name: str,
        window_s: float,
        max_batch: int,
        concurrency: int,
        slots: threading.Semaphore | None = None,
        observe: Callable[[str, int], None] | None = None,
    ) -> None:
        self.name = name
        self.window_s = window_s
        self.max_batch = max_batch
        self.concurrency = concurrency
        self._slots = slots  # shared by the batchers of all models
        self._observe = observe  # (model, batch size) for the metrics
        self._changed = threading.Condition()  # an RLock: guards the queue, the counters and the workers
        self._queue: deque[BatchItem] = deque()
        self._workers: list[threading.Thread] = []
        self._closed = False
        self.calls = 0  # batched calls made (for tests and logs)
        self.running = 0  # batches running now (at most ``concurrency``; a /metrics gauge)
        self._running_items: Counter[Hashable] = Counter()  # the items of those batches, by key

    def __len__(self) -> int:
        with self._changed:  # /metrics reads it from the event loop while workers change the queue
            return sum(not item.future.done() for item in self._queue)

    def waiting(self, windows: bool = False) -> int:
        """The whole documents (or, with ``windows``, the windows) waiting for a batch."""
        with self._changed:
            return sum(item.windows == windows and not item.future.done() for item in self._queue)

    def _share(self) -> int:
        """A worker's share of the items in flight (waiting or running)."""
        return -(-(len(self) + sum(self._running_items.values())) // self.concurrency)

    def _ready(self, key: Hashable) -> int:
        return sum(1 for item in self._queue if item.key == key and not item.future.done())

    def submit(
        self,
        documents: Sequence[Document | Window],
        instructions: Sequence[str | None],
        summarizer: Summarizer,
        key: Hashable,
        *,
        windows: bool = False,
        decoding: DecodingOptions = NO_DECODING,
        limit: int | None = None,
        wake: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None,
    ) -> list[Future[BatchResult]]:
        """Queue one summary per document (per window with ``windows``), from any thread; wait on the futures
        (cancel one to withdraw its item if it has not run yet), or with ``wake`` (an event loop and a
        callback) be called on that loop when an item is done. More than ``limit`` items of the kind waiting
        is :class:`QueueFullError`, and nothing is queued. ``decoding``: the options every one is decoded
        with, which ``key`` holds (items share a call only under equal keys)."""
        items = [
            BatchItem(
                document=document,
                instruction=instruction,
                summarizer=summarizer,
                key=(windows, key),
                windows=windows,
                decoding=decoding,
                wake=wake,
            )
            for document, instruction in zip(documents, instructions, strict=True)
        ]
        with self._changed:
            if self._closed:
                raise QueueFullError("server shutting down")
            if limit is not None and self.waiting(windows) + len(items) > limit:
                raise QueueFullError(f"server busy: {self.waiting(windows)} summaries waiting for a batch")
            idle = not len(self)
            self._queue.extend(items)
            while len(self._workers) < self.concurrency:
                worker = threading.Thread(target=self._work, name=f"synopsis-batch-{self.name}", daemon=True)
                self._workers.append(worker)
                worker.start()
            # Wake the workers only when it changes what they do (an item to wait for, a full batch): each
            # wake-up is a thread switch, which on a busy CPU waits for the GIL.
            first = next(item for item in self._queue if not item.future.done())
            ready = self._ready(first.key)
            if idle or ready >= self.max_batch or ready - len(items) < self._share() <= ready:
                self._changed.notify_all()
        return [item.future for item in items]

    def close(self) -> None:
        """Stop the workers once their running batch ends; what waits fails as the server shuts down."""
        with self._changed:
            self._closed = True
            for item in self._queue:
                if item.future.set_running_or_notify_cancel():  # False: withdrawn already
                    item.future.set_exception(QueueFullError("server shutting down"))
            _answer(self._queue)
            self._queue.clear()
            self._changed.notify_all()

    # ------------------------------------------------------------------ the workers
    def _work(self) -> None:
        free_since = time.monotonic()
        while True:
            with self._changed:
                while not self._closed and not len(self):
                    self._changed.wait()
                if self._closed:
                    return
            # A slot first, then the batch: items keep arriving while this worker waits for one.
            with self._slots if self._slots is not None else nullcontext():
                batch = self._take(free_since)
                if batch:
                    self._execute(batch)
                    free_since = time.monotonic()

    def _take(self, free_since: float) -> list[BatchItem]:
        """The next batch (empty: its items were withdrawn) once its window has closed, it is full, or,
        while another batch with its key runs, it holds its share of the items in flight (waiting or
        running, over the workers), which is also the most it takes. (Only a batch with its key counts
        there: one with other options running says nothing of when this one's company comes. With one
        worker and one key, the share is all that waits, and neither rule changes what the window does.)

        The share evens out the workers' batches: 12 ready while 4 run make a batch of 8 at once, and the
        other worker's 4, once answered and back, join the 4 left. For that, a worker that has just finished
        a batch waits up to one window more (from ``free_since``) while fewer than its share are ready:
        clients that wait for their answers send their next requests within it, and these ride with what
        waited instead of making a small batch of their own behind it. Without these rules, 16 such clients
        on two workers fell into lasting cohorts (4 + 6 + 6, 12 + 4) of smaller batches than the 8 + 8 that
        two cores run best, and each batch waited out its window although its share was there
        (docs/serve.md, "Fourth round").
        """
        with self._changed:
            while True:
                self._queue = deque(item for item in self._queue if not item.future.done())
                if self._closed or not self._queue:
                    return []
                first = self._queue[0]
                ready = self._ready(first.key)
                share = self._share()
                now = time.monotonic()
                left = first.arrived + self.window_s - now  # from the first item's arrival
                if ready < share:
                    left = max(left, free_since + self.window_s - now)
                alongside = self._running_items[first.key] > 0  # a batch that could have been this one's
                if left <= 0 or ready >= self.max_batch or (alongside and ready >= share):
                    break
                self._changed.wait(left)
            ready_items = [item for item in self._queue if item.key == first.key]
            # Split what is ready over this worker and the other free ones too (16 ready on two free workers:
            # 8 + 8); what stays queued has its window closed, so the next free worker takes it at once.
            parts = 1 + max(0, self.concurrency - self.running - 1)
            batch = ready_items[: min(self.max_batch, share, -(-len(ready_items) // parts))]
            taken = set(map(id, batch))
            self._queue = deque(item for item in self._queue if id(item) not in taken)
            batch = [item for item in batch if item.future.set_running_or_notify_cancel()]
            if batch:
                self.running += 1
                self._running_items[first.key] += len(batch)
                self.calls += 1
            if self._queue:
                self._changed.notify_all()  # another free worker may take the rest
            return batch

    def _execute(self, batch: list[BatchItem]) -> None:
        if self._observe is not None:
            self._observe(self.name, len(batch))
        try:
            try:
                summaries, ms = _call(batch)
            except Exception as err:
                if len(batch) == 1:
                    batch[0].future.set_exception(err)
                    return
                logger.warning(
                    "batch of %d for %s failed (%s); retrying its items alone", len(batch), self.name, err
                )
                for item in batch:
                    try:
                        (summary,), alone_ms = _call([item])
                        item.future.set_result(BatchResult(summary, alone_ms, 1))
                    except Exception as item_err:
                        item.future.set_exception(item_err)
                return
            for item, summary in zip(batch, summaries, strict=True):
                item.future.set_result(BatchResult(summary, ms, len(batch)))
        finally:
            _answer(batch)
            with self._changed:
                self.running -= 1
                key = batch[0].key
                self._running_items[key] -= len(batch)
                if not self._running_items[key]:
                    del self._running_items[key]  # options come and go: keep only the running ones


def _answer(items: Sequence[BatchItem]) -> None:
    """Tell the event loops that await ``items`` (done) once for all of them: one wake-up of a loop per
    batch, and the batch's requests answered in one turn of it. (A wake-up per item would let the loop
    answer each as this thread hands it over, the handovers spread by waits for the GIL, and the next
    requests of those clients arrive spread over more than a window.)"""
    calls: dict[asyncio.AbstractEventLoop, list[Callable[[], None]]] = {}
    for item in items:
        if item.wake is not None:
            loop, callback = item.wake
            calls.setdefault(loop, []).append(callback)
    for loop, callbacks in calls.items():
        try:
            loop.call_soon_threadsafe(_call_each, callbacks)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass


def _call_each(callbacks: list[Callable[[], None]]) -> None:
    for callback in callbacks:
        callback()


def _call(batch: list[BatchItem]) -> tuple[list[Any], float]:
    """One model call for ``batch``, as the runner makes it unbatched, and its wall time in ms."""
    documents: list[Any] = [item.document for item in batch]
    instructions: list[str | None] | None = [item.instruction for item in batch]
    summarizer, decoding = batch[0].summarizer, batch[0].decoding
    begin = time.perf_counter()
    if batch[0].windows:  # as summarize_by_section calls it: one instruction (or None) per window
        out = summarizer.summarize_windows(documents, instructions, decoding)
    else:
        if all(instruction is None for instruction in instructions):
            instructions = None  # as the CLI passes plain summaries
        with batch_size_in_force(len(documents)):  # the batcher's batch is one model call
            out = summarizer.summarize(documents, instructions, decoding=decoding)
    return out, round(1000 * (time.perf_counter() - begin), 2)


class SharedCalls:
    """One request's model calls of documents (``windows=False``) or windows, made through the model's
    :class:`Batcher`, where they may share calls with other requests': blocking (``calls(items,
    instructions)``, a runner on a request thread) or awaited (:meth:`call_async`, from the event loop). More
    than ``limit`` items of the kind waiting is :class:`QueueFullError`. :meth:`cancel` (client gone, timeout)
    withdraws the items still waiting, and every later call fails, so the request ends without computing them.
    """

    def __init__(
        self,
        batcher: Batcher,
        summarizer: Summarizer,
        key: Hashable,
        *,
        windows: bool = True,
        decoding: DecodingOptions = NO_DECODING,
        limit: int | None = None,
    ) -> None:
        self._batcher = batcher
        self._summarizer = summarizer
        self._key = key
        self._decoding = decoding
        self._windows = windows
        self._limit = limit
        self._lock = threading.Lock()
        self._waiting: list[Future[BatchResult]] = []
        self._cancelled = False
        self.largest = 0  # the largest call this request's items were part of
        self.call_ms = 0.0  # the model call of the last items back (not their wait for a batch)

    def __call__(self, items: Sequence[Any], instructions: Sequence[str | None] | None) -> list[Any]:
        futures = self._submit(items, instructions)
        try:
            return self._summaries([future.result() for future in futures])
        finally:
            self._withdraw(futures)

    async def call_async(self, items: Sequence[Any], instructions: Sequence[str | None] | None) -> list[Any]:
        loop = asyncio.get_running_loop()
        answered = loop.create_future()
        futures: list[Future[BatchResult]] = []

        def check() -> None:  # on the loop, when a batch with some of these items is done
            if not answered.done() and all(future.done() for future in futures):
                answered.set_result(None)

        futures = self._submit(items, instructions, (loop, check))
        try:
            check()  # none to wait for
            await answered
            return self._summaries([future.result() for future in futures])
        finally:
            self._withdraw(futures)

    def cancel(self) -> None:
        """Withdraw the items still waiting for a batch; later calls fail."""
        with self._lock:
            self._cancelled = True
            for future in self._waiting:
                future.cancel()

    def _submit(
        self,
        items: Sequence[Any],
        instructions: Sequence[str | None] | None,
        wake: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None,
    ) -> list[Future[Any]]:
        wanted = list(instructions) if instructions is not None else [None] * len(items)
        with self._lock:
            if self._cancelled:
                raise CancelledError()
            self._waiting = self._batcher.submit(
                items,
                wanted,
                self._summarizer,
                self._key,
                windows=self._windows,
                decoding=self._decoding,
                limit=self._limit,
                wake=wake,
            )
            return self._waiting

    def _withdraw(self, futures: list[Future[BatchResult]]) -> None:
        for future in futures:
            future.cancel()  # after a failure or a cancel: the request's other items leave the queue
        with self._lock:
            self._waiting = []

    def _summaries(self, results: Sequence[BatchResult]) -> list[Any]:
        self.largest = max([self.largest, *(result.batch_size for result in results)])
        self.call_ms = max(result.ms for result in results)
        return [result.summary for result in results]
