"""Greedy decoding over a batch, with the same step-function interface as beam search."""

from __future__ import annotations

from typing import Any

import torch

from synopsis.generation.beam_search import Hypothesis, StepFunction, device_of
from synopsis.generation.penalties import block_repeated_ngrams, forbid_eos_before, length_normalize


def greedy_search(
    step: StepFunction,
    state: Any,
    memory: Any,
    *,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    min_length: int = 1,
    max_length: int = 100,
    no_repeat_ngram_size: int = 0,
) -> list[Hypothesis]:
    """The most probable next token at every step, for every document at once."""
    device = device_of(state, memory)  # every buffer on the model's device
    tokens = torch.full((batch_size, 1), bos_id, dtype=torch.long, device=device)
    total = torch.zeros(batch_size, device=device)
    lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
    done = torch.zeros(batch_size, dtype=torch.bool, device=device)
    for t in range(max_length):
        log_probs, state = step(tokens[:, -1], state, memory)
        log_probs = forbid_eos_before(log_probs.float(), eos_id, t + 1, min_length)
        if no_repeat_ngram_size > 0:
            log_probs = block_repeated_ngrams(log_probs, tokens[:, 1:].tolist(), no_repeat_ngram_size)
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
        out.append(
            Hypothesis(ids, length_normalize(float(total[b]), int(lengths[b])), float(total[b]), ended)
        )
    return out
