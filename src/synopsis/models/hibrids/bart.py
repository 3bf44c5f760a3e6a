"""HIBRIDS on BART (Cao & Wang, ACL 2022, section 3): biased encoder self-attention, biased last
cross-attention, and the config/model classes registered with the Auto classes as ``hibrids_bart``."""

from __future__ import annotations

from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import BartConfig
from transformers.models.bart.modeling_bart import (
    BartAttention,
    BartDecoder,
    BartEncoder,
    BartForConditionalGeneration,
    BartModel,
    BartPreTrainedModel,
    BartScaledWordEmbedding,
)

from synopsis.models.adaptation import AdaptedModel, register
from synopsis.models.hibrids.bias import (
    HibridsBias,
    HibridsConfigMixin,
    HibridsCrossAttentionMixin,
    _biased_attention,
    _check_backend,
    _CrossAttentionLink,
    layout_for,
    token_pair_bias,
)
from synopsis.models.hibrids.relations import SectionLayout, num_buckets


@strict
class HibridsBartConfig(HibridsConfigMixin, BartConfig):
    """:class:`~transformers.BartConfig` + which HIBRIDS biases the model has (see the module docstring)."""

    model_type = "hibrids_bart"


class HibridsBartEncoderAttention(BartAttention):
    """BART encoder self-attention with a per-head HIBRIDS table (``hibrids_bias``)."""

    def __init__(self, config: HibridsBartConfig, layer_idx: int) -> None:
        super().__init__(
            embed_dim=config.d_model,
            num_heads=config.encoder_attention_heads,
            dropout=config.attention_dropout,
            config=config,
            layer_idx=layer_idx,
        )
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
        bias = token_pair_bias(self.hibrids_bias.weight, hibrids_layout)
        batch, length, _ = hidden_states.shape
        shape = (batch, length, -1, self.head_dim)
        query = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        keys = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        values = self.v_proj(hidden_states).view(shape).transpose(1, 2)
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

    biased = True


class HibridsBartEncoder(AdaptedModel, BartEncoder):
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

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        if self.config.hibrids_encoder:
            source = input_ids if input_ids is not None else inputs_embeds
            layout = layout_for(self.config, section_ids, section_relations, source)
            if layout is not None:
                kwargs["hibrids_layout"] = layout
        return super().forward(
            input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, **kwargs
        )


class HibridsBartDecoder(AdaptedModel, BartDecoder):
    """BART's decoder whose last layer's cross-attention gets the HIBRIDS-DEC bias."""

    def __init__(self, config: HibridsBartConfig) -> None:
        super().__init__(config)
        if config.hibrids_decoder:
            last = len(self.layers) - 1
            self.layers[last - 1].encoder_attn = HibridsBartAlignmentAttention(config, layer_idx=last - 1)
            self.layers[last].encoder_attn = HibridsBartCrossAttention(config, layer_idx=last)
            self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        if self.config.hibrids_decoder and encoder_hidden_states is not None:
            layout = layout_for(self.config, section_ids, section_relations, encoder_hidden_states)
            if layout is not None:
                kwargs["hibrids_cross"] = _CrossAttentionLink(layout)  # a fresh link per call
        return super().forward(
            input_ids=input_ids,
            attention_mask=attention_mask,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )


class HibridsBartModel(AdaptedModel, BartModel):
    config_class = HibridsBartConfig
    hibrids_encoder_class: type = (
        HibridsBartEncoder  # HIBRIDS on Hie-BART: the Hie-BART encoder with the biases
    )

    def __init__(self, config: HibridsBartConfig) -> None:
        # BartModel.__init__ with the HIBRIDS encoder/decoder (calling it would build and discard stock ones).
        BartPreTrainedModel.__init__(self, config)
        embed_scale = config.d_model**0.5 if config.scale_embedding else 1.0
        self.shared = BartScaledWordEmbedding(
            config.vocab_size, config.d_model, config.pad_token_id, embed_scale=embed_scale
        )
        self.encoder = self.hibrids_encoder_class(config)
        self.decoder = HibridsBartDecoder(config)
        self.post_init()


class HibridsBartForConditionalGeneration(AdaptedModel, BartForConditionalGeneration):
    """BART with HIBRIDS biases; pass ``section_ids`` and ``section_relations`` to forward/generate."""

    config_class = HibridsBartConfig
    hibrids_model_class: type = HibridsBartModel

    def __init__(self, config: HibridsBartConfig) -> None:
        BartPreTrainedModel.__init__(self, config)
        self.model = self.hibrids_model_class(config)
        self.final_logits_bias = nn.Buffer(torch.zeros((1, self.model.shared.num_embeddings)))
        self.lm_head = nn.Linear(config.d_model, self.model.shared.num_embeddings, bias=False)
        self.post_init()


register(HibridsBartConfig, HibridsBartModel, HibridsBartForConditionalGeneration)
