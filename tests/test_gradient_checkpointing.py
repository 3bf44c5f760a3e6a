"""``gradient_checkpointing: true``: every seq2seq model (stock BART / T5 / LED, Hie-BART, HIBRIDS on the
three, InstructSum) gives the same loss and gradients with and without it, in float64 (tolerance 1e-10: the
recomputed forward is the same arithmetic), and each layer really is recomputed (its forward runs twice)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers.modeling_layers import GradientCheckpointingLayer

from synopsis.models.seq2seq import enable_gradient_checkpointing

TOL = 1e-10


def _hie_bart() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    from helpers.hie_bart import EOS, stock_and_hie, toy_batch

    _, model = stock_and_hie(word_heads=2, attn="eager", scale=5.0)  # dropout 0.1: replayed on recompute
    ids, mask = toy_batch()
    labels = torch.tensor([[7, 8, 9, EOS]] * 3)
    return model, {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _inputs(family: str) -> dict[str, torch.Tensor]:
    from helpers.hibrids import family_inputs

    inputs = family_inputs(family)
    if family == "led":
        # one document: stock LED's eager sliding-window attention already has NaN gradients at the rows of a
        # padded second document (fully masked rows), with or without checkpointing
        inputs = {key: value[:1] for key, value in inputs.items()}
    labels = torch.tensor([[5, 6, 7, 8]] * inputs["input_ids"].shape[0])
    return {**inputs, "labels": labels}


def _hibrids(family: str) -> Callable[[], tuple[torch.nn.Module, dict[str, torch.Tensor]]]:
    def build() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
        from helpers.hibrids import stock_model
        from helpers.models import randomize_tables

        from synopsis.models.hibrids import convert_to_hibrids

        model = convert_to_hibrids(stock_model(family))
        randomize_tables(model)
        return model, _inputs(family)

    return build


def _stock(family: str) -> Callable[[], tuple[torch.nn.Module, dict[str, torch.Tensor]]]:
    def build() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
        from helpers.hibrids import stock_model, without_sections

        return stock_model(family), without_sections(_inputs(family))

    return build


def _instructsum(shared_data: Path) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    from helpers.instructsum import prompts, sharp_t5
    from helpers.tiny_models import t5_tokenizer

    from synopsis.models.instructsum import collate_prompts, convert_to_instructsum

    tokenizer = t5_tokenizer(shared_data / "tokenizers")
    model = convert_to_instructsum(sharp_t5(tokenizer))
    batch = collate_prompts(prompts(tokenizer)[:2], tokenizer.pad_token_id)
    labels = torch.tensor([tokenizer("A mirrorless camera.")["input_ids"]] * 2)
    return model, {**batch, "labels": labels}


MODELS = {
    "bart": _stock("bart"),
    "t5": _stock("t5"),
    "led": _stock("led"),
    "hie_bart": _hie_bart,
    "hibrids_bart": _hibrids("bart"),
    "hibrids_t5": _hibrids("t5"),
    "hibrids_led": _hibrids("led"),
    "instructsum": _instructsum,
}


def _loss_and_gradients(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> tuple[float, dict]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(7)  # the same dropout masks in both runs
    loss = model(**inputs).loss
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return float(loss.detach()), grads


def _counting_layer_modules(model: torch.nn.Module, calls: list[int]) -> list:
    """Hooks counting the calls of every module inside the checkpointed layers (the layers' own forward is
    what is checkpointed, so its hooks do not fire again; those of the modules it calls do)."""
    inner = [
        sub
        for layer in model.modules()
        if isinstance(layer, GradientCheckpointingLayer)
        for sub in layer.modules()
        if sub is not layer
    ]
    return [sub.register_forward_pre_hook(lambda *_: calls.append(1)) for sub in inner]


@pytest.mark.parametrize("name", list(MODELS))
def test_gradients_equal_without_checkpointing_float64(name: str, shared_data: Path) -> None:
    build = MODELS[name]
    model, inputs = build(shared_data) if name == "instructsum" else build()
    model = model.double().train()
    plain: list[int] = []
    hooks = _counting_layer_modules(model, plain)
    loss, expected = _loss_and_gradients(model, inputs)

    enable_gradient_checkpointing(model)
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    assert layers and all(layer.gradient_checkpointing for layer in layers)
    checkpointed: list[int] = []
    for hook in hooks:
        hook.remove()
    hooks = _counting_layer_modules(model, checkpointed)
    checkpointed_loss, got = _loss_and_gradients(model, inputs)
    for hook in hooks:
        hook.remove()
    # Every layer ran again in the backward (T5's relative position bias, computed once per stack before
    # the first layer's checkpoint in one mode and inside it in the other, makes the count not exactly 2x).
    assert len(plain) > 0 and len(checkpointed) >= 1.9 * len(plain)
    assert checkpointed_loss == pytest.approx(loss, abs=TOL)
    assert got.keys() == expected.keys() and len(got) > 0
    for key, grad in expected.items():
        assert (got[key] - grad).abs().max() <= TOL * max(1.0, float(grad.abs().max())), key
