"""Hypothesis scoring and decoder-state helpers shared by the decoders (OpenNMT-py's ``penalties.py``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

#: Length penalties by name: ``average`` divides by ``length ** alpha`` (alpha = 1 is the average
#: log-probability See et al. rank by, 0 the sum); ``wu`` divides by ``((5 + length) / 6) ** alpha``
#: (Wu et al., 2016).
LENGTH_PENALTIES = ("average", "wu")


def length_normalize(score: float, length: int, alpha: float = 1.0, kind: str = "average") -> float:
    """A hypothesis's ranking score from its total log-probability and length."""
    if kind == "average":
        return score / max(length, 1) ** alpha
    if kind == "wu":
        return score / ((5 + length) / 6) ** alpha
    raise ValueError(f"length penalty must be one of {', '.join(LENGTH_PENALTIES)}, got {kind!r}")


def map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], obj: Any) -> Any:
    """Apply ``fn`` to every tensor inside ``obj`` (tensors, dataclasses, tuples, lists, dicts)."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(
            obj, **{f.name: map_tensors(fn, getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
        )
    if isinstance(obj, tuple | list):
        return type(obj)(map_tensors(fn, x) for x in obj)
    if isinstance(obj, dict):
        return {k: map_tensors(fn, v) for k, v in obj.items()}
    return obj


def device_of(*objects: Any) -> torch.device:
    """The device of the first tensor inside ``objects`` (decoder buffers are created there); CPU if none."""
    found: list[torch.device] = []

    def note(tensor: torch.Tensor) -> torch.Tensor:
        found.append(tensor.device)
        return tensor

    for obj in objects:
        map_tensors(note, obj)
        if found:
            return found[0]
    return torch.device("cpu")
