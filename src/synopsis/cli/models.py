"""Models by name on the command line: ``--revision``, the resolution of every ``--model``, and ``synopsis
models`` (the cached hub models synopsis can run)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from synopsis.errors import InputError


def revision_option() -> Any:
    return typer.Option(
        None,
        "--revision",
        help="With a hub model id (org/name): the branch, tag or commit to use (default: main).",
    )


def show_download_progress(json_output: bool = False) -> bool:
    """Download bars only on a terminal, never with ``-q`` nor beside JSON output."""
    from synopsis.progress import progress_enabled

    return progress_enabled() and sys.stderr.isatty() and not json_output


def resolve_model_option(
    model: str | Path | None, revision: str | None, *, json_output: bool = False
) -> Path | None:
    """``--model`` as a local directory: a directory as it is, a hub id ``org/name`` (at ``--revision``)
    from huggingface_hub's cache, downloaded when online (:func:`synopsis.models.seq2seq.resolve_seq2seq`).

    A name that is neither is returned as it is, for the command's own message about a missing path."""
    if model is None:
        if revision is not None:
            raise InputError(f"--revision {revision}: give the hub model it applies to with --model ORG/NAME")
        return None
    from synopsis.hub import is_hub_id, resolve_model

    if Path(model).exists() or not is_hub_id(model):  # no transformers import for a local directory
        return resolve_model(model, revision) if Path(model).is_dir() else Path(model)
    from synopsis.models.seq2seq import resolve_seq2seq

    return resolve_seq2seq(model, revision, progress=show_download_progress(json_output))
