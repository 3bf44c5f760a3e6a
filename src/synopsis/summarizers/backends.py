"""``--backend auto`` (the default): CTranslate2 where it writes ``generate()``'s tokens, torch otherwise.

A Hugging Face checkpoint decodes on CTranslate2 (:mod:`synopsis.summarizers.ct2`, float32) when all of
these hold, else on torch (``generate()``), and one log line says which and why:

* the ``ct2`` extra is installed (``ctranslate2`` imports);
* the checkpoint is a stock one of a family whose CTranslate2 summaries are tested equal to ``generate()``'s
  (:data:`AUTO_MODEL_TYPES`: BART, PEGASUS, T5, UMT5; no HIBRIDS, Hie-BART or InstructSum), and its
  tokenizer's ids are what CTranslate2 reads (checked when converting);
* nobody asked for a precision of either backend (``--dtype`` is torch's, ``--compute-type`` CTranslate2's);
* the decoding settings (the checkpoint's generation config with the request's options on top) are ones
  where CTranslate2 writes ``generate()``'s tokens (:func:`~synopsis.summarizers.ct2.differs_from_generate`:
  greedy, or beam search under ``early_stopping=True`` with a length penalty and without n-gram blocking;
  nothing it cannot honour).

The choice is made per set of decoding options: :meth:`~synopsis.summarizers.Summarizer.with_options` on an
``auto`` summarizer (a service request's options, a library caller's) decides again, and the other backend
is loaded the first time it is needed, once, sharing nothing but the checkpoint. What decodes a summary is
:attr:`SummarizerInfo.backend <synopsis.summarizers.base.SummarizerInfo>` of the summarizer that made it: the
CLI's run record and the service's answer say it.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path
from typing import Any

from synopsis.config import NO_DECODING, DecodingOptions
from synopsis.errors import SynopsisError

logger = logging.getLogger(__name__)

#: The families whose CTranslate2 summaries tests/test_ct2_backend.py holds equal to ``generate()``'s: auto
#: takes CTranslate2 for these only (``--backend ctranslate2`` converts the others it can, as asked).
AUTO_MODEL_TYPES = frozenset({"bart", "pegasus", "t5", "umt5"})


def ctranslate2_installed() -> bool:
    """Whether the ``ct2`` extra is installed (without importing it)."""
    return importlib.util.find_spec("ctranslate2") is not None


class AutoBackend:
    """One checkpoint under ``--backend auto``: which backend a set of decoding options goes to, and each
    backend's summarizer, loaded on first use (``load``: backend name -> summarizer, with the load's
    decoding options)."""

    def __init__(self, model_dir: Path, load: Any, decoding: DecodingOptions | None = None) -> None:
        self.model_dir = Path(model_dir)
        self.load = load
        self.decoding = decoding or NO_DECODING
        self._loaded: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._generation: tuple[Any, int | None] | None = None
        self.refusal = self._refusal()  # what keeps the checkpoint off CTranslate2 whatever the options

    def _refusal(self) -> str | None:
        if not ctranslate2_installed():
            return "the ct2 extra is not installed"
        from synopsis.hub import check_safetensors_weights
        from synopsis.models.seq2seq import read_model_config
        from synopsis.summarizers.ct2 import check_convertible

        try:  # what torch would refuse (pickled weights, a bad config) is refused by its load, in one line
            config = read_model_config(self.model_dir)
            check_safetensors_weights(self.model_dir)
            check_convertible(self.model_dir, config)
        except SynopsisError as err:
            return str(err).split(": ", 1)[-1].split(";")[0]
        if config.get("model_type") not in AUTO_MODEL_TYPES:
            return f"CTranslate2's tokens are not tested equal for {config.get('model_type')} checkpoints"
        return None

    def reason(self, decoding: DecodingOptions) -> str | None:
        """Why ``decoding`` (the full options, the load's included) goes to torch; ``None``: CTranslate2."""
        if self.refusal is not None:
            return self.refusal
        from synopsis.summarizers.ct2 import checkpoint_generation_config, differs_from_generate

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

    def summarizer(self, decoding: DecodingOptions | None = None) -> Any:
        """The summarizer for ``decoding`` (``None``: the load's options) on the backend they go to."""
        decoding = self.decoding if decoding is None else decoding
        reason = self.reason(decoding)
        base = self._base("torch" if reason is not None else "ctranslate2", reason)
        return base if decoding == base.decoding else base.copy_with(decoding)

    def _base(self, backend: str, reason: str | None) -> Any:
        loaded = self._loaded.get(backend)
        if loaded is not None:
            return loaded
        with self._lock:
            if backend not in self._loaded:
                try:
                    summarizer = self.load(backend)
                except SynopsisError as err:
                    if backend == "torch":
                        raise
                    self.refusal = f"CTranslate2 cannot load it: {err}"
                    return self._base("torch", self.refusal)
                if reason is None:
                    logger.info("--backend auto: ctranslate2 (generate()'s tokens with these settings)")
                else:
                    logger.info("--backend auto: torch (%s)", reason)
                summarizer.auto = self
                self._loaded[backend] = summarizer
            return self._loaded[backend]
