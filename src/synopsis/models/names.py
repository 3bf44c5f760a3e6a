"""Which seq2seq model a name means: a local directory or a hub id, checked from its ``config.json``.

Light on purpose (no transformers import): the CLI and :func:`synopsis.summarizers.load_summarizer` resolve
a ``--model`` here before deciding what to load; :mod:`synopsis.models.seq2seq` loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synopsis.checkpoint import CONFIG_FILE, read_config
from synopsis.errors import CheckpointError
from synopsis.hub import resolve_model
from synopsis.models.registry import SUPPORTED_MODEL_TYPES


def read_model_config(model_dir: str | Path) -> dict[str, Any]:
    """The checkpoint's ``config.json`` as a dict, checking that it is a supported seq2seq model."""
    model_dir = Path(model_dir)
    path = model_dir / CONFIG_FILE
    if model_dir.is_dir() and not path.is_file():
        raise CheckpointError(f"{model_dir}: no config.json; not a Hugging Face model directory")
    data = read_config(model_dir, kind="model")
    model_type = data.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(
            f"{path}: model_type {model_type!r} is not a supported seq2seq model "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    return data


def resolve_seq2seq(model: str | Path, revision: str | None = None, *, progress: bool | None = None) -> Path:
    """The local directory of seq2seq model ``model`` (a directory or a hub id, :func:`synopsis.hub.
    resolve_model`); a hub repo that is not a supported seq2seq model is refused from its config.json,
    before its weights are downloaded."""
    return resolve_model(model, revision, progress=progress, check_config=read_model_config)


