"""Which seq2seq model a name means: a local directory or a hub id, checked from its ``config.json``.

Light on purpose (no transformers import): the CLI and :func:`synopsis.summarizers.load_summarizer` resolve
a ``--model`` here before deciding what to load; :mod:`synopsis.models.seq2seq` loads it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from synopsis.checkpoint import CONFIG_FILE, read_config
from synopsis.errors import CheckpointError, SynopsisError
from synopsis.hub import check_safetensors_weights, display_name, resolve_model
from synopsis.models.registry import METHOD_NAMES, SUPPORTED_MODEL_TYPES, checkpoint_type


def read_model_config(model_dir: str | Path) -> dict[str, Any]:
    """The checkpoint's ``config.json`` as a dict, checking that it is a supported seq2seq model."""
    model_dir = Path(model_dir)
    path = model_dir / CONFIG_FILE
    if model_dir.is_dir() and not path.is_file():
        raise CheckpointError(f"{display_name(model_dir)}: no config.json; not a Hugging Face model")
    data = read_config(model_dir, kind="model")
    model_type = data.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(
            f"{display_name(path)}: model_type {model_type!r} is not a supported seq2seq model "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    return data


def resolve_seq2seq(model: str | Path, revision: str | None = None, *, progress: bool | None = None) -> Path:
    """The local directory of seq2seq model ``model`` (a directory or a hub id, :func:`synopsis.hub.
    resolve_model`); a hub repo that is not a supported seq2seq model is refused from its config.json,
    before its weights are downloaded."""
    return resolve_model(model, revision, progress=progress, check_config=read_model_config)


@dataclass(frozen=True)
class CachedModel:
    """A model in huggingface_hub's cache that synopsis can run (``synopsis models``)."""

    repo_id: str
    refs: tuple[str, ...]  #: the branches and tags pointing at this snapshot (empty: a commit only)
    commit: str
    model_type: str
    family: str
    methods: tuple[str, ...]  #: the synopsis methods it carries, as their papers name them (empty: stock)
    size_bytes: int  #: on disk, this snapshot's files

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "refs": list(self.refs), "methods": list(self.methods)}


def cached_models(cache_dir: str | Path | None = None) -> tuple[list[CachedModel], int]:
    """The snapshots in huggingface_hub's cache (``HF_HUB_CACHE``, or ``cache_dir``) that synopsis can run: a
    supported seq2seq ``config.json`` and safetensors weights; and how many other model snapshots it holds."""
    from huggingface_hub import constants, scan_cache_dir

    directory = Path(cache_dir or constants.HF_HUB_CACHE)
    if not directory.is_dir():
        return [], 0
    runnable, others = [], 0
    for repo in sorted(scan_cache_dir(directory).repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        for revision in sorted(repo.revisions, key=lambda r: sorted(r.refs)):
            try:
                model_type = read_model_config(revision.snapshot_path)["model_type"]
                check_safetensors_weights(revision.snapshot_path)
            except SynopsisError:
                others += 1
                continue
            entry = checkpoint_type(model_type)
            methods = tuple(METHOD_NAMES[m] for m in sorted(entry.methods))
            runnable.append(
                CachedModel(
                    repo.repo_id, tuple(sorted(revision.refs)), revision.commit_hash, model_type,
                    entry.family, methods, revision.size_on_disk,
                )
            )  # fmt: skip
    return runnable, others
