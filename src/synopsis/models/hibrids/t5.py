"""HIBRIDS on T5 (Cao & Wang, ACL 2022, section 3), registered as ``hibrids_t5``.

T5 adds its relative position bias to the attention scores as ``position_bias``; the HIBRIDS bias goes in
through the same term (``position_bias + bias`` for one layer, :class:`T5AttentionBias`), so any T5
attention that honours ``position_bias`` (InstructSum's block-mask attention included) takes the HIBRIDS
bias unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from transformers import T5Config
from transformers.models.t5.modeling_t5 import T5Attention, T5Stack

from synopsis.models.adaptation import AdaptedModel
from synopsis.models.bases import AdaptedT5ForConditionalGeneration, AdaptedT5Model, method_classes
from synopsis.models.hibrids.bias import (
    HibridsBias,
    HibridsConfigMixin,
    HibridsStackMixin,
    _attend_and_pool,
    _check_backend,
    _cross_keys_values,
    _CrossAttentionLink,
    _decoder_table_heads,
    cross_attention_bias,
    token_pair_bias,
)
from synopsis.models.hibrids.relations import SectionLayout, num_buckets


@strict
class HibridsT5Config(HibridsConfigMixin, T5Config):
    """:class:`~transformers.T5Config` + which HIBRIDS biases the model has (see the module docstring)."""

    model_type = "hibrids_t5"


class T5AttentionBias:
    """Mixin for a ``T5Attention`` subclass (put it first): :meth:`forward_with_bias` runs the next
    class's forward with an additive per-head term on the scores, through T5's ``position_bias``.

    T5 computes its relative position bias in layer 0 and every later layer reuses the returned tensor,
    so the extra term is added for this layer only and the *unbiased* position bias is returned. This is
    the seam for stacking HIBRIDS on any T5 attention that honours ``position_bias`` (InstructSum's
    block-mask attention included): put the mixin before that class.
    """

    def forward_with_bias(
        self,
        bias: torch.Tensor,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
        past_key_values: Any = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        _check_backend(self.config)
        if position_bias is None:  # what T5Attention would compute (self-attention: no cache, no offset)
            if self.has_relative_attention_bias:
                length = hidden_states.shape[1]
                position_bias = self.compute_bias(length, length, device=hidden_states.device)
            else:  # cross-attention and later layers' stand-alone calls: zeros
                position_bias = bias.new_zeros((1, self.n_heads, bias.shape[2], bias.shape[3]))
        output, _, weights = super().forward(  # type: ignore[misc]
            hidden_states, mask, key_value_states, position_bias + bias, past_key_values, **kwargs
        )
        return output, position_bias, weights


class HibridsT5EncoderAttention(T5AttentionBias, T5Attention):
    """T5 encoder self-attention with a per-head HIBRIDS table (see :class:`T5AttentionBias`)."""

    def __init__(self, config: HibridsT5Config, has_relative_attention_bias: bool, layer_idx: int) -> None:
        super().__init__(config, has_relative_attention_bias=has_relative_attention_bias, layer_idx=layer_idx)
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), self.n_heads)

    def forward(
        self,
        hidden_states: torch.Tensor,
        *args: Any,
        hibrids_layout: SectionLayout | None = None,
        **kwargs: Any,
    ) -> Any:
        """T5's forward; with a section layout, the token-pair bias on this layer's scores."""
        if hibrids_layout is None:
            return super().forward(hidden_states, *args, **kwargs)
        bias = token_pair_bias(self.hibrids_bias.weight, hibrids_layout)
        return self.forward_with_bias(bias, hidden_states, *args, **kwargs)


class HibridsT5AlignmentAttention(T5Attention):
    """T5's second-to-last cross-attention, computed once, its probabilities pooled (see BART's)."""

    def __init__(self, config: HibridsT5Config, layer_idx: int) -> None:
        super().__init__(config, has_relative_attention_bias=False, layer_idx=layer_idx)

    def forward(
        self,
        hidden_states: torch.Tensor,
        *args: Any,
        hibrids_cross: _CrossAttentionLink | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """T5's forward; with a link, the eager form whose probabilities are pooled into it. T5's
        cross-attention layers pass everything after the hidden states by keyword."""
        key_value_states = kwargs.get("key_value_states")
        if hibrids_cross is None or key_value_states is None:
            return super().forward(hidden_states, *args, **kwargs)
        mask, position_bias = kwargs.get("mask"), kwargs.get("position_bias")
        past_key_values = kwargs.get("past_key_values")
        batch, steps, _ = hidden_states.shape
        dim = self.key_value_proj_dim
        query = self.q(hidden_states).view(batch, steps, -1, dim).transpose(1, 2)
        keys, values = _cross_keys_values(self, key_value_states, past_key_values, (self.k, self.v), dim)
        if position_bias is None:  # cross-attention has no relative bias: T5Attention would use zeros
            position_bias = query.new_zeros((1, self.n_heads, steps, keys.shape[-2]))
        output, weights = _attend_and_pool(
            self,
            query,
            keys,
            values,
            mask,
            hibrids_cross,
            scaling=self.scaling,
            dropout=self.dropout if self.training else 0.0,
            position_bias=position_bias,
        )
        return self.o(output.reshape(batch, steps, -1)), position_bias, weights


class HibridsT5CrossAttention(T5AttentionBias, T5Attention):
    """T5's last cross-attention with the HIBRIDS-DEC table; returns the unbiased position bias."""

    def __init__(self, config: HibridsT5Config, layer_idx: int) -> None:
        super().__init__(config, has_relative_attention_bias=False, layer_idx=layer_idx)
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), _decoder_table_heads(config))

    def forward(
        self,
        hidden_states: torch.Tensor,
        *args: Any,
        hibrids_cross: _CrossAttentionLink | None = None,
        **kwargs: Any,
    ) -> Any:
        """T5's forward; after the second-to-last layer has pooled its attention, the HIBRIDS-DEC bias."""
        # T5's cross-attention layers pass everything after the hidden states by keyword
        if hibrids_cross is None or hibrids_cross.pooled is None or kwargs.get("key_value_states") is None:
            return super().forward(hidden_states, *args, **kwargs)
        bias = cross_attention_bias(hibrids_cross.pooled, self.hibrids_bias.weight, hibrids_cross.layout)
        return self.forward_with_bias(bias, hidden_states, *args, **kwargs)


class HibridsT5Stack(HibridsStackMixin, AdaptedModel, T5Stack):
    """T5's encoder or decoder stack with HIBRIDS attention; checks the section inputs once per call."""

    def __init__(self, config: HibridsT5Config) -> None:
        super().__init__(config)
        self.hibrids_decoder_stack = config.is_decoder
        if not config.is_decoder and config.hibrids_encoder:
            for idx, block in enumerate(self.block):
                block.layer[0].SelfAttention = HibridsT5EncoderAttention(
                    config, has_relative_attention_bias=idx == 0, layer_idx=idx
                )
        if config.is_decoder and config.hibrids_decoder:
            last = len(self.block) - 1
            self.block[last - 1].layer[1].EncDecAttention = HibridsT5AlignmentAttention(config, last - 1)
            self.block[last].layer[1].EncDecAttention = HibridsT5CrossAttention(config, last)
        self.post_init()
        self.gradient_checkpointing = False


HibridsT5Model, HibridsT5ForConditionalGeneration = method_classes(
    __name__,
    "HibridsT5",
    HibridsT5Config,
    (AdaptedT5Model, AdaptedT5ForConditionalGeneration),
    "T5 with HIBRIDS biases; pass ``section_ids`` and ``section_relations`` to forward/generate.",
    encoder_class=HibridsT5Stack,
    decoder_class=HibridsT5Stack,
)
