"""Greedy decoding over a batch, with the same step-function interface as beam search."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from synopsis.generation.beam_search import Hypothesis, StepFunction
from synopsis.generation.penalties import device_of, length_normalize
from synopsis.generation.processors import LogitsProcessorList


def greedy_search(
    step: StepFunction, state: Any, memory: Any, *, batch_size: int, bos_id: int, eos_id: int,
    max_length: int = 100, processors: LogitsProcessorList | None = None,
    trace: Callable[[Any, int], Any] | None = None,
) -> list[Hypothesis]:
    """The most probable next token at every step, for every document at once; ``trace`` as in
    :func:`~synopsis.generation.beam_search.beam_search` (taken from the final state)."""
    processors = processors or LogitsProcessorList()
    device = device_of(memory, state)
    tokens = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=device)
    total = torch.zeros(batch_size, device=device)
    lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
    done = torch.zeros(batch_size, dtype=torch.bool, device=device)
    for _ in range(max_length):
        log_probs, state = step(tokens[:, -1], state, memory)
        log_probs = processors(tokens[:, 1:], log_probs.float())
        score, token = log_probs.max(dim=-1)
        token = token.masked_fill(done, eos_id)  # finished rows only pad with EOS
        total += torch.where(done, torch.zeros_like(score), score)
        lengths += (~done).long()
        tokens = torch.cat([tokens, token.unsqueeze(1)], dim=1)
        done |= token.eq(eos_id)
        if bool(done.all()):
            break
    out = []
    for b in range(batch_size):
        ids = tokens[b, 1:].tolist()
        ended = eos_id in ids
        ids = ids[: ids.index(eos_id)] if ended else ids
        kept = trace(state, b) if trace is not None else None
        out.append(
            Hypothesis(ids, length_normalize(float(total[b]), int(lengths[b])), float(total[b]), ended, kept)
        )
    return out
