"""Summaries from a Hugging Face seq2seq checkpoint (BART, PEGASUS, T5, LED, ..., Hie-BART, InstructSum) with
``generate()``.

An InstructSum checkpoint encodes each distinct document once: its source part goes into a byte-bounded LRU
(:class:`~synopsis.models.instructsum.SourceCache`, shared across calls and with the service), and every
instruction then runs only its own tokens against the cached keys and values (Nishida et al., section 3).
``instruction_cache=False`` encodes every prompt in full with the same block mask (for checking and timing).
HIBRIDS on InstructSum (``instructsum_hibrids_t5``) takes the same cached path, each prompt carrying its
source's section tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from synopsis.config import DECODING_OPTIONS, NO_DECODING, DecodingOptions
from synopsis.devices import resolve_device
from synopsis.document import Document
from synopsis.errors import ConfigError
from synopsis.models.inputs import Seq2SeqInputs, SourceEncoding
from synopsis.models.instructsum import SourceCache
from synopsis.models.lengths import generate_kwargs
from synopsis.models.seq2seq import load_seq2seq
from synopsis.summarizers.base import INFERENCE_DTYPES, Summarizer, SummarizerInfo, place_model


class Seq2SeqSummarizer(Summarizer):
    """Batched abstractive summarization with beam search; unset options keep the checkpoint's defaults."""

    options = tuple(DECODING_OPTIONS)
    takes_instructions = True
    #: under ``--backend auto``, what decides each set of options' backend (:mod:`.backends`); else None
    auto: Any = None

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        inputs: Seq2SeqInputs | None = None,
        instruction_cache: bool = True,
        cache_bytes: int = 1 << 30,
        decoding: DecodingOptions | None = None,
        **generation: Any,
    ) -> None:
        # ``decoding`` comes checked; loose keyword options (num_beams=..., as generate() names them) are
        # checked here, once
        if generation:
            decoding = DecodingOptions.from_mapping(generation).over(decoding)
        self.decoding = decoding or NO_DECODING
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.inputs = inputs or Seq2SeqInputs(model.config, tokenizer)
        self.generation = generate_kwargs(self.decoding, model.generation_config)
        self.cache = SourceCache(cache_bytes) if instruction_cache and self.inputs.caches_source else None

    @classmethod
    def from_pretrained(
        cls,
        model_dir: str | Path,
        max_source_length: int | None = None,
        instruction_cache: bool = True,
        dtype: str | None = None,
        device: Any = "auto",
        decoding: DecodingOptions | None = None,
        **generation_options: Any,
    ) -> Seq2SeqSummarizer:
        """Load ``model_dir``; what the model is comes from its ``config.json``. ``dtype`` (fp32, bf16,
        fp16; None: as stored) casts the weights, so the whole generation runs in that precision; ``device``
        (``auto``: a GPU when torch sees one, else the CPU; ``cpu``, ``cuda``, ``cuda:N``) is where it runs
        (:func:`~synopsis.summarizers.base.place_model`)."""
        if dtype is not None and dtype not in INFERENCE_DTYPES:  # before the weights are read
            raise ConfigError(f"--dtype must be one of {', '.join(INFERENCE_DTYPES)}, got {dtype!r}")
        resolve_device(device)  # an unusable device is refused before the weights are read
        model, tokenizer = load_seq2seq(model_dir)  # refuses NaN/inf weights
        model = place_model(model, device, dtype)
        inputs = Seq2SeqInputs(model.config, tokenizer, max_source_length=max_source_length)
        return cls(
            model,
            tokenizer,
            inputs,
            instruction_cache=instruction_cache,
            decoding=decoding,
            **generation_options,
        )

    def describe(self) -> SummarizerInfo:
        return self._info("seq2seq", "Hugging Face seq2seq checkpoint")

    def _with_options(self, options: dict[str, Any]) -> Seq2SeqSummarizer:
        """The same model, inputs and source cache with other decoding options (e.g. one per request); under
        ``--backend auto`` on the backend those options go to (:mod:`synopsis.summarizers.backends`)."""
        decoding = options["decoding"].over(self.decoding)
        if self.auto is not None:
            return self.auto.summarizer(decoding)
        return self.copy_with(decoding)

    def copy_with(self, decoding: DecodingOptions) -> Seq2SeqSummarizer:
        """This summarizer with ``decoding`` (checked, complete), sharing its weights and caches."""
        other = type(self)(
            self.model, self.tokenizer, self.inputs, instruction_cache=False, decoding=decoding
        )
        other.cache = self.cache
        other.auto = self.auto
        return other

    #: Room left in a window for the special tokens (BOS/EOS, section markers) the inputs add around the text.
    SPECIAL_TOKEN_ROOM = 8

    @property
    def reads_section_tree(self) -> bool:  # type: ignore[override]
        """HIBRIDS reads the tree's relations, so by section it reads each section's subtree."""
        return self.inputs.reads_section_tree

    def input_capacity(self) -> int | None:
        # InstructSum's source part gets what the instruction's own budget leaves, less its fixed lead-in
        # ("Title: ... Article:"), so that a window is read whole beside any instruction.
        room = self.SPECIAL_TOKEN_ROOM + self.inputs.prompt_room()
        return max(1, self.inputs.max_source_length - room)

    def input_length(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    @torch.inference_mode()
    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any
    ) -> list[str]:
        encodings = self.inputs.encode_sources(documents, instructions)
        if self.cache is not None:
            return self._summarize_from_cache(encodings)
        batch = self.inputs.collate(encodings)
        output = self.model.generate(**self.inputs.model_inputs(batch, self.device), **self.generation)
        return self._decode(output)

    def _decode(self, output: torch.Tensor) -> list[str]:
        texts = self.tokenizer.batch_decode(
            output, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        return [text.strip() for text in texts]

    def _summarize_from_cache(self, encodings: Sequence[SourceEncoding]) -> list[str]:
        """Rows that share a source part (and, for a model that reads sections, its section tree) share one
        cached source pass; instructions run alone."""
        prompts = self.inputs.cached_prompts(encodings)
        return self._decode(self.cache.generate(self.model, prompts, **self.generation))
