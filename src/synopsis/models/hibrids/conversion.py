"""Stock checkpoints as HIBRIDS models: :func:`convert_to_hibrids` (Cao & Wang, ACL 2022).

The converted model has every weight of the source and zero tables, so it computes exactly what the source
computes until it is trained; its config records ``hibrids_encoder``, ``hibrids_decoder`` and
``hibrids_selected`` and ``AutoModelForSeq2SeqLM.from_pretrained`` rebuilds it with no extra flags.
"""

from __future__ import annotations

from transformers import PreTrainedModel

from synopsis.models.adaptation import stack_method
from synopsis.models.registry import is_family, is_hibrids


def convert_to_hibrids(
    model: PreTrainedModel,
    *,
    encoder: bool = True,
    decoder: bool = True,
    selected: bool = False,
    decoder_per_head: bool = True,
    global_bias: bool = True,
) -> PreTrainedModel:
    """The HIBRIDS version of a loaded BART/T5/LED model (stock, Hie-BART or InstructSum: the methods stack,
    :func:`~synopsis.models.registry.stacked_type`), with zero-initialised tables.

    Every weight of ``model`` is copied; the new tables (parameter names contain ``hibrids``) are zero,
    so the result computes exactly what ``model`` computes until it is trained. The config records the
    choice (``hibrids_encoder``, ``hibrids_decoder``, ``hibrids_selected``), so the saved model reloads
    through ``AutoModelForSeq2SeqLM.from_pretrained`` alone.

    Two choices where the paper and the authors' public code differ (docs/hibrids.md lists both):
    ``decoder_per_head`` (default, the paper: "each head maintains its own lookup table") gives the decoder
    table one column per head, False one column shared by the heads (the public code's
    ``nn.Embedding(600, 1)``); ``global_bias`` (default, the paper's equation covers every attention score)
    biases LED's global tokens' rows and columns too, False only its sliding band (the public code).
    """
    if is_hibrids(model.config):  # its options decide which tables exist: convert the base again instead
        raise ValueError(f"HIBRIDS converts a model without it, not model_type {model.config.model_type!r}")
    if not (encoder or decoder):
        raise ValueError("HIBRIDS needs the encoder bias, the decoder bias or both")
    settings = {"hibrids_decoder_per_head": decoder_per_head}
    if is_family(model.config, "led"):
        settings["hibrids_global_bias"] = global_bias
    elif not global_bias:
        raise ValueError("only LED has global tokens: the band-only bias (global_bias=False) is LED's")
    return stack_method(
        model,
        "hibrids",
        hibrids_encoder=encoder,
        hibrids_decoder=decoder,
        hibrids_selected=selected,
        **settings,
    )
