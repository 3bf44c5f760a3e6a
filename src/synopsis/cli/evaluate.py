"""``synopsis evaluate``. (Owned by the evaluation work.)"""

from __future__ import annotations

from synopsis.errors import SynopsisError


def evaluate() -> None:
    """Score predictions against references."""
    raise SynopsisError("evaluate is not available yet")
