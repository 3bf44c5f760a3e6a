"""``synopsis train seq2seq`` and ``synopsis experiment hie-bart-heads``. (Owned by the seq2seq work.)"""

from __future__ import annotations

from synopsis.errors import SynopsisError


def train() -> None:
    """Fine-tune a Hugging Face seq2seq checkpoint."""
    raise SynopsisError("seq2seq training is not available yet")


def hie_bart_heads_experiment() -> None:
    """Hie-BART head-ratio sweep."""
    raise SynopsisError("hie-bart-heads experiment is not available yet")
