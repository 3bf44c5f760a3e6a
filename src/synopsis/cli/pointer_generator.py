"""``synopsis train pointer-generator``. (Owned by the pointer-generator work.)"""

from __future__ import annotations

from synopsis.errors import SynopsisError


def train() -> None:
    """Train a pointer-generator network."""
    raise SynopsisError("pointer-generator training is not available yet")
