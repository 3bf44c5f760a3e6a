"""The published architectures of the paper configs' starting checkpoints (their config.json values on the
Hugging Face Hub), as local model directories without weights: enough for ``train --dry-run``."""

from __future__ import annotations

from pathlib import Path

from helpers.tiny_models import bart_tokenizer, t5_tokenizer

_BART_LARGE = dict(
    vocab_size=50265,
    d_model=1024,
    encoder_layers=12,
    decoder_layers=12,
    encoder_attention_heads=16,
    decoder_attention_heads=16,
    encoder_ffn_dim=4096,
    decoder_ffn_dim=4096,
)
ARCHITECTURES = {
    # facebook/bart-large
    "bart-large": ("bart", dict(_BART_LARGE, max_position_embeddings=1024)),
    # allenai/led-large-16384
    "led-large-16384": (
        "led",
        dict(
            _BART_LARGE,
            attention_window=[1024] * 12,
            max_encoder_position_embeddings=16384,
            max_decoder_position_embeddings=1024,
        ),
    ),
    # google/flan-t5-large
    "flan-t5-large": (
        "t5",
        dict(
            vocab_size=32128,
            d_model=1024,
            d_kv=64,
            d_ff=2816,
            num_layers=24,
            num_decoder_layers=24,
            num_heads=16,
            feed_forward_proj="gated-gelu",
            tie_word_embeddings=False,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        ),
    ),
}


def save_architecture(name: str, directory: Path, tokenizers_dir: Path) -> Path:
    """``directory`` with the config.json of ``name`` and its tokenizer (no weights)."""
    from transformers import BartConfig, LEDConfig, T5Config

    family, settings = ARCHITECTURES[name]
    config = {"bart": BartConfig, "led": LEDConfig, "t5": T5Config}[family](**settings)
    directory.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(directory)
    tokenizer = t5_tokenizer(tokenizers_dir) if family == "t5" else bart_tokenizer(tokenizers_dir)
    tokenizer.save_pretrained(directory)
    return directory
