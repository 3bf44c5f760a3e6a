"""The service object behind the routes: it owns the pools and the batchers, maps a request's failures to its
error response, and runs a summarize request through the library's runner.

Every summarize request runs :class:`~synopsis.pipeline.SummarizeRunner` (the one path of
``synopsis summarize`` too) on a thread, never on the event loop, and its hooks become the request's events
(:mod:`synopsis.serve.streaming`). With batching (the default) the runner's documents and windows go to the
model's :class:`~synopsis.serve.batching.Batcher`, where they share calls with other requests'; when the
request times out or its client leaves, its waiting items are withdrawn and the runner stops before its next
batch (its ``cancelled`` hook).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from fastapi import Request

from synopsis.errors import InputError, SynopsisError
from synopsis.pipeline import (
    ParsedDocument,
    RunHooks,
    SummarizeRequest,
    SummarizeRunner,
    Summary,
)
from synopsis.serve.batching import Batcher, SharedCalls
from synopsis.serve.documents import read_pasted
from synopsis.serve.errors import ApiError, ClientGone, check_instructions
from synopsis.serve.metrics import ServiceMetrics
from synopsis.serve.pool import InferencePool, QueueFullError
from synopsis.serve.registry import ModelRegistry, OptionError, UnknownModelError
from synopsis.serve.requests import ApiRequest
from synopsis.serve.schemas import SummarizeBody
from synopsis.serve.settings import ServeSettings
from synopsis.serve.streaming import (
    check_by_section,
    guarded,
    parsed_event,
    section_event,
    summary_event,
    until_disconnected,
)
from synopsis.summarizers.sections import Cancelled

logger = logging.getLogger("synopsis.serve")
# What ends a request's events besides its events: its work done, its client gone, its time out.
_DONE, _GONE, _TIMED_OUT = object(), object(), object()
T = TypeVar("T")
Emit = Callable[[dict[str, Any]], None]


class SummarizeService:
    """The pools, the batchers and the metrics of one app, and what the routes do with them."""

    def __init__(self, registry: ModelRegistry, settings: ServeSettings) -> None:
        self.registry = registry
        self.settings = settings
        # Unbatched requests, outlines and evaluations run here, within --inference-threads.
        self.pool = InferencePool(settings.inference_threads, settings.queue_size)
        # Batched requests wait for their batches, which run on the batchers' workers: they wait on threads of
        # their own (as many as one batch holds), never on the pool's.
        self.request_pool = InferencePool(settings.max_batch, settings.queue_size)
        # Batches of all models run up to ``batch_workers`` at once.
        self.batch_slots = threading.BoundedSemaphore(settings.batches_at_once)
        self.batchers: dict[str, Batcher] = {}
        self._batchers_lock = threading.Lock()
        self.metrics = ServiceMetrics(registry.names(), self._queues, self._caches, self._running)

    # ------------------------------------------------------------------ state for /metrics and /health
    def _queues(self) -> dict[str, int]:
        return {"pool": self.pool.stats()["waiting"], "batch": sum(len(b) for b in self.batchers.values())}

    def _caches(self) -> list[tuple[str, Any]]:
        found = [(entry.name, entry.summarizer.cache) for entry in self.registry]
        return [(name, cache) for name, cache in found if cache is not None]

    def _running(self) -> dict[str, int]:
        return {name: queue.running for name, queue in self.batchers.items()}

    def batcher(self, name: str) -> Batcher:
        with self._batchers_lock:  # made on first use
            if name not in self.batchers:
                self.batchers[name] = Batcher(
                    name,
                    self.settings.batch_window_ms / 1000,
                    self.settings.max_batch,
                    # With one torch thread a batch uses one core: two at once use two (torch releases the
                    # GIL in its ops). With as many torch threads as cores one batch fills them: the default
                    # is 1.
                    concurrency=self.settings.batches_at_once,
                    slots=self.batch_slots,
                    observe=self.metrics.observe_batch,
                )
            return self.batchers[name]

    async def close(self) -> None:
        with self._batchers_lock:
            for queue in self.batchers.values():
                queue.close()
            self.batchers.clear()
        for pool in (self.pool, self.request_pool):
            pool.shutdown()

    # ------------------------------------------------------------------ a request's time and errors
    def remaining(self, request: Request) -> float:
        arrived = request.scope.get("state", {}).get("arrived", time.perf_counter())
        return max(self.settings.request_timeout_s - (time.perf_counter() - arrived), 0.001)

    @contextmanager
    def api_errors(self, request: Request) -> Iterator[None]:
        """Failures of a request's work as its error response: 499/503/504/422/500."""
        try:
            yield
        except ClientGone:
            raise ApiError(499, "client_closed", "the client closed the connection") from None
        except QueueFullError as err:
            raise ApiError(503, "busy", f"{err}; retry shortly", headers={"Retry-After": "1"}) from None
        except TimeoutError:
            raise ApiError(
                504, "timeout", f"the request took longer than {self.settings.request_timeout_s:g} s"
            ) from None
        except OptionError as err:
            raise ApiError(422, "invalid_option", str(err), f"options.{err.option}") from None
        except InputError as err:
            raise ApiError(422, "invalid_document", str(err), "document") from None
        except SynopsisError as err:
            raise ApiError(422, "invalid_request", str(err)) from None
        except ApiError:
            raise
        except Exception:
            # A bug or a model failure on this input: log it with the traceback, answer this request only.
            logger.exception("request %s %s failed", request.method, request.url.path)
            raise ApiError(500, "internal_error", "internal error while processing the request") from None

    async def run(self, request: Request, job: Callable[[], T], stop: threading.Event | None = None) -> T:
        """``job`` on the pool within what is left of the request's time, withdrawn if the client leaves;
        ``stop`` is set when the request ends first (a job that looks at it stops then)."""

        def withdraw() -> None:
            future.cancel()
            if stop is not None:
                stop.set()

        with self.api_errors(request):
            future = self.pool.submit(job)
            return await guarded(request, asyncio.wrap_future(future), self.remaining(request), withdraw)

    # ------------------------------------------------------------------ summarize
    async def check(self, body: SummarizeBody, request: Request) -> ApiRequest:
        """The body checked once, at the edge, before any work or stream starts: the model (404), the
        instructions, the options as one frozen value and ``by`` (422), and the summarizer for them (loaded on
        the pool the first time a request asks for another backend)."""
        try:
            entry = self.registry.get(body.model)
        except UnknownModelError as err:
            raise ApiError(404, "unknown_model", str(err), "model") from None
        request.scope["state"]["model"] = entry.name
        instructions = check_instructions(body.instructions, self.settings)
        with self.api_errors(request):
            given = body.options.given() if body.options else {}
            if "max_words" in entry.options:  # an extractive summary by document fills the same budget
                given = {**given, "max_words": body.max_words}
            options = entry.request_options(given)
            if body.by == "section":  # a model that cannot is a plain 422
                check_by_section(entry)
            # cheap (a copy that shares the weights) unless the model must be loaded on another backend
            summarizer = entry.summarizer_for(options) if entry.loaded(options) else None
        if summarizer is None:
            summarizer = await self.run(request, lambda: entry.summarizer_for(options))
        warnings = []
        if instructions and not entry.instructions:
            warnings.append(f"model '{entry.name}' ignores instructions: each summary is the plain summary")
        return ApiRequest(
            entry=entry,
            summarizer=summarizer,
            options=options,
            document=body.document,
            format=body.format,
            instructions=tuple(instructions),
            by=body.by,
            max_words=body.max_words,
            submitted=time.perf_counter(),
            warnings=tuple(warnings),
        )

    def summarize_events(self, request: Request, asked: ApiRequest) -> AsyncIterator[dict[str, Any]]:
        """The request's events from the runner, as they happen: ``parsed``, then ``section`` (by section)
        and ``summary`` events (see :class:`_Run`)."""
        run = _Run(self, asked)
        return self.events_from(request, run.produce, run.withdraw)

    async def events_from(
        self,
        request: Request,
        produce: Callable[[Emit], Awaitable[None]],
        withdraw: Callable[[], None],
    ) -> AsyncIterator[dict[str, Any]]:
        """Run ``produce(emit)`` and yield every event it emits (from the event loop or from a thread), as it
        emits it; ``withdraw()`` takes back its work when the request ends early: its time runs out
        (``TimeoutError``) or its client leaves (:class:`ClientGone`)."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Any] = asyncio.Queue()
        loop_thread = threading.get_ident()

        def emit(event: dict[str, Any]) -> None:
            if threading.get_ident() == loop_thread:  # by document with batching, the loop emits
                events.put_nowait(event)
            else:
                loop.call_soon_threadsafe(events.put_nowait, event)

        # Its end, the client leaving and the deadline are events too: one watcher and one timer for the
        # request, not one of each per event (each costs the event loop a task or two).
        task = asyncio.ensure_future(produce(emit))
        task.add_done_callback(lambda _: events.put_nowait(_DONE))  # after what its threads emitted
        gone = asyncio.ensure_future(until_disconnected(request.receive))
        gone.add_done_callback(lambda watcher: watcher.cancelled() or events.put_nowait(_GONE))
        timer = loop.call_later(self.remaining(request), events.put_nowait, _TIMED_OUT)
        finished = False
        try:
            while True:
                event = await events.get()
                if event is _DONE:
                    finished = True
                    task.result()  # the work's exception, if it failed
                    return
                if event is _GONE:
                    raise ClientGone()
                if event is _TIMED_OUT:
                    raise TimeoutError()
                yield event
        finally:
            timer.cancel()
            gone.cancel()
            if not finished:
                task.cancel()  # a job still waiting for a thread never starts
                withdraw()


class _Run:
    """One summarize request's work: its document read on a thread, the runner's typed request
    (:meth:`ApiRequest.typed`, the one the CLI builds) run by :class:`SummarizeRunner`, and the runner's hooks
    turned into events.

    Without batching it all runs on one pool thread. With batching the runner's documents and windows go to
    the model's batcher under the request's options (the batch key): by section the runner goes on on a
    request thread, handing its windows to the batcher; by document the event loop hands the summaries to
    the batcher and awaits them (:meth:`SummarizeRunner.run_items_async`), so the summaries of one batch are
    answered in one turn of the loop, not by one waking thread after another (which, with every core busy,
    spreads the next requests over more than a window)."""

    def __init__(self, service: SummarizeService, asked: ApiRequest) -> None:
        self.service, self.asked = service, asked
        self.stop = threading.Event()  # set when the request ends first: the runner stops before a batch
        self.documents: SharedCalls | None = None
        self.windows: SharedCalls | None = None
        settings = service.settings
        # An extractive method picks sentences in microseconds: a batch window would only delay it.
        if settings.batching and not asked.entry.extractive:
            queue, key = service.batcher(asked.entry.name), asked.options
            # --queue-size bounds the summaries waiting for a batch too (at least one full batch may wait);
            # windows are bounded by the request threads (at most one batch of each request's waits).
            limit = max(settings.queue_size, settings.max_batch)
            decoding = asked.options.decoding
            self.documents = SharedCalls(
                queue, asked.summarizer, key, windows=False, decoding=decoding, limit=limit
            )
            self.windows = SharedCalls(queue, asked.summarizer, key, decoding=decoding)

    def read(self, emit: Emit, emit_parsed: Emit) -> tuple[SummarizeRunner, SummarizeRequest, RunHooks]:
        """On a thread: the document read within the server's limits, the runner's request and its runner,
        which decides here whether it goes by section (the ``parsed`` event, to ``emit_parsed``), and the
        hooks that turn the rest into events."""
        started = time.perf_counter()
        hooks = self.hooks(emit, emit_parsed, started)
        parsed = read_pasted(
            self.asked.document, self.asked.format, self.service.settings.document_limits, self.stop.is_set
        )
        typed = self.asked.typed(parsed)
        runner = SummarizeRunner.for_request(
            self.asked.summarizer,
            typed,
            batch_size=self.service.settings.max_batch,  # batched or not: the most items of one model call
            summarize_windows=self.windows,
        )
        runner.sectioned(parsed, hooks)
        return runner, typed, hooks

    def hooks(self, emit: Emit, emit_parsed: Emit, started: float) -> RunHooks:
        submitted, documents, windows = self.asked.submitted, self.documents, self.windows

        def parsed(read: ParsedDocument, _: bool) -> None:
            emit_parsed(parsed_event(read.document, read.format, submitted, started, time.perf_counter()))

        def summary(done: Summary) -> None:
            if documents is None or windows is None:
                emit(summary_event(done, done.batch_size))
                return
            if done.by == "document":  # the time of its model call, not of its wait for a batch
                done.ms = documents.call_ms
            emit(summary_event(done, max(documents.largest, windows.largest)))

        def section(index: int, instruction: str | None, done: Any) -> None:
            emit(section_event(index, instruction, done))

        return RunHooks(parsed=parsed, section=section, summary=summary, cancelled=self.stop.is_set)

    def run(self, runner: SummarizeRunner, typed: SummarizeRequest, hooks: RunHooks) -> None:
        """The runner's blocking run of the request's items."""
        try:
            runner.run_items(typed.items, hooks)
        except Cancelled:
            logger.info("request withdrawn: %s", "the rest of its work was not computed")

    async def produce(self, emit: Emit) -> None:
        pool = self.service.pool
        if self.documents is None:  # unbatched: read and summarized on one pool thread
            await asyncio.wrap_future(pool.submit(lambda: self.run(*self.read(emit, emit))))
            return
        # Read on the pool (a few threads: reading holds the GIL, more threads would only take turns); its
        # event is emitted here once it returns: one wake-up of the loop, not two, before the summaries are
        # queued (what delays a request on its way to the batcher spreads a batch's requests).
        read_events: list[dict[str, Any]] = []
        read = pool.submit(lambda: self.read(emit, read_events.append))
        runner, typed, hooks = await asyncio.wrap_future(read)
        for event in read_events:
            emit(event)
        if any(runner.sectioned(item.parsed) for item in typed.items):  # decided when read
            # its windows wait for their batches on a request thread of its own
            threads = self.service.request_pool
            await asyncio.wrap_future(threads.submit(lambda: self.run(runner, typed, hooks)))
        else:
            await runner.run_items_async(typed.items, hooks, self.documents.call_async)

    def withdraw(self) -> None:
        self.stop.set()  # the runner stops before its next batch
        for shared in (self.documents, self.windows):
            if shared is not None:
                shared.cancel()  # and what waits for a batch leaves the queue
