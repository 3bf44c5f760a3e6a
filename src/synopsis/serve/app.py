"""The FastAPI application: JSON API v1, the web page at ``/``, the API reference at ``/docs``.

``create_app(registry, settings)`` builds an app around an already-loaded :class:`ModelRegistry`. Requests
are parsed and summarized on the bounded :class:`~synopsis.serve.pool.InferencePool`, never on the event
loop; every failure of one request becomes that request's error response (JSON, ``{"error": {...}}``) and
leaves the others alone. One log line per request comes from :class:`RequestMiddleware`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from synopsis import __version__
from synopsis.errors import InputError, SynopsisError
from synopsis.serve.documents import document_stats, outline, parse_document
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
class RequestMiddleware:
    """Body-size limit (413) before the app sees a byte of an oversized body, and one log line per request.

    Bodies are read here, up to the limit, and replayed to the app: a declared ``Content-Length`` over the
    limit is refused without reading, and a chunked body is refused as soon as it passes the limit.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

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
            if declared is not None:
                try:
                    received = int(declared)
                except ValueError:
                    await _error_response(400, "bad_request", "invalid Content-Length header")(
                        scope, receive, send_logged
                    )
                    return
                if received > self.max_body_bytes:
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
                        await self._too_large(scope, receive, send_logged)
                        return
                received = len(body)
                receive = _replay(bytes(body), receive)
            await self.app(scope, receive, send_logged)
        finally:
            extra = state.get("log", "")
            access_logger.info(
                '%s "%s %s" %d %.1fms in=%dB out=%dB%s',
                _client(scope),
                scope["method"],
                scope["path"],
                status,
                1000 * (time.perf_counter() - arrived),
                received,
                sent,
                f" {extra}" if extra else "",
            )

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit_mb = self.max_body_bytes / 1024 / 1024
        response = _error_response(
            413,
            "body_too_large",
            f"request body larger than the {limit_mb:g} MB limit ({self.max_body_bytes} bytes)",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


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

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        logger.info(
            "serving %d model(s): %s; %d inference thread(s), queue %d, timeout %gs, body limit %d bytes",
            len(registry),
            ", ".join(registry.names()),
            settings.inference_threads,
            settings.queue_size,
            settings.request_timeout_s,
            settings.max_body_bytes,
        )
        yield
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
    app.add_middleware(RequestMiddleware, max_body_bytes=settings.max_body_bytes)

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

    async def run(request: Request, job: Callable[[], T]) -> T:
        """``job`` on the pool within what is left of the request's time; 503/504/422/500 on failure."""
        arrived = request.scope.get("state", {}).get("arrived", time.perf_counter())
        remaining = settings.request_timeout_s - (time.perf_counter() - arrived)
        try:
            return await pool.run(job, max(remaining, 0.001))
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
        except Exception:
            # A bug or a model failure on this input: log it with the traceback, answer this request only.
            logger.exception("request %s %s failed", request.method, request.url.path)
            raise ApiError(500, "internal_error", "internal error while processing the request") from None

    error_responses: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorResponse, "description": description}
        for status, description in (
            (404, "Unknown model"),
            (413, "Request body too large"),
            (422, "Invalid request (the error names the field)"),
            (503, "Queue full: retry later"),
            (504, "Request timed out"),
        )
    }
    modelless_errors = {status: value for status, value in error_responses.items() if status != 404}

    @app.get("/health", response_model=HealthResponse, tags=["service"])
    async def health() -> dict[str, Any]:
        """Liveness and load: the number of models and the inference pool's running/waiting jobs."""
        return {"status": "ok", "version": __version__, "models": len(registry), "pool": pool.stats()}

    @app.get("/v1/models", response_model=ModelsResponse, tags=["models"])
    async def models() -> dict[str, Any]:
        """The models this server offers, by name, with the options and whether they use instructions."""
        default = DEFAULT_MODEL if DEFAULT_MODEL in registry else None
        return {"default": default, "models": [entry.public() for entry in registry]}

    @app.post(
        "/v1/summarize",
        response_model=SummarizeResponse,
        responses=error_responses,
        tags=["summarize"],
        response_model_exclude_unset=True,  # an item has "by" and "structured" only by section
    )
    async def summarize(body: SummarizeRequest, request: Request) -> dict[str, Any]:
        """Parse the document, then summarize it once per instruction (or once without), timing each."""
        request.state.log = f"model={body.model}"
        try:
            entry = registry.get(body.model)
        except UnknownModelError as err:
            raise ApiError(404, "unknown_model", str(err), "model") from None
        instructions = _check_instructions(body.instructions, settings)
        options = body.options.given() if body.options else {}
        try:
            summarizer = entry.with_options(options)  # cheap: shares the weights
        except OptionError as err:
            raise ApiError(422, "invalid_option", str(err), f"options.{err.option}") from None
        submitted = time.perf_counter()

        def job() -> dict[str, Any]:
            started = time.perf_counter()
            document, used = parse_document(body.document, body.format)
            parsed = time.perf_counter()
            items, times = [], []
            # One call per instruction, one document each, so each is timed on its own (a model with an
            # instruction cache shows its speed-up on the second) and one slow instruction shows as such.
            by_section = _by_section(body.by, summarizer, document, entry.name)
            offsets = None
            if by_section and used in ("text", "markdown"):
                offsets = locate_sentences(body.document, [s.text for s in document.sentences])
            for instruction in instructions or [None]:
                begin = time.perf_counter()
                given = None if instruction is None else [instruction]
                if by_section:
                    (result,) = summarizer.summarize_by_section(
                        [document], given, max_words=body.max_words, offsets=[offsets]
                    )
                    item = {"summary": result.prediction, "by": "section", "structured": result.to_dict()}
                else:
                    item = {"summary": summarizer.summarize([document], given)[0]}
                times.append(round(1000 * (time.perf_counter() - begin), 2))
                items.append({"instruction": instruction, **item})
            return {
                "summaries": items,
                "sections": outline(document),
                "document": document_stats(document, used),
                "outline": question_summary_outline([item["summary"] for item in items]),
                "timing_ms": {
                    "queue": round(1000 * (started - submitted), 2),
                    "parse": round(1000 * (parsed - started), 2),
                    "summaries": times,
                },
            }

        result = await run(request, job)
        arrived = request.scope["state"].get("arrived", submitted)
        result["timing_ms"]["total"] = round(1000 * (time.perf_counter() - arrived), 2)
        warnings = []
        if instructions and not entry.instructions:
            warnings.append(f"model '{entry.name}' ignores instructions: each summary is the plain summary")
        return {"model": entry.name, **result, "warnings": warnings}

    @app.post("/v1/outline", response_model=OutlineResponse, responses=modelless_errors, tags=["summarize"])
    async def document_outline(body: OutlineRequest, request: Request) -> dict[str, Any]:
        """The section outline of a document as the service parses it, without summarizing."""

        def job() -> dict[str, Any]:
            document, used = parse_document(body.document, body.format)
            return {"sections": outline(document), "document": document_stats(document, used)}

        return await run(request, job)

    @app.post("/v1/evaluate", responses=modelless_errors, tags=["evaluate"])
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
    return app


def _by_section(by: str, summarizer: Any, document: Any, name: str) -> bool:
    """Whether this request is summarized by section (``auto``: when the document is longer than the
    model's input); asking a model that cannot is a 422 (raised in the job, so as a SynopsisError)."""
    able = callable(getattr(summarizer, "summarize_by_section", None))
    if by == "section" and not able:
        raise SynopsisError(f"by: model '{name}' cannot summarize by section")
    if by == "section" and getattr(summarizer, "needs_references", False):
        raise SynopsisError(f"by: model '{name}' needs reference summaries; use by=document")
    return by == "section" or (by == "auto" and able and longer_than_input(summarizer, document) is not None)


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
