"""The shared model layer: registration on import, the registry of checkpoint types, conversion checks."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from helpers.tiny_models import bart_config, t5_config
from transformers import AutoConfig, BartForConditionalGeneration, T5ForConditionalGeneration

from synopsis.errors import CheckpointError
from synopsis.models.adaptation import convert_from_base, method_tables
from synopsis.models.hibrids import HibridsBartConfig, HibridsBartForConditionalGeneration, convert_to_hibrids
from synopsis.models.instructsum import convert_to_instructsum
from synopsis.models.registry import MODEL_TYPES, checkpoint_type, stacked_type


@pytest.mark.parametrize("entry", ["import synopsis.models.seq2seq", "synopsis.models.register_methods()"])
def test_the_loading_path_registers_every_method_with_the_auto_classes(entry: str) -> None:
    code = (
        f"import synopsis.models\n{entry}\n"
        "from transformers import AutoConfig, AutoModelForSeq2SeqLM\n"
        "from synopsis.models.registry import MODEL_TYPES\n"
        "for name in MODEL_TYPES:\n"
        "    config = AutoConfig.for_model(name)\n"
        "    assert AutoModelForSeq2SeqLM._model_mapping[type(config)], name\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr[-2000:]


def test_every_checkpoint_type_has_one_entry_that_says_what_it_needs() -> None:
    for name, entry in MODEL_TYPES.items():
        assert entry.name == name and entry.family in ("bart", "t5", "led", "pegasus")
        assert AutoConfig.for_model(name).model_type == name
    assert checkpoint_type("hibrids_hie_bart").methods == {"hibrids", "hie_bart"}
    assert checkpoint_type("hibrids_t5").inputs == ("section_ids", "section_relations")
    assert checkpoint_type("instructsum_t5").inputs == ("segment_ids",)
    assert checkpoint_type(t5_config()).task_prefix == "summarize: "
    assert checkpoint_type("gpt2") is None


def test_conversion_refuses_weights_that_do_not_map() -> None:
    t5 = T5ForConditionalGeneration(t5_config())
    with pytest.raises(ValueError, match="do not map onto HibridsBartForConditionalGeneration"):
        convert_from_base(t5, HibridsBartForConditionalGeneration, HibridsBartConfig.from_base(bart_config()))


def test_conversion_keeps_device_dtype_and_mode_and_zeroes_only_new_tables() -> None:
    bart = BartForConditionalGeneration(bart_config()).to(torch.float64).train()
    converted = convert_from_base(
        bart, HibridsBartForConditionalGeneration, HibridsBartConfig.from_base(bart.config)
    )
    assert converted.training and next(converted.parameters()).dtype == torch.float64
    assert converted.config._attn_implementation == bart.config._attn_implementation
    tables = {n: p for n, p in converted.named_parameters() if "hibrids" in n}
    assert tables and all(not p.any() for p in tables.values())
    with torch.no_grad():
        for p in tables.values():
            p.fill_(0.5)
    again = convert_from_base(converted, HibridsBartForConditionalGeneration, converted.config)
    assert all((p == 0.5).all() for n, p in again.named_parameters() if "hibrids" in n)  # kept, not zeroed


def test_method_classes_are_named_registered_and_laid_out_as_their_base(tmp_path) -> None:
    from transformers import AutoModel, AutoModelForSeq2SeqLM

    from synopsis.models.hibrids import HibridsT5Config, HibridsT5ForConditionalGeneration, HibridsT5Model
    from synopsis.models.hibrids.bart import HibridsBartModel

    cases = (
        (
            HibridsBartModel,
            HibridsBartForConditionalGeneration,
            HibridsBartConfig,
            bart_config(),
            BartForConditionalGeneration,
        ),
        (
            HibridsT5Model,
            HibridsT5ForConditionalGeneration,
            HibridsT5Config,
            t5_config(),
            T5ForConditionalGeneration,
        ),
    )
    for model_class, generation_class, config_class, base_config, stock_class in cases:
        config = config_class.from_base(base_config)
        assert model_class.__module__ == generation_class.__module__ and "hibrids" in model_class.__module__
        assert generation_class.__name__.endswith("ForConditionalGeneration") and generation_class.__doc__
        assert AutoModel._model_mapping[type(config)] is model_class
        assert AutoModelForSeq2SeqLM._model_mapping[type(config)] is generation_class
        # the same parameter names as the stock model (a stock checkpoint loads unchanged), tables aside
        stock = stock_class(base_config)
        model = generation_class(config)
        names = {n for n in model.state_dict() if "hibrids_bias" not in n}
        assert names == set(stock.state_dict())
        model.save_pretrained(tmp_path / config.model_type)
        loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / config.model_type)
        assert type(loaded) is generation_class
        assert loaded.config.architectures == [generation_class.__name__]


def test_which_methods_stack_is_read_off_the_registrys_composed_types() -> None:
    """One list: every composed type is what stacking one of its methods on the rest gives, and a type the
    table has no composition for is refused naming the families the method stacks on."""
    for entry in MODEL_TYPES.values():
        for method in entry.methods:
            rest = [
                t
                for t in MODEL_TYPES.values()
                # methods stack on the families' own classes: not on mT5, mBART, UMT5, LongT5 ...
                if t.family == entry.family
                and t.methods == entry.methods - {method}
                and (t.methods or t.name == t.family)
            ]
            assert rest
            assert [stacked_type(t.name, method).name for t in rest] == [entry.name] * len(rest)
    assert stacked_type("hibrids_bart", "hie_bart").name == "hibrids_hie_bart"
    assert stacked_type("hie_bart", "hie_bart").name == "hie_bart"  # converted again with new settings
    with pytest.raises(
        CheckpointError, match="HIBRIDS needs a BART or T5 or LED checkpoint, this one is 'mt5'"
    ):
        stacked_type("mt5", "hibrids")
    with pytest.raises(
        CheckpointError, match="InstructSum needs a T5 checkpoint, this one is 'hibrids_bart'"
    ):
        stacked_type("hibrids_bart", "instructsum")


def test_instructsum_on_a_hibrids_t5_is_the_composed_type_with_its_tables() -> None:
    """The InstructSum converter finds the composition through the registry as HIBRIDS' does (before, it
    built a plain InstructSum T5 that had no place for HIBRIDS' tables)."""
    torch.manual_seed(0)
    hibrids = convert_to_hibrids(T5ForConditionalGeneration(t5_config()))
    for _, table in method_tables(hibrids):
        torch.nn.init.normal_(table)
    converted = convert_to_instructsum(hibrids)
    assert converted.config.model_type == "instructsum_hibrids_t5"
    assert {n: t.tolist() for n, t in method_tables(converted)} == {
        n: t.tolist() for n, t in method_tables(hibrids)
    }
