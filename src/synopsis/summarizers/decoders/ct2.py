"""Stock Hugging Face checkpoints decoded by CTranslate2 (``--backend ctranslate2``): the same summaries as
``generate()``, faster on a CPU.

The weights are converted once (:mod:`synopsis.summarizers.decoders.ct2_conversion`). Here:

* **Precision**: the conversion keeps float32 weights; ``compute_type`` picks how they run (``float32``,
  the default, gives the same token ids as ``generate()``; ``int8`` and ``int8_float32`` quantize the
  weights when loaded: faster, other tokens; ``docs/results/decoding.md`` has the numbers).
* **Decoding options** map one to one, in one place (:func:`translate_options`): beams, lengths (in summary
  tokens, as every backend reads them, with the checkpoint's forced end token), length penalty, no-repeat
  n-grams, early stopping and a forced first token. Two differences under beam search are kept and said
  (:func:`differs_from_generate`, which ``--backend auto`` consults): CTranslate2 renormalizes the scores
  after banning no-repeat n-grams, as ``generate(renormalize_logits=True)`` does (plain ``generate()`` does
  not), and it ends a search as ``early_stopping=True`` does (``generate()``'s default searches on).
  Anything else the checkpoint's generation config sets that CTranslate2 cannot do the same way (sampling,
  repetition penalties, several returned sequences, ...) is refused in one line, never dropped.

Inputs, by-section windows and sources are :class:`~synopsis.summarizers.seq2seq.Seq2SeqSummarizer`'s: this
decoder only replaces what turns a batch of encoded sources into token ids, so both backends summarize the
same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from synopsis.config import NO_DECODING, DecodingOptions
from synopsis.errors import ConfigError
from synopsis.models.lengths import checkpoint_max_summary
from synopsis.summarizers.decoders.base import Decoder
from synopsis.summarizers.decoders.ct2_conversion import check_convertible, converted_model

logger = logging.getLogger(__name__)

#: ``generate()``'s length when neither the checkpoint nor the caller sets one (new tokens)
DEFAULT_NEW_TOKENS = 20
#: Generation-config fields CTranslate2 cannot honour as ``generate()`` does, with their neutral values.
UNSUPPORTED = {
    "do_sample": False,
    "num_return_sequences": 1,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "encoder_no_repeat_ngram_size": 0,
    "num_beam_groups": 1,
    "diversity_penalty": 0.0,
    "penalty_alpha": None,
    "bad_words_ids": None,
    "force_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "sequence_bias": None,
    "exponential_decay_length_penalty": None,
    "forced_decoder_ids": None,
}


def translate_options(
    generation_config: Any, decoding: DecodingOptions, max_positions: int | None = None
) -> tuple[dict[str, Any], int | None]:
    """``translate_batch`` keywords that decode as ``generate()`` would with the checkpoint's generation
    config and the caller's options on top, and the forced first token (``None``: none): the one place
    CTranslate2's settings are made.

    A length the caller sets is in summary tokens (after the decoder's start token, as every backend reads
    it: :mod:`synopsis.models.lengths`), and so is CTranslate2's, which counts predicted tokens; only the
    checkpoint's own ``max_length``/``min_length`` count the start token. With a ``forced_eos_token_id``,
    ``generate()`` spends the last step on the end token, where CTranslate2 would stop at the length: one
    step fewer. ``early_stopping=True`` is CTranslate2's patience 1 (stop once ``num_beams`` hypotheses are
    done). ``max_positions``: the decoder's positions, which cap ``generate()``'s default length."""
    config = generation_config
    refused = [name for name, off in UNSUPPORTED.items() if getattr(config, name, None) not in (off, None)]
    if refused:
        name = refused[0]
        raise ConfigError(
            f"--backend ctranslate2 cannot honour {name}={getattr(config, name)!r} of this checkpoint's "
            "generation config as generate() does; use --backend torch"
        )
    if config.early_stopping == "never":
        raise ConfigError("--backend ctranslate2 cannot honour early_stopping='never'; use --backend torch")
    if decoding.max_length is not None:
        steps = decoding.max_length
    elif decoding.min_length is not None and decoding.min_length > checkpoint_max_summary(config):
        steps = decoding.min_length  # a minimum above the checkpoint's maximum raises it, as in generate()
    elif config.max_new_tokens is not None:
        steps = config.max_new_tokens
    elif config.max_length is not None:
        steps = config.max_length - 1
    else:  # generate()'s default: 20 new tokens, within the decoder's positions
        steps = min(DEFAULT_NEW_TOKENS, (max_positions or DEFAULT_NEW_TOKENS + 1) - 1)
    if decoding.min_length is not None:
        least = decoding.min_length
    elif config.min_new_tokens is not None:
        least = config.min_new_tokens
    else:
        least = max(0, (config.min_length or 0) - 1)
    if config.forced_eos_token_id is not None:
        steps -= 1
    options = {
        "beam_size": _first_set(decoding.num_beams, config.num_beams, 1),
        "max_decoding_length": max(1, steps),
        "min_decoding_length": min(least, max(1, steps)),
        "length_penalty": float(_first_set(decoding.length_penalty, config.length_penalty, 1.0)),
        "no_repeat_ngram_size": _first_set(decoding.no_repeat_ngram_size, config.no_repeat_ngram_size, 0),
        "patience": 1.0,
        **({"end_token": ends} if (ends := _end_ids(config)) else {}),  # the ids generate() stops on
        "max_input_length": 0,  # the inputs are already cut to what the model reads
    }
    return options, config.forced_bos_token_id


def _first_set(*values: Any) -> Any:
    return next(value for value in values if value is not None)


def differs_from_generate(
    generation_config: Any, decoding: DecodingOptions, max_positions: int | None = None
) -> str | None:
    """Why CTranslate2 would not write ``generate()``'s tokens with these settings (the checkpoint's
    generation config and the caller's options on top), in a few words; ``None`` where it writes them (the
    settings tests/test_ct2_backend.py holds equal). What it cannot honour at all (:func:`translate_options`
    refuses it) is a reason, and under beam search (docs/results/decoding.md has the measurements):

    * n-gram blocking: CTranslate2 bans the n-grams on the logits, before its log-softmax, so the allowed
      tokens' probabilities are renormalized; ``generate()`` bans them after its log-softmax;
    * ``early_stopping`` other than ``True``: ``generate()``'s default keeps searching after ``num_beams``
      hypotheses have ended, until no running beam can beat them; CTranslate2 stops when ``num_beams`` have
      ended (``patience`` 1: ``early_stopping=True``'s rule);
    * ``length_penalty`` 0: CTranslate2 then stops as soon as its best beam ends."""
    try:
        options, _ = translate_options(generation_config, decoding, max_positions)
    except ConfigError as err:
        return str(err)
    if options["beam_size"] == 1:
        return None
    if options["no_repeat_ngram_size"] > 0:
        return "no-repeat n-grams under beam search (CTranslate2 renormalizes the scores after the ban)"
    early_stopping = generation_config.early_stopping  # no decoding option sets it
    if early_stopping is not True:
        return (
            f"beam search with early_stopping={early_stopping!r} (generate() searches on after "
            "num_beams hypotheses end, CTranslate2 stops)"
        )
    if options["length_penalty"] == 0:
        return "beam search with length_penalty 0 (CTranslate2 stops when its best beam ends)"
    return None


def checkpoint_generation_config(model_dir: Path, config: Any) -> Any:
    """The checkpoint's generation config (its ``generation_config.json``, else its model config's), as
    ``generate()`` reads it."""
    from transformers import GenerationConfig

    if (model_dir / "generation_config.json").is_file():
        return GenerationConfig.from_pretrained(str(model_dir), local_files_only=True)
    return GenerationConfig.from_model_config(config)


def _end_ids(config: Any) -> list[int]:
    ends = config.eos_token_id
    return [] if ends is None else [ends] if isinstance(ends, int) else list(ends)


class CTranslate2Decoder(Decoder):
    """A stock seq2seq checkpoint's converted weights on a ``ctranslate2.Translator``."""

    backend = "ctranslate2"

    def __init__(
        self,
        translator: Any,
        config: Any,
        tokenizer: Any,
        generation_config: Any,
        vocabulary: list[str],
        *,
        compute_type: str = "float32",
        start_token: int | None = None,
    ) -> None:
        super().__init__()
        self.translator = translator
        self.config = config
        self.tokenizer = tokenizer
        self.generation_config = generation_config
        self.vocabulary = vocabulary
        self.token_ids = {token: index for index, token in enumerate(vocabulary)}
        self.compute_type = compute_type
        self.start_token = start_token  # given as the first target token where the model names none (mBART)
        self.positions = getattr(config, "max_position_embeddings", None)

    @classmethod
    def from_pretrained(
        cls, model_dir: str | Path, *, device: Any = "auto", compute_type: str | None = None
    ) -> CTranslate2Decoder:
        """Load (converting once, see :func:`~.ct2_conversion.converted_model`) ``model_dir`` for CTranslate2
        on ``device`` (``auto``: a GPU when there is one, else the CPU) with ``torch.get_num_threads()`` CPU
        threads."""
        import ctranslate2
        import torch
        from transformers import AutoConfig

        from synopsis.devices import resolve_device
        from synopsis.models.seq2seq import load_tokenizer, read_model_config

        model_dir = Path(model_dir)
        check_convertible(model_dir, read_model_config(model_dir))
        target = resolve_device(device)
        config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
        generation_config = checkpoint_generation_config(model_dir, config)
        tokenizer = load_tokenizer(model_dir)
        positions = getattr(config, "max_position_embeddings", None)
        translate_options(
            generation_config, NO_DECODING, positions
        )  # what it cannot honour: before converting
        path = converted_model(model_dir)
        compute = compute_type or "float32"
        translator = ctranslate2.Translator(
            str(path),
            device=target.type,
            device_index=target.index or 0,
            compute_type=compute,
            intra_threads=torch.get_num_threads(),
        )
        vocabulary = json.loads((path / "shared_vocabulary.json").read_text())
        named = json.loads((path / "config.json").read_text()).get("decoder_start_token")
        start = None if named is not None else generation_config.decoder_start_token_id
        logger.info("CTranslate2 runs on %s (%s)", target, compute)
        return cls(
            translator,
            config,
            tokenizer,
            generation_config,
            vocabulary,
            compute_type=compute,
            start_token=start,
        )

    @property
    def description(self) -> str:  # type: ignore[override]
        return f"on CTranslate2 ({self.compute_type})"

    @classmethod
    def check_checkpoint(cls, name: str, config: Any) -> None:
        check_convertible(name, config)

    def map(self, decoding: DecodingOptions) -> tuple[dict[str, Any], int | None]:
        options, first = translate_options(self.generation_config, decoding, self.positions)
        if options["beam_size"] > 1 and options["no_repeat_ngram_size"] > 0:  # said once per set of options
            logger.warning(
                "--backend ctranslate2 renormalizes beam scores after banning repeated n-grams, as "
                "generate(renormalize_logits=True) does: summaries may differ from --backend torch"
            )
        return options, first

    def differs_from_generate(self, decoding: DecodingOptions) -> str | None:
        """Why these options would not give ``generate()``'s tokens here (:func:`differs_from_generate`)."""
        return differs_from_generate(self.generation_config, decoding, self.positions)

    def decode(self, inputs: Any, encodings: Sequence[Any], decoding: DecodingOptions) -> list[list[int]]:
        options, first_token = self.settings(decoding)
        source = [[self.vocabulary[i] for i in encoding.input_ids] for encoding in encodings]
        forced = [i for i in (self.start_token, first_token) if i is not None]
        prefix = [[self.vocabulary[i] for i in forced]] * len(source) if forced else None
        results = self.translator.translate_batch(source, prefix, **options)
        return [[self.token_ids[t] for t in result.hypotheses[0]] for result in results]

    @property
    def device(self) -> Any:
        import torch

        if self.translator.device == "cpu":
            return torch.device("cpu")
        return torch.device(self.translator.device, self.translator.device_index[0])

    @property
    def dtype(self) -> Any:
        return self.compute_type

    def to(self, device: Any) -> None:
        """Nothing: a CTranslate2 model is placed when it is loaded (``device=``)."""
