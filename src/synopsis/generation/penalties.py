"""Score adjustments shared by the decoders: length normalisation, minimum length, n-gram blocking."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch


def length_normalize(score: float, length: int, alpha: float = 1.0) -> float:
    """``score / length ** alpha``: alpha = 1 is the average log-probability See et al. rank by, 0 the sum."""
    return score / max(length, 1) ** alpha


def forbid_eos_before(log_probs: torch.Tensor, eos_id: int, length: int, min_length: int) -> torch.Tensor:
    """Mask EOS while the hypothesis (with the token being chosen) would be shorter than ``min_length``."""
    if length < min_length:
        log_probs = log_probs.clone()
        log_probs[:, eos_id] = float("-inf")
    return log_probs


def block_repeated_ngrams(log_probs: torch.Tensor, history: Sequence[Sequence[int]], n: int) -> torch.Tensor:
    """Forbid tokens that would repeat an n-gram already in the hypothesis (``history`` = its tokens).

    A row in which every token ends up forbidden keeps its unblocked scores, so a hypothesis can always
    continue (or end) instead of becoming -inf everywhere: the trap of naive blocking."""
    if n <= 0:
        return log_probs
    blocked = log_probs.clone()
    for row, tokens in enumerate(history):
        if len(tokens) < n - 1:
            continue
        prefix = tuple(tokens[len(tokens) - (n - 1) :]) if n > 1 else ()
        banned = {
            tokens[i + n - 1] for i in range(len(tokens) - n + 1) if tuple(tokens[i : i + n - 1]) == prefix
        }
        if banned:
            blocked[row, list(banned)] = float("-inf")
    dead = torch.isinf(blocked).all(dim=-1) & ~torch.isinf(log_probs).all(dim=-1)
    if dead.any():
        blocked[dead] = log_probs[dead]
    return blocked


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
