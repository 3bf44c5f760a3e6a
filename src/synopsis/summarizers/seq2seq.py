"""Summaries from a local Hugging Face seq2seq checkpoint (BART, Hie-BART, T5, LED) with ``generate()``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from synopsis.checkpoint import check_finite_tensors
from synopsis.document import Document
from synopsis.errors import ConfigError
from synopsis.models.inputs import Seq2SeqInputs
from synopsis.models.seq2seq import load_seq2seq
from synopsis.summarizers.base import Summarizer

#: Decoding options users know from ``generate()``; anything else is refused by name.
GENERATION_OPTIONS = ("num_beams", "min_length", "max_length", "length_penalty", "no_repeat_ngram_size")


class Seq2SeqSummarizer(Summarizer):
    """Batched abstractive summarization with beam search; unset options keep the checkpoint's defaults."""

    takes_instructions = True

    def __init__(
        self, model: Any, tokenizer: Any, inputs: Seq2SeqInputs | None = None, **generation: Any
    ) -> None:
        unknown = sorted(set(generation) - set(GENERATION_OPTIONS))
        if unknown:
            raise ConfigError(
                f"unknown generation option(s) {', '.join(unknown)}; valid: {', '.join(GENERATION_OPTIONS)}"
            )
        _check_generation(generation)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.inputs = inputs or Seq2SeqInputs(model.config, tokenizer)
        self.generation = {k: v for k, v in generation.items() if v is not None}

    @classmethod
    def from_pretrained(
        cls, model_dir: str | Path, max_source_length: int | None = None, **generation_options: Any
    ) -> Seq2SeqSummarizer:
        """Load ``model_dir``; what the model is comes from its ``config.json``."""
        model, tokenizer = load_seq2seq(model_dir)
        check_finite_tensors(model.state_dict(), model_dir)
        inputs = Seq2SeqInputs(model.config, tokenizer, max_source_length=max_source_length)
        return cls(model, tokenizer, inputs, **generation_options)

    @torch.inference_mode()
    def summarize(
        self,
        documents: Sequence[Document],
        instructions: Sequence[str | None] | None = None,
        references: Sequence[Sequence[str]] | None = None,
    ) -> list[str]:
        instructions = self._check_batch(documents, instructions, references)
        if not documents:
            return []
        batch = self.inputs.collate(self.inputs.encode_sources(documents, instructions))
        output = self.model.generate(**self.inputs.model_inputs(batch, self.model.device), **self.generation)
        texts = self.tokenizer.batch_decode(
            output, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        return [text.strip() for text in texts]


def _check_generation(options: dict[str, Any]) -> None:
    """Refuse impossible decoding settings with the option's CLI name."""
    for name in ("num_beams", "max_length"):
        if options.get(name) is not None and options[name] < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {options[name]}")
    for name in ("min_length", "no_repeat_ngram_size"):
        if options.get(name) is not None and options[name] < 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be >= 0, got {options[name]}")
    low, high = options.get("min_length"), options.get("max_length")
    if low is not None and high is not None and low > high:
        raise ConfigError(f"--min-length {low} is larger than --max-length {high}")
