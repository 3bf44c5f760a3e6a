"""Ancestral sampling from a :class:`~synopsis.models.domain_lm.DomainLM` given domain attributes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from synopsis.models.domain_lm import DomainLM
from synopsis.vocab import Vocab


@torch.no_grad()
def sample(
    model: DomainLM,
    vocab: Vocab,
    attributes: Mapping[str, str] | None = None,
    prompt: Sequence[str] = (),
    length: int = 50,
    temperature: float = 1.0,
    seed: int | None = None,
    allow_unk: bool = False,
) -> list[str]:
    """``length`` sampled tokens after ``prompt`` (the prompt is preceded by ``<eos>``, a line start)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    was_training = model.training
    model.eval()
    mask = model.attribute_mask(attributes).unsqueeze(0)  # (1, N)
    context = [vocab.eos_id] + vocab.encode(prompt)[:-1]
    logits, state = model(torch.tensor([context]), mask)
    out: list[str] = []
    for _ in range(length):
        scores = logits[0, -1] / temperature
        if not allow_unk:
            scores[vocab.unk_id] = float("-inf")
        token = int(torch.multinomial(scores.softmax(-1), 1, generator=generator))
        out.append(vocab.itos[token])
        logits, state = model(torch.tensor([[token]]), mask, state)
    model.train(was_training)
    return out


def detokenize(tokens: Sequence[str], eos: str = "<eos>") -> str:
    """Tokens to lines: ``<eos>`` ends a line."""
    return "\n".join(line.strip() for line in " ".join(tokens).split(eos)).strip()
