"""Limits and tuning of the web service, each with a default sane for one CPU box and a shared model set."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from synopsis.config import usable_cores
from synopsis.errors import ConfigError
from synopsis.serve.connections import ConnectionLimits


def _default_threads() -> int:
    # Two threads let a fast extractive request pass a slow neural one; more only oversubscribe a small CPU.
    return max(1, min(2, os.cpu_count() or 1))


def default_batch_workers() -> int:
    """Batches of one model that may run at once when ``batch_workers`` is not given: the cores over torch's
    intra-op threads (2 on two cores with one torch thread, 1 with two), so concurrent batches fill the
    cores without oversubscribing them."""
    import torch

    return max(1, usable_cores() // max(1, torch.get_num_threads()))


@dataclass(frozen=True)
class DocumentLimits:
    """The most sections, sentences and words of one document the service takes (then 422): checked once
    the document is parsed, before any of its work is queued, so one request cannot hold an inference
    thread for minutes. Each is also a ``synopsis serve`` flag (``--max-sections``, ``--max-sentences``,
    ``--max-document-words``). ``seconds``: the CPU time reading one document may take
    (``--max-parse-seconds``; a reader stops at its next block after it)."""

    sections: int = 5_000
    sentences: int = 50_000
    words: int = 1_000_000
    seconds: float = 20.0


@dataclass(frozen=True)
class ServeSettings:
    """Every limit the service enforces (see ``docs/serve.md``).

    ``inference_threads`` bounds the threads that parse and summarize; ``queue_size`` bounds the requests
    waiting for one of them (beyond that: 503). ``request_timeout_s`` counts from the request's arrival,
    queueing included (504 when exceeded). ``batch_window_ms`` > 0 (default 20) turns batching on: summaries
    for the same model and options that arrive within the window (up to ``max_batch``) run as one batched
    call; up to ``batch_workers`` batches of a model run at once, each on a thread of its own (None: see
    :func:`default_batch_workers`). ``max_sections``, ``max_sentences``, ``max_document_words`` and
    ``max_parse_s`` (CPU seconds to read it) bound one document (:class:`DocumentLimits`). ``max_variants``:
    the models loaded on another backend or compute type for requests, kept at once (least recently used
    unloaded first; 0: requests get only the backends the server loaded). ``header_timeout_s`` closes a
    connection whose request headers have not arrived in time, ``request_timeout_s`` one whose whole
    request has not, ``min_body_rate`` one whose body arrives slower (bytes/s), ``keep_alive_s`` an idle
    kept-alive one, and beyond
    ``max_connections`` open connections the oldest without a request in progress, else the slowest body,
    is closed (:mod:`synopsis.serve.connections`). ``auth_token``: when set, ``/v1`` and ``/metrics`` need
    ``Authorization: Bearer <token>``. ``allowed_hosts``: the names a request's ``Host`` may give besides IP
    addresses (None: any; ``synopsis serve`` sets them when it runs without a token).
    """

    max_body_bytes: int = 10 * 1024 * 1024
    request_timeout_s: float = 60.0
    inference_threads: int = _default_threads()
    queue_size: int = 64
    max_instructions: int = 16
    max_instruction_chars: int = 2000
    max_evaluate_examples: int = 10_000
    max_sections: int = DocumentLimits.sections
    max_sentences: int = DocumentLimits.sentences
    max_document_words: int = DocumentLimits.words
    max_parse_s: float = DocumentLimits.seconds
    max_variants: int = 2  # serve.registry.DEFAULT_MAX_VARIANTS (not imported: it loads the summarizers)
    batch_window_ms: float = 20.0  # docs/serve.md: 2.9-3.5x the requests/s of unbatched serving
    max_batch: int = 16
    batch_workers: int | None = None
    header_timeout_s: float = 10.0
    min_body_rate: float = 500.0
    keep_alive_s: float = 5.0
    max_connections: int = 1000
    allowed_hosts: tuple[str, ...] | None = None
    auth_token: str | None = field(default=None, repr=False)  # never in a log line or a repr

    def __post_init__(self) -> None:
        positive = {
            "max_body_bytes": self.max_body_bytes,
            "request_timeout_s": self.request_timeout_s,
            "inference_threads": self.inference_threads,
            "max_instructions": self.max_instructions,
            "max_instruction_chars": self.max_instruction_chars,
            "max_evaluate_examples": self.max_evaluate_examples,
            "max_sections": self.max_sections,
            "max_sentences": self.max_sentences,
            "max_document_words": self.max_document_words,
            "max_parse_s": self.max_parse_s,
            "max_batch": self.max_batch,
            "header_timeout_s": self.header_timeout_s,
            "min_body_rate": self.min_body_rate,
            "keep_alive_s": self.keep_alive_s,
            "max_connections": self.max_connections,
        }
        if self.batch_workers is not None:
            positive["batch_workers"] = self.batch_workers
        for name, value in positive.items():
            if not value > 0:
                raise ConfigError(f"serve setting {name} must be > 0, got {value}")
        if self.max_variants < 0:
            raise ConfigError(f"serve setting max_variants must be >= 0, got {self.max_variants}")
        if self.queue_size < 0:
            raise ConfigError(f"serve setting queue_size must be >= 0, got {self.queue_size}")
        if self.batch_window_ms < 0:
            raise ConfigError(f"serve setting batch_window_ms must be >= 0, got {self.batch_window_ms}")
        if self.auth_token is not None and not self.auth_token.strip():
            raise ConfigError("serve setting auth_token is empty: give a token or none")

    @property
    def connection_limits(self) -> ConnectionLimits:
        """What one connection may take to send its request (:mod:`synopsis.serve.connections`)."""
        return ConnectionLimits(
            self.header_timeout_s, self.request_timeout_s, self.min_body_rate, self.max_connections
        )

    @property
    def document_limits(self) -> DocumentLimits:
        return DocumentLimits(
            self.max_sections, self.max_sentences, self.max_document_words, self.max_parse_s
        )

    @property
    def batching(self) -> bool:
        return self.batch_window_ms > 0

    @property
    def batches_at_once(self) -> int:
        """``batch_workers``, or its default on this machine when not given."""
        return self.batch_workers if self.batch_workers is not None else default_batch_workers()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
