"""Models: one package or module per method, built on Hugging Face base models.

:mod:`synopsis.models.adaptation` holds what every method shares (derived configs, the base class's weight
init, registration with the Auto classes, conversion from a stock checkpoint), :mod:`synopsis.models.bases`
the base models' outer classes with a method's stacks plugged in; :mod:`synopsis.models.registry`
says what every checkpoint type needs. Each method module registers its classes with ``AutoConfig`` /
``AutoModel`` / ``AutoModelForSeq2SeqLM`` when it is imported; :func:`register_methods` imports them all
(:mod:`synopsis.models.seq2seq`, the loading path, does so). This package itself imports nothing heavy:
importing the methods pulls in transformers' modeling code (~3.5 s), which the pointer-generator and the
domain LM do not need.
"""

from __future__ import annotations


def register_methods() -> None:
    """Register every method's config and model classes with the Auto classes (idempotent)."""
    from synopsis.models import hibrids, hie_bart, instructsum  # noqa: F401  (registration on import)
