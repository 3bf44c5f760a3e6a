"""Atomic safetensors checkpoints with everything needed to resume exactly.

A checkpoint is a directory::

    model.safetensors      model weights
    config.json            the model's configuration (JSON)
    optimizer.safetensors  optimizer tensors (optional)
    state.json             trainer state: step, epoch, metrics, optimizer's non-tensor state, RNG states

It is written to ``<name>.tmp-*`` and renamed into place, and the run directory's ``latest`` file is then
replaced atomically, so a kill at any moment leaves the previous checkpoint intact. Nothing is unpickled:
all tensors go through safetensors and everything else through JSON.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from synopsis.errors import CheckpointError
from synopsis.io import open_for_atomic_write, write_directory_atomically, write_json

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "state.json"
LATEST_FILE = "latest"

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
    state = _read_json(directory / STATE_FILE)
    optimizer_state = None
    if "optimizer" in state and (directory / OPTIMIZER_FILE).exists():
        optimizer_state = unflatten_optimizer_state(
            load_tensors(directory / OPTIMIZER_FILE), state.pop("optimizer")
        )
    return state, optimizer_state


def save_checkpoint(
    directory: str | Path,
    model_state: dict[str, torch.Tensor],
    config: dict[str, Any],
    state: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> Path:
    """Write a checkpoint directory atomically (replacing an existing one only once the new one is whole)."""

    def write(tmp: Path) -> None:
        save_file(_contiguous(model_state), str(tmp / MODEL_FILE), metadata={"format": "pt"})
        write_json(tmp / CONFIG_FILE, config)
        write_training_state(tmp, dict(state or {}), optimizer)

    return write_directory_atomically(directory, write)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent}: missing {path.name}; not a synopsis checkpoint") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: corrupt JSON ({err})") from None


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


def load_checkpoint(directory: str | Path, with_optimizer: bool = True) -> Checkpoint:
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    config = _read_json(directory / CONFIG_FILE)
    model_state = load_tensors(directory / MODEL_FILE)
    state, optimizer_state = {}, None
    if (directory / STATE_FILE).exists():
        state, optimizer_state = read_training_state(directory)
    return Checkpoint(model_state, config, state, optimizer_state if with_optimizer else None, directory)


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
