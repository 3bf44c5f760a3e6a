"""Stock checkpoints as HIBRIDS models: :func:`convert_to_hibrids` (Cao & Wang, ACL 2022).

The converted model has every weight of the source and zero tables, so it computes exactly what the source
computes until it is trained; its config records ``hibrids_encoder``, ``hibrids_decoder`` and
``hibrids_selected`` and ``AutoModelForSeq2SeqLM.from_pretrained`` rebuilds it with no extra flags.
"""

from __future__ import annotations

from transformers import PreTrainedModel

from synopsis.models.adaptation import stack_method
from synopsis.models.registry import is_hibrids


def convert_to_hibrids(
    model: PreTrainedModel, *, encoder: bool = True, decoder: bool = True, selected: bool = False
) -> PreTrainedModel:
    """The HIBRIDS version of a loaded BART/T5/LED model (stock, Hie-BART or InstructSum: the methods stack,
    :func:`~synopsis.models.registry.stacked_type`), with zero-initialised tables.

    Every weight of ``model`` is copied; the new tables (parameter names contain ``hibrids``) are zero,
    so the result computes exactly what ``model`` computes until it is trained. The config records the
    choice (``hibrids_encoder``, ``hibrids_decoder``, ``hibrids_selected``), so the saved model reloads
    through ``AutoModelForSeq2SeqLM.from_pretrained`` alone.
    """
    if is_hibrids(model.config):  # its options decide which tables exist: convert the base again instead
        raise ValueError(f"HIBRIDS converts a model without it, not model_type {model.config.model_type!r}")
    if not (encoder or decoder):
        raise ValueError("HIBRIDS needs the encoder bias, the decoder bias or both")
    return stack_method(
        model, "hibrids", hibrids_encoder=encoder, hibrids_decoder=decoder, hibrids_selected=selected
    )
