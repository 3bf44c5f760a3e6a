"""A HIBRIDS model built from its config (training from scratch) is initialised as its base model is.

transformers 5 skips the init of parameter-less modules of classes defined outside the library, which left
a HIBRIDS T5 built with ``from_config`` with attention and feed-forward weights at std ~1.0 against stock
T5's 0.005-0.04. Each weight's spread is compared with the stock model's built from the same base config
with the same seed; the HIBRIDS tables start as N(0, 0.02) (Cao & Wang, ACL 2022, section 3).
"""

from __future__ import annotations

import pytest
import torch
from helpers.hibrids import _spread
from helpers.tiny_models import bart_config, led_config, t5_config
from transformers import AutoModelForSeq2SeqLM

from synopsis.models.hibrids import HibridsBartConfig, HibridsLEDConfig, HibridsT5Config

BASES = {
    "bart": (lambda: bart_config(d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128), HibridsBartConfig),
    "t5": (lambda: t5_config(d_model=64, d_ff=128, d_kv=16), HibridsT5Config),
    "led": (lambda: led_config(d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=128), HibridsLEDConfig),
}


@pytest.mark.parametrize("family", BASES)
def test_a_model_built_from_its_config_has_the_base_class_init(family: str) -> None:
    make_base, config_class = BASES[family]
    base_config = make_base()
    torch.manual_seed(0)
    stock = _spread(AutoModelForSeq2SeqLM.from_config(base_config))
    torch.manual_seed(0)
    model = AutoModelForSeq2SeqLM.from_config(config_class.from_base(base_config))
    hibrids = _spread(model)
    assert hibrids.keys() == stock.keys()
    # Same init function, different random draws: each matrix's spread within 25% of the stock one
    # (the bug was a factor of 25-200 on T5's attention and feed-forward weights).
    off = {n: (hibrids[n], stock[n]) for n in stock if not 0.8 < hibrids[n] / stock[n] < 1.25}
    assert not off, off
    tables = [p.detach().flatten() for n, p in model.named_parameters() if "hibrids" in n]
    assert tables
    assert 0.015 < float(torch.cat(tables).std()) < 0.025  # N(0, 0.02), as the paper initialises them
