"""The service's routes, in routers over one :class:`~synopsis.serve.service.SummarizeService`: the
service's own (``/health``, ``/metrics``), the JSON API (``/v1``: models and summaries, then outlines and
evaluations) and the pages (``/``, ``/docs``)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import torch
from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response, StreamingResponse

from synopsis import __version__
from synopsis.serve.documents import document_stats, outline, read_pasted_document
from synopsis.serve.errors import check_evaluate
from synopsis.serve.registry import DEFAULT_MODEL
from synopsis.serve.requests import final_response, ndjson_answer
from synopsis.serve.schemas import (
    ErrorResponse,
    EvaluateRequest,
    HealthResponse,
    ModelsResponse,
    OutlineRequest,
    OutlineResponse,
    SummarizeBody,
    SummarizeResponse,
)
from synopsis.serve.service import SummarizeService
from synopsis.serve.streaming import STREAM_EVENT_SCHEMA


def static_dir() -> Path:
    return Path(str(resources.files("synopsis.serve") / "static"))


@dataclass(frozen=True)
class Documented:
    """What the OpenAPI schema says about the routes' errors and auth, from the settings."""

    errors: dict[int | str, dict[str, Any]]
    security: dict[str, Any]

    @classmethod
    def of(cls, auth: bool) -> Documented:
        errors: dict[int | str, dict[str, Any]] = {
            status: {"model": ErrorResponse, "description": description}
            for status, description in (
                (401, "Missing or wrong bearer token"),
                (404, "Unknown model"),
                (413, "Request body too large"),
                (422, "Invalid request (the error names the field)"),
                (503, "Queue full: retry later"),
                (504, "Request timed out"),
            )
            if status != 401 or auth
        }
        return cls(errors, {"openapi_extra": {"security": [{"bearer": []}]}} if auth else {})

    def without(self, *statuses: int) -> dict[int | str, dict[str, Any]]:
        return {status: value for status, value in self.errors.items() if status not in statuses}

    @property
    def auth_errors(self) -> dict[int | str, dict[str, Any]]:
        return {status: value for status, value in self.errors.items() if status == 401}


def service_router(service: SummarizeService, documented: Documented) -> APIRouter:
    router = APIRouter(tags=["service"])

    @router.get("/health", response_model=HealthResponse)
    async def health() -> dict[str, Any]:
        """Liveness and load: the number of models, where and with how many threads they compute, and the
        inference pool's running/waiting jobs."""
        return {
            "status": "ok",
            "version": __version__,
            "models": len(service.registry),
            "device": service.registry.device,
            "pool": service.pool.stats(),
            "compute": {
                "torch_threads": torch.get_num_threads(),
                "batch_workers": service.settings.batches_at_once if service.settings.batching else 0,
            },
        }

    @router.get(
        "/metrics",
        # the route's class stays JSON so that the 401 is documented as JSON; 200 is the text format
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            **documented.auth_errors,
        },
        **documented.security,
    )
    async def prometheus_metrics() -> Response:
        """Counters and histograms in the Prometheus text format (requests, latency, batch sizes, queues)."""
        payload, content_type = service.metrics.render()
        return Response(payload, media_type=content_type)

    return router


def api_router(service: SummarizeService, documented: Documented) -> APIRouter:
    """The JSON API's models and summaries: a thin adapter over the service (:meth:`SummarizeService.check`,
    :meth:`SummarizeService.summarize_events`) and the answer made of the events."""
    router = APIRouter(prefix="/v1")
    registry = service.registry

    @router.get(
        "/models",
        response_model=ModelsResponse,
        responses=documented.auth_errors,
        tags=["models"],
        **documented.security,
    )
    async def models() -> dict[str, Any]:
        """The models this server offers, by name, with the options and whether they use instructions."""
        default = DEFAULT_MODEL if DEFAULT_MODEL in registry else None
        return {"default": default, "models": [entry.public() for entry in registry]}

    summarize_responses: dict[int | str, dict[str, Any]] = {
        200: {
            "description": 'The summaries; with `"stream": true`, NDJSON events (see StreamEvent)',
            "content": {"application/x-ndjson": {"schema": STREAM_EVENT_SCHEMA}},
        },
        **documented.errors,
    }

    @router.post(
        "/summarize",
        response_model=SummarizeResponse,
        responses=summarize_responses,
        tags=["summarize"],
        response_model_exclude_unset=True,
        **documented.security,
    )
    async def summarize(body: SummarizeBody, request: Request) -> Any:
        """Parse the document, then summarize it once per instruction (or once without), timing each.

        With ``"stream": true`` the answer is NDJSON: an event per summary as it finishes, then a ``done``
        event holding the whole response (or an ``error`` event).
        """
        request.state.log = f"model={body.model}"  # escaped and clipped in the log line
        asked = await service.check(body, request)  # 404/422 before any work or stream starts
        events = service.summarize_events(request, asked)
        # The document is parsed before any answer starts, so a bad one is a plain 422 even when streaming.
        with service.api_errors(request):
            parsed = await anext(events)

        def arrived() -> float:
            return float(request.scope["state"].get("arrived", asked.submitted))

        if body.stream:
            errors = partial(service.api_errors, request)
            stream = ndjson_answer(asked, parsed, events, errors, arrived)
            return StreamingResponse(stream, media_type="application/x-ndjson")
        with service.api_errors(request):
            items = [event async for event in events if event["event"] == "summary"]
        return final_response(asked, parsed, items, arrived())

    return router


def document_router(service: SummarizeService, documented: Documented) -> APIRouter:
    """The JSON API's routes beside summarizing: a document's outline and the scores of summaries."""
    router = APIRouter(prefix="/v1")
    settings = service.settings

    @router.post(
        "/outline",
        response_model=OutlineResponse,
        responses=documented.without(404),
        tags=["summarize"],
        **documented.security,
    )
    async def document_outline(body: OutlineRequest, request: Request) -> dict[str, Any]:
        """The section outline of a document as the service parses it, without summarizing."""

        stop = threading.Event()  # set when the request ends first: the reader stops at its next block

        def job() -> dict[str, Any]:
            document, used = read_pasted_document(
                body.document, body.format, settings.document_limits, stop.is_set
            )
            return {"sections": outline(document), "document": document_stats(document, used)}

        return await service.run(request, job, stop)

    @router.post("/evaluate", responses=documented.without(404), tags=["evaluate"], **documented.security)
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

        return await service.run(request, job)

    return router


def page_router() -> APIRouter:
    router = APIRouter(include_in_schema=False)
    static = static_dir()

    @router.get("/")
    async def index() -> FileResponse:
        return FileResponse(static / "index.html", media_type="text/html")

    @router.get("/docs")
    async def docs() -> FileResponse:
        return FileResponse(static / "docs.html", media_type="text/html")

    @router.get("/favicon.ico")
    async def favicon() -> FileResponse:  # asked for by clients that do not read the page's <link rel=icon>
        return FileResponse(static / "favicon.svg", media_type="image/svg+xml")

    return router
