"""Stock Hugging Face checkpoints converted for CTranslate2 (``--backend ctranslate2``), once per weights.

CTranslate2 (Klein et al., 2020, the OpenNMT inference engine) runs a converted copy of the weights.
:func:`converted_model` converts the checkpoint with CTranslate2's Transformers converter (from the weights
synopsis loaded and checked) into ``<model>/.ctranslate2/<key>/``, where the key is a SHA-256 over the
checkpoint's files (weights, config, tokenizer) and CTranslate2's version. It is written to a temporary
folder and renamed into place (two processes converting at once keep one copy); later runs reuse it once its
files pass a digest check (a truncated or overwritten ``model.bin`` is converted again); a change to the
weights changes the key, so the next run converts again and removes the stale copy. Only folders holding
synopsis' :data:`MARKER` are ever removed, and a cache folder that is a link or resolves elsewhere is
refused. A model folder that cannot be written, or a snapshot in huggingface_hub's cache, caches under
``$XDG_CACHE_HOME/synopsis/ctranslate2``. What it converts: stock checkpoints of the families CTranslate2
converts (:data:`CT2_MODEL_TYPES`); a checkpoint carrying a method (HIBRIDS, Hie-BART, InstructSum), whose
attention CTranslate2 does not have, or another family (LED) is refused in one line
(:func:`check_convertible`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from synopsis.errors import ConfigError, InputError
from synopsis.models.registry import PAPER_NAMES, checkpoint_type

logger = logging.getLogger(__name__)


#: The ``model_type``s whose stock checkpoints CTranslate2's Transformers converter makes a Translator of.
CT2_MODEL_TYPES = frozenset({"bart", "mbart", "pegasus", "marian", "t5", "mt5", "umt5", "m2m_100"})
#: The families of BART's converter whose layers normalize before attention (BART and Marian after it).
PRE_NORM_MODEL_TYPES = frozenset({"mbart", "pegasus"})
#: The families of BART's converter with a layer norm on the embeddings (not PEGASUS, not Marian).
EMBEDDING_NORM = frozenset({"bart", "mbart"})
#: Where a checkpoint's conversions are kept, inside its folder.
CACHE_DIR = ".ctranslate2"


def check_convertible(model_dir: Path | str, config: Mapping[str, Any]) -> None:
    """A checkpoint with a method, or of a family CTranslate2 does not convert, is refused in one line
    (``model_dir``: how the line names it; the service names its model, never a path)."""
    model_type = config.get("model_type")
    entry = checkpoint_type(model_type)
    if entry is not None and entry.methods:
        names = ", ".join(sorted(PAPER_NAMES[m] for m in entry.methods))
        raise ConfigError(
            f"{model_dir}: --backend ctranslate2 runs stock checkpoints; this one carries {names}, whose "
            "attention CTranslate2 does not have (use --backend torch)"
        )
    if model_type not in CT2_MODEL_TYPES:
        raise ConfigError(
            f"{model_dir}: CTranslate2 cannot convert model_type {model_type!r} (it converts: "
            f"{', '.join(sorted(CT2_MODEL_TYPES))}); use --backend torch"
        )


# ------------------------------------------------------------------------------------------ the cache
def _file_digest(path: Path, memo: dict[str, Any]) -> str:
    """SHA-256 of a file, remembered by (size, mtime) so a large checkpoint is read once, not every run."""
    stat = path.stat()
    stamp = [stat.st_size, stat.st_mtime_ns]
    known = memo.get(path.name)
    if isinstance(known, dict) and known.get("stamp") == stamp:
        return str(known["sha256"])
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    memo[path.name] = {"stamp": stamp, "sha256": digest}
    return digest


def weights_key(model_dir: Path, cache: Path) -> str:
    """The key of a conversion: SHA-256 over the checkpoint's files (weights, config, tokenizer; not
    ``generation_config.json``, which is read at run time), CTranslate2's version and the cache's layout
    (conversions made before it had a :data:`MARKER` are left alone, never deleted)."""
    import ctranslate2

    memo_path = cache / "digests.json"
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    if not isinstance(memo, dict):
        memo = {}
    total = hashlib.sha256(f"ctranslate2 {ctranslate2.__version__} layout 2".encode())
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and not path.name.startswith(".") and path.name != "generation_config.json":
            total.update(f"{path.name} {_file_digest(path, memo)}\n".encode())
    try:
        cache.mkdir(parents=True, exist_ok=True)
        _write_atomically(memo_path, json.dumps(memo))
    except OSError:  # a read-only cache still converts; it only hashes again next time
        pass
    return total.hexdigest()[:20]


def _write_atomically(path: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _user_cache(model_dir: Path) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "synopsis" / "ctranslate2"
    return base / hashlib.sha256(str(model_dir.resolve()).encode()).hexdigest()[:16]


def in_hub_cache(model_dir: Path) -> bool:
    """Whether ``model_dir`` is a snapshot in huggingface_hub's cache (``models--org--name/snapshots/<rev>``),
    whose folder is the hub's: a conversion inside it would count as the model's files."""
    for path in (model_dir, model_dir.resolve()):
        if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
            return True
    return False


def cache_root(model_dir: Path) -> Path:
    """``<model>/.ctranslate2`` where the model's folder can be written and is not a snapshot of the hub's
    cache, else a per-model folder under the user's cache (``$XDG_CACHE_HOME/synopsis/ctranslate2``).

    A cache folder that is a symbolic link, or not a folder, or resolves outside its parent is refused in one
    line (issue 58: ``ln -s victim model/.ctranslate2`` had the clean-up delete the victim's folders)."""
    beside = model_dir / CACHE_DIR
    if in_hub_cache(model_dir) or not os.access(beside if beside.is_dir() else model_dir, os.W_OK):
        root = _user_cache(model_dir)
    else:
        root = beside
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        kind = "a symbolic link" if root.is_symlink() else "not a folder"
        raise ConfigError(f"{root}: the CTranslate2 cache is {kind}; refusing to use it (remove it)")
    if root.exists() and root.resolve().parent != root.parent.resolve():
        raise ConfigError(f"{root}: the CTranslate2 cache resolves outside {root.parent}; refusing to use it")
    return root


#: The file synopsis writes into each conversion (and each folder a conversion is built in): only folders
#: holding it are ever deleted, and it holds the digests a conversion is checked against before it is used.
MARKER = ".synopsis-ctranslate2.json"
#: A ``.building-*`` folder older than this was left by a conversion that died: removed.
STALE_BUILD_S = 6 * 3600


def _ours(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and (path / MARKER).is_file()


def _record_digests(folder: Path) -> None:
    """The marker of a finished conversion: each file's size, mtime and SHA-256."""
    files = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != MARKER:
            stat = path.stat()
            with path.open("rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
            files[path.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
    (folder / MARKER).write_text(json.dumps({"made_by": "synopsis", "files": files}))


def _intact(folder: Path) -> bool:
    """Whether a conversion is ours and its files are those it was written with: sizes first (a truncated
    file), then the SHA-256 of any file whose mtime changed (random bytes written over it)."""
    if not _ours(folder) or not (folder / "model.bin").is_file():
        return False
    try:
        files = json.loads((folder / MARKER).read_text())["files"]
        for name, known in files.items():
            stat = (folder / name).stat()
            if stat.st_size != known["size"]:
                return False
            if stat.st_mtime_ns != known["mtime_ns"]:
                with (folder / name).open("rb") as handle:
                    if hashlib.file_digest(handle, "sha256").hexdigest() != known["sha256"]:
                        return False
        return "model.bin" in files
    except (OSError, ValueError, KeyError, TypeError):
        return False


def converted_model(model_dir: str | Path) -> Path:
    """The CTranslate2 copy of ``model_dir``'s weights, converted now unless an intact copy of these weights
    exists (see the module's docstring for the key, the atomic write and the clean-up); a copy that fails
    its digest check is converted again."""
    model_dir = Path(model_dir)
    root = cache_root(model_dir)
    target = root / weights_key(model_dir, root)
    if _intact(target):
        logger.debug("CTranslate2 model reused: %s", target)
        return target
    if _ours(target):
        logger.warning("the CTranslate2 conversion %s failed its digest check: converting again", target)
        shutil.rmtree(target, ignore_errors=True)
    elif target.exists() or target.is_symlink():
        raise ConfigError(f"{target}: not a conversion synopsis made; refusing to replace it (remove it)")
    logger.info("converting %s for CTranslate2 (once for these weights) into %s", model_dir, target)
    root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=root, prefix=".building-"))
    try:
        (building / MARKER).write_text(json.dumps({"made_by": "synopsis", "building": True}))
        _convert(model_dir, building / "model")
        _record_digests(building / "model")
        try:
            os.replace(building / "model", target)
        except OSError:  # another process put its copy there first: keep that one
            if not _intact(target):
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    _remove_stale(root, target)
    return target


def _remove_stale(root: Path, target: Path) -> None:
    """Conversions of weights this folder no longer holds, and ``.building-*`` folders a conversion that
    died left: only folders synopsis made (their :data:`MARKER`), never a link or anything else."""
    now = time.time()
    for stale in root.iterdir():
        if stale == target or not _ours(stale):
            continue
        if stale.name.startswith(".building-"):
            try:
                if now - (stale / MARKER).stat().st_mtime < STALE_BUILD_S:
                    continue  # another process may be converting into it now
            except OSError:
                continue
        elif stale.name.startswith("."):
            continue
        shutil.rmtree(stale, ignore_errors=True)


def _convert(model_dir: Path, output: Path) -> None:
    """Convert with CTranslate2's Transformers converter from the weights synopsis loads (checked finite)."""
    from ctranslate2.converters import TransformersConverter

    from synopsis.models.seq2seq import load_seq2seq

    model, tokenizer = load_seq2seq(model_dir)
    vocabulary = sorted(tokenizer.get_vocab().values())
    if vocabulary != list(range(len(vocabulary))):
        raise InputError(f"{model_dir}: the tokenizer's ids are not 0..{len(vocabulary) - 1}; cannot convert")
    missing = (("normalize_before", PRE_NORM_MODEL_TYPES), ("normalize_embedding", EMBEDDING_NORM))
    for name, families in missing:
        if not hasattr(model.config, name):  # read by the BART converter, gone from transformers 5's configs
            setattr(model.config, name, model.config.model_type in families)

    class Loaded(TransformersConverter):  # converts the model in memory, not a second load from disk
        def load_model(self, model_class: Any, path: str, **kwargs: Any) -> Any:
            return model

        def load_tokenizer(self, tokenizer_class: Any, path: str, **kwargs: Any) -> Any:
            return tokenizer

    Loaded(str(model_dir)).convert(str(output), quantization="float32", force=True)
