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
        help="With a hub model id (org/name or name): the branch, tag or commit to use (default: main).",
    )


def show_download_progress(json_output: bool = False) -> bool:
    """Download bars only on a terminal, never with ``-q`` nor beside JSON output."""
    from synopsis.progress import progress_enabled

    return progress_enabled() and sys.stderr.isatty() and not json_output


def resolve_model_option(
    model: str | Path | None, revision: str | None, *, json_output: bool = False
) -> Path | None:
    """``--model`` as a local directory: a directory as it is, a hub id ``org/name`` or ``name`` (at
    ``--revision``) from huggingface_hub's cache, downloaded when online
    (:func:`synopsis.models.seq2seq.resolve_seq2seq`).

    A name that is neither is returned as it is, for the command's own message about a missing path."""
    if model is None:
        if revision is not None:
            raise InputError(f"--revision {revision}: give the hub model it applies to with --model ORG/NAME")
        return None
    from synopsis.hub import is_hub_id, resolve_model
    from synopsis.summarizers import METHOD_TABLE

    # a method's name (``-m lead-3``, from when -m meant --method) stays a path, for the command's hint
    method = "/" not in str(model) and any(m.matches(str(model)) for m in METHOD_TABLE)
    if Path(model).exists() or not is_hub_id(model) or method:  # no transformers import for a local dir
        return resolve_model(model, revision) if Path(model).is_dir() else Path(model)
    from synopsis.models.seq2seq import resolve_seq2seq

    return resolve_seq2seq(model, revision, progress=show_download_progress(json_output))


def _size(size_bytes: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} B"


def models(
    as_json: bool = typer.Option(False, "--json", help="One JSON object per model, one per line."),
) -> None:
    """List the models in the Hugging Face cache (HF_HOME / HF_HUB_CACHE) that synopsis can run: a
    seq2seq summarization family with safetensors weights; give one to --model by its name."""
    import json

    from huggingface_hub import constants

    from synopsis.models.names import cached_models

    found, others = cached_models()
    for model in found:
        if as_json:
            typer.echo(json.dumps(model.to_dict()))
            continue
        at = ",".join(model.refs) or model.commit[:12]
        method = " + ".join(model.methods) or "stock"
        typer.echo(
            f"{model.repo_id}  {at}  {model.family} ({model.model_type})  {_size(model.size_bytes)}  {method}"
        )
    if not as_json:
        if not found:
            typer.echo(
                f"no hub model in {constants.HF_HUB_CACHE}; the bundled pointer-generator (SciTLDR paper "
                "abstracts, inside the package) needs none: synopsis summarize FILE. Add one by naming it, "
                "online: synopsis summarize FILE --model facebook/bart-large-cnn (downloaded once, then "
                "listed here)"
            )
        if others:
            typer.echo(
                f"({others} other cached model snapshot(s): not a seq2seq model synopsis runs, or no "
                "safetensors weights)"
            )
