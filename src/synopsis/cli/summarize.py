"""``synopsis summarize``."""

from __future__ import annotations

from synopsis.errors import SynopsisError


def summarize() -> None:
    """Summarize a document."""
    raise SynopsisError("summarize is not available yet")
