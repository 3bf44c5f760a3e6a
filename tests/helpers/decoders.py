"""A decoding backend the tests add (issue 59: a new backend is one module and one table row): greedy
decoding written out by hand over a torch model, one token at a time. It is this whole module."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from synopsis.config import DecodingOptions
from synopsis.summarizers.decoders.base import Decoder


class StepwiseGreedyDecoder(Decoder):
    """Greedy search with the model's forward pass, no ``generate()``: lengths in summary tokens."""

    backend = "stepwise"
    maps: list[DecodingOptions] = []  # every value mapped, across instances (what the tests count)

    def __init__(self, model: Any, tokenizer: Any) -> None:
        super().__init__()
        self.model, self.config, self.tokenizer = model.eval(), model.config, tokenizer

    @classmethod
    def from_pretrained(cls, model_dir: str | Path, *, device: Any = "auto", dtype: str | None = None) -> Any:
        from synopsis.models.seq2seq import load_seq2seq

        model, tokenizer = load_seq2seq(model_dir)
        return cls(model, tokenizer)

    def map(self, decoding: DecodingOptions) -> int:
        if (decoding.num_beams or 1) != 1:
            from synopsis.errors import ConfigError

            raise ConfigError("--backend stepwise decodes greedily: --num-beams 1")
        type(self).maps.append(decoding)
        return decoding.max_length or 8

    @torch.inference_mode()
    def decode(self, inputs: Any, encodings: Sequence[Any], decoding: DecodingOptions) -> list[list[int]]:
        steps = self.settings(decoding)
        batch = inputs.model_inputs(inputs.collate(encodings), self.device)
        start = self.model.config.decoder_start_token_id
        out = torch.full((len(encodings), 1), start, dtype=torch.long)
        for _ in range(steps):
            logits = self.model(**batch, decoder_input_ids=out).logits[:, -1]
            out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)
        return out.tolist()
