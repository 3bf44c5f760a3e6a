"""``--backend auto`` (the default): CTranslate2 where it writes ``generate()``'s tokens, torch otherwise.

A Hugging Face checkpoint decodes on CTranslate2 (:mod:`~.decoders.ct2`, float32) when all of
these hold, else on torch (``generate()``), and one log line says which and why:

* the ``ct2`` extra is installed (``ctranslate2`` imports);
* the checkpoint is a stock one of a family whose CTranslate2 summaries are tested equal to ``generate()``'s
  (:data:`AUTO_MODEL_TYPES`: BART, PEGASUS, T5, UMT5; no HIBRIDS, Hie-BART or InstructSum), and its
  tokenizer's ids are what CTranslate2 reads (checked when converting);
* nobody asked for a precision of either backend (``--dtype`` is torch's, ``--compute-type`` CTranslate2's);
* the decoding settings (the checkpoint's generation config with the request's options on top) are ones
  where CTranslate2 writes ``generate()``'s tokens (:func:`~.ct2.differs_from_generate`:
  greedy, or beam search under ``early_stopping=True`` with a length penalty and without n-gram blocking;
  nothing it cannot honour).

The choice is made per set of decoding options, each call's (:meth:`AutoDecoder.backend_for`, once per
distinct value), and the other backend is loaded the first time it is needed, once, sharing nothing but the
checkpoint. What decodes a summary is :meth:`Summarizer.backend_for(decoding)
<synopsis.summarizers.base.Summarizer.backend_for>`: the CLI's run record and the service's answer say it.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from synopsis.config import NO_DECODING, DecodingOptions
from synopsis.errors import SynopsisError
from synopsis.summarizers.decoders.base import Decoder

logger = logging.getLogger(__name__)

#: The families whose CTranslate2 summaries tests/test_ct2_backend.py holds equal to ``generate()``'s: auto
#: takes CTranslate2 for these only (``--backend ctranslate2`` converts the others it can, as asked).
AUTO_MODEL_TYPES = frozenset({"bart", "pegasus", "t5", "umt5"})


def ctranslate2_installed() -> bool:
    """Whether the ``ct2`` extra is installed (without importing it)."""
    return importlib.util.find_spec("ctranslate2") is not None


class AutoDecoder(Decoder):
    """One checkpoint under ``--backend auto``: each call decoded by the backend its options go to, each
    backend's decoder loaded on first use (``load``: backend name -> decoder)."""

    backend = "auto"

    def __init__(self, model_dir: Path, load: Callable[[str], Decoder]) -> None:
        super().__init__()
        self.model_dir = Path(model_dir)
        self.load = load
        self._loaded: dict[str, Decoder] = {}
        self._lock = threading.RLock()
        self._generation: tuple[Any, int | None] | None = None  # the checkpoint's, read on first need
        self.refusal = self._refusal()  # what keeps the checkpoint off CTranslate2 whatever the options
        first = self.part(*self.settings(NO_DECODING))  # the checkpoint's own options' backend, now
        self.config, self.tokenizer = first.config, first.tokenizer

    def _refusal(self) -> str | None:
        if not ctranslate2_installed():
            return "the ct2 extra is not installed"
        from synopsis.hub import check_safetensors_weights
        from synopsis.models.seq2seq import read_model_config
        from synopsis.summarizers.decoders.ct2_conversion import check_convertible

        try:  # what torch would refuse (pickled weights, a bad config) is refused by its load, in one line
            config = read_model_config(self.model_dir)
            check_safetensors_weights(self.model_dir)
            check_convertible(self.model_dir, config)
        except SynopsisError as err:
            return str(err).split(": ", 1)[-1].split(";")[0]
        if config.get("model_type") not in AUTO_MODEL_TYPES:
            return f"CTranslate2's tokens are not tested equal for {config.get('model_type')} checkpoints"
        return None

    def map(self, decoding: DecodingOptions) -> tuple[str, str | None]:
        """The backend ``decoding`` goes to and why not CTranslate2 (``None``: it goes there)."""
        reason = self.refusal if self.refusal is not None else self._differs(decoding)
        return ("torch" if reason is not None else "ctranslate2"), reason

    def _differs(self, decoding: DecodingOptions) -> str | None:
        from synopsis.summarizers.decoders.ct2 import checkpoint_generation_config, differs_from_generate

        with self._lock:
            if self._generation is None:
                from transformers import AutoConfig

                try:
                    config = AutoConfig.from_pretrained(str(self.model_dir), local_files_only=True)
                    generation = checkpoint_generation_config(self.model_dir, config)
                except Exception:  # noqa: BLE001 - transformers' own errors: the torch load says them in one line
                    self.refusal = "transformers cannot read its config"
                    return self.refusal
                self._generation = (generation, getattr(config, "max_position_embeddings", None))
        generation, positions = self._generation
        return differs_from_generate(generation, decoding, positions)

    def backend_for(self, decoding: DecodingOptions) -> str:
        backend, _ = self.settings(decoding)
        if backend == "ctranslate2" and self.refusal is not None:  # CTranslate2 failed to load since
            return "torch"
        return backend

    def part(self, backend: str, reason: str | None = None) -> Decoder:
        """The decoder of ``backend``, loaded on first use (one log line says which and why: ``reason``,
        what keeps these options off CTranslate2); a CTranslate2 that fails to load is said once, and torch
        decodes from then on."""
        loaded = self._loaded.get(backend)
        if loaded is not None:
            return loaded
        with self._lock:
            if backend not in self._loaded:
                try:
                    decoder = self.load(backend)
                except SynopsisError as err:
                    if backend == "torch":
                        raise
                    self.refusal = f"CTranslate2 cannot load it: {err}"
                    return self.part("torch", self.refusal)  # said once torch has loaded
                if backend == "ctranslate2":
                    logger.info("--backend auto: ctranslate2 (generate()'s tokens with these settings)")
                else:
                    logger.info("--backend auto: torch (%s)", reason or self.refusal)
                self._loaded[backend] = decoder
            return self._loaded[backend]

    def _for(self, decoding: DecodingOptions) -> Decoder:
        _, reason = self.settings(decoding)
        return self.part(self.backend_for(decoding), reason)

    def check(self, decoding: DecodingOptions) -> None:
        self._for(decoding).check(decoding)

    def decode(self, inputs: Any, encodings: Sequence[Any], decoding: DecodingOptions) -> list[list[int]]:
        return self._for(decoding).decode(inputs, encodings, decoding)

    def _placed(self) -> Decoder:
        """The decoder that says where the model computes: torch's once loaded, else the one loaded."""
        return self._loaded.get("torch") or next(iter(self._loaded.values()))

    @property
    def model(self) -> Any:  # type: ignore[override]
        torch_part = self._loaded.get("torch")
        return None if torch_part is None else torch_part.model

    @property
    def cache(self) -> Any:  # type: ignore[override]
        torch_part = self._loaded.get("torch")
        return None if torch_part is None else torch_part.cache

    @property
    def device(self) -> Any:
        return self._placed().device

    @property
    def dtype(self) -> Any:
        return self._placed().dtype

    def to(self, device: Any) -> None:
        for decoder in self._loaded.values():
            decoder.to(device)
