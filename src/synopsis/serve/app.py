"""The FastAPI application: JSON API v1, the web page at ``/``, the API reference at ``/docs``.

``create_app(registry, settings)`` builds an app around an already-loaded :class:`ModelRegistry`. Requests
are parsed and summarized on the bounded :class:`~synopsis.serve.pool.InferencePool`, never on the event
loop; every failure of one request becomes that request's error response (JSON, ``{"error": {...}}``, see
:mod:`synopsis.serve.errors`) and leaves the others alone. Auth, the body limit and one log line per request
come from :class:`~synopsis.serve.middleware.RequestMiddleware`; a summarize request's events (streamed or
gathered) are made in :mod:`synopsis.serve.streaming`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles

from synopsis import __version__
from synopsis.errors import InputError, SynopsisError
from synopsis.serve.batching import Batcher, BatchResult, SharedWindows, options_key
from synopsis.serve.documents import document_stats, outline, parse_document
from synopsis.serve.errors import (
    ApiError,
    ClientGone,
    add_error_handlers,
    check_evaluate,
    check_instructions,
)
from synopsis.serve.metrics import ServiceMetrics
from synopsis.serve.middleware import RequestMiddleware
from synopsis.serve.pool import InferencePool, QueueFullError
from synopsis.serve.registry import DEFAULT_MODEL, ModelEntry, ModelRegistry, OptionError, UnknownModelError
from synopsis.serve.schemas import (
    ErrorResponse,
    EvaluateRequest,
    HealthResponse,
    ModelsResponse,
    OutlineRequest,
    OutlineResponse,
    SummarizeRequest,
    SummarizeResponse,
)
from synopsis.serve.settings import ServeSettings
from synopsis.serve.streaming import (
    STREAM_EVENT_SCHEMA,
    by_section,
    check_by_section,
    guarded,
    ndjson_line,
    parsed_event,
    question_summary_outline,
    section_summaries,
    summary_event,
)

logger = logging.getLogger("synopsis.serve")
T = TypeVar("T")

#: Environment variable through which ``synopsis serve --workers N`` hands its configuration to workers.
CONFIG_ENV = "SYNOPSIS_SERVE_CONFIG"


def static_dir() -> Path:
    return Path(str(resources.files("synopsis.serve") / "static"))


# ----------------------------------------------------------------------------- the app
def create_app(registry: ModelRegistry, settings: ServeSettings | None = None) -> FastAPI:
    """The service around ``registry`` (already loaded) with ``settings`` (default: ``ServeSettings()``)."""
    settings = settings or ServeSettings()
    pool = InferencePool(settings.inference_threads, settings.queue_size)
    # Batched by-section jobs wait for their windows' batches, which run on ``pool``: they wait on threads
    # of their own (one per request summarized by section at a time), never on the pool's.
    sections_pool = InferencePool(settings.max_batch, settings.queue_size)
    # Batches run on threads of their own, up to ``batch_workers`` at once: never behind a batch, the
    # inference threads stay free to parse the requests that fill the next batch.
    batch_workers = settings.batches_at_once
    batch_pool = InferencePool(batch_workers, settings.queue_size)
    batchers: dict[str, Batcher] = {}

    def queues() -> dict[str, int]:
        return {"pool": pool.stats()["waiting"], "batch": sum(len(b) for b in batchers.values())}

    def caches() -> list[tuple[str, Any]]:
        found = [(entry.name, getattr(entry.summarizer, "cache", None)) for entry in registry]
        return [(name, cache) for name, cache in found if cache is not None]

    def running() -> dict[str, int]:
        return {name: queue.running for name, queue in batchers.items()}

    metrics = ServiceMetrics(registry.names(), queues, caches, running)

    def batcher(name: str) -> Batcher:
        if name not in batchers:  # made on the event loop, on first use
            batchers[name] = Batcher(
                name,
                batch_pool,
                settings.batch_window_ms / 1000,
                settings.max_batch,
                # With one torch thread a batch uses one core: two at once use two (torch releases the GIL
                # in its ops). With as many torch threads as cores one batch fills them: the default is 1.
                concurrency=batch_workers,
                observe=metrics.observe_batch,
            )
        return batchers[name]

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        logger.info(
            "serving %d model(s): %s; %d inference thread(s), queue %d, timeout %gs, body limit %d bytes, "
            "batching %s, auth %s",
            len(registry),
            ", ".join(registry.names()),
            settings.inference_threads,
            settings.queue_size,
            settings.request_timeout_s,
            settings.max_body_bytes,
            f"{settings.batch_window_ms:g} ms x {settings.max_batch}, {batch_workers} at once"
            if settings.batching
            else "off",
            "on" if settings.auth_token else "off",
        )
        yield
        for queue in batchers.values():
            await queue.close()
        batchers.clear()  # their events belong to this event loop
        pool.shutdown()
        sections_pool.shutdown()
        batch_pool.shutdown()

    app = FastAPI(
        title="synopsis",
        version=__version__,
        summary="Summarize documents with the synopsis models; evaluate summaries.",
        lifespan=lifespan,
        # FastAPI's /docs loads Swagger UI from a CDN; ours is served by the package and works offline.
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.registry = registry
    app.state.settings = settings
    app.state.pool = pool
    app.state.batchers = batchers
    app.state.metrics = metrics
    app.add_middleware(
        RequestMiddleware,
        max_body_bytes=settings.max_body_bytes,
        auth_token=settings.auth_token,
        metrics=metrics,
        body_timeout_s=settings.request_timeout_s,
    )

    add_error_handlers(app)

    def remaining(request: Request) -> float:
        arrived = request.scope.get("state", {}).get("arrived", time.perf_counter())
        return max(settings.request_timeout_s - (time.perf_counter() - arrived), 0.001)

    @contextmanager
    def api_errors(request: Request) -> Iterator[None]:
        """Failures of a request's work as its error response: 499/503/504/422/500."""
        try:
            yield
        except ClientGone:
            raise ApiError(499, "client_closed", "the client closed the connection") from None
        except QueueFullError as err:
            raise ApiError(503, "busy", f"{err}; retry shortly", headers={"Retry-After": "1"}) from None
        except TimeoutError:
            raise ApiError(
                504, "timeout", f"the request took longer than {settings.request_timeout_s:g} s"
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

    async def run(request: Request, job: Callable[[], T]) -> T:
        """``job`` on the pool within what is left of the request's time, withdrawn if the client leaves."""
        with api_errors(request):
            future = pool.submit(job)
            return await guarded(request, asyncio.wrap_future(future), remaining(request), future.cancel)

    bearer = {"bearer": {"type": "http", "scheme": "bearer"}}
    error_responses: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorResponse, "description": description}
        for status, description in (
            (401, "Missing or wrong bearer token"),
            (404, "Unknown model"),
            (413, "Request body too large"),
            (422, "Invalid request (the error names the field)"),
            (503, "Queue full: retry later"),
            (504, "Request timed out"),
        )
        if status != 401 or settings.auth_token
    }
    modelless_errors = {status: value for status, value in error_responses.items() if status != 404}
    auth_errors = {status: value for status, value in error_responses.items() if status == 401}
    security: dict[str, Any] = (
        {"openapi_extra": {"security": [{"bearer": []}]}} if settings.auth_token else {}
    )

    @app.get("/health", response_model=HealthResponse, tags=["service"])
    async def health() -> dict[str, Any]:
        """Liveness and load: the number of models and the inference pool's running/waiting jobs."""
        return {"status": "ok", "version": __version__, "models": len(registry), "pool": pool.stats()}

    @app.get(
        "/metrics",
        tags=["service"],
        # the route's class stays JSON so that the 401 is documented as JSON; 200 is the text format
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, **auth_errors},
        **security,
    )
    async def prometheus_metrics() -> Response:
        """Counters and histograms in the Prometheus text format (requests, latency, batch sizes, queues)."""
        payload, content_type = metrics.render()
        return Response(payload, media_type=content_type)

    @app.get("/v1/models", response_model=ModelsResponse, responses=auth_errors, tags=["models"], **security)
    async def models() -> dict[str, Any]:
        """The models this server offers, by name, with the options and whether they use instructions."""
        default = DEFAULT_MODEL if DEFAULT_MODEL in registry else None
        return {"default": default, "models": [entry.public() for entry in registry]}

    summarize_responses: dict[int | str, dict[str, Any]] = {
        200: {
            "description": 'The summaries; with `"stream": true`, NDJSON events (see StreamEvent)',
            "content": {"application/x-ndjson": {"schema": STREAM_EVENT_SCHEMA}},
        },
        **error_responses,
    }

    @app.post(
        "/v1/summarize",
        response_model=SummarizeResponse,
        responses=summarize_responses,
        tags=["summarize"],
        response_model_exclude_unset=True,  # an item has "by" and "structured" only by section
        **security,
    )
    async def summarize(body: SummarizeRequest, request: Request) -> Any:
        """Parse the document, then summarize it once per instruction (or once without), timing each.

        With ``"stream": true`` the answer is NDJSON: an event per summary as it finishes, then a ``done``
        event holding the whole response (or an ``error`` event).
        """
        request.state.log = f"model={body.model}"
        try:
            entry = registry.get(body.model)
        except UnknownModelError as err:
            raise ApiError(404, "unknown_model", str(err), "model") from None
        request.scope["state"]["model"] = entry.name
        instructions = check_instructions(body.instructions, settings)
        options = body.options.given() if body.options else {}
        try:
            summarizer = entry.with_options(options)  # cheap: shares the weights
        except OptionError as err:
            raise ApiError(422, "invalid_option", str(err), f"options.{err.option}") from None
        if body.by == "section":  # a model that cannot is a plain 422, before any work or stream starts
            with api_errors(request):
                check_by_section(entry)
        submitted = time.perf_counter()
        warnings = []
        if instructions and not entry.instructions:
            warnings.append(f"model '{entry.name}' ignores instructions: each summary is the plain summary")

        # An extractive method picks sentences in microseconds: a batch window would only delay it.
        if settings.batching and not entry.extractive:
            events = batched_events(request, entry, summarizer, options, instructions, body, submitted)
        else:
            events = pooled_events(request, entry, summarizer, instructions, body, submitted)
        # The document is parsed before any answer starts, so a bad one is a plain 422 even when streaming.
        with api_errors(request):
            parsed = await anext(events)

        def final(items: list[dict[str, Any]]) -> dict[str, Any]:
            items = sorted(items, key=lambda item: item["index"])
            arrived = request.scope["state"].get("arrived", submitted)
            return {
                "model": entry.name,
                "summaries": [
                    {key: item[key] for key in ("instruction", "summary", "by", "structured") if key in item}
                    for item in items
                ],
                "sections": parsed["sections"],
                "document": parsed["document"],
                "outline": question_summary_outline([item["summary"] for item in items]),
                "timing_ms": {
                    **parsed["timing_ms"],
                    "summaries": [item["ms"] for item in items],
                    "total": round(1000 * (time.perf_counter() - arrived), 2),
                },
                "warnings": warnings,
            }

        if not body.stream:
            with api_errors(request):
                items = [event async for event in events if event["event"] == "summary"]
            return final(items)

        async def ndjson() -> AsyncIterator[bytes]:
            # Events are produced by the same iterator as the plain answer; by section, the producer adds a
            # "section" event per section summary as it is done (see streaming.section_summaries).
            items: list[dict[str, Any]] = []
            yield ndjson_line(parsed)
            try:
                with api_errors(request):
                    async for event in events:
                        if event["event"] == "summary":
                            items.append(event)
                        yield ndjson_line(event)
                yield ndjson_line({"event": "done", "response": final(items)})
            except ApiError as err:
                body = {"code": err.code, "message": err.message, "field": err.field}
                yield ndjson_line({"event": "error", "status": err.status, "error": body})
            finally:
                await events.aclose()

        return StreamingResponse(ndjson(), media_type="application/x-ndjson")

    def pooled_events(
        request: Request,
        entry: ModelEntry,
        summarizer: Any,
        instructions: list[str],
        body: SummarizeRequest,
        submitted: float,
    ) -> AsyncIterator[dict[str, Any]]:
        """Parse and summarize in one pool job, one call per instruction; events as each finishes."""

        def job(emit: Callable[[dict[str, Any]], None]) -> None:
            started = time.perf_counter()
            document, used = parse_document(body.document, body.format, settings.document_limits)
            parsed = time.perf_counter()
            emit(parsed_event(document, used, submitted, started, parsed))
            if by_section(body.by, entry, summarizer, document):
                section_summaries(summarizer, document, used, instructions, body, emit)
                return
            # One call per instruction, one document each, so each is timed on its own (a model with an
            # instruction cache shows its speed-up on the second) and one slow instruction shows as such.
            for index, instruction in enumerate(instructions or [None]):
                begin = time.perf_counter()
                summary = summarizer.summarize([document], None if instruction is None else [instruction])[0]
                ms = round(1000 * (time.perf_counter() - begin), 2)
                emit(summary_event(index, instruction, summary, ms, 1))

        return events_from_thread(request, job)

    async def batched_events(
        request: Request,
        entry: ModelEntry,
        summarizer: Any,
        options: dict[str, Any],
        instructions: list[str],
        body: SummarizeRequest,
        submitted: float,
    ) -> AsyncIterator[dict[str, Any]]:
        """Parse on the pool, then queue every summary of the request in the model's batcher at once (they
        may share one call with each other and with other requests); events in the order they finish."""

        def parse() -> dict[str, Any]:
            started = time.perf_counter()
            document, used = parse_document(body.document, body.format, settings.document_limits)
            return parsed_event(document, used, submitted, started, time.perf_counter())

        parsed = await run(request, parse)
        yield parsed
        document, used = parsed["parsed"], parsed["document"]["format"]
        queue = batcher(entry.name)
        if body.by == "section" or (
            body.by == "auto" and await run(request, lambda: by_section("auto", entry, summarizer, document))
        ):
            # By section the job walks the document on a thread of its own and hands its windows, a batch at
            # a time, to the model's batcher, where they share calls with other requests' windows.
            shared = SharedWindows(queue, summarizer, options_key(options), asyncio.get_running_loop())
            job = partial(
                section_summaries, summarizer, document, used, instructions, body,
                shared=shared, batch_size=settings.max_batch,
            )  # fmt: skip
            async for event in events_from_thread(request, job, sections_pool, shared.cancel):
                yield event
            return
        wanted = instructions or [None]
        # --queue-size bounds the summaries waiting for a batch too (at least one full batch may wait);
        # windows are bounded by the by-section threads (at most one batch of each request's waits)
        if queue.waiting() + len(wanted) > max(settings.queue_size, settings.max_batch):
            raise QueueFullError(f"server busy: {queue.waiting()} summaries waiting for a batch")
        futures = [
            queue.submit(parsed["parsed"], instruction, summarizer, options_key(options))
            for instruction in wanted
        ]
        index_of = {id(future): index for index, future in enumerate(futures)}
        pending: set[asyncio.Future[BatchResult]] = set(futures)
        try:
            while pending:
                done = await guarded(
                    request,
                    asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED),
                    remaining(request),
                    lambda: None,
                )
                for future in done[0]:
                    pending.discard(future)
                    result = future.result()
                    index = index_of[id(future)]
                    yield summary_event(index, wanted[index], result.summary, result.ms, result.batch_size)
        finally:
            for future in pending:
                future.cancel()  # client gone or timed out: withdrawn from the batch queue, never computed

    async def events_from_thread(
        request: Request,
        job: Callable[[Callable[[dict[str, Any]], None]], None],
        threads: InferencePool = pool,
        withdraw: Callable[[], None] = lambda: None,
    ) -> AsyncIterator[dict[str, Any]]:
        """Run ``job(emit)`` on ``threads`` and yield every event it emits, as it emits it; ``withdraw()``
        takes back the job's queued work when the request ends early.

        This is the seam for per-section results: a job that summarizes section by section calls ``emit``
        with one event per finished section, and streaming and plain answers both follow.
        """
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

        def emit(event: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        future = threads.submit(lambda: job(emit))
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, None))

        def stop() -> None:
            future.cancel()  # only succeeds while the job still waits for a thread
            withdraw()

        try:
            while True:
                event = await guarded(request, events.get(), remaining(request), stop)
                if event is None:
                    future.result()  # the job's exception, if it failed
                    return
                yield event
        finally:
            stop()

    @app.post(
        "/v1/outline",
        response_model=OutlineResponse,
        responses=modelless_errors,
        tags=["summarize"],
        **security,
    )
    async def document_outline(body: OutlineRequest, request: Request) -> dict[str, Any]:
        """The section outline of a document as the service parses it, without summarizing."""

        def job() -> dict[str, Any]:
            document, used = parse_document(body.document, body.format, settings.document_limits)
            return {"sections": outline(document), "document": document_stats(document, used)}

        return await run(request, job)

    @app.post("/v1/evaluate", responses=modelless_errors, tags=["evaluate"], **security)
    async def evaluate(body: EvaluateRequest, request: Request) -> dict[str, Any]:
        """Score predictions against references: the report ``synopsis evaluate --json`` writes.

        The same library call (``synopsis.evaluation.evaluate_corpus``) with the same defaults; only the
        ``inputs`` entry naming the CLI's files is absent.
        """
        references = check_evaluate(body, settings)
        from synopsis.evaluation import evaluate_corpus
        from synopsis.evaluation.corpus import lsum_sentences

        split, sentence_setting = lsum_sentences(body.predictions, body.sentences)

        def job() -> dict[str, Any]:
            report = evaluate_corpus(
                body.predictions,
                references,
                body.sources,
                metrics=body.metrics,
                mode=body.mode,
                use_stemmer=body.use_stemmer,
                aggregate=body.aggregate,
                split_summaries=split,
                wordnet_exceptions=body.wordnet_exceptions,
                bootstrap=body.bootstrap,
                seed=body.seed,
            )
            if "rouge" in body.metrics:
                report["settings"]["sentences"] = sentence_setting
            return report

        return await run(request, job)

    static = static_dir()

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(static / "index.html", media_type="text/html")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> FileResponse:
        return FileResponse(static / "docs.html", media_type="text/html")

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:  # asked for by clients that do not read the page's <link rel=icon>
        return FileResponse(static / "favicon.svg", media_type="image/svg+xml")

    app.mount("/static", StaticFiles(directory=static), name="static")
    if settings.auth_token:
        schema = app.openapi()
        schema.setdefault("components", {}).setdefault("securitySchemes", {}).update(bearer)
    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn workers (``--workers N``): each builds its own registry from ``$CONFIG_ENV``."""
    from synopsis.serve.registry import build_registry

    logging.captureWarnings(True)  # as in the single-process server: a model's warning is one log line
    config = json.loads(os.environ[CONFIG_ENV])
    registry = build_registry(config.get("models", {}), builtin=config.get("builtin", True))
    return create_app(registry, ServeSettings(**config.get("settings", {})))
