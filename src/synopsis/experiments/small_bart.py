"""Small BARTs trained from scratch, shared by the CPU-scale experiments (the Hie-BART head sweep, the
HIBRIDS variants): their config's BART settings, a tokenizer and a BART config."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from synopsis.config import AT_LEAST_ONE, Range
from synopsis.experiments.common import Seq2SeqExperimentConfig

TOKENIZERS = ("corpus-bpe", "gpt2")


@dataclass(kw_only=True)
class SmallBartExperimentConfig(Seq2SeqExperimentConfig):
    """An experiment on small BARTs: :class:`Seq2SeqExperimentConfig`, the tokenizer and the feed-forward
    width, and dev scores every ``eval_every`` steps."""

    tokenizer: str = "corpus-bpe"  # "corpus-bpe": byte-level BPE trained on the train split; "gpt2": 50k
    vocab_size: int = 8000  # corpus-bpe only
    ffn_dim: int = 256
    eval_every: int = 100

    RANGES: ClassVar[dict[str, Range]] = {
        **Seq2SeqExperimentConfig.RANGES,
        **dict.fromkeys(("vocab_size", "ffn_dim", "eval_every"), AT_LEAST_ONE),
    }

    def validate(self) -> None:
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be {' or '.join(TOKENIZERS)}, got {self.tokenizer!r}")


def experiment_tokenizer(
    kind: str, data_dir: Path, out_dir: Path, vocab_size: int, texts: Callable[[], Iterable[str]]
) -> Any:
    """GPT-2's byte-level BPE (``kind="gpt2"``), or one trained on ``texts()`` (read only when ``out_dir``
    holds no trained vocabulary yet) with BART's special tokens at ids 0..4."""
    from synopsis.models.seq2seq import bart_tokenizer_from_files

    if kind == "gpt2":
        gpt2 = data_dir / "tokenizers" / "gpt2"
        return bart_tokenizer_from_files(gpt2 / "vocab.json", gpt2 / "merges.txt")
    from tokenizers import ByteLevelBPETokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    if not (out_dir / "vocab.json").is_file():
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(
            list(texts()),
            vocab_size=vocab_size,
            min_frequency=2,
            show_progress=False,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],  # BART's ids 0..4
        )
        bpe.save_model(str(out_dir))
    return bart_tokenizer_from_files(out_dir / "vocab.json", out_dir / "merges.txt")


def small_bart_config(cfg: Any, tokenizer: Any) -> Any:
    """A BART config from an experiment config's sizes (d_model, layers, heads, ffn_dim, lengths, dropout)."""
    from transformers import BartConfig

    # the encoder and the decoder have the same sizes
    sizes = {"layers": cfg.layers, "attention_heads": cfg.heads, "ffn_dim": cfg.ffn_dim}
    eos = tokenizer.eos_token_id
    return BartConfig(
        vocab_size=len(tokenizer),
        d_model=cfg.d_model,
        **{f"{part}_{name}": value for part in ("encoder", "decoder") for name, value in sizes.items()},
        max_position_embeddings=max(cfg.max_source_length, cfg.max_target_length) + 2,
        dropout=cfg.dropout,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        decoder_start_token_id=eos,
        forced_eos_token_id=eos,
    )
