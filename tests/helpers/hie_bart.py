"""Shared by the tests (moved from tests/test_hie_bart.py)."""

from __future__ import annotations

import torch
from transformers import BartConfig, BartForConditionalGeneration

from helpers.tiny_models import TOY_BART
from synopsis.models.hie_bart import (
    HieBartConfig,
    HieBartForConditionalGeneration,
)

PAD, BOS, EOS, SENT = 1, 0, 2, 5  # ids of the toy vocabulary below (real tokenizers: see test_seq2seq.py)


def toy_config(**overrides: object) -> BartConfig:
    """The toy BART of ``tiny_models`` with the library's dropout and attention backend."""
    return BartConfig(**{**TOY_BART, "max_position_embeddings": 64, "forced_eos_token_id": EOS, **overrides})


def toy_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three documents of different lengths and sentence counts, right-padded."""
    docs = [
        [BOS, SENT, 10, 11, 12, SENT, 13, 14, SENT, 15, EOS],
        [BOS, SENT, 20, 21, 22, 23, 24, EOS],
        [BOS, SENT, 30, SENT, 31, 32, EOS],
    ]
    width = max(map(len, docs))
    ids = torch.tensor([d + [PAD] * (width - len(d)) for d in docs])
    return ids, (ids != PAD).long()


def stock_and_hie(word_heads: int, attn: str = "sdpa", seed: int = 0, scale: float = 1.0):
    torch.manual_seed(seed)
    config = toy_config()
    config._attn_implementation = attn
    bart = BartForConditionalGeneration(config).eval()
    if scale != 1.0:  # larger weights make attention patterns (and any mistake) visible in the outputs
        with torch.no_grad():
            for name, p in bart.named_parameters():
                if "self_attn" in name and name.endswith("weight"):
                    p.mul_(scale)
    hie_config = HieBartConfig.from_bart_config(config, word_heads=word_heads, sentence_start_token_id=SENT)
    hie_config._attn_implementation = attn
    hie = HieBartForConditionalGeneration(hie_config).eval()
    hie.load_state_dict(bart.state_dict(), strict=True)  # the same parameters, nothing added
    return bart, hie
