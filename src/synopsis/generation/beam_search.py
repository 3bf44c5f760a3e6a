"""Beam search batched over documents and hypotheses (all B x K hypotheses go through one step call).

Follows See et al.'s decoder: at every step the 2K best extensions of the K live hypotheses are scanned in
order; those that end with EOS (and are at least ``min_length`` long) become finished hypotheses, the first
K others stay live. A document is done when it has K finished hypotheses (or at ``max_length``; if nothing
finished, its live hypotheses are used); a done document's rows leave the batch, so the documents still
searching no longer pay for them. Hypotheses are ranked by length-normalised log-probability,
``sum / length ** length_penalty``: the paper's average log-probability with the default 1.0.
Score adjustments (minimum length, n-gram and repeat bans) are logits processors applied at every step;
every buffer is created on the device of the model's memory.

The step function gets the tokens and decoder state of the K hypotheses of every document still searching
(K consecutive rows per document) and the memory (e.g. the encoder's output) with one row per document:
the K hypotheses of a document read one copy of its source, not K.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from synopsis.generation.penalties import device_of, length_normalize, map_tensors
from synopsis.generation.processors import LogitsProcessorList

StepFunction = Callable[[torch.Tensor, Any, Any], tuple[torch.Tensor, Any]]


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, without BOS and EOS
    score: float  # length-normalised log-probability (the ranking key)
    log_prob: float  # total log-probability
    finished: bool  # ended with EOS (False: cut at max_length)
    trace: Any = None  # what ``trace(state, row)`` took from the decoder state when it was chosen


def beam_search(
    step: StepFunction,
    state: Any,
    memory: Any,
    *,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    num_beams: int = 4,
    max_length: int = 100,
    length_penalty: float = 1.0,
    length_penalty_kind: str = "average",
    processors: LogitsProcessorList | None = None,
    trace: Callable[[Any, int], Any] | None = None,
) -> list[Hypothesis]:
    """Best hypothesis per document. ``state``/``memory`` have ``batch_size`` rows (see the module doc).

    ``max_length`` counts generated tokens, EOS included. ``trace(state, row)``, if given, is kept with each
    finished hypothesis: what the decoder state of its row holds after its last step (e.g. the attention
    history a step function accumulates in its state, which the search reorders with the beams)."""
    if num_beams < 1 or max_length < 1:
        raise ValueError("num_beams and max_length must be >= 1")
    processors = processors or LogitsProcessorList()
    device = device_of(memory, state)
    k = num_beams
    n = batch_size * k
    state = map_tensors(lambda t: t.repeat_interleave(k, dim=0), state)
    tokens = torch.full((n, 1), bos_id, dtype=torch.long, device=device)
    # Only the first beam is live at the start, so the K beams do not all pick the same first word.
    beam_scores = torch.full((batch_size, k), float("-inf"), device=device)
    beam_scores[:, 0] = 0.0
    finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    searching = list(range(batch_size))  # the documents still in the batch, in row order (K rows each)
    beam = torch.arange(k, device=device)

    def normalize(total: float, length: int) -> float:
        return length_normalize(total, length, length_penalty, length_penalty_kind)

    for t in range(max_length):
        length = t + 1
        live, n = len(searching), len(searching) * k
        log_probs, state = step(tokens[:, -1], state, memory)
        log_probs = processors(tokens[:, 1:], log_probs.float())
        vocab = log_probs.size(-1)
        candidates = (beam_scores.view(n, 1) + log_probs).view(live, k * vocab)
        top_scores, top_index = candidates.topk(2 * k, dim=-1)  # sorted, best first
        top_beam, top_token = top_index // vocab, top_index % vocab
        is_eos = top_token.eq(eos_id)

        # Scan in order: an EOS candidate counts only while fewer than K live candidates precede it.
        live_before = torch.cumsum(~is_eos, dim=-1) - (~is_eos).long()
        ends = is_eos & live_before.lt(k) & torch.isfinite(top_scores)
        for b, j in ends.nonzero().tolist():
            source = b * k + int(top_beam[b, j])
            total = float(top_scores[b, j])
            kept = trace(state, source) if trace is not None else None
            finished[searching[b]].append(
                Hypothesis(tokens[source, 1:].tolist(), normalize(total, length), total, True, kept)
            )

        # The first K non-EOS candidates stay live (a stable sort keeps the score order).
        keep = torch.sort(is_eos.int(), dim=-1, stable=True).indices[:, :k]
        beam_scores = top_scores.gather(1, keep)
        first_rows = torch.arange(0, n, k, device=device).unsqueeze(1)
        source_rows = (first_rows + top_beam.gather(1, keep)).view(-1)
        tokens = torch.cat([tokens[source_rows], top_token.gather(1, keep).view(n, 1)], dim=1)

        # A document with K finished hypotheses is done: its rows leave the batch (state, memory, tokens,
        # scores and the processors' per-document data), in the same selection as the beam reordering.
        going_on = [b for b, document in enumerate(searching) if len(finished[document]) < k]
        if not going_on:
            break
        if len(going_on) < live:
            kept_documents = beam.new_tensor(going_on)
            source_rows = source_rows.view(live, k)[kept_documents].view(-1)
            rows = (kept_documents.unsqueeze(1) * k + beam).view(-1)
            tokens, beam_scores = tokens[rows], beam_scores[kept_documents]
            memory = map_tensors(lambda x, kept=kept_documents: x.index_select(0, kept), memory)
            processors = processors.select_documents(kept_documents)
            searching = [searching[b] for b in going_on]
        state = map_tensors(lambda x, rows=source_rows: x.index_select(0, rows), state)

    best: list[Hypothesis] = []
    position = {document: b for b, document in enumerate(searching)}  # rows of the documents left
    for document in range(batch_size):
        pool = finished[document]
        if not pool:  # nothing ended with EOS within max_length: fall back to the live hypotheses
            b = position[document]
            length = tokens.size(1) - 1
            pool = [
                Hypothesis(
                    tokens[b * k + j, 1:].tolist(),
                    normalize(float(beam_scores[b, j]), length),
                    float(beam_scores[b, j]),
                    False,
                    trace(state, b * k + j) if trace is not None else None,
                )
                for j in range(k)
                if torch.isfinite(beam_scores[b, j])
            ]
        best.append(
            max(pool, key=lambda h: h.score, default=Hypothesis([], float("-inf"), float("-inf"), False))
        )
    return best
