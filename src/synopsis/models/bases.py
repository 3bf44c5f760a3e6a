"""The outer classes of the base models (BART, T5) with a method's encoder and decoder stacks plugged in.

A method that swaps a stack of its base (Hie-BART's encoder, HIBRIDS' encoder and decoder, InstructSum's
encoder) needs the base's ``__init__`` with other stack classes: calling the stock ``__init__`` would build
stock stacks only to discard them. These classes restate each base's ``__init__`` once, with the stacks
named by class attributes (``encoder_class``, ``decoder_class``; ``model_class`` for BART's generation
class, which wraps a ``BartModel``). A method subclasses them, sets its ``config_class`` and its stacks, and
gets the base's layout (same parameter names, so a stock checkpoint loads unchanged) and the base's weight
init (:class:`~synopsis.models.adaptation.AdaptedModel`).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn
from transformers import BartConfig, T5Config
from transformers.models.bart.modeling_bart import (
    BartAttention,
    BartDecoder,
    BartEncoder,
    BartForConditionalGeneration,
    BartModel,
    BartPreTrainedModel,
    BartScaledWordEmbedding,
)
from transformers.models.t5.modeling_t5 import (
    T5ForConditionalGeneration,
    T5Model,
    T5PreTrainedModel,
    T5Stack,
)

from synopsis.models.adaptation import AdaptedModel, register


class BartEncoderAttention(BartAttention):
    """BART's attention as its encoder layers build it (self-attention, the encoder's heads), for a method's
    subclass that replaces the encoder layers' ``self_attn``."""

    def __init__(self, config: BartConfig, layer_idx: int | None = None) -> None:
        super().__init__(
            embed_dim=config.d_model,
            num_heads=config.encoder_attention_heads,
            dropout=config.attention_dropout,
            config=config,
            layer_idx=layer_idx,
        )


class AdaptedBartModel(AdaptedModel, BartModel):
    """``BartModel`` built with ``encoder_class`` and ``decoder_class`` (each called with the config)."""

    encoder_class: type = BartEncoder
    decoder_class: type = BartDecoder

    def __init__(self, config: BartConfig) -> None:
        BartPreTrainedModel.__init__(self, config)
        embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.shared = BartScaledWordEmbedding(
            config.vocab_size, config.d_model, config.pad_token_id, embed_scale=embed_scale
        )
        self.encoder = self.encoder_class(config)
        self.decoder = self.decoder_class(config)
        self.post_init()


class AdaptedBartForConditionalGeneration(AdaptedModel, BartForConditionalGeneration):
    """``BartForConditionalGeneration`` around a ``model_class`` (an :class:`AdaptedBartModel`)."""

    model_class: type = AdaptedBartModel

    def __init__(self, config: BartConfig) -> None:
        BartPreTrainedModel.__init__(self, config)
        self.model = self.model_class(config)
        self.final_logits_bias = nn.Buffer(torch.zeros((1, self.model.shared.num_embeddings)))
        self.lm_head = nn.Linear(config.d_model, self.model.shared.num_embeddings, bias=False)
        self.post_init()


class _T5Stacks:
    """The shared embedding and the two stacks, configured as ``T5Model`` and ``T5ForConditionalGeneration``
    configure them (the encoder never caches; the decoder has ``num_decoder_layers``)."""

    encoder_class: type = T5Stack
    decoder_class: type = T5Stack

    def _build_stacks(self, config: T5Config) -> None:
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        encoder_config = copy.deepcopy(config)
        encoder_config.is_decoder = False
        encoder_config.use_cache = False
        self.encoder = self.encoder_class(encoder_config)
        decoder_config = copy.deepcopy(config)
        decoder_config.is_decoder = True
        decoder_config.num_layers = config.num_decoder_layers
        self.decoder = self.decoder_class(decoder_config)


class AdaptedT5Model(_T5Stacks, AdaptedModel, T5Model):
    """``T5Model`` built with ``encoder_class`` and ``decoder_class`` (each with its stack's config)."""

    def __init__(self, config: T5Config) -> None:
        T5PreTrainedModel.__init__(self, config)
        self._build_stacks(config)
        self.post_init()


class AdaptedT5ForConditionalGeneration(_T5Stacks, AdaptedModel, T5ForConditionalGeneration):
    """``T5ForConditionalGeneration`` built with ``encoder_class`` and ``decoder_class``."""

    def __init__(self, config: T5Config) -> None:
        T5PreTrainedModel.__init__(self, config)
        self.model_dim = config.d_model
        self._build_stacks(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()


def method_classes(
    module: str,
    name: str,
    config_class: type,
    bases: tuple[type, type],
    doc: str,
    **stacks: type,
) -> tuple[type, type]:
    """A method's ``<name>Model`` and ``<name>ForConditionalGeneration`` on ``bases`` (this module's model
    and generation classes of one base), with the method's config and stacks (``encoder_class``,
    ``decoder_class``), registered with the Auto classes (:func:`~synopsis.models.adaptation.register`).

    ``module`` is the defining module's ``__name__`` (the classes' home for repr and pickling of configs);
    ``doc`` says what the generation class is. The classes differ from their bases only in these
    attributes, so they are made here rather than written out per method.
    """
    model_base, generation_base = bases

    def subclass(class_name: str, base: type, text: str, **attributes: Any) -> type:
        namespace = {"__module__": module, "__qualname__": class_name, "__doc__": text}
        return type(class_name, (base,), {**namespace, "config_class": config_class, **stacks, **attributes})

    model = subclass(f"{name}Model", model_base, f"The bare {doc}")
    generation = subclass(f"{name}ForConditionalGeneration", generation_base, doc, model_class=model)
    register(config_class, model, generation)
    return model, generation
