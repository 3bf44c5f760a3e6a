"""HIBRIDS stacked on Hie-BART (``hibrids_hie_bart``): the methods compose at the encoder attention.

Zero tables give Hie-BART alone (bit for bit under eager), all heads word-level give HIBRIDS alone, both
conversion orders give the same model type, and the composed model round-trips through the Auto classes.
"""

from __future__ import annotations

import pytest
import torch
from helpers.hibrids import sharpen
from helpers.hie_bart import SENT, toy_batch
from helpers.hie_bart import stock_and_hie as _stock_and_hie
from helpers.models import randomize_tables
from transformers import AutoConfig, AutoModelForSeq2SeqLM

from synopsis.models.adaptation import convert_from_base
from synopsis.models.hibrids import (
    HibridsHieBartConfig,
    HibridsHieBartForConditionalGeneration,
    convert_to_hibrids,
    num_buckets,
)

DECODER_IDS = torch.tensor([[2, 7, 8, 9]] * 3)


def stock_and_hie(word_heads: int, attn: str) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A stock BART and the Hie-BART with its weights, sharpened so that attention shows in the logits."""
    bart, hie = _stock_and_hie(word_heads=word_heads, attn=attn)
    sharpen(bart)
    hie.load_state_dict(bart.state_dict())
    return bart, hie


def section_inputs(ids: torch.Tensor, seed: int = 0) -> dict[str, torch.Tensor]:
    """Three sections per row (the first two tokens outside any section) and random relation buckets."""
    generator = torch.Generator().manual_seed(seed)
    section_ids = torch.arange(ids.shape[1]).repeat(ids.shape[0], 1) * 3 // ids.shape[1]
    section_ids[:, :2] = -1
    relations = torch.randint(0, num_buckets(), (ids.shape[0], 3, 3), generator=generator)
    return {"section_ids": section_ids, "section_relations": relations}


def logits(model: torch.nn.Module, with_sections: bool = True) -> torch.Tensor:
    ids, mask = toy_batch()
    extra = section_inputs(ids) if with_sections else {}
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, decoder_input_ids=DECODER_IDS, **extra).logits


def test_zero_tables_are_hie_bart_alone_bit_for_bit_and_tables_reach_the_attention() -> None:
    _, hie = stock_and_hie(word_heads=2, attn="eager")
    composed = convert_to_hibrids(hie).eval()
    assert type(composed) is HibridsHieBartForConditionalGeneration
    assert composed.config.word_heads == 2 and composed.config.sentence_start_token_id == SENT
    assert torch.equal(logits(composed), logits(hie, with_sections=False))
    assert torch.equal(logits(composed, with_sections=False), logits(hie, with_sections=False))
    randomize_tables(composed, std=2.0)
    assert (logits(composed) - logits(hie, with_sections=False)).abs().max() > 1e-2


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_all_heads_word_level_is_hibrids_alone(attn: str) -> None:
    bart, _ = stock_and_hie(word_heads=4, attn=attn)
    hibrids = convert_to_hibrids(bart).eval()
    randomize_tables(hibrids, std=2.0)
    config = HibridsHieBartConfig.from_base(hibrids.config, word_heads=4, sentence_start_token_id=SENT)
    composed = convert_from_base(hibrids, HibridsHieBartForConditionalGeneration, config).eval()
    tables = {n: p for n, p in composed.named_parameters() if "hibrids" in n}
    assert len(tables) == 2 + 1 and all(p.abs().sum() > 0 for p in tables.values())  # kept, not zeroed
    expected, got = logits(hibrids), logits(composed)
    assert (expected - logits(bart, with_sections=False)).abs().max() > 1e-2  # the biases matter here
    if attn == "eager":
        assert torch.equal(got, expected)
    else:
        # different kernels (HIBRIDS folds its bias into SDPA; Hie-BART adds it to the scores): equal up
        # to rounding, which float64 shrinks below anything a different computation would give
        torch.testing.assert_close(logits(composed.double()), logits(hibrids.double()), atol=1e-10, rtol=0)


def test_the_composed_model_round_trips_through_the_auto_classes(tmp_path) -> None:
    _, hie = stock_and_hie(word_heads=3, attn="eager")
    composed = convert_to_hibrids(hie, decoder=True, selected=False).eval()
    randomize_tables(composed, std=2.0)
    composed.save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.model_type == "hibrids_hie_bart"
    assert (config.word_heads, config.sentence_heads, config.sentence_start_token_id) == (3, 1, SENT)
    assert (config.hibrids_encoder, config.hibrids_decoder, config.hibrids_selected) == (True, True, False)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    assert type(loaded) is HibridsHieBartForConditionalGeneration
    assert torch.equal(logits(loaded), logits(composed))


def test_both_conversion_orders_give_the_same_model_type(shared_data, tmp_path) -> None:
    from helpers.tiny_models import save_tiny_bart

    from synopsis.models.seq2seq import convert_checkpoint, convert_seq2seq, load_seq2seq

    source = save_tiny_bart(tmp_path / "bart", shared_data / "tokenizers")
    model, tokenizer = load_seq2seq(source)
    first = convert_seq2seq("hibrids", convert_seq2seq("hie-bart", model, tokenizer, word_heads=2), tokenizer)
    model, tokenizer = load_seq2seq(source)
    second = convert_seq2seq(
        "hie-bart", convert_seq2seq("hibrids", model, tokenizer), tokenizer, word_heads=2
    )
    for converted in (first, second):
        assert type(converted) is HibridsHieBartForConditionalGeneration
        assert converted.config.word_heads == 2 and converted.config.hibrids_encoder
    assert first.state_dict().keys() == second.state_dict().keys()
    for name, value in first.state_dict().items():
        assert torch.equal(value, second.state_dict()[name]), name

    # the CLI's path: checkpoint in, checkpoint out, loaded by its config alone
    hie = convert_checkpoint("hie-bart", source, tmp_path / "hie", word_heads=2)
    out = convert_checkpoint("hibrids", hie, tmp_path / "composed")
    loaded, _ = load_seq2seq(out)
    assert type(loaded) is HibridsHieBartForConditionalGeneration
