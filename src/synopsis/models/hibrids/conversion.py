"""Stock checkpoints as HIBRIDS models: :func:`convert_to_hibrids` (Cao & Wang, ACL 2022).

The converted model has every weight of the source and zero tables, so it computes exactly what the source
computes until it is trained; its config records ``hibrids_encoder``, ``hibrids_decoder`` and
``hibrids_selected`` and ``AutoModelForSeq2SeqLM.from_pretrained`` rebuilds it with no extra flags.
"""

from __future__ import annotations

from transformers import (
    BartForConditionalGeneration,
    LEDForConditionalGeneration,
    PreTrainedModel,
    T5ForConditionalGeneration,
)

from synopsis.models.adaptation import convert_from_base
from synopsis.models.hibrids.bart import HibridsBartConfig, HibridsBartForConditionalGeneration
from synopsis.models.hibrids.hie_bart import HibridsHieBartConfig, HibridsHieBartForConditionalGeneration
from synopsis.models.hibrids.instructsum import (
    InstructSumHibridsT5Config,
    InstructSumHibridsT5ForConditionalGeneration,
)
from synopsis.models.hibrids.led import HibridsLEDConfig, HibridsLEDForConditionalGeneration
from synopsis.models.hibrids.t5 import HibridsT5Config, HibridsT5ForConditionalGeneration
from synopsis.models.hie_bart import HieBartForConditionalGeneration
from synopsis.models.instructsum.model import InstructSumT5ForConditionalGeneration

#: base model_type -> (HIBRIDS config class, HIBRIDS model class, stock model class)
HIBRIDS_FAMILIES: dict[str, tuple[type, type, type]] = {
    "bart": (HibridsBartConfig, HibridsBartForConditionalGeneration, BartForConditionalGeneration),
    "t5": (HibridsT5Config, HibridsT5ForConditionalGeneration, T5ForConditionalGeneration),
    "led": (HibridsLEDConfig, HibridsLEDForConditionalGeneration, LEDForConditionalGeneration),
    # methods compose: HIBRIDS on a Hie-BART keeps its sentence heads
    "hie_bart": (
        HibridsHieBartConfig,
        HibridsHieBartForConditionalGeneration,
        HieBartForConditionalGeneration,
    ),
    # on an InstructSum T5 it keeps the block mask and the exact source cache
    "instructsum_t5": (
        InstructSumHibridsT5Config,
        InstructSumHibridsT5ForConditionalGeneration,
        InstructSumT5ForConditionalGeneration,
    ),
}


def convert_to_hibrids(
    model: PreTrainedModel, *, encoder: bool = True, decoder: bool = True, selected: bool = False
) -> PreTrainedModel:
    """The HIBRIDS version of a loaded stock BART/T5/LED (or Hie-BART) model, with zero-initialised tables.

    Every weight of ``model`` is copied; the new tables (parameter names contain ``hibrids``) are zero,
    so the result computes exactly what ``model`` computes until it is trained. The config records the
    choice (``hibrids_encoder``, ``hibrids_decoder``, ``hibrids_selected``), so the saved model reloads
    through ``AutoModelForSeq2SeqLM.from_pretrained`` alone.
    """
    model_type = model.config.model_type
    if model_type not in HIBRIDS_FAMILIES:
        raise ValueError(
            f"HIBRIDS converts stock {', '.join(HIBRIDS_FAMILIES)} models, not model_type {model_type!r}"
        )
    config_class, model_class, stock_class = HIBRIDS_FAMILIES[model_type]
    if not isinstance(model, stock_class):
        raise ValueError(f"expected a {stock_class.__name__}, got {type(model).__name__}")
    if not (encoder or decoder):
        raise ValueError("HIBRIDS needs the encoder bias, the decoder bias or both")
    config = config_class.from_base(
        model.config, hibrids_encoder=encoder, hibrids_decoder=decoder, hibrids_selected=selected
    )
    return convert_from_base(model, model_class, config)
