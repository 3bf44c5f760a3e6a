"""Summaries from a Hugging Face seq2seq checkpoint (BART, PEGASUS, T5, LED, ..., Hie-BART, HIBRIDS,
InstructSum): the model's inputs (:class:`~synopsis.models.inputs.Seq2SeqInputs`) and a decoder
(:mod:`synopsis.summarizers.decoders`: ``generate()``, InstructSum's cached source, CTranslate2, or ``auto``
choosing per call), as OpenNMT-py keeps its translator apart from its models.

The decoding options come with each call (``summarize(..., decoding=DecodingOptions(...))``; the CLI's
flags and a service request's ``options`` become one such value at the edge); a summarizer holds none, so
one loaded model serves every request's options, and the decoder maps each distinct value once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synopsis.config import DECODING_OPTIONS, DecodingOptions
from synopsis.document import Document
from synopsis.summarizers.base import Summarizer, SummarizerInfo
from synopsis.summarizers.decoders import AUTO, DECODERS
from synopsis.summarizers.decoders.base import Decoder


class Seq2SeqSummarizer(Summarizer):
    """Batched abstractive summarization: ``inputs`` encodes a batch, ``decoder`` writes its summaries."""

    decoding_options = tuple(DECODING_OPTIONS)
    takes_instructions = True

    def __init__(self, inputs: Any, decoder: Decoder) -> None:
        self.inputs = inputs
        self.decoder = decoder

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        *,
        max_source_length: int | None = None,
        instruction_cache: bool = True,
    ) -> Seq2SeqSummarizer:
        """A loaded torch model (and its tokenizer), decoded by ``generate()`` (InstructSum: from its cached
        source unless ``instruction_cache=False``: every prompt encoded in full with the same block mask, for
        checking and timing)."""
        from synopsis.models.inputs import Seq2SeqInputs
        from synopsis.summarizers.decoders.generate import GenerateDecoder

        decoder = GenerateDecoder.from_model(model, tokenizer, instruction_cache=instruction_cache)
        return cls(Seq2SeqInputs(model.config, tokenizer, max_source_length=max_source_length), decoder)

    @classmethod
    def from_pretrained(
        cls, model_dir: str | Path, *, backend: str = "torch", max_source_length: int | None = None,
        device: Any = "auto", dtype: str | None = None, compute_type: str | None = None,
        instruction_cache: bool = True,
    ) -> Seq2SeqSummarizer:
        """Load ``model_dir`` (what it is comes from its ``config.json``) on ``backend``
        (:data:`~synopsis.summarizers.decoders.DECODERS`, or ``auto``) onto ``device`` (``auto``: a GPU when
        torch sees one, else the CPU; ``cpu``, ``cuda``, ``cuda:N``), in ``dtype`` (torch: fp32, bf16, fp16;
        ``None``: as stored) or ``compute_type`` (CTranslate2: float32, int8, int8_float32)."""
        from synopsis.models.inputs import Seq2SeqInputs
        from synopsis.summarizers import check_backend

        check_backend(backend, "seq2seq", compute_type, dtype)  # before any weights are read
        settings = {"dtype": dtype, "compute_type": compute_type, "instruction_cache": instruction_cache}

        def load(name: str) -> Decoder:
            row = DECODERS[name]
            own = {option: settings[option] for option in (row.precision_option, *row.load_options)}
            return row.decoder_class().from_pretrained(model_dir, device=device, **own)

        if backend == AUTO:
            from synopsis.summarizers.decoders.auto import AutoDecoder

            decoder: Decoder = AutoDecoder(Path(model_dir), load)
        else:
            decoder = load(backend)
        inputs = Seq2SeqInputs(decoder.config, decoder.tokenizer, max_source_length=max_source_length)
        return cls(inputs, decoder)

    # ------------------------------------------------------------------ what it is
    def describe(self) -> SummarizerInfo:
        on = self.decoder.description  # what decodes it, where worth saying (CTranslate2's compute type)
        return self._info("seq2seq", f"Hugging Face seq2seq checkpoint {on}".strip())

    # What it computes with, where and in which precision, what decodes it, and the source cache it keeps
    # across calls (InstructSum's, which the service's metrics read): its decoder's (no model on CTranslate2).
    tokenizer = property(lambda self: self.inputs.tokenizer)
    model = property(lambda self: self.decoder.model)  # type: ignore[assignment]
    device = property(lambda self: self.decoder.device)  # type: ignore[assignment]
    dtype = property(lambda self: self.decoder.dtype)  # type: ignore[assignment]
    backend = property(lambda self: self.decoder.backend)  # type: ignore[assignment]
    cache = property(lambda self: self.decoder.cache)  # type: ignore[assignment]

    def to(self, device: Any) -> Seq2SeqSummarizer:
        from synopsis.devices import resolve_device

        self.decoder.to(resolve_device(device))
        return self

    def backend_for(self, decoding: DecodingOptions) -> str:
        return self.decoder.backend_for(decoding)

    def check_decoding(self, decoding: DecodingOptions | None) -> DecodingOptions:
        checked = super().check_decoding(decoding)
        self.decoder.check(checked)  # what the decoder cannot honour, before any work
        return checked

    # ------------------------------------------------------------------ inputs
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

    # ------------------------------------------------------------------ the contract
    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any,
        decoding: DecodingOptions,
    ) -> list[str]:
        encodings = self.inputs.encode_sources(documents, instructions)
        ids = self.decoder.decode(self.inputs, encodings, decoding)
        texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return [text.strip() for text in texts]
