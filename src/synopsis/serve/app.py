"""The FastAPI application: JSON API v1, the web page at ``/``, the API reference at ``/docs``.

``create_app(registry, settings)`` builds an app around an already-loaded :class:`ModelRegistry`. Requests
are parsed and summarized on the bounded :class:`~synopsis.serve.pool.InferencePool`, never on the event
loop; every failure of one request becomes that request's error response (JSON, ``{"error": {...}}``) and
leaves the others alone. One log line per request comes from :class:`RequestMiddleware`.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from synopsis import __version__
from synopsis.errors import InputError, SynopsisError
from synopsis.serve.batching import Batcher, BatchResult, options_key
from synopsis.serve.documents import document_stats, outline, parse_document
from synopsis.serve.metrics import ServiceMetrics
from synopsis.serve.pool import InferencePool, QueueFullError
from synopsis.serve.registry import DEFAULT_MODEL, ModelRegistry, OptionError, UnknownModelError
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
from synopsis.summarizers.sections import longer_than_input
from synopsis.text import locate_sentences

logger = logging.getLogger("synopsis.serve")
access_logger = logging.getLogger("synopsis.serve.access")
T = TypeVar("T")

#: Environment variable through which ``synopsis serve --workers N`` hands its configuration to workers.
CONFIG_ENV = "SYNOPSIS_SERVE_CONFIG"


def static_dir() -> Path:
    return Path(str(resources.files("synopsis.serve") / "static"))


class ApiError(Exception):
    """An error response: HTTP status, a stable code, a one-line message and the offending field."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.headers = status, code, message, field, headers


def _error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message, "field": field}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _field_name(loc: tuple[Any, ...] | list[Any]) -> str | None:
    """("body", "options", "k") -> "options.k"; ("body", "instructions", 2) -> "instructions[2]"."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    name = ""
    for part in parts:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or None


# ----------------------------------------------------------------------------- middleware
#: Paths that need the bearer token when one is configured; /health stays open for probes, the page and the
#: API reference are static (the page asks for the token itself).
PROTECTED_PREFIXES = ("/v1/", "/metrics")
#: An oversized or refused body is read and discarded up to this many bytes (and seconds) before the error
#: is sent, so that clients which write their whole body before reading (urllib, requests, httpx) receive
#: the answer instead of a connection reset. Larger bodies are refused without reading; the client may then
#: see a reset. Clients that send ``Expect: 100-continue`` (curl) are answered at once.
DRAIN_BYTES = 256 * 1024 * 1024
DRAIN_SECONDS = 30.0


#: One line of a streamed answer (``"stream": true``), in order: ``parsed`` (the outline and document
#: statistics), one ``summary`` per instruction as it finishes (``section`` events are the by-section
#: mode's), then ``done`` with the whole response, or ``error`` with the error body and its HTTP status.
STREAM_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["event"],
    "properties": {"event": {"type": "string", "enum": ["parsed", "section", "summary", "done", "error"]}},
}


def _protected(path: str) -> bool:
    return path == "/v1" or any(path == p.rstrip("/") or path.startswith(p) for p in PROTECTED_PREFIXES)


def _authorized(headers: dict[bytes, bytes], token: bytes) -> bool:
    scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
    # compare_digest: the time taken does not depend on where the first wrong byte is
    return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)


class RequestMiddleware:
    """Auth (401), body-size limit (413) before the app sees a byte of an oversized body, one log line and
    the metrics of every request.

    Bodies are read here, up to the limit, and replayed to the app: a declared ``Content-Length`` over the
    limit is refused without keeping a byte, and a chunked body as soon as it passes the limit; either is
    read and discarded (up to ``DRAIN_BYTES``) first, see there. A body that is not UTF-8 (RFC 8259 JSON
    must be) is a 422 here rather than the framework's undocumented 400.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        auth_token: str | None = None,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.token = None if auth_token is None else auth_token.strip().encode()
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.perf_counter()
        state = scope.setdefault("state", {})
        state["arrived"] = arrived
        status, sent, received = 500, 0, 0

        async def send_logged(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            headers = dict(scope["headers"])
            declared = headers.get(b"content-length")
            expect_continue = headers.get(b"expect", b"").lower() == b"100-continue"
            if declared is not None:
                try:
                    received = int(declared)
                except ValueError:
                    await _error_response(
                        400, "bad_request", "invalid Content-Length header", headers={"Connection": "close"}
                    )(scope, receive, send_logged)
                    return
            if self.token is not None and _protected(scope["path"]) and not _authorized(headers, self.token):
                if not expect_continue:
                    await _drain(receive, received if declared is not None else None)
                await _error_response(
                    401,
                    "unauthorized",
                    "missing or wrong token: send the header 'Authorization: Bearer <token>'",
                    headers={"WWW-Authenticate": "Bearer", "Connection": "close"},
                )(scope, receive, send_logged)
                return
            if declared is not None and received > self.max_body_bytes:
                if not expect_continue:
                    await _drain(receive, received)
                await self._too_large(scope, receive, send_logged)
                return
            if scope["method"] in ("POST", "PUT", "PATCH"):
                body = bytearray()
                more = True
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        status = 499  # the client went away before sending its body
                        return
                    body += message.get("body", b"")
                    more = message.get("more_body", False)
                    if len(body) > self.max_body_bytes:
                        received = len(body)
                        if more:
                            received += await _drain(receive, None)
                        await self._too_large(scope, receive, send_logged)
                        return
                received = len(body)
                if body and not _decodes(bytes(body)):
                    await _error_response(
                        422,
                        "validation_error",
                        "the request body is not UTF-8 text (a JSON body must be UTF-8)",
                    )(scope, receive, send_logged)
                    return
                receive = _replay(bytes(body), receive)
            await self.app(scope, receive, send_logged)
        finally:
            elapsed = time.perf_counter() - arrived
            extra = state.get("log", "")
            access_logger.info(
                '%s "%s %s" %d %.1fms in=%dB out=%dB%s',
                _client(scope),
                scope["method"],
                scope["path"],
                status,
                1000 * elapsed,
                received,
                sent,
                f" {extra}" if extra else "",
            )
            if self.metrics is not None:
                self.metrics.observe_request(scope["path"], state.get("model"), status, elapsed)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit_mb = self.max_body_bytes / 1024 / 1024
        response = _error_response(
            413,
            "body_too_large",
            f"request body larger than the {limit_mb:g} MB limit ({self.max_body_bytes} bytes)",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


async def _drain(receive: Receive, declared: int | None) -> int:
    """Read and discard the rest of a refused body, within ``DRAIN_BYTES`` and ``DRAIN_SECONDS``."""
    if declared is not None and declared > DRAIN_BYTES:
        return 0
    read = 0

    async def loop() -> None:
        nonlocal read
        while read <= DRAIN_BYTES:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            read += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    try:
        await asyncio.wait_for(loop(), DRAIN_SECONDS)
    except TimeoutError:
        pass
    return read


def _decodes(body: bytes) -> bool:
    """Whether ``json.loads`` could decode ``body`` as text (it detects UTF-8/16/32 as the RFC allows)."""
    try:
        body.decode(json.detect_encoding(body))
    except UnicodeDecodeError:
        return False
    return True


def _replay(body: bytes, receive: Receive) -> Receive:
    done = False

    async def replay() -> Message:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body, only a disconnect can come

    return replay


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


# ----------------------------------------------------------------------------- the app
def create_app(registry: ModelRegistry, settings: ServeSettings | None = None) -> FastAPI:
    """The service around ``registry`` (already loaded) with ``settings`` (default: ``ServeSettings()``)."""
    settings = settings or ServeSettings()
    pool = InferencePool(settings.inference_threads, settings.queue_size)
    batchers: dict[str, Batcher] = {}

    def queues() -> dict[str, int]:
        return {"pool": pool.stats()["waiting"], "batch": sum(len(b) for b in batchers.values())}

    def caches() -> list[tuple[str, Any]]:
        found = [(entry.name, getattr(entry.summarizer, "cache", None)) for entry in registry]
        return [(name, cache) for name, cache in found if cache is not None]

    metrics = ServiceMetrics(registry.names(), queues, caches)

    def batcher(name: str) -> Batcher:
        if name not in batchers:  # made on the event loop, on first use
            batchers[name] = Batcher(
                name,
                pool,
                settings.batch_window_ms / 1000,
                settings.max_batch,
                # One batch of a model at a time: a batch already keeps every core busy (torch's intra-op
                # threads); two at once only contend. The other threads parse and serve other models.
                concurrency=1,
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
            f"{settings.batch_window_ms:g} ms x {settings.max_batch}" if settings.batching else "off",
            "on" if settings.auth_token else "off",
        )
        yield
        for queue in batchers.values():
            await queue.close()
        batchers.clear()  # their events belong to this event loop
        pool.shutdown()

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
    )

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, err: ApiError) -> JSONResponse:
        return _error_response(err.status, err.code, err.message, err.field, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, err: RequestValidationError) -> JSONResponse:
        errors = list(err.errors())
        details = [
            {"field": _field_name(e.get("loc", ())), "message": e.get("msg", ""), "type": e.get("type", "")}
            for e in errors
        ]
        first = details[0] if details else {"field": None, "message": "invalid request"}
        message = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
        return _error_response(422, "validation_error", message, first["field"], details)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, err: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(err.status_code, "http_error")
        return _error_response(err.status_code, code, str(err.detail), headers=err.headers)

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
        instructions = _check_instructions(body.instructions, settings)
        options = body.options.given() if body.options else {}
        try:
            summarizer = entry.with_options(options)  # cheap: shares the weights
        except OptionError as err:
            raise ApiError(422, "invalid_option", str(err), f"options.{err.option}") from None
        if body.by == "section":  # a model that cannot is a plain 422, before any work or stream starts
            with api_errors(request):
                _check_by_section(summarizer, entry.name)
        submitted = time.perf_counter()
        warnings = []
        if instructions and not entry.instructions:
            warnings.append(f"model '{entry.name}' ignores instructions: each summary is the plain summary")

        if settings.batching:
            events = batched_events(request, entry.name, summarizer, options, instructions, body, submitted)
        else:
            events = pooled_events(request, summarizer, instructions, body, submitted)
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
            # "section" event per section summary as it is done (see section_summaries).
            items: list[dict[str, Any]] = []
            yield _ndjson(parsed)
            try:
                with api_errors(request):
                    async for event in events:
                        if event["event"] == "summary":
                            items.append(event)
                        yield _ndjson(event)
                yield _ndjson({"event": "done", "response": final(items)})
            except ApiError as err:
                body = {"code": err.code, "message": err.message, "field": err.field}
                yield _ndjson({"event": "error", "status": err.status, "error": body})
            finally:
                await events.aclose()

        return StreamingResponse(ndjson(), media_type="application/x-ndjson")

    def pooled_events(
        request: Request,
        summarizer: Any,
        instructions: list[str],
        body: SummarizeRequest,
        submitted: float,
    ) -> AsyncIterator[dict[str, Any]]:
        """Parse and summarize in one pool job, one call per instruction; events as each finishes."""

        def job(emit: Callable[[dict[str, Any]], None]) -> None:
            started = time.perf_counter()
            document, used = parse_document(body.document, body.format)
            parsed = time.perf_counter()
            emit(_parsed_event(document, used, submitted, started, parsed))
            if _by_section(body.by, summarizer, document):
                section_summaries(summarizer, document, used, instructions, body, emit)
                return
            # One call per instruction, one document each, so each is timed on its own (a model with an
            # instruction cache shows its speed-up on the second) and one slow instruction shows as such.
            for index, instruction in enumerate(instructions or [None]):
                begin = time.perf_counter()
                summary = summarizer.summarize([document], None if instruction is None else [instruction])[0]
                ms = round(1000 * (time.perf_counter() - begin), 2)
                emit(_summary_event(index, instruction, summary, ms, 1))

        return events_from_thread(request, job)

    async def batched_events(
        request: Request,
        name: str,
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
            document, used = parse_document(body.document, body.format)
            return _parsed_event(document, used, submitted, started, time.perf_counter())

        parsed = await run(request, parse)
        yield parsed
        document, used = parsed["parsed"], parsed["document"]["format"]
        if body.by == "section" or (
            body.by == "auto" and await run(request, lambda: _by_section("auto", summarizer, document))
        ):
            # By section the windows of one request share batches within summarize_by_section, on the pool;
            # they do not join the batcher's queue (its items are whole documents, one summary each).
            job = partial(section_summaries, summarizer, document, used, instructions, body)
            async for event in events_from_thread(request, job):
                yield event
            return
        queue = batcher(name)
        wanted = instructions or [None]
        # --queue-size bounds the summaries waiting for a batch too (at least one full batch may wait)
        if len(queue) + len(wanted) > max(settings.queue_size, settings.max_batch):
            raise QueueFullError(f"server busy: {len(queue)} summaries waiting for a batch")
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
                    yield _summary_event(index, wanted[index], result.summary, result.ms, result.batch_size)
        finally:
            for future in pending:
                future.cancel()  # client gone or timed out: withdrawn from the batch queue, never computed

    def section_summaries(
        summarizer: Any,
        document: Any,
        used: str,
        instructions: list[str],
        body: SummarizeRequest,
        emit: Callable[[dict[str, Any]], None],
    ) -> None:
        """By section, one ``summarize_by_section`` call per instruction: a ``section`` event per section
        summary as it is done (its ``on_section`` callback), then the instruction's ``summary`` event with
        the whole structured summary."""
        offsets = None
        if used in ("text", "markdown"):  # sources get character offsets into the submitted text
            offsets = locate_sentences(body.document, [s.text for s in document.sentences])
        for index, instruction in enumerate(instructions or [None]):
            event_of = partial(_section_event, index, instruction)
            begin = time.perf_counter()
            (result,) = summarizer.summarize_by_section(
                [document],
                None if instruction is None else [instruction],
                max_words=body.max_words,
                offsets=[offsets],
                on_section=lambda _, section, event_of=event_of: emit(event_of(section)),
            )
            ms = round(1000 * (time.perf_counter() - begin), 2)
            event = _summary_event(index, instruction, result.prediction, ms, 1)
            emit({**event, "by": "section", "structured": result.to_dict()})

    async def events_from_thread(
        request: Request, job: Callable[[Callable[[dict[str, Any]], None]], None]
    ) -> AsyncIterator[dict[str, Any]]:
        """Run ``job(emit)`` on the pool and yield every event it emits, as it emits it.

        This is the seam for per-section results: a job that summarizes section by section calls ``emit``
        with one event per finished section, and streaming and plain answers both follow.
        """
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

        def emit(event: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        future = pool.submit(lambda: job(emit))
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(events.put_nowait, None))
        try:
            while True:
                event = await guarded(request, events.get(), remaining(request), future.cancel)
                if event is None:
                    future.result()  # the job's exception, if it failed
                    return
                yield event
        finally:
            future.cancel()  # only succeeds while the job still waits for a thread

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
            document, used = parse_document(body.document, body.format)
            return {"sections": outline(document), "document": document_stats(document, used)}

        return await run(request, job)

    @app.post("/v1/evaluate", responses=modelless_errors, tags=["evaluate"], **security)
    async def evaluate(body: EvaluateRequest, request: Request) -> dict[str, Any]:
        """Score predictions against references: the report ``synopsis evaluate --json`` writes.

        The same library call (``synopsis.evaluation.evaluate_corpus``) with the same defaults; only the
        ``inputs`` entry naming the CLI's files is absent.
        """
        references = _check_evaluate(body, settings)
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

    app.mount("/static", StaticFiles(directory=static), name="static")
    if settings.auth_token:
        schema = app.openapi()
        schema.setdefault("components", {}).setdefault("securitySchemes", {}).update(bearer)
    return app


class ClientGone(Exception):
    """The client closed the connection while its request waited or ran."""


async def _until_disconnected(receive: Receive) -> None:
    # After the body only a disconnect can arrive; the server delivers it when the client goes away.
    while (await receive())["type"] != "http.disconnect":
        pass


async def guarded(request: Request, work: Awaitable[T], timeout: float, withdraw: Callable[[], Any]) -> T:
    """``await work`` for at most ``timeout`` seconds while watching for the client to go away.

    On a timeout (``TimeoutError``) or a disconnect (:class:`ClientGone`) ``withdraw()`` takes the work
    back (a waiting job is cancelled before it runs) and ``work`` is cancelled.
    """
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_until_disconnected(request.receive))
    try:
        done, _ = await asyncio.wait({task, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        withdraw()
        task.cancel()
        raise
    finally:
        gone.cancel()
    if task in done:
        return task.result()
    withdraw()
    task.cancel()
    raise ClientGone() if gone in done else TimeoutError()


def _parsed_event(
    document: Any, used: str, submitted: float, started: float, parsed: float
) -> dict[str, Any]:
    """The first event of every summarize request, made on the inference thread that parsed the document."""
    return {
        "event": "parsed",
        "sections": outline(document),
        "document": document_stats(document, used),
        "timing_ms": {
            "queue": round(1000 * (started - submitted), 2),
            "parse": round(1000 * (parsed - started), 2),
        },
        "parsed": document,  # stays on the server (see _ndjson)
    }


def _summary_event(
    index: int, instruction: str | None, summary: str, ms: float, batch: int
) -> dict[str, Any]:
    return {
        "event": "summary",
        "index": index,
        "instruction": instruction,
        "summary": summary,
        "ms": ms,
        "batch_size": batch,
    }


def _ndjson(event: dict[str, Any]) -> bytes:
    if event["event"] == "parsed":  # the Document itself stays on the server: its outline goes out
        event = {key: value for key, value in event.items() if key != "parsed"}
    return json.dumps(event, ensure_ascii=False).encode() + b"\n"


def _able_by_section(summarizer: Any) -> bool:
    able = callable(getattr(summarizer, "summarize_by_section", None))
    return able and not getattr(summarizer, "needs_references", False)


def _check_by_section(summarizer: Any, name: str) -> None:
    """``by: section`` for a model that cannot is a 422 (a SynopsisError, see ``api_errors``)."""
    if not callable(getattr(summarizer, "summarize_by_section", None)):
        raise SynopsisError(f"by: model '{name}' cannot summarize by section")
    if getattr(summarizer, "needs_references", False):
        raise SynopsisError(f"by: model '{name}' needs reference summaries; use by=document")


def _by_section(by: str, summarizer: Any, document: Any) -> bool:
    """Whether this request is summarized by section (``auto``: when the model can and the document is
    longer than the model's input). Runs on the pool: measuring the document may tokenize it."""
    if by != "auto":
        return by == "section"
    return _able_by_section(summarizer) and longer_than_input(summarizer, document) is not None


def _section_event(index: int, instruction: str | None, section: Any) -> dict[str, Any]:
    """One section's summary as soon as it is done (its subsections come in their own events)."""
    return {
        "event": "section",
        "index": index,
        "instruction": instruction,
        "section": {
            "heading": section.heading,
            "path": list(section.path),
            "summary": [sentence.to_dict() for sentence in section.summary],
        },
    }


def question_summary_outline(summaries: list[str]) -> dict[str, Any] | None:
    """The first summary that is a question-summary hierarchy (a model trained on QS targets writes them,
    HIBRIDS section 4), parsed leniently: ``{"tree", "text", "problems"}``; ``None`` for plain summaries."""
    from synopsis.qs import ANSWER, LEVEL_MARKERS, parse_lenient, render_outline

    for summary in summaries:
        if ANSWER in summary or any(marker in summary for marker in LEVEL_MARKERS):
            parsed = parse_lenient(summary)
            return {
                "tree": parsed.tree.to_dict(),
                "text": render_outline(parsed.tree, width=None),
                "problems": [problem.problem for problem in parsed.problems],
            }
    return None


def _check_instructions(instructions: list[str] | None, settings: ServeSettings) -> list[str]:
    if not instructions:
        return []
    if len(instructions) > settings.max_instructions:
        raise ApiError(
            422,
            "validation_error",
            f"instructions: {len(instructions)} given, at most {settings.max_instructions} per request",
            "instructions",
        )
    for i, instruction in enumerate(instructions):
        if not instruction.strip():
            raise ApiError(
                422, "validation_error", f"instructions[{i}]: empty instruction", f"instructions[{i}]"
            )
        if len(instruction) > settings.max_instruction_chars:
            raise ApiError(
                422,
                "validation_error",
                f"instructions[{i}]: {len(instruction)} characters, at most {settings.max_instruction_chars}",
                f"instructions[{i}]",
            )
    return [instruction.strip() for instruction in instructions]


def _check_evaluate(body: EvaluateRequest, settings: ServeSettings) -> list[list[str]]:
    n = len(body.predictions)
    if n > settings.max_evaluate_examples:
        raise ApiError(
            422,
            "validation_error",
            f"predictions: {n} examples, at most {settings.max_evaluate_examples} per request",
            "predictions",
        )
    if len(body.references) != n:
        raise ApiError(
            422,
            "validation_error",
            f"references: {len(body.references)} given for {n} predictions",
            "references",
        )
    if body.sources is not None and len(body.sources) != n:
        raise ApiError(
            422, "validation_error", f"sources: {len(body.sources)} given for {n} predictions", "sources"
        )
    references = []
    for i, refs in enumerate(body.references):
        refs = [refs] if isinstance(refs, str) else refs
        if not refs:
            raise ApiError(422, "validation_error", f"references[{i}]: no references", f"references[{i}]")
        references.append(refs)
    return references


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn workers (``--workers N``): each builds its own registry from ``$CONFIG_ENV``."""
    from synopsis.serve.registry import build_registry

    logging.captureWarnings(True)  # as in the single-process server: a model's warning is one log line
    config = json.loads(os.environ[CONFIG_ENV])
    registry = build_registry(config.get("models", {}), builtin=config.get("builtin", True))
    return create_app(registry, ServeSettings(**config.get("settings", {})))
