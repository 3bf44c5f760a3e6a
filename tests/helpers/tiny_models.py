"""Tiny local Hugging Face checkpoints (random weights, real tokenizers) for the seq2seq tests.

Each builder saves a complete model directory (config, safetensors weights, tokenizer) the way a user's
fine-tuned checkpoint looks, so loading goes through the same ``from_pretrained`` path. Nothing is
downloaded: the tokenizers come from ``../shared/data/tokenizers``.
"""

from __future__ import annotations

import shutil
import tempfile
from functools import cache
from pathlib import Path

import torch
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    LEDConfig,
    LEDForConditionalGeneration,
    PreTrainedTokenizerBase,
    T5Config,
    T5ForConditionalGeneration,
    T5Tokenizer,
)

from synopsis.models.seq2seq import bart_tokenizer_from_files

#: Toy vocabulary ids of the configs below (BART/LED); T5 uses pad 0 / eos 1.
PAD, BOS, EOS = 1, 0, 2
LED_WINDOW = 16  # one-sided 8: the LED test inputs are several windows long

TINY = {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64}


@cache
def bart_tokenizer(tokenizers_dir: Path) -> PreTrainedTokenizerBase:
    """GPT-2 byte-level BPE with BART's special tokens."""
    tokenizer = bart_tokenizer_from_files(
        tokenizers_dir / "gpt2" / "vocab.json", tokenizers_dir / "gpt2" / "merges.txt"
    )
    assert len(tokenizer) == 50257 + 5, len(tokenizer)  # <s> <pad> </s> <unk> <mask> added
    return tokenizer


@cache
def t5_tokenizer(tokenizers_dir: Path) -> PreTrainedTokenizerBase:
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(tokenizers_dir / "t5" / "spiece.model", tmp)
        tokenizer = T5Tokenizer.from_pretrained(tmp)
    assert len(tokenizer) == 32100, len(tokenizer)  # 32,000 pieces + 100 sentinels
    return tokenizer


def _bart_config(tokenizer: PreTrainedTokenizerBase, **overrides: object) -> dict[str, object]:
    return {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "decoder_start_token_id": tokenizer.eos_token_id,
        "forced_eos_token_id": tokenizer.eos_token_id,
        **overrides,
    }


def save_tiny_bart(
    directory: Path,
    tokenizers_dir: Path,
    heads: int = 4,
    max_positions: int = 512,
    seed: int = 0,
    **overrides: object,
) -> Path:
    torch.manual_seed(seed)
    tokenizer = bart_tokenizer(tokenizers_dir)
    config = BartConfig(
        **TINY,
        **_bart_config(tokenizer),
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        max_position_embeddings=max_positions,
        **overrides,
    )
    BartForConditionalGeneration(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def save_tiny_t5(directory: Path, tokenizers_dir: Path, seed: int = 0, **overrides: object) -> Path:
    torch.manual_seed(seed)
    tokenizer = t5_tokenizer(tokenizers_dir)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        **overrides,
    )
    T5ForConditionalGeneration(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def save_tiny_led(directory: Path, tokenizers_dir: Path, seed: int = 0, **overrides: object) -> Path:
    torch.manual_seed(seed)
    tokenizer = bart_tokenizer(tokenizers_dir)
    config = LEDConfig(
        **TINY,
        **_bart_config(tokenizer),
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        attention_window=[8, 8],
        max_encoder_position_embeddings=256,
        max_decoder_position_embeddings=64,
        **overrides,
    )
    LEDForConditionalGeneration(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# ----------------------------------------------------------------------------- toy configs (no tokenizer)
#: The toy BART/LED of the unit tests: sizes and the toy vocabulary's special ids.
TOY_BART = {
    **TINY,
    "vocab_size": 64,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "pad_token_id": PAD,
    "bos_token_id": BOS,
    "eos_token_id": EOS,
    "decoder_start_token_id": EOS,
}
NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0}


def bart_config(attn: str = "eager", **overrides: object) -> BartConfig:
    settings = {**TOY_BART, **NO_DROPOUT, "max_position_embeddings": 128, "forced_eos_token_id": None}
    config = BartConfig(**{**settings, **overrides})
    config._attn_implementation = attn
    return config


def t5_config(attn: str = "eager", **overrides: object) -> T5Config:
    settings = dict(
        vocab_size=64,
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        dropout_rate=0.0,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    config = T5Config(**{**settings, **overrides})
    config._attn_implementation = attn
    return config


def led_config(**overrides: object) -> LEDConfig:
    settings = {
        **TOY_BART,
        **NO_DROPOUT,
        "attention_window": [LED_WINDOW, LED_WINDOW],
        "max_encoder_position_embeddings": 256,
        "max_decoder_position_embeddings": 64,
    }
    config = LEDConfig(**{**settings, **overrides})
    config._attn_implementation = "eager"
    return config
