"""The checkpoint store: every model directory synopsis writes or reads without Hugging Face.

A trainer's checkpoint and an exported model (the pointer-generator's ``save_pretrained``, the domain LM's)
are one format, a directory::

    model.safetensors      model weights
    config.json            the model's configuration (JSON), with a ``checkpoint_type`` that says what it is
    optimizer.safetensors  optimizer tensors (optional, trainer checkpoints)
    state.json             trainer state: step, epoch, metrics, optimizer's non-tensor state, RNG states
                           (an export: what its model needs besides the config, e.g. ``lowercase``)

plus whatever a model keeps beside them (the pointer-generator's ``vocab.txt``). :func:`read_config`,
:func:`save_checkpoint` / :func:`save_model` and :func:`load_checkpoint` / :func:`load_model` are the only
readers and writers: every load checks that each tensor is finite, and every problem is one
:class:`~synopsis.errors.CheckpointError` naming the file. Directories written before ``checkpoint_type``
existed are read as before.

It is written to ``<name>.tmp-*`` and renamed into place, and the run directory's ``latest`` file is then
replaced atomically, so a kill at any moment leaves the previous checkpoint intact. Nothing is unpickled:
all tensors go through safetensors and everything else through JSON.
"""

from __future__ import annotations

import logging
import random
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from synopsis.errors import CheckpointError, SynopsisError
from synopsis.io import open_for_atomic_write, read_json, write_directory_atomically, write_json

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
#: The largest ``config.json`` (or ``generation_config.json``) read: refused before it is parsed (a 44 MB
#: one took a minute and 1.7 GB to fail; real ones are a few kB).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "state.json"
LATEST_FILE = "latest"
#: The key of ``config.json`` that names the kind of checkpoint (``pointer-generator``, ``domain-lm``).
CHECKPOINT_TYPE = "checkpoint_type"

logger = logging.getLogger(__name__)


@dataclass
class Checkpoint:
    model_state: dict[str, torch.Tensor]
    config: dict[str, Any]
    state: dict[str, Any] = field(default_factory=dict)
    optimizer_state: dict[str, Any] | None = None
    path: Path | None = None


def _contiguous(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # safetensors refuses shared storage (tied embeddings); a copy per tensor is cheap at our sizes.
    return {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}


def flatten_optimizer_state(state_dict: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split ``optimizer.state_dict()`` into tensors (for safetensors) and a JSON-able rest."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for param_id, per_param in state_dict["state"].items():
        for name, value in per_param.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{param_id}.{name}"] = value
            else:
                scalars.setdefault(str(param_id), {})[name] = value
    return tensors, {"param_groups": state_dict["param_groups"], "scalars": scalars}


def unflatten_optimizer_state(tensors: dict[str, torch.Tensor], rest: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        param_id, name = key.split(".", 1)
        state.setdefault(int(param_id), {})[name] = value
    for param_id, values in rest.get("scalars", {}).items():
        state.setdefault(int(param_id), {}).update(values)
    return {"state": state, "param_groups": rest["param_groups"]}


def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch CPU and every CUDA device's RNG states, in a JSON-able form."""
    np_state = np.random.get_state()
    state = {
        "python": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "torch": torch.get_rng_state().tolist(),
    }
    if torch.cuda.is_available():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available():
        if len(cuda) != torch.cuda.device_count():
            logger.warning(
                "checkpoint has RNG states for %d CUDA devices, here there are %d; restoring those in common",
                len(cuda),
                torch.cuda.device_count(),
            )
        for index, device_state in enumerate(cuda[: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(torch.tensor(device_state, dtype=torch.uint8), index)


def write_training_state(
    directory: Path, state: dict[str, Any], optimizer: torch.optim.Optimizer | None = None
) -> None:
    """``state.json`` (trainer state + RNG states of every device) and ``optimizer.safetensors``."""
    full_state = {**state, "rng": rng_state()}
    if optimizer is not None:
        tensors, rest = flatten_optimizer_state(optimizer.state_dict())
        save_file(_contiguous(tensors), str(directory / OPTIMIZER_FILE))
        full_state["optimizer"] = rest
    write_json(directory / STATE_FILE, full_state)


def read_training_state(directory: Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(trainer state, optimizer state dict or None) as written by :func:`write_training_state`."""
    state = read_json(directory / STATE_FILE, "a synopsis checkpoint", CheckpointError, dict)
    optimizer_state = None
    if "optimizer" in state and (directory / OPTIMIZER_FILE).exists():
        optimizer_state = unflatten_optimizer_state(
            load_tensors(directory / OPTIMIZER_FILE), state.pop("optimizer")
        )
    return state, optimizer_state


def _save(
    directory: str | Path,
    model_state: Mapping[str, torch.Tensor],
    config: Mapping[str, Any],
    checkpoint_type: str | None,
    extra: Callable[[Path], None] | None,
) -> Path:
    """Weights, config (with its type) and ``extra(tmp)``'s files, as one directory written atomically
    (an existing one is replaced only once the new one is whole)."""
    if checkpoint_type is not None:
        config = {CHECKPOINT_TYPE: checkpoint_type, **config}

    def write(tmp: Path) -> None:
        save_file(_contiguous(dict(model_state)), str(tmp / MODEL_FILE), metadata={"format": "pt"})
        write_json(tmp / CONFIG_FILE, dict(config))
        if extra is not None:
            extra(tmp)

    return write_directory_atomically(directory, write)


def save_checkpoint(
    directory: str | Path,
    model_state: dict[str, torch.Tensor],
    config: dict[str, Any],
    state: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    checkpoint_type: str | None = None,
) -> Path:
    """A trainer's checkpoint: weights, config, ``state.json`` (with RNG states) and the optimizer."""
    return _save(
        directory,
        model_state,
        config,
        checkpoint_type,
        lambda tmp: write_training_state(tmp, dict(state or {}), optimizer),
    )


def save_model(
    directory: str | Path,
    model: torch.nn.Module,
    config: Mapping[str, Any],
    checkpoint_type: str,
    state: Mapping[str, Any] | None = None,
    extra: Callable[[Path], None] | None = None,
) -> Path:
    """An exported model: weights, config with ``checkpoint_type``, ``state`` as ``state.json`` (if given)
    and the files ``extra(tmp)`` writes beside them (a vocabulary, decoding defaults), atomically."""

    def write_rest(tmp: Path) -> None:
        if state is not None:
            write_json(tmp / STATE_FILE, dict(state))
        if extra is not None:
            extra(tmp)

    return _save(directory, model.state_dict(), config, checkpoint_type, write_rest)


def read_config(
    directory: str | Path, checkpoint_type: str | None = None, kind: str = "checkpoint"
) -> dict[str, Any]:
    """``config.json`` of a checkpoint or model directory (``kind``), without its ``checkpoint_type``; a
    directory of another type than ``checkpoint_type`` is refused (one without a type, older, is not)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such {kind} directory")
    what = f"a {checkpoint_type} {kind}" if checkpoint_type else f"a synopsis {kind}"
    config = read_json(directory / CONFIG_FILE, what, CheckpointError, dict, MAX_CONFIG_BYTES)
    found = config.pop(CHECKPOINT_TYPE, None)
    if checkpoint_type is not None and found is not None and found != checkpoint_type:
        raise CheckpointError(f"{directory / CONFIG_FILE}: a {found} {kind}, not {what}")
    return config


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; a missing or corrupt file, or NaN/inf values, are errors."""
    if not path.exists():
        raise CheckpointError(f"{path.parent}: missing {path.name}; not a synopsis checkpoint")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{path}: truncated or corrupt safetensors file ({err})") from None
    check_finite_tensors(tensors, path)
    return tensors


def check_finite_tensors(tensors: Mapping[str, torch.Tensor], where: str | Path) -> None:
    """A :class:`CheckpointError` naming the first floating-point tensor with a NaN or infinite value
    (a file whose header is valid but whose data is garbage loads without complaint otherwise)."""
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(
                f"{where}: tensor '{name}' holds NaN or infinite values; the checkpoint is corrupt"
            )


def load_checkpoint(
    directory: str | Path,
    with_optimizer: bool = True,
    checkpoint_type: str | None = None,
    kind: str = "checkpoint",
) -> Checkpoint:
    """A checkpoint or model directory: config (see :func:`read_config`), finite weights, trainer state."""
    directory = Path(directory)
    config = read_config(directory, checkpoint_type, kind)
    model_state = load_tensors(directory / MODEL_FILE)
    state, optimizer_state = {}, None
    if (directory / STATE_FILE).exists():
        state, optimizer_state = read_training_state(directory)
    return Checkpoint(model_state, config, state, optimizer_state if with_optimizer else None, directory)


M = TypeVar("M", bound=torch.nn.Module)


def load_model(
    directory: str | Path, build: Callable[[dict[str, Any]], M], checkpoint_type: str, kind: str = "model"
) -> tuple[M, Checkpoint]:
    """``build(config)`` with the directory's weights loaded, and the checkpoint read. ``build``'s
    :class:`~synopsis.errors.SynopsisError` (a bad config) and weights that do not fit the model are
    :class:`~synopsis.errors.CheckpointError`."""
    checkpoint = load_checkpoint(directory, with_optimizer=False, checkpoint_type=checkpoint_type, kind=kind)
    try:
        model = build(checkpoint.config)
    except SynopsisError as err:
        raise CheckpointError(str(err)) from None
    try:
        model.load_state_dict(checkpoint.model_state)
    except RuntimeError as err:
        raise CheckpointError(
            f"{Path(directory) / MODEL_FILE}: weights do not match {CONFIG_FILE} ({err})"
        ) from None
    return model, checkpoint


class CheckpointManager:
    """Keeps ``run_dir/checkpoints/step-N`` directories, a ``latest`` pointer, and a ``best`` copy."""

    def __init__(self, run_dir: str | Path, keep: int = 2) -> None:
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.keep = keep

    def save(self, step: int, is_best: bool = False, **kwargs: Any) -> Path:
        """A :func:`save_checkpoint` directory for ``step`` (and ``best``)."""
        return self.save_with(step, lambda directory: save_checkpoint(directory, **kwargs), is_best)

    def save_with(self, step: int, save: Callable[[Path], Any], is_best: bool = False) -> Path:
        """``save(directory)`` writes one checkpoint directory atomically (e.g. with :func:`save_checkpoint`
        or a Hugging Face ``save_pretrained`` inside :func:`~synopsis.io.write_directory_atomically`); the
        ``latest`` pointer moves only after it is complete, and old checkpoints beyond ``keep`` go."""
        path = self.ckpt_dir / f"step-{step:08d}"
        save(path)
        with open_for_atomic_write(self.ckpt_dir / LATEST_FILE) as handle:
            handle.write(path.name + "\n")
        if is_best:
            save(self.run_dir / "best")
        for old in sorted(self.ckpt_dir.glob("step-*"))[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return path

    def latest(self) -> Path | None:
        pointer = self.ckpt_dir / LATEST_FILE
        if not pointer.exists():
            return None
        path = self.ckpt_dir / pointer.read_text(encoding="utf-8").strip()
        if not (path / STATE_FILE).is_file():
            raise CheckpointError(f"{pointer}: points to {path.name}, which is missing or incomplete")
        return path


class TrainingDivergedError(CheckpointError):
    """Raised when the loss becomes NaN/inf: training stops loudly instead of writing garbage."""


def check_finite(loss: torch.Tensor | float, step: int) -> None:
    value = float(loss)
    if not np.isfinite(value):
        raise TrainingDivergedError(
            f"loss became {value} at step {step}; the last good checkpoint is kept. "
            "Lower the learning rate or check the data."
        )
