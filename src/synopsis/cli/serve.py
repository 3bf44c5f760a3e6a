"""``synopsis serve``: the JSON API and the web page on one port (FastAPI + uvicorn)."""

from __future__ import annotations

import ipaddress
import json
import logging
import logging.config
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from synopsis.cli import options as flags
from synopsis.config import NON_NEGATIVE, POSITIVE, Range
from synopsis.devices import resolve_device
from synopsis.errors import ConfigError, InputError
from synopsis.io import read_text

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TOKEN_ENV = "SYNOPSIS_API_TOKEN"
#: A token file is one short line; more is not a token file (and /dev/zero must not be read to its end).
TOKEN_FILE_BYTES = 64 * 1024
logger = logging.getLogger("synopsis.serve")


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def host_names(host: str, allowed: list[str]) -> tuple[str, ...]:
    """The names a request's ``Host`` may give a server listening on ``host`` without a token, besides IP
    addresses: ``localhost``, ``host`` when it is a name, and ``--allowed-hosts``."""
    names = ["localhost", *allowed]
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        names.append(host)
    return tuple(dict.fromkeys(name.strip().lower().rstrip(".") for name in names if name.strip()))


def auth_token(token_file: Path | None, environ: Mapping[str, str]) -> str | None:
    """The API token from ``--auth-token-file`` (first line), else ``$SYNOPSIS_API_TOKEN``, else None."""
    if token_file is not None:
        try:
            lines = read_text(token_file, allow_empty=True, max_bytes=TOKEN_FILE_BYTES).splitlines()
        except InputError as err:
            raise ConfigError(f"--auth-token-file {err}") from None
        token = lines[0].strip() if lines else ""
        if not token:
            raise ConfigError(f"--auth-token-file {token_file}: the file is empty")
        return token
    token = environ.get(TOKEN_ENV, "").strip()
    return token or None


#: The logger of the default summarizer's notes (why a summary is extractive, which checkpoint to name).
NOTES_LOGGER = "synopsis.summarizers.default"


class OnceFilter(logging.Filter):
    """The notes' records (:data:`NOTES_LOGGER`), each distinct message once (the most recent ``limit``
    remembered): a note on a document is news the first time, not on every request for it. Others pass."""

    def __init__(self, limit: int = 1024) -> None:
        super().__init__()
        self.limit = limit
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != NOTES_LOGGER:
            return True
        message = record.getMessage()
        with self._lock:
            if message in self._seen:
                self._seen.move_to_end(message)
                return False
            self._seen[message] = None
            if len(self._seen) > self.limit:
                self._seen.popitem(last=False)
        return True


def _log_config(level: str) -> dict:
    """uvicorn's messages in our one-line format; its access log is off (ours: one line per request); the
    default summarizer's notes once each."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"line": {"format": _LOG_FORMAT}},
        "filters": {"once": {"()": "synopsis.cli.serve.OnceFilter"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "line", "filters": ["once"]}},
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "synopsis": {"handlers": ["stderr"], "level": level, "propagate": False},
            "py.warnings": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
        },
    }


def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: all interfaces)."),
    port: int = flags.ranged(8000, "--port", allowed=Range(1, 65535), help="Port to listen on."),
    model: list[str] = typer.Option(
        [],
        "--model",
        help="Offer a model under a name: NAME=DIR, or NAME=ORG/MODEL[@REVISION] for a hub id (repeatable).",
    ),
    workers: int = flags.count_option(
        1, "--workers", help="Worker processes; each loads every model (memory x N)."
    ),
    threads: int | None = flags.threads_option(),
    device: str = flags.device_option(),
    dtype: str | None = flags.inference_dtype_option("; the --model ones"),
    backend: str = flags.backend_option(),
    compute_type: str | None = flags.compute_type_option(),
    inference_threads: int | None = flags.count_option(
        None,
        "--inference-threads",
        help="Requests parsed and summarized at once, each on a thread of its own (default: min(2, cores)).",
    ),
    queue_size: int = flags.ranged(
        64, "--queue-size", allowed=NON_NEGATIVE, help="Requests that may wait for a thread (then 503)."
    ),
    timeout: float = flags.ranged(
        60.0, "--timeout", allowed=POSITIVE, help="Seconds per request (then 504)."
    ),
    max_body_mb: float = flags.ranged(
        10.0, "--max-body-mb", allowed=POSITIVE, help="Largest request body (then 413)."
    ),
    max_instructions: int = flags.count_option(
        16, "--max-instructions", help="Instructions per request (then 422)."
    ),
    # default None: the service's own limit (serve.settings.DocumentLimits; importing it here would load
    # the web framework for every command)
    max_sections: int | None = flags.count_option(
        None, "--max-sections", help="Sections per document (then 422; default 5000)."
    ),
    max_sentences: int | None = flags.count_option(
        None, "--max-sentences", help="Sentences per document (then 422; default 50000)."
    ),
    max_document_words: int | None = flags.count_option(
        None, "--max-document-words", help="Words per document (then 422; default 1000000)."
    ),
    max_variants: int | None = flags.ranged(
        None, "--max-variants", allowed=NON_NEGATIVE,
        help="Models loaded on another backend or compute type for requests, kept at once, all models "
        "together (least recently used unloaded first; 0: only the server's own backend; default 2).",
    ),  # fmt: skip
    max_parse_seconds: float | None = flags.ranged(
        None, "--max-parse-seconds", allowed=POSITIVE,
        help="CPU seconds reading one document may take (then 422; default 20).",
    ),  # fmt: skip
    header_timeout: float = flags.ranged(
        10.0, "--header-timeout", allowed=POSITIVE,
        help="Seconds a connection may take to send its request headers (then closed).",
    ),  # fmt: skip
    min_body_rate: float = flags.ranged(
        500.0,
        "--min-body-rate",
        allowed=POSITIVE,
        help="Bytes/s a request body must average once --header-timeout has passed since its headers "
        "(then 408 and closed).",
    ),
    keep_alive: float = flags.ranged(
        5.0,
        "--keep-alive",
        allowed=POSITIVE,
        help="Seconds an idle connection is kept open for its next request.",
    ),
    max_connections: int = flags.count_option(
        1000,
        "--max-connections",
        help="Open connections per worker; beyond, the oldest one without a request in progress is closed.",
    ),
    no_builtin: bool = flags.switch(
        "--no-builtin", "Offer only the --model models (not the bundled default, lead-3, centrality)."
    ),
    batch_window_ms: float = flags.ranged(
        20.0,
        "--batch-window-ms",
        allowed=Range(0, 10_000),
        help="Batch summaries for one model arriving within this window into one call (0: off).",
    ),
    max_batch: int = flags.count_option(16, "--max-batch", help="Summaries per batched call."),
    batch_workers: int | None = flags.count_option(
        None,
        "--batch-workers",
        help="Batches of one model running at once, each on a thread of its own "
        "(default: cores // torch threads, at least 1).",
    ),
    auth_token_file: Path | None = typer.Option(
        None,
        "--auth-token-file",
        help=f"File whose first line is the API token (else ${TOKEN_ENV}); /v1 and /metrics then need "
        "'Authorization: Bearer <token>'.",
    ),
    allowed_hosts: list[str] = typer.Option(
        [],
        "--allowed-hosts",
        metavar="NAME",
        help="Without a token, a name besides the --host one, localhost and IP addresses that a request's "
        "Host may give (repeatable; guards against DNS rebinding). With a token any Host is answered.",
    ),
    forwarded_allow_ips: str | None = typer.Option(
        None,
        "--forwarded-allow-ips",
        metavar="IPS",
        help="Comma-separated proxy addresses whose X-Forwarded-For / X-Forwarded-Proto are trusted "
        "(default: none, not even loopback).",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Serve the summarizers: JSON API under /v1, the web page at /, the API reference at /docs."""
    level = log_level.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError(f"--log-level must be debug, info, warning or error, got '{log_level}'")
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    loading = {
        "models": _models(model, no_builtin),
        "builtin": not no_builtin,
        "device": device,
        "dtype": dtype,
        "backend": backend,
        "compute_type": compute_type,
    }
    # --threads is what every computing command takes: torch's intra-op threads per computation (before the
    # settings: the batch workers' default divides the cores by it).
    flags.set_torch_threads(threads)
    settings = _settings(
        host,
        allowed_hosts,
        auth_token_file,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        request_timeout_s=timeout,
        queue_size=queue_size,
        max_instructions=max_instructions,
        batch_window_ms=batch_window_ms,
        max_batch=max_batch,
        batch_workers=batch_workers,
        header_timeout_s=header_timeout,
        min_body_rate=min_body_rate,
        keep_alive_s=keep_alive,
        max_connections=max_connections,
        inference_threads=inference_threads,
        max_sections=max_sections,
        max_sentences=max_sentences,
        max_document_words=max_document_words,
        max_parse_s=max_parse_seconds,
        max_variants=max_variants,
    )
    resolve_device(device)  # and the device (a one-line error, exit 2), before any worker starts
    _start(host, port, workers, threads, level, settings, loading, forwarded_allow_ips)


def _models(specs: list[str], no_builtin: bool) -> dict[str, str]:
    """``--model NAME=DIR`` (or a hub id) by name, each checked before anything loads."""
    from synopsis.serve import parse_model_spec

    models: dict[str, str] = {}
    for spec in specs:
        name, directory = parse_model_spec(spec)
        if name in models:
            raise ConfigError(f"--model {spec!r}: the name '{name}' is given twice")
        models[name] = str(directory.resolve())
    if no_builtin and not models:
        raise ConfigError("--no-builtin needs at least one --model NAME=DIR")
    return models


def _settings(host: str, allowed_hosts: list[str], token_file: Path | None, **given: Any) -> Any:
    """The service's :class:`~synopsis.serve.settings.ServeSettings` from the flags (a flag left unset: the
    service's own default), checked before any model loads; without a token, the names a request's Host may
    give (a page on another origin must not reach the service through DNS rebinding)."""
    from synopsis.serve import ServeSettings

    options = {name: value for name, value in given.items() if value is not None}
    options["auth_token"] = auth_token(token_file, os.environ)
    if options["auth_token"] is None:
        options["allowed_hosts"] = host_names(host, allowed_hosts)
    return ServeSettings(**options)


def _start(
    host: str,
    port: int,
    workers: int,
    threads: int | None,
    level: str,
    settings: Any,
    loading: dict[str, Any],
    forwarded_allow_ips: str | None,
) -> None:
    """Log as the service does, then run uvicorn: one process with its registry (``loading``: what
    :func:`~synopsis.serve.build_registry` takes), or ``workers`` processes that each load their own."""
    import uvicorn

    from synopsis.serve import build_registry, create_app
    from synopsis.serve.app import CONFIG_ENV
    from synopsis.serve.connections import LIMITS_ENV, PROTOCOL, fit_to_descriptors

    config = _log_config(level)
    logging.config.dictConfig(config)
    logging.captureWarnings(True)  # a model's UserWarning becomes one log line, not a source listing
    if settings.auth_token is None and not is_loopback(host):
        logger.warning(
            "listening on %s without a token: anyone who can reach port %d can use every endpoint "
            "(set --auth-token-file FILE or $%s)",
            host,
            port,
            TOKEN_ENV,
        )
    # uvicorn makes the protocol objects itself, in every worker: the limits go by the environment
    connections, backlog = fit_to_descriptors(settings.max_connections)
    os.environ[LIMITS_ENV] = replace(settings.connection_limits, max_connections=connections).to_env()
    common = {
        "host": host,
        "port": port,
        "log_config": config,
        "access_log": False,
        "http": PROTOCOL,
        "timeout_keep_alive": settings.keep_alive_s,
        "backlog": backlog,
        # uvicorn trusts X-Forwarded-For from loopback by default: only from the proxies named here
        "proxy_headers": bool(forwarded_allow_ips),
        "forwarded_allow_ips": forwarded_allow_ips or "",
    }
    if workers == 1:
        uvicorn.run(create_app(build_registry(**loading), settings), **common)
        return
    # uvicorn starts each worker from an import string; the configuration travels in the environment,
    # and every worker loads its own registry (so N workers hold N copies of every model).
    if threads is not None:  # worker processes set torch's threads from the environment they inherit
        os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ[CONFIG_ENV] = json.dumps({**loading, "settings": settings.to_dict()})
    uvicorn.run("synopsis.serve.app:create_app_from_env", factory=True, workers=workers, **common)
