"""Models: one package or module per method, built on Hugging Face base models.

:mod:`synopsis.models.adaptation` holds what every method shares (derived configs, the base class's weight
init, registration with the Auto classes, conversion from a stock checkpoint); :mod:`synopsis.models.registry`
says what every checkpoint type needs. Importing this package registers every method's classes with
``AutoConfig``/``AutoModel``/``AutoModelForSeq2SeqLM``.
"""

from synopsis.models import hibrids, hie_bart, instructsum  # noqa: F401  (registers the Auto classes)
