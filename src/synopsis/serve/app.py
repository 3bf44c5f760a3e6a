"""The FastAPI application: JSON API v1, the web page at ``/``, the API reference at ``/docs``.

``create_app(registry, settings)`` builds an app around an already-loaded :class:`ModelRegistry`: one
:class:`~synopsis.serve.service.SummarizeService` (the pools, the batchers, the error mapping, the summarize
path through the library's runner) and the routers of :mod:`synopsis.serve.routes`. Every failure of one
request becomes that request's error response (JSON, ``{"error": {...}}``, see :mod:`synopsis.serve.errors`)
and leaves the others alone. Auth, the body limit and one log line per request come from
:class:`~synopsis.serve.middleware.RequestMiddleware`.
"""

from __future__ import annotations

import gc
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

from synopsis import __version__
from synopsis.serve.errors import add_error_handlers
from synopsis.serve.middleware import RequestMiddleware
from synopsis.serve.registry import ModelRegistry
from synopsis.serve.routes import (
    Documented,
    api_router,
    document_router,
    page_router,
    service_router,
    static_dir,
)
from synopsis.serve.service import SummarizeService
from synopsis.serve.settings import ServeSettings
from synopsis.summarizers.decoders import DEFAULT_BACKEND

logger = logging.getLogger("synopsis.serve")

#: Environment variable through which ``synopsis serve --workers N`` hands its configuration to workers.
CONFIG_ENV = "SYNOPSIS_SERVE_CONFIG"

__all__ = ["CONFIG_ENV", "create_app", "create_app_from_env", "static_dir"]


def create_app(registry: ModelRegistry, settings: ServeSettings | None = None) -> FastAPI:
    """The service around ``registry`` (already loaded) with ``settings`` (default: ``ServeSettings()``)."""
    settings = settings or ServeSettings()
    registry.limit_variants(settings.max_variants)
    service = SummarizeService(registry, settings)

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
            f"{settings.batch_window_ms:g} ms x {settings.max_batch}, {settings.batches_at_once} at once"
            if settings.batching
            else "off",
            "on" if settings.auth_token else "off",
        )
        # What startup made (the imports, the models: some 400,000 objects) lives as long as the server. Out
        # of the collector's way, a full collection walks only what requests made: walking it all took 0.2 s
        # with the GIL held, a stall of every request and batch (docs/serve.md, "Load test").
        gc.freeze()
        try:
            yield
        finally:
            gc.unfreeze()  # back to the oldest generation: an app made and closed in a process frees its own
            await service.close()

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
    app.state.service = service
    app.state.registry = registry
    app.state.settings = settings
    app.state.pool = service.pool
    app.state.batchers = service.batchers
    app.state.metrics = service.metrics
    add_error_handlers(app)
    documented = Documented.of(bool(settings.auth_token))
    routers = [
        service_router(service, documented),
        api_router(service, documented),
        document_router(service, documented),
        page_router(),
    ]
    for router in routers:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=static_dir()), name="static")
    app.add_middleware(
        RequestMiddleware,
        max_body_bytes=settings.max_body_bytes,
        auth_token=settings.auth_token,
        metrics=service.metrics,
        body_timeout_s=settings.request_timeout_s,
        # the routes that take a body: a body anywhere else is refused at once, unread
        body_paths=[
            route.path
            for router in routers
            for route in router.routes
            if isinstance(route, APIRoute) and "POST" in route.methods
        ],
        allowed_hosts=settings.allowed_hosts,
    )
    if settings.auth_token:
        schema = app.openapi()
        bearer = {"bearer": {"type": "http", "scheme": "bearer"}}
        schema.setdefault("components", {}).setdefault("securitySchemes", {}).update(bearer)
    return app


def create_app_from_env() -> FastAPI:
    """Factory for uvicorn workers (``--workers N``): each builds its own registry from ``$CONFIG_ENV``."""
    from synopsis.serve.registry import build_registry

    logging.captureWarnings(True)  # as in the single-process server: a model's warning is one log line
    config = json.loads(os.environ[CONFIG_ENV])
    registry = build_registry(
        config.get("models", {}),
        builtin=config.get("builtin", True),
        device=config.get("device", "auto"),
        dtype=config.get("dtype"),
        backend=config.get("backend", DEFAULT_BACKEND),
        compute_type=config.get("compute_type"),
    )
    return create_app(registry, ServeSettings(**config.get("settings", {})))
