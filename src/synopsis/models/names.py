"""Which seq2seq model a name means: a local directory or a hub id, checked from its ``config.json``.

Light on purpose (no transformers import): the CLI and :func:`synopsis.summarizers.load_summarizer` resolve
a ``--model`` here before deciding what to load; :mod:`synopsis.models.seq2seq` loads it.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from synopsis.checkpoint import CONFIG_FILE, MAX_CONFIG_BYTES, read_config
from synopsis.errors import CheckpointError, SynopsisError
from synopsis.hub import check_safetensors_weights, display_name, resolve_model, untrusted_repo
from synopsis.io import read_json
from synopsis.models.registry import PAPER_NAMES, SUPPORTED_MODEL_TYPES, checkpoint_type

logger = logging.getLogger(__name__)


def read_model_config(model_dir: str | Path, generation: bool = True) -> dict[str, Any]:
    """The checkpoint's ``config.json`` as a dict, checking that it is a supported seq2seq model and
    (``generation``) that its decoding settings are in range (:func:`check_generation_settings`)."""
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
    if generation:
        check_generation_settings(model_dir, data)
    return data


GENERATION_CONFIG_FILE = "generation_config.json"
#: The most a checkpoint's own settings may ask for, beyond the CLI's ranges (which have no ceiling: a
#: flag the user sets is theirs to choose): 100,000 beams or a length of 1e9 allocated gigabytes (issue 58).
_CEILINGS = {"num_beams": 64, "min_length": 100_000, "max_length": 100_000, "no_repeat_ngram_size": 1_000}
#: generate()'s lengths in new tokens, which the CLI does not set: a length's range.
_NEW_TOKENS = {"max_new_tokens": "max_length", "min_new_tokens": "min_length"}


def check_generation_settings(model_dir: Path, config: dict[str, Any]) -> None:
    """The decoding settings a checkpoint carries (``generation_config.json``, else ``config.json``, which
    transformers reads them from then) within the CLI's ranges (:data:`synopsis.config.DECODING_OPTIONS`)
    and :data:`_CEILINGS`: a :class:`CheckpointError` naming the file and the key."""
    from synopsis.config import DECODING_OPTIONS, Range

    generation_path = model_dir / GENERATION_CONFIG_FILE
    sources = [(model_dir / CONFIG_FILE, config)]
    if generation_path.is_file():
        read = read_json(generation_path, "a generation config", CheckpointError, dict, MAX_CONFIG_BYTES)
        sources.append((generation_path, read))
    for path, values in sources:
        for key in (*DECODING_OPTIONS, *_NEW_TOKENS):
            value = values.get(key)
            if value is None:
                continue
            option = DECODING_OPTIONS[_NEW_TOKENS.get(key, key)]
            ceiling = _CEILINGS.get(option.name)
            allowed = option.allowed if ceiling is None else Range(option.allowed.low, ceiling)
            whole = option.type is int and not (isinstance(value, int) and not isinstance(value, bool))
            if whole or value not in allowed:
                kind = "a whole number " if option.type is int else ""
                raise CheckpointError(
                    f"{display_name(path)}: {key} must be {kind}{allowed}, got {value!r} (the checkpoint's "
                    "own setting; fix the file)"
                )


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
    from huggingface_hub import constants

    directory = Path(cache_dir or constants.HF_HUB_CACHE)
    if not directory.is_dir():
        return [], 0
    runnable, others = [], 0
    for repo in _scanned_repos(directory):
        for revision in sorted(repo.revisions, key=lambda r: sorted(r.refs)):
            try:
                model_type = read_model_config(revision.snapshot_path, generation=False)["model_type"]
                check_safetensors_weights(revision.snapshot_path)
            except SynopsisError:
                others += 1
                continue
            entry = checkpoint_type(model_type)
            methods = tuple(PAPER_NAMES[m] for m in sorted(entry.methods))
            runnable.append(
                CachedModel(
                    repo_id=repo.repo_id,
                    refs=tuple(sorted(revision.refs)),
                    commit=revision.commit_hash,
                    model_type=model_type,
                    family=entry.family,
                    methods=methods,
                    size_bytes=revision.size_on_disk,
                )
            )
    return runnable, others


def _scanned_repos(directory: Path) -> list[Any]:
    """The model repos of huggingface_hub's cache, as its scanner reads them, one at a time: a repo that is
    damaged or reaches outside the cache (:func:`synopsis.hub.untrusted_repo`: a ref that is not a commit,
    a snapshot linked elsewhere) is skipped with a warning saying why, and the others are listed (one such
    repo broke the listing of all, issue 58)."""
    from huggingface_hub.errors import CorruptedCacheException
    from huggingface_hub.utils._cache_manager import _scan_cached_repo

    repos = []
    for folder in sorted(directory.glob("models--*")):
        name = folder.name[len("models--") :].replace("--", "/")
        reason = untrusted_repo(folder) if folder.is_dir() and not folder.is_symlink() else "not a folder"
        if reason is None:
            try:
                repos.append(_scan_cached_repo(folder))
                continue
            except (CorruptedCacheException, OSError, ValueError) as err:
                reason = " ".join(str(err).split())[:160]
        logger.warning("%s: skipped, the cache's copy is damaged or not its own (%s)", name, reason)
    return repos
