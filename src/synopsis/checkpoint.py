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
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from synopsis.errors import CheckpointError
from synopsis.io import open_for_atomic_write, write_json

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "state.json"
LATEST_FILE = "latest"


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
    """Python, NumPy and torch RNG states in a JSON-able form."""
    np_state = np.random.get_state()
    return {
        "python": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "torch": torch.get_rng_state().tolist(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))


def save_checkpoint(
    directory: str | Path,
    model_state: dict[str, torch.Tensor],
    config: dict[str, Any],
    state: dict[str, Any] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
) -> Path:
    """Write a checkpoint directory atomically (replacing an existing one only once the new one is whole)."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.tmp-"))
    try:
        save_file(_contiguous(model_state), str(tmp / MODEL_FILE), metadata={"format": "pt"})
        write_json(tmp / CONFIG_FILE, config)
        full_state = dict(state or {})
        if optimizer is not None:
            tensors, rest = flatten_optimizer_state(optimizer.state_dict())
            save_file(_contiguous(tensors), str(tmp / OPTIMIZER_FILE))
            full_state["optimizer"] = rest
        write_json(tmp / STATE_FILE, full_state)
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            directory.rename(old)
            tmp.rename(directory)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent}: missing {path.name}; not a synopsis checkpoint") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: corrupt JSON ({err})") from None


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.exists():
        raise CheckpointError(f"{path.parent}: missing {path.name}; not a synopsis checkpoint")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{path}: truncated or corrupt safetensors file ({err})") from None


def load_checkpoint(directory: str | Path, with_optimizer: bool = True) -> Checkpoint:
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    config = _read_json(directory / CONFIG_FILE)
    model_state = load_tensors(directory / MODEL_FILE)
    state = _read_json(directory / STATE_FILE) if (directory / STATE_FILE).exists() else {}
    optimizer_state = None
    if with_optimizer and "optimizer" in state and (directory / OPTIMIZER_FILE).exists():
        optimizer_state = unflatten_optimizer_state(
            load_tensors(directory / OPTIMIZER_FILE), state.pop("optimizer")
        )
    return Checkpoint(model_state, config, state, optimizer_state, directory)


class CheckpointManager:
    """Keeps ``run_dir/checkpoints/step-N`` directories, a ``latest`` pointer, and a ``best`` copy."""

    def __init__(self, run_dir: str | Path, keep: int = 2) -> None:
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.keep = keep

    def save(self, step: int, is_best: bool = False, **kwargs: Any) -> Path:
        path = save_checkpoint(self.ckpt_dir / f"step-{step:08d}", **kwargs)
        with open_for_atomic_write(self.ckpt_dir / LATEST_FILE) as handle:
            handle.write(path.name + "\n")
        if is_best:
            save_checkpoint(self.run_dir / "best", **kwargs)
        for old in sorted(self.ckpt_dir.glob("step-*"))[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return path

    def latest(self) -> Path | None:
        pointer = self.ckpt_dir / LATEST_FILE
        if not pointer.exists():
            return None
        path = self.ckpt_dir / pointer.read_text().strip()
        if not path.is_dir():
            raise CheckpointError(f"{pointer}: points to missing checkpoint {path.name}")
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
