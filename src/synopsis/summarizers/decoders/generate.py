"""torch's decoders: Hugging Face ``generate()`` (any seq2seq checkpoint, every method's), and InstructSum's
decoding from a cached source (Nishida et al., section 3: one document encoded once, every instruction then
running only its own tokens against the cached keys and values).

The decoding options map to ``generate()``'s keywords in one place,
:func:`~synopsis.models.lengths.generate_kwargs` (lengths in summary tokens after the decoder's start token).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from synopsis.config import DecodingOptions
from synopsis.models.lengths import generate_kwargs
from synopsis.summarizers.decoders.base import Decoder

#: The InstructSum source cache's default size.
DEFAULT_CACHE_BYTES = 1 << 30


class GenerateDecoder(Decoder):
    """``model.generate(**inputs, **generate_kwargs(decoding))`` on a padded batch."""

    backend = "torch"

    def __init__(self, model: Any, tokenizer: Any) -> None:
        super().__init__()
        self.model = model.eval()
        self.config = model.config
        self.tokenizer = tokenizer

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        *,
        instruction_cache: bool = True,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> GenerateDecoder:
        """The decoder of a loaded model: InstructSum's cached decoder for an InstructSum checkpoint (unless
        ``instruction_cache=False``: every prompt encoded in full, with the same block mask, for checking and
        timing), else ``generate()``."""
        from synopsis.models.registry import checkpoint_type

        entry = checkpoint_type(model.config)
        if instruction_cache and entry is not None and entry.instructsum:
            return CachedSourceDecoder(model, tokenizer, cache_bytes)
        return cls(model, tokenizer)

    @classmethod
    def from_pretrained(
        cls, model_dir: str | Path, *, device: Any = "auto", dtype: str | None = None,
        instruction_cache: bool = True, cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> GenerateDecoder:
        """Load ``model_dir`` (what it is comes from its ``config.json``; NaN/inf weights are refused) onto
        ``device`` in ``dtype`` (fp32, bf16, fp16; ``None``: as stored), so the whole generation runs there
        in that precision (:func:`~synopsis.summarizers.base.place_model`)."""
        from synopsis.devices import resolve_device
        from synopsis.models.seq2seq import load_seq2seq
        from synopsis.summarizers.base import check_dtype, place_model

        check_dtype(dtype)  # before the weights are read
        resolve_device(device)  # an unusable device is refused before the weights are read
        model, tokenizer = load_seq2seq(model_dir)
        model = place_model(model, device, dtype)
        return cls.from_model(model, tokenizer, instruction_cache=instruction_cache, cache_bytes=cache_bytes)

    def map(self, decoding: DecodingOptions) -> dict[str, Any]:
        return generate_kwargs(decoding, self.model.generation_config)

    @torch.inference_mode()
    def decode(self, inputs: Any, encodings: Sequence[Any], decoding: DecodingOptions) -> list[list[int]]:
        batch = inputs.collate(encodings)
        output = self.model.generate(**inputs.model_inputs(batch, self.device), **self.settings(decoding))
        return output.tolist()


class CachedSourceDecoder(GenerateDecoder):
    """InstructSum's decoding: rows that share a source part (and, for a model that reads sections, its
    section tree) share one cached source pass in a byte-bounded LRU
    (:class:`~synopsis.models.instructsum.SourceCache`, kept across calls and shared with the service's
    copies); instructions run alone."""

    def __init__(self, model: Any, tokenizer: Any, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        from synopsis.models.instructsum import SourceCache

        super().__init__(model, tokenizer)
        self.cache = SourceCache(cache_bytes)

    @torch.inference_mode()
    def decode(self, inputs: Any, encodings: Sequence[Any], decoding: DecodingOptions) -> list[list[int]]:
        prompts = inputs.cached_prompts(encodings)
        return self.cache.generate(self.model, prompts, **self.settings(decoding)).tolist()
