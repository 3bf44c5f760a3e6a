"""Decoding lengths in summary tokens, for every Hugging Face seq2seq model (the one place they are mapped).

Hugging Face's ``max_length`` / ``min_length`` count the decoder start token of an encoder-decoder, its
``max_new_tokens`` / ``min_new_tokens`` do not and outrank them. Here a length is what the summary holds:
``--max-length N`` gives at most N tokens after the start token (EOS among them when one is generated), as
the pointer-generator's own beam search counts, and ``--min-length M`` at least M before EOS.
"""

from __future__ import annotations

from typing import Any

from synopsis.config import DecodingOptions

#: The decoder start token, which Hugging Face counts in an encoder-decoder's ``max_length`` / ``min_length``.
DECODER_START_TOKENS = 1


def generate_kwargs(decoding: DecodingOptions, checkpoint: Any = None) -> dict[str, Any]:
    """The caller's decoding options as ``generate()``'s keyword arguments (the one place they are mapped).

    A length means summary tokens, for every model: ``max_length`` N gives at most N tokens after the decoder
    start token and ``min_length`` M at least M before EOS (Hugging Face counts the start token, so they go
    to ``generate()`` as N + 1 and M + 1). A length the caller sets wins over the checkpoint's: a generation
    config's ``max_new_tokens`` / ``min_new_tokens`` (converting to InstructSum writes the paper's
    ``max_new_tokens: 192``) outrank a ``max_length`` / ``min_length`` given to ``generate()``, so a length
    given here unsets its ``*_new_tokens`` twin; and a minimum above the maximum of ``checkpoint`` (its
    generation config) raises that maximum to the minimum."""
    kwargs = decoding.given()
    if decoding.max_length is not None:
        kwargs.update(max_length=decoding.max_length + DECODER_START_TOKENS, max_new_tokens=None)
    if decoding.min_length is not None:
        kwargs.update(min_length=decoding.min_length + DECODER_START_TOKENS, min_new_tokens=None)
        if decoding.max_length is None and decoding.min_length > checkpoint_max_summary(checkpoint):
            kwargs.update(max_length=kwargs["min_length"], max_new_tokens=None)
    return kwargs


def checkpoint_max_summary(generation_config: Any) -> int:
    """The most summary tokens a generation config allows: its ``max_new_tokens``, else its ``max_length``
    less the start token (Hugging Face's default ``max_length`` 20 when it sets none)."""
    if generation_config is not None and getattr(generation_config, "max_new_tokens", None) is not None:
        return int(generation_config.max_new_tokens)
    max_length = getattr(generation_config, "max_length", None)
    return (20 if max_length is None else int(max_length)) - DECODER_START_TOKENS
