"""``synopsis serve``: the summarizers behind a URL, as a JSON API (``/v1``) and a web page (``/``).

* :func:`create_app` builds the FastAPI app around a :class:`ModelRegistry` and :class:`ServeSettings`.
* :func:`build_registry` loads the models a server offers (the bundled default, the extractive methods,
  and user checkpoints by name).

This package shares :mod:`synopsis.summarizers` with the CLI but never imports :mod:`synopsis.cli`.
"""

from synopsis.serve.app import create_app
from synopsis.serve.registry import ModelEntry, ModelRegistry, build_registry, describe, parse_model_spec
from synopsis.serve.settings import ServeSettings

__all__ = [
    "ModelEntry",
    "ModelRegistry",
    "ServeSettings",
    "build_registry",
    "create_app",
    "describe",
    "parse_model_spec",
]
