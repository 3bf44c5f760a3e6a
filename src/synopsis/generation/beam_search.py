"""Beam search batched over documents and hypotheses (all B x K hypotheses go through one step call).

Follows See et al.'s decoder: at every step the 2K best extensions of the K live hypotheses are scanned in
order; those that end with EOS (and are at least ``min_length`` long) become finished hypotheses, the first
K others stay live. A document is done when it has K finished hypotheses (or at ``max_length``; if nothing
finished, its live hypotheses are used). Hypotheses are ranked by length-normalised log-probability,
``sum / length ** length_penalty``: the paper's average log-probability with the default 1.0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from synopsis.generation.penalties import (
    block_repeated_ngrams,
    forbid_eos_before,
    length_normalize,
    map_tensors,
)

StepFunction = Callable[[torch.Tensor, Any, Any], tuple[torch.Tensor, Any]]


def device_of(*objects: Any) -> torch.device:
    """The device of the first tensor inside ``objects`` (the model's, for state and memory); CPU if none.

    Decoding buffers are created there, so that a model on a GPU decodes without device mismatches."""
    stack = list(reversed(objects))
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            return obj.device
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            stack += reversed([getattr(obj, f.name) for f in dataclasses.fields(obj)])
        elif isinstance(obj, dict):
            stack += reversed(list(obj.values()))
        elif isinstance(obj, tuple | list):
            stack += reversed(obj)
    return torch.device("cpu")


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, without BOS and EOS
    score: float  # length-normalised log-probability (the ranking key)
    log_prob: float  # total log-probability
    finished: bool  # ended with EOS (False: cut at max_length)


def beam_search(
    step: StepFunction,
    state: Any,
    memory: Any,
    *,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    num_beams: int = 4,
    min_length: int = 1,
    max_length: int = 100,
    length_penalty: float = 1.0,
    no_repeat_ngram_size: int = 0,
) -> list[Hypothesis]:
    """Best hypothesis per document. ``state``/``memory`` have ``batch_size`` rows (see the package doc).

    ``min_length`` and ``max_length`` count generated tokens, EOS included."""
    if num_beams < 1 or max_length < 1:
        raise ValueError("num_beams and max_length must be >= 1")
    k = num_beams
    n = batch_size * k
    device = device_of(state, memory)
    state = map_tensors(lambda t: t.repeat_interleave(k, dim=0), state)
    memory = map_tensors(lambda t: t.repeat_interleave(k, dim=0), memory)
    tokens = torch.full((n, 1), bos_id, dtype=torch.long, device=device)
    # Only the first beam is live at the start, so the K beams do not all pick the same first word.
    beam_scores = torch.full((batch_size, k), float("-inf"), device=device)
    beam_scores[:, 0] = 0.0
    finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    done = torch.zeros(batch_size, dtype=torch.bool, device=device)
    batch_offset = torch.arange(batch_size, device=device).unsqueeze(1) * k

    for t in range(max_length):
        length = t + 1
        log_probs, state = step(tokens[:, -1], state, memory)
        log_probs = forbid_eos_before(log_probs.float(), eos_id, length, min_length)
        if no_repeat_ngram_size > 0:
            log_probs = block_repeated_ngrams(log_probs, tokens[:, 1:].tolist(), no_repeat_ngram_size)
        vocab = log_probs.size(-1)
        candidates = (beam_scores.view(n, 1) + log_probs).view(batch_size, k * vocab)
        top_scores, top_index = candidates.topk(2 * k, dim=-1)  # sorted, best first
        top_beam, top_token = top_index // vocab, top_index % vocab
        is_eos = top_token.eq(eos_id)

        # Scan in order: an EOS candidate counts only while fewer than K live candidates precede it.
        live_before = torch.cumsum(~is_eos, dim=-1) - (~is_eos).long()
        ends = is_eos & live_before.lt(k) & torch.isfinite(top_scores) & ~done.unsqueeze(1)
        for b, j in ends.nonzero().tolist():
            source = b * k + int(top_beam[b, j])
            total = float(top_scores[b, j])
            finished[b].append(
                Hypothesis(
                    tokens[source, 1:].tolist(), length_normalize(total, length, length_penalty), total, True
                )
            )

        # The first K non-EOS candidates stay live (a stable sort keeps the score order).
        keep = torch.sort(is_eos.int(), dim=-1, stable=True).indices[:, :k]
        beam_scores = top_scores.gather(1, keep)
        source_rows = (batch_offset + top_beam.gather(1, keep)).view(-1)
        tokens = torch.cat([tokens[source_rows], top_token.gather(1, keep).view(n, 1)], dim=1)
        state = map_tensors(lambda x, rows=source_rows: x.index_select(0, rows), state)

        done |= torch.tensor([len(f) >= k for f in finished], device=device)
        beam_scores[done] = float("-inf")  # finished documents stop proposing candidates
        if bool(done.all()):
            break

    best: list[Hypothesis] = []
    for b in range(batch_size):
        pool = finished[b]
        if not pool:  # nothing ended with EOS within max_length: fall back to the live hypotheses
            length = tokens.size(1) - 1
            pool = [
                Hypothesis(
                    tokens[b * k + j, 1:].tolist(),
                    length_normalize(float(beam_scores[b, j]), length, length_penalty),
                    float(beam_scores[b, j]),
                    False,
                )
                for j in range(k)
                if torch.isfinite(beam_scores[b, j])
            ]
        best.append(
            max(pool, key=lambda h: h.score, default=Hypothesis([], float("-inf"), float("-inf"), False))
        )
    return best
