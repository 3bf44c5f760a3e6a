"""Shared by the tests (moved from tests/test_instructsum.py)."""

from __future__ import annotations

import torch
from transformers import T5Config, T5ForConditionalGeneration

from synopsis.models.instructsum import (
    PromptIds,
    tokenize_prompt,
)

TITLE = "Fujifilm X-T2"


ARTICLE = (
    "The Fujifilm X-T2 is a mirrorless interchangeable-lens camera. It was announced by Fujifilm on "
    "7 July 2016. It uses the Fujifilm X-mount and an X-Trans CMOS III sensor of 24.3 megapixels. "
    "The intro price was USD 1,599 for the body and USD 1,899 for the kit with a zoom lens."
)


INSTRUCTIONS = [
    "Firstly, mention what kind of camera it is.",
    "Firstly, mention what kind of camera it is. Secondly, indicate the date the camera was announced on. "
    "Indicate this camera's feature.",
    "If the price is known, give it.",
]


def sharp_t5(
    tokenizer, attn: str = "eager", seed: int = 0, **overrides: object
) -> T5ForConditionalGeneration:
    """A tiny random T5 whose attention and position biases are scaled up (sharp, position-sensitive)."""
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(t5_config(tokenizer, attn, **overrides)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".q.weight" in name or ".k.weight" in name:
                p.mul_(4.0)
            if "relative_attention_bias" in name:
                p.mul_(20.0)
    return model


def prompts(tokenizer, instructions=INSTRUCTIONS, title=TITLE, article=ARTICLE) -> list[PromptIds]:
    return [tokenize_prompt(tokenizer, i, title, article) for i in instructions]


def real_rows(hidden: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    return [h[m.bool()] for h, m in zip(hidden, mask, strict=True)]


def t5_config(tokenizer, attn: str = "eager", **overrides: object) -> T5Config:
    settings: dict[str, object] = dict(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=16,
        relative_attention_max_distance=64,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    config = T5Config(**{**settings, **overrides})
    config._attn_implementation = attn
    return config
