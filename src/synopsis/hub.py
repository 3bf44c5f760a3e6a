"""Models named by a local directory or a Hugging Face hub id: the one resolver.

Everywhere a model is named (``summarize --model``, ``serve --model NAME=...``, ``convert``, ``train
seq2seq``, ``load_summarizer(model=...)``, ``load_seq2seq``) the name goes through :func:`resolve_model`:
a local directory is used as it is (a directory with the same name as a hub id wins, as in
transformers); otherwise a hub id, ``org/name`` or a name without an organisation as thousands of model cards
write it (``t5-small``, ``gpt2``: huggingface_hub's own rule, :func:`huggingface_hub.utils.validate_repo_id`),
with an optional ``revision`` (a branch, tag or commit), is found in
huggingface_hub's own cache (``HF_HOME`` / ``HF_HUB_CACHE``, the files transformers reads) and, when
online, downloaded into it. ``HF_HUB_OFFLINE=1`` is honoured: only the cache is read.

Weights are safetensors only: a repo whose weights exist only as pickles (``pytorch_model.bin``) is refused
before anything large is downloaded, and :func:`check_safetensors_weights` refuses a directory (or a
``model.safetensors.index.json``) whose weights are pickles. Nothing is ever unpickled.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from synopsis.errors import CheckpointError, InputError, SynopsisError
from synopsis.io import read_json
from synopsis.progress import progress_enabled

logger = logging.getLogger(__name__)

#: What the hub calls a model id: ``org/name`` or ``name`` alone (the hub's canonical models: ``t5-small``,
#: ``gpt2``); letters, digits, ``-``, ``_``, ``.``, neither starting nor ending with ``-`` or ``.``, no ``--``
#: or ``..`` (huggingface_hub's ``validate_repo_id``).
_HUB_PART = r"[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?"
HUB_ID = re.compile(rf"(?!.*(--|\.\.))(?:{_HUB_PART}/)?{_HUB_PART}")
#: The files a model needs (config, generation config, tokenizer, safetensors weights and their index):
#: never pickles, ONNX, TF or Flax weights, nor code.
DOWNLOAD_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.spm", "*.txt"]
#: Weight files that are pickles (loading one can run code): never downloaded nor loaded.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
SAFETENSORS_INDEX = "model.safetensors.index.json"


def is_hub_id(name: str | Path) -> bool:
    """Whether ``name`` is spelt as a hub model id, ``org/name`` or ``name`` (it may still not exist)."""
    return HUB_ID.fullmatch(str(name)) is not None


#: What turns a ``pytorch_model.bin`` into ``model.safetensors`` (run it only on a file you trust: loading a
#: pickle can run code; torch >= 2.6 loads only tensors by default).
CONVERT_BIN_COMMAND = (
    'python -c "import sys, torch; from safetensors.torch import save_file; '
    "d = sys.argv[1]; save_file({k: v.clone().contiguous() for k, v in torch.load(d + '/pytorch_model.bin', "
    "weights_only=True).items()}, d + '/model.safetensors', metadata={'format': 'pt'})\" DIR"
)
#: The alternatives a refusal of pickled weights names.
ALTERNATIVE = (
    "use a revision with model.safetensors (--revision; on the hub often a refs/pr/N that adds safetensors), "
    f"or convert a local copy to model.safetensors first: {CONVERT_BIN_COMMAND}"
)


def check_safetensors_weights(model_dir: Path) -> None:
    """Refuse weights that are not safetensors, in one line naming the alternative.

    A directory with ``model.safetensors`` loads; one with ``model.safetensors.index.json`` loads only when
    every file its weight map names is a ``.safetensors`` file (transformers would otherwise load a
    ``pytorch_model.bin`` named there through ``torch.load``); one with only pickled weights is refused."""
    index = model_dir / SAFETENSORS_INDEX
    if index.is_file():
        data = read_json(index, "a safetensors index", CheckpointError)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{display_name(index)}: no weight_map; not a safetensors index")
        files = sorted({str(name) for name in weight_map.values()})
        other = [name for name in files if not name.endswith(".safetensors") or "/" in name or "\\" in name]
        if other:
            raise CheckpointError(
                f"{display_name(index)}: maps weights to {other[0]}, not a .safetensors file beside it, "
                f"which is not loaded (nothing is unpickled); {ALTERNATIVE}"
            )
        missing = [name for name in files if not (model_dir / name).is_file()]
        if missing:
            raise CheckpointError(f"{display_name(index)}: names {missing[0]}, which is not beside it")
        return
    if (model_dir / "model.safetensors").is_file():
        return
    pickled = sorted(p.name for p in model_dir.glob("*") if p.name.endswith(PICKLE_SUFFIXES))
    if pickled:
        raise CheckpointError(
            f"{display_name(model_dir)}: weights in {pickled[0]} (a pickle) are not loaded; convert them to "
            f"model.safetensors first: {CONVERT_BIN_COMMAND}"
        )


def _bars(show: bool) -> type:
    """The progress-bar class of one download: tqdm's own (not huggingface_hub's, which
    ``HF_HUB_DISABLE_PROGRESS_BARS``, set by the CLI for transformers' other bars, would silence), shown or
    not as asked."""
    from tqdm.auto import tqdm

    class Bar(tqdm):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = not show
            super().__init__(*args, **kwargs)

    return Bar


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _cache_dir() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def is_cached(repo_id: str, revision: str | None = None) -> bool:
    """Whether huggingface_hub's cache holds ``repo_id`` at ``revision`` (its config.json, at least)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json", revision=revision), str)
    except (OSError, ValueError):  # a damaged cache (a refs file of random bytes) holds nothing usable
        return False


# ------------------------------------------------------------------------------ trusting the cache
#: A commit id, as refs/<branch> holds it and as snapshots/<commit> is named.
COMMIT = re.compile(r"[0-9a-f]{40}")


def check_revision(revision: str | None) -> None:
    """A ``--revision`` that names a branch, tag or commit, never a path (``../../x`` read a file outside
    the cache as a ref, issue 58): a one-line :class:`InputError`."""
    if revision is None:
        return
    parts = revision.split("/")
    if (
        not revision.strip()
        or revision.startswith("/")
        or any(part in ("", ".", "..") for part in parts)
        or any(ord(c) < 32 or c in "\\\x7f" for c in revision)
    ):
        raise InputError(f"--revision {revision!r}: not a branch, tag or commit name")


def repo_folder(repo_id: str, cache: Path | None = None) -> Path:
    """The folder of ``repo_id`` in huggingface_hub's cache (``models--org--name``)."""
    return (cache or _cache_dir()) / f"models--{repo_id.replace('/', '--')}"


def untrusted_repo(folder: Path) -> str | None:
    """Why a repo folder of the cache cannot be trusted (None: it can): a ref that is not a commit id, a
    snapshot that is not named by one, is a link, or has a file that resolves outside the repo's folder."""
    base = folder.resolve()
    refs = folder / "refs"
    for ref in sorted(refs.rglob("*")) if refs.is_dir() else []:
        if ref.is_file():
            name = ref.relative_to(refs)
            try:
                with open(ref, "rb") as handle:
                    held = handle.read(128).decode("ascii").strip()
            except (OSError, UnicodeDecodeError):
                return f"refs/{name} is not a commit id"
            if not COMMIT.fullmatch(held):
                return f"refs/{name} is not a commit id"
    snapshots = folder / "snapshots"
    for snapshot in sorted(snapshots.iterdir()) if snapshots.is_dir() else []:
        if not COMMIT.fullmatch(snapshot.name):
            return f"snapshots/{snapshot.name} is not named by a commit id"
        reason = _outside(snapshot, base)
        if reason:
            return reason
    return None


def _outside(snapshot: Path, base: Path) -> str | None:
    if snapshot.is_symlink() or not snapshot.resolve().is_relative_to(base):
        return f"snapshots/{snapshot.name} is a link out of the cache"
    for path in snapshot.rglob("*"):
        if not path.resolve().is_relative_to(base):
            return f"snapshots/{snapshot.name}/{path.relative_to(snapshot)} resolves outside the cache"
    return None


def _trusted_snapshot(repo_id: str, revision: str | None) -> None:
    """Refuse, in one line, a cached repo whose ref for ``revision`` (default ``main``) or snapshots go
    outside the cache (before huggingface_hub reads the ref as a path)."""
    folder = repo_folder(repo_id)
    if not folder.is_dir():
        return
    reason = untrusted_repo(folder)
    if reason is not None:
        raise InputError(
            f"{repo_id}: the Hugging Face cache's copy is damaged or not its own ({reason}); remove {folder}"
        )


def display_name(path: str | Path) -> str:
    """A cached snapshot as people name it, ``org/name@commit`` (its commit's first 12 digits); any other
    path as it is. Errors about a hub model name the model, not the cache's directories."""
    parts = Path(path).parts
    for i, part in enumerate(parts[:-2]):
        if part.startswith("models--") and parts[i + 1] == "snapshots":
            rest = "/".join(parts[i + 3 :])
            name = f"{part[len('models--') :].replace('--', '/')}@{parts[i + 2][:12]}"
            return f"{name}/{rest}" if rest else name
    return str(path)


def _cached_refs(repo_id: str) -> list[str]:
    refs = _cache_dir() / f"models--{repo_id.replace('/', '--')}" / "refs"
    return sorted(str(p.relative_to(refs)) for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []


def _from_cache(repo_id: str, revision: str | None) -> Path:
    """The cached snapshot of ``repo_id`` at ``revision`` (offline), or a one-line error saying what is
    missing and that offline mode is on."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    _trusted_snapshot(repo_id, revision)
    try:
        snapshot = Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError):
        pass
    else:
        _trusted_snapshot(repo_id, revision)  # what it downloaded or found, checked as it is now
        return snapshot
    refs = _cached_refs(repo_id)
    where = f"the Hugging Face cache ({_cache_dir()})"
    if refs and revision is not None:
        raise InputError(
            f"{repo_id}: revision {revision!r} is not in {where} (cached: {', '.join(refs)}) and offline "
            "mode is on (HF_HUB_OFFLINE=1); unset it to download that revision"
        )
    raise InputError(
        f"{repo_id}: not a local directory, and not in {where}; offline mode is on (HF_HUB_OFFLINE=1): "
        "unset it to download the model, or point HF_HOME at a cache that holds it"
    )


def _check_repo_files(repo_id: str, files: list[str]) -> None:
    """Refuse a repo without a config or whose weights are only pickles, before downloading them."""
    top = [name for name in files if "/" not in name]
    if "config.json" not in top:
        raise CheckpointError(f"{repo_id}: no config.json; not a Hugging Face model repo")
    if "model.safetensors" in top or SAFETENSORS_INDEX in top:
        return
    pickled = [name for name in top if name.endswith(PICKLE_SUFFIXES)]
    if pickled:
        raise CheckpointError(
            f"{repo_id}: weights only in {pickled[0]} (a pickle), which is never loaded; {ALTERNATIVE}"
        )
    raise CheckpointError(f"{repo_id}: no model weights (model.safetensors) in the repo")


def _download(
    repo_id: str, revision: str | None, check_config: Callable[[Path], Any] | None, bars: type
) -> Path:
    """Download what a model needs into the cache: the file list first (pickle-only repos refused), then
    config.json (checked by ``check_config`` before the weights), then the rest."""
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download

    info = HfApi().model_info(repo_id, revision=revision)
    _check_repo_files(repo_id, [s.rfilename for s in info.siblings or []])
    check_revision(info.sha)  # becomes a folder's name in the cache: never a path
    if check_config is not None:
        config = hf_hub_download(repo_id, "config.json", revision=info.sha, tqdm_class=bars)
        check_config(Path(config).parent)
    snapshot = Path(
        snapshot_download(repo_id, revision=info.sha, allow_patterns=DOWNLOAD_PATTERNS, tqdm_class=bars)
    )
    _trusted_snapshot(repo_id, info.sha)
    return snapshot


class HubError(InputError):
    """A hub look-up that failed; ``reachable``: the hub answered (an unknown repo or revision, a gated
    repo), so a cached copy must not stand in for it."""

    def __init__(self, message: str, reachable: bool) -> None:
        super().__init__(message)
        self.reachable = reachable


def _hub_error(repo_id: str, revision: str | None, err: Exception) -> HubError:
    """huggingface_hub's exceptions as one line naming the model."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(err, RevisionNotFoundError):
        return HubError(f"{repo_id}: no revision {revision!r} on the hub (a branch, tag or commit)", True)
    if isinstance(err, GatedRepoError):
        return HubError(
            f"{repo_id}: a gated model; accept its terms on the hub and log in (hf auth login)", True
        )
    if isinstance(err, RepositoryNotFoundError):
        return HubError(
            f"{repo_id}: no such model on the hub, nor a local directory (a private one needs hf auth login)",
            True,
        )
    reason = " ".join(str(err).split())[:160] or type(err).__name__
    return HubError(
        f"{repo_id}: cannot download it from the Hugging Face hub ({reason}), and it is not in the cache "
        f"({_cache_dir()}); check the network, or give a local directory",
        False,
    )


def resolve_model(
    name: str | Path,
    revision: str | None = None,
    *,
    progress: bool | None = None,
    check_config: Callable[[Path], Any] | None = None,
) -> Path:
    """The local directory of model ``name``: a local directory, or a hub id (``org/name``, or ``name`` alone
    as ``t5-small``) at ``revision``.

    A hub id is found in huggingface_hub's cache, or downloaded into it when online (only the config,
    tokenizer and safetensors weights: a repo with only pickled weights is refused first, and
    ``check_config``, given the directory holding ``config.json``, may refuse the model before its weights
    are downloaded). ``progress``: huggingface_hub's download bars (default: on a terminal, unless ``-q``).
    Raises a one-line :class:`~synopsis.errors.SynopsisError`: neither a directory nor a hub id, not cached
    while offline, an unknown repo or revision, a network error."""
    path = Path(name)
    check_revision(revision)
    if path.is_dir():
        if revision is not None:
            raise InputError(
                f"--revision {revision}: {name} is a local directory (a revision names a hub commit)"
            )
        return path
    if not is_hub_id(name):
        raise CheckpointError(f"{name}: no such model directory (nor a hub model id, org/name or name)")
    repo_id = str(name)
    if _offline():
        snapshot = _from_cache(repo_id, revision)
        if check_config is not None:
            check_config(snapshot)
        return snapshot
    if progress is None:
        progress = progress_enabled() and sys.stderr.isatty()
    try:
        return _download(repo_id, revision, check_config, _bars(progress))
    except SynopsisError:
        raise
    except Exception as err:  # noqa: BLE001 - huggingface_hub's and httpx's errors, mapped in _hub_error
        if isinstance(err, KeyboardInterrupt | SystemExit):
            raise
        error = _hub_error(repo_id, revision, err)
    if error.reachable:  # the hub answered: the cache does not override what it said
        raise error
    try:  # the hub is unreachable: a cached copy serves, as huggingface_hub itself falls back
        cached = _from_cache(repo_id, revision)
    except InputError:
        raise error from None
    logger.warning("%s: the hub is unreachable; using the cached copy %s", repo_id, cached)
    return cached
