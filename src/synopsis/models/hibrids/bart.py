"""HIBRIDS on BART (Cao & Wang, ACL 2022, section 3): biased encoder self-attention, biased last
cross-attention, and the config/model classes registered with the Auto classes as ``hibrids_bart``."""

from __future__ import annotations

from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from transformers import BartConfig
from transformers.models.bart.modeling_bart import BartAttention, BartDecoder, BartEncoder

from synopsis.models.adaptation import AdaptedModel
from synopsis.models.bases import (
    AdaptedBartForConditionalGeneration,
    AdaptedBartModel,
    BartEncoderAttention,
    method_classes,
)
from synopsis.models.hibrids.bias import (
    BIAS,
    HibridsBias,
    HibridsConfigMixin,
    HibridsCrossAttentionMixin,
    HibridsStackMixin,
    _biased_attention,
    _check_backend,
    fused_pair_bias_fits,
    fused_section_attention,
    token_pair_bias,
)
from synopsis.models.hibrids.relations import SectionLayout, num_buckets


@strict
class HibridsBartConfig(HibridsConfigMixin, BartConfig):
    """:class:`~transformers.BartConfig` + which HIBRIDS biases the model has (see the module docstring)."""

    model_type = "hibrids_bart"


class HibridsBartEncoderAttention(BartEncoderAttention):
    """BART encoder self-attention with a per-head HIBRIDS table (``hibrids_bias``)."""

    def __init__(self, config: HibridsBartConfig, layer_idx: int) -> None:
        super().__init__(config, layer_idx=layer_idx)
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), self.num_heads)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        hibrids_layout: SectionLayout | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if hibrids_layout is None:
            return super().forward(hidden_states, attention_mask=attention_mask, **kwargs)
        _check_backend(self.config)
        batch, length, _ = hidden_states.shape
        shape = (batch, length, -1, self.head_dim)
        query = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        keys = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        values = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        if self.config._attn_implementation == "sdpa" and fused_pair_bias_fits(hibrids_layout, self.head_dim):
            output = fused_section_attention(
                self,
                query,
                keys,
                values,
                attention_mask=attention_mask,
                weight=self.hibrids_bias.weight,
                layout=hibrids_layout,
                scaling=self.scaling,
            )
            return self.out_proj(output.reshape(batch, length, -1)), None
        bias = token_pair_bias(self.hibrids_bias.weight, hibrids_layout)
        output, weights = _biased_attention(
            self, query, keys, values, attention_mask, bias, scaling=self.scaling
        )
        return self.out_proj(output.reshape(batch, length, -1)), weights


class _BartCrossAttention(HibridsCrossAttentionMixin, BartAttention):
    """BART's decoder cross-attention for the last two layers (see :class:`HibridsCrossAttentionMixin`)."""


class HibridsBartAlignmentAttention(_BartCrossAttention):
    """The second-to-last decoder layer's cross-attention: the stock computation (eager form, once), whose
    probabilities are also pooled per section for the last layer's bias (SDPA would not return them)."""


class HibridsBartCrossAttention(_BartCrossAttention):
    """The last decoder layer's cross-attention with the HIBRIDS-DEC table (one column per head)."""

    role = BIAS


class HibridsBartEncoder(HibridsStackMixin, AdaptedModel, BartEncoder):
    """BART's encoder with HIBRIDS self-attention; checks the section inputs once per forward pass."""

    #: The biased self-attention; HIBRIDS stacked on Hie-BART swaps in its own (:mod:`.hie_bart`).
    self_attention_class: type = HibridsBartEncoderAttention

    def __init__(self, config: HibridsBartConfig) -> None:
        super().__init__(config)
        if config.hibrids_encoder:
            for idx, layer in enumerate(self.layers):
                if not isinstance(layer.self_attn, self.self_attention_class):
                    layer.self_attn = self.self_attention_class(config, layer_idx=idx)
            self.post_init()  # initialises only the new modules


class HibridsBartDecoder(HibridsStackMixin, AdaptedModel, BartDecoder):
    """BART's decoder whose last layer's cross-attention gets the HIBRIDS-DEC bias."""

    hibrids_decoder_stack = True

    def __init__(self, config: HibridsBartConfig) -> None:
        super().__init__(config)
        if config.hibrids_decoder:
            last = len(self.layers) - 1
            self.layers[last - 1].encoder_attn = HibridsBartAlignmentAttention(config, layer_idx=last - 1)
            self.layers[last].encoder_attn = HibridsBartCrossAttention(config, layer_idx=last)
            self.post_init()


HibridsBartModel, HibridsBartForConditionalGeneration = method_classes(
    __name__,
    "HibridsBart",
    HibridsBartConfig,
    (AdaptedBartModel, AdaptedBartForConditionalGeneration),
    "BART with HIBRIDS biases; pass ``section_ids`` and ``section_relations`` to forward/generate.",
    encoder_class=HibridsBartEncoder,
    decoder_class=HibridsBartDecoder,
)
