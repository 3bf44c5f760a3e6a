"""Limits and tuning of the web service, each with a default sane for one CPU box and a shared model set."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from synopsis.errors import ConfigError


def _default_threads() -> int:
    # Two threads let a fast extractive request pass a slow neural one; more only oversubscribe a small CPU.
    return max(1, min(2, os.cpu_count() or 1))


@dataclass(frozen=True)
class ServeSettings:
    """Every limit the service enforces (see ``docs/serve.md``).

    ``inference_threads`` bounds the threads that parse and summarize; ``queue_size`` bounds the requests
    waiting for one of them (beyond that: 503). ``request_timeout_s`` counts from the request's arrival,
    queueing included (504 when exceeded).
    """

    max_body_bytes: int = 10 * 1024 * 1024
    request_timeout_s: float = 60.0
    inference_threads: int = _default_threads()
    queue_size: int = 64
    max_instructions: int = 16
    max_instruction_chars: int = 2000
    max_evaluate_examples: int = 10_000

    def __post_init__(self) -> None:
        positive = {
            "max_body_bytes": self.max_body_bytes,
            "request_timeout_s": self.request_timeout_s,
            "inference_threads": self.inference_threads,
            "max_instructions": self.max_instructions,
            "max_instruction_chars": self.max_instruction_chars,
            "max_evaluate_examples": self.max_evaluate_examples,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ConfigError(f"serve setting {name} must be > 0, got {value}")
        if self.queue_size < 0:
            raise ConfigError(f"serve setting queue_size must be >= 0, got {self.queue_size}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
