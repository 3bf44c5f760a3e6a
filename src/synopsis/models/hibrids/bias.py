"""HIBRIDS' bias math and the attention helpers every base (BART, T5, LED) shares.

Cao & Wang, ACL 2022, section 3. HIBRIDS-ENC adds ``B^l[rel(x_i, y_j), h]`` to the score of every token
pair (:func:`token_pair_bias`; on LED's band :func:`window_bias`); HIBRIDS-DEC adds to the last decoder
layer's cross-attention ``bias_tj^h = sum_k alpha_tk^h B_dec[rel(sec(k), sec(j)), h]``, weighted by the
second-to-last layer's probabilities ``alpha`` (:func:`pool_by_section`, :func:`cross_attention_bias`).
No (L, L) index and no T x L x L tensor is ever built.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedConfig
from transformers.cache_utils import EncoderDecoderCache

from synopsis.models.adaptation import DerivedConfig, MethodTable
from synopsis.models.hibrids.relations import SectionLayout, num_buckets, section_layout


def _relation_values(weight: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
    """(B, H, S+1, S+1) bias values of every section pair; the last row and column (no section) are 0."""
    values = F.embedding(relations, weight).permute(0, 3, 1, 2)
    return F.pad(values, (0, 1, 0, 1))


def pair_bias(
    weight: torch.Tensor, relations: torch.Tensor, query_ids: torch.Tensor, key_ids: torch.Tensor
) -> torch.Tensor:
    """(B, H, Q, K) bias ``weight[relations[b, q_sec, k_sec], h]`` (0 when either token has no section).

    ``query_ids``/``key_ids`` are section ids in [0, S] (S = no section). Two gathers, no (Q, K) index:
    first the (S+1) x K columns, then whole rows of length K are copied per query token.
    """
    batch, heads = relations.shape[0], weight.shape[1]
    slots = relations.shape[-1] + 1
    columns = _relation_values(weight, relations).gather(
        3, key_ids[:, None, None, :].expand(batch, heads, slots, key_ids.shape[1])
    )  # (B, H, S+1, K)
    offsets = torch.arange(batch * heads, device=query_ids.device).view(batch, heads, 1) * slots
    rows = (offsets + query_ids[:, None, :]).reshape(-1)
    return (
        columns.reshape(batch * heads * slots, -1)
        .index_select(0, rows)
        .view(batch, heads, -1, key_ids.shape[1])
    )


def token_pair_bias(weight: torch.Tensor, layout: SectionLayout) -> torch.Tensor:
    """(B, H, L, L) encoder self-attention bias of every token pair."""
    return pair_bias(weight, layout.relations, layout.ids, layout.ids)


def window_index(ids: torch.Tensor, num_sections: int, one_sided: int) -> torch.Tensor:
    """Flat (B, 1, L*(2w+1)) index of the section pair of each (query, window offset) of LED's band.

    Key ``j = i + d - w`` for offset ``d``; keys outside the sequence get the no-section slot. Built once
    per forward pass and shared by every layer with that window.
    """
    slots = num_sections + 1
    keys = F.pad(ids, (one_sided, one_sided), value=num_sections).unfold(1, 2 * one_sided + 1, 1)
    return (ids[:, :, None] * slots + keys).reshape(ids.shape[0], 1, -1)


def window_bias(
    weight: torch.Tensor, relations: torch.Tensor, index: torch.Tensor, length: int
) -> torch.Tensor:
    """(B, H, L, 2w+1) bias on LED's band, from :func:`window_index`."""
    batch, heads = relations.shape[0], weight.shape[1]
    values = _relation_values(weight, relations).reshape(batch, heads, -1)
    return values.gather(2, index.expand(batch, heads, -1)).view(batch, heads, length, -1)


def pool_by_section(probs: torch.Tensor, layout: SectionLayout) -> torch.Tensor:
    """``A[b, h, t, s] = sum_{k in s} probs[b, h, t, k]``: (B, H, T, S+1), the last slot = no section."""
    one_hot = F.one_hot(layout.ids, layout.num_sections + 1).to(probs.dtype)  # (B, L, S+1)
    return torch.matmul(probs, one_hot[:, None])


def cross_attention_bias(pooled: torch.Tensor, weight: torch.Tensor, layout: SectionLayout) -> torch.Tensor:
    """(B, H, T, L) decoder bias ``bias_tj^h = sum_s A_ts^h * B_dec[rel(s, sec(j)), h]`` in O(T x S) memory.

    ``pooled`` is :func:`pool_by_section` of the previous layer's probabilities (head h weighted by head h
    of that layer); ``weight`` is the (buckets, H) per-head table, or a (buckets, 1) table shared by the
    heads (checkpoints written before the tables were per head).
    """
    size = layout.num_sections
    table = F.embedding(layout.relations, weight).permute(0, 3, 1, 2)  # (B, H or 1, S, S)
    per_section = torch.matmul(pooled[..., :size], table)  # (B, H, T, S)
    per_section = F.pad(per_section, (0, 1))  # keys without a section get 0
    batch, heads, steps, _ = per_section.shape
    index = layout.ids[:, None, None, :].expand(batch, heads, steps, layout.ids.shape[1])
    return per_section.gather(3, index)


class HibridsBias(MethodTable):
    """A learnable table of attention biases: one row per relation bucket, one column per head.

    Built from a config it starts as N(0, 0.02), "like other weights" (paper section 3); converted from a
    stock checkpoint it starts at zero (:func:`synopsis.models.adaptation.convert_from_base`).
    """

    init_std = 0.02

    def extra_repr(self) -> str:
        return f"buckets={self.weight.shape[0]}, heads={self.weight.shape[1]}"


def _check_backend(config: PreTrainedConfig) -> None:
    implementation = config._attn_implementation
    if implementation not in ("eager", "sdpa"):
        raise ValueError(
            f"HIBRIDS supports the eager and sdpa attention implementations, not {implementation!r}"
        )


def _biased_attention(
    module: nn.Module,
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    attention_mask: torch.Tensor | None,
    bias: torch.Tensor,
    *,
    scaling: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T * scaling + bias + mask) v`` for (B, H, Q, D) inputs and a (B, H, Q, K) bias,
    without further (B, H, Q, K) tensors. SDPA with a float mask that needs a gradient falls back to its
    math path, which on top pays a "safe softmax" (``isneginf``/``all``/``where`` over the scores); this
    avoids those passes. Under ``sdpa`` the bias enters the score product itself (``baddbmm``, one pass;
    stock SDPA rounds differently anyway); under ``eager`` the stock eager order is kept (product, scale,
    then the bias and mask added in place), so zero biases give the stock eager result bit for bit.
    Returns the (B, Q, H, D) output, as the attention functions do, and the probabilities."""
    if getattr(getattr(module, "config", None), "_attn_implementation", "eager") == "sdpa":  # LED: eager
        batch, heads, steps, dim = query.shape
        length = keys.shape[2]
        scores = torch.baddbmm(
            bias.expand(batch, heads, steps, length).reshape(batch * heads, steps, length),
            query.reshape(batch * heads, steps, dim),
            keys.reshape(batch * heads, length, dim).transpose(1, 2),
            alpha=scaling,
        ).view(batch, heads, steps, length)
    else:
        scores = _head_scores(module, query, keys).mul_(scaling).add_(bias)
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill_(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores.add_(attention_mask)
    probs = F.softmax(scores, dim=-1)
    dropped = F.dropout(probs, p=module.dropout, training=module.training)
    return _head_outputs(module, dropped, values).transpose(1, 2).contiguous(), probs


def _head_scores(module: nn.Module, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """(B, H, Q, K) products ``q k^T`` of (B, H, Q, D) queries and (B, H, K, D) keys, with the operations of
    the module's stock eager attention: a 4-D ``matmul`` (BART, T5), or ``bmm`` over (B*H, Q, D) queries
    and transposed (B*H, K, D) keys (LED, ``flat_heads``). The two round differently (1e-15 in float64,
    where the keys are not contiguous: a forward pass without a cache), so each base keeps its own."""
    if not getattr(module, "flat_heads", False):
        return torch.matmul(query, keys.transpose(2, 3))
    batch, heads, steps, dim = query.shape
    flat = torch.bmm(
        query.reshape(batch * heads, steps, dim), keys.reshape(batch * heads, -1, dim).transpose(1, 2)
    )
    return flat.view(batch, heads, steps, -1)


def _head_outputs(module: nn.Module, probs: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """(B, H, Q, D) ``probs @ values`` as the module's stock eager attention computes it (see
    :func:`_head_scores`)."""
    if not getattr(module, "flat_heads", False):
        return torch.matmul(probs, values)
    batch, heads, steps, length = probs.shape
    flat = torch.bmm(probs.reshape(batch * heads, steps, length), values.reshape(batch * heads, length, -1))
    return flat.view(batch, heads, steps, -1)


def fused_pair_bias_fits(layout: SectionLayout, head_dim: int) -> bool:
    """Whether :func:`fused_section_attention` pays off: measured on one CPU thread at L = 1,000, 12 heads
    of 64, it beats the direct product up to about 100 section slots; past ``head_dim`` slots the widened
    product would cost more than the bias it saves."""
    return layout.num_sections + 1 <= head_dim


def section_terms(
    weight: torch.Tensor, layout: SectionLayout, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two factors of the self-attention bias, ``bias[i, j] = rows[i] . one_hot[j]``: (B, H, L, W) rows,
    each token's section's row of :func:`_relation_values`, and (B, L, W) one-hots of each token's section.

    W is the S+1 section slots rounded up to a multiple of 8 (for GPU kernels); the padding columns are 0.
    """
    values = _relation_values(weight, layout.relations).to(dtype)  # (B, H, S+1, S+1)
    batch, heads, slots = values.shape[:3]
    width = -(-slots // 8) * 8
    values = F.pad(values, (0, width - slots))
    rows = values.gather(2, layout.ids[:, None, :, None].expand(batch, heads, layout.ids.shape[1], width))
    return rows, F.one_hot(layout.ids, width).to(dtype)


def fused_section_attention(
    module: nn.Module,
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    attention_mask: torch.Tensor | None,
    weight: torch.Tensor,
    layout: SectionLayout,
    *,
    scaling: float,
) -> torch.Tensor:
    """``softmax(q k^T * scaling + bias + mask) v`` with the section-pair bias, in one fused SDPA call.

    ``bias[i, j]`` is a dot product (:func:`section_terms`): the query's row of section values against the
    one-hot of the key's section. Appending that row to the scaled query and the one-hot to the key gives
    the biased scores inside SDPA's own product, so forward and backward run in the fused kernel and the
    table's gradient (summed per key section) comes out of the query's extra columns; no (B, H, L, L)
    tensor is built here. The values are padded with zeros to the widened width, as the fused CPU kernel
    needs equal widths. Equal to the direct computation up to rounding. Returns the (B, L, H, D) output,
    as the attention functions do.
    """
    batch, heads, _, dim = query.shape
    rows, one_hot = section_terms(weight, layout, query.dtype)
    width = rows.shape[-1]
    output = F.scaled_dot_product_attention(
        torch.cat([query * scaling, rows], dim=-1),
        torch.cat([keys, one_hot[:, None].expand(batch, heads, -1, width)], dim=-1),
        F.pad(values, (0, width)),
        attn_mask=attention_mask,
        dropout_p=module.dropout if module.training else 0.0,
        scale=1.0,
    )
    return output[..., :dim].transpose(1, 2).contiguous()


def _probabilities(scores: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax of attention scores under a float (additive) or boolean mask, as the stock layers do: in the
    scores' own precision (BART's, LED's and T5's eager attention; under autocast, what autocast picks), so
    that with zero tables the model is its base bit for bit in any dtype."""
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    return F.softmax(scores, dim=-1)


def _cross_keys_values(
    module: nn.Module,
    key_value_states: torch.Tensor,
    past_key_values: Any,
    projections: tuple[nn.Module, nn.Module],
    head_dim: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-attention keys/values (B, H, L, D) as the stock layers get them: from the generation cache when
    this layer stored them already, else projected (and stored)."""
    cache = past_key_values
    if isinstance(past_key_values, EncoderDecoderCache):
        if past_key_values.is_updated.get(module.layer_idx):
            layer = past_key_values.cross_attention_cache.layers[module.layer_idx]
            return layer.keys, layer.values
        cache = past_key_values.cross_attention_cache
    shape = (*key_value_states.shape[:-1], -1, head_dim)
    keys = projections[0](key_value_states).view(shape).transpose(1, 2)
    values = projections[1](key_value_states).view(shape).transpose(1, 2)
    if cache is not None:
        keys, values = cache.update(keys, values, module.layer_idx)
        if isinstance(past_key_values, EncoderDecoderCache):
            past_key_values.is_updated[module.layer_idx] = True
    return keys, values


def _attend_and_pool(
    module: nn.Module,
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    attention_mask: torch.Tensor | None,
    link: _CrossAttentionLink,
    *,
    scaling: float,
    dropout: float,
    position_bias: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The second-to-last layer's cross-attention, computed once: (B, T, H, D) output and (B, H, T, L)
    probabilities; the probabilities (before dropout: the paper weights by attention probabilities) are
    pooled per section into ``link`` for the last layer. The same operations as the stock eager path."""
    scores = _head_scores(module, query, keys) * scaling
    if position_bias is not None:
        scores = scores + position_bias
    probs = _probabilities(scores, attention_mask)
    link.pooled = pool_by_section(probs, link.layout)
    dropped = F.dropout(probs, p=dropout, training=module.training)
    return _head_outputs(module, dropped, values).transpose(1, 2).contiguous(), probs


@dataclass
class _CrossAttentionLink:
    """Per decoder call: the sections, and the previous layer's attention pooled per section."""

    layout: SectionLayout
    pooled: torch.Tensor | None = None  # (B, H, T, S+1), set by the second-to-last layer


def _decoder_table_heads(config: PreTrainedConfig) -> int:
    """Columns of the decoder table: one per head (the paper), or 1 for configs saved before that."""
    heads = getattr(config, "decoder_attention_heads", None) or config.num_heads  # T5: num_heads
    return heads if config.hibrids_decoder_per_head else 1


@dataclass
class HibridsConfigMixin(DerivedConfig):
    """The HIBRIDS fields, their checks and defaults, shared by the BART, T5, LED and Hie-BART configs:
    which biases the model has (``hibrids_encoder``, ``hibrids_decoder``) and whether its tables cover
    the HIBRIDS-S relations only (``hibrids_selected``).

    ``hibrids_decoder_per_head`` is False for configs saved before the decoder table was per head, so
    their (buckets, 1) tables load and compute as before; new configs default to per-head tables.
    """

    hibrids_encoder: bool = True
    hibrids_decoder: bool = True
    hibrids_selected: bool = False
    hibrids_decoder_per_head: bool = True

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any) -> Any:
        if "hibrids_decoder_per_head" not in config_dict:
            config_dict = {**config_dict, "hibrids_decoder_per_head": False}
        return super().from_dict(config_dict, **kwargs)  # type: ignore[misc]

    def __post_init__(self, **kwargs: Any) -> None:
        super().__post_init__(**kwargs)  # type: ignore[misc]
        decoder_layers = getattr(self, "num_decoder_layers", None) or self.decoder_layers  # T5 / BART, LED
        if self.hibrids_decoder and decoder_layers < 2:
            raise ValueError("HIBRIDS-DEC needs at least 2 decoder layers (it reads the second-to-last one)")


def layout_for(
    config: PreTrainedConfig,
    section_ids: torch.Tensor | None,
    section_relations: torch.Tensor | None,
    source: torch.Tensor,
) -> SectionLayout | None:
    """:func:`section_layout` of the section inputs for a ``source`` (ids, embeddings or encoder states)
    of shape (B, L, ...): checked against L and the config's table size, on the source's device."""
    return section_layout(
        section_ids,
        section_relations,
        length=source.shape[1],
        buckets=num_buckets(config.hibrids_selected),
        device=source.device,
    )


def encoder_layout(
    config: PreTrainedConfig,
    section_ids: torch.Tensor | None,
    section_relations: torch.Tensor | None,
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
) -> SectionLayout | None:
    """The layout an encoder's biased self-attention reads (None: no HIBRIDS-ENC, or no section inputs)."""
    if not config.hibrids_encoder:
        return None
    source = input_ids if input_ids is not None else inputs_embeds
    return layout_for(config, section_ids, section_relations, source)


def cross_link(
    config: PreTrainedConfig,
    section_ids: torch.Tensor | None,
    section_relations: torch.Tensor | None,
    encoder_hidden_states: torch.Tensor | None,
) -> _CrossAttentionLink | None:
    """A fresh per-call link for the last two cross-attentions (None: no HIBRIDS-DEC, no encoder states,
    or no section inputs)."""
    if not config.hibrids_decoder or encoder_hidden_states is None:
        return None
    layout = layout_for(config, section_ids, section_relations, encoder_hidden_states)
    return None if layout is None else _CrossAttentionLink(layout)


class HibridsStackMixin:
    """Mixin for a BART, T5 or LED encoder/decoder stack (put it before the base class): ``forward`` also
    takes ``section_ids`` and ``section_relations`` and hands the stack's layers, for this call, what the
    HIBRIDS attention reads (:meth:`hibrids_value`). The base's own arguments pass through unchanged, by
    keyword (as the base models call their stacks)."""

    #: Whether this stack is a decoder (BART's config does not say; T5's stacks set it from their config).
    hibrids_decoder_stack = False

    def forward(
        self,
        *,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        value = self.hibrids_value(section_ids, section_relations, kwargs)
        with self.hibrids_passing(value, kwargs):
            return super().forward(**kwargs)  # type: ignore[misc]

    def hibrids_value(
        self, section_ids: torch.Tensor | None, section_relations: torch.Tensor | None, kwargs: dict[str, Any]
    ) -> Any:
        """The per-call input of the HIBRIDS layers: the encoder's :func:`encoder_layout` or the decoder's
        :func:`cross_link` (None: no bias in this call)."""
        config = self.config  # type: ignore[attr-defined]
        if self.hibrids_decoder_stack:
            return cross_link(config, section_ids, section_relations, kwargs.get("encoder_hidden_states"))
        source = kwargs.get("input_ids"), kwargs.get("inputs_embeds")
        return encoder_layout(config, section_ids, section_relations, *source)

    def hibrids_passing(self, value: Any, kwargs: dict[str, Any]) -> AbstractContextManager[None]:
        """How the layers get ``value`` during the base's forward: BART's and T5's layers pass keyword
        arguments on to their attention (``hibrids_cross`` in the decoder, ``hibrids_layout`` in the
        encoder); LED's stacks override this (their layers pass nothing on)."""
        if value is not None:
            kwargs["hibrids_cross" if self.hibrids_decoder_stack else "hibrids_layout"] = value
        return nullcontext()


@dataclass(frozen=True)
class BaseAttention:
    """How a base family's cross-attention class is built and computes its scores: BART's takes the model
    config, scales the product (its attention backend is checked before a biased product) and multiplies
    4-D tensors with ``matmul``; LED's takes no config, scales the query first and multiplies (B*H, T, D)
    tensors with ``bmm`` (:func:`_head_scores`: the stock layer's operations, so zero tables give it bit for
    bit)."""

    takes_config: bool
    pre_scaled_query: bool
    flat_heads: bool = False

    def init_kwargs(self, config: PreTrainedConfig) -> dict[str, Any]:
        return {"config": config} if self.takes_config else {}

    def check(self, module: Any) -> None:
        if self.takes_config:
            _check_backend(module.config)


BART_ATTENTION = BaseAttention(takes_config=True, pre_scaled_query=False)
LED_ATTENTION = BaseAttention(takes_config=False, pre_scaled_query=True, flat_heads=True)


class PoolRole:
    """The second-to-last decoder layer's part: its attention computed once in the eager form, its
    probabilities pooled per section into the link (SDPA would not return them); no table."""

    def table(self, config: PreTrainedConfig) -> HibridsBias | None:
        return None

    def ready(self, link: _CrossAttentionLink) -> bool:
        return True

    def attend(
        self, module: Any, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
        mask: torch.Tensor | None, link: _CrossAttentionLink, scaling: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        return _attend_and_pool(
            module, query, keys, values, mask, link, scaling=scaling, dropout=module.dropout
        )


class BiasRole(PoolRole):
    """The last decoder layer's part: the HIBRIDS-DEC table (one column per head), its bias weighted by the
    pooled probabilities of the layer before (none when that layer was skipped by LayerDrop)."""

    def table(self, config: PreTrainedConfig) -> HibridsBias | None:
        return HibridsBias(num_buckets(config.hibrids_selected), _decoder_table_heads(config))

    def ready(self, link: _CrossAttentionLink) -> bool:
        return link.pooled is not None

    def attend(
        self, module: Any, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
        mask: torch.Tensor | None, link: _CrossAttentionLink, scaling: float,
    ) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
        module.base.check(module)
        bias = cross_attention_bias(link.pooled, module.hibrids_bias.weight, link.layout)
        return _biased_attention(module, query, keys, values, mask, bias, scaling=scaling)


POOL, BIAS = PoolRole(), BiasRole()


class HibridsCrossAttentionMixin:
    """The HIBRIDS part of the last two decoder layers' cross-attention, for BART's and LED's attention
    classes (``q_proj``/``k_proj``/``v_proj``/``out_proj``, ``head_dim``, ``scaling``, ``dropout``).

    Two small strategy objects say what a layer is: ``role`` (:data:`POOL`, the second-to-last layer, or
    :data:`BIAS`, the last, with the table) and ``base`` (:data:`BART_ATTENTION` or :data:`LED_ATTENTION`:
    how the base class is built and scales).
    """

    role: PoolRole = POOL
    base: BaseAttention = BART_ATTENTION

    @property
    def flat_heads(self) -> bool:
        """Whether the base multiplies (B*H, T, D) tensors with ``bmm`` (:func:`_head_scores`)."""
        return self.base.flat_heads

    def __init__(self, config: PreTrainedConfig, layer_idx: int) -> None:
        super().__init__(  # type: ignore[call-arg]
            config.d_model,
            config.decoder_attention_heads,
            dropout=config.attention_dropout,
            is_decoder=True,
            layer_idx=layer_idx,
            **self.base.init_kwargs(config),
        )
        table = self.role.table(config)
        if table is not None:
            self.hibrids_bias = table

    #: The per-call link, when the layer sets it on the module (LED) rather than passing it (BART).
    hibrids_cross: _CrossAttentionLink | None = None

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values: Any = None,
        attention_mask: torch.Tensor | None = None,
        hibrids_cross: _CrossAttentionLink | None = None,
        **kwargs: Any,
    ) -> tuple[Any, ...]:
        link = hibrids_cross if hibrids_cross is not None else self.hibrids_cross
        # pooled is None only when the previous layer was skipped (LayerDrop): no bias for that pass.
        if link is None or key_value_states is None or not self.role.ready(link):
            return super().forward(  # type: ignore[misc]
                hidden_states,
                key_value_states=key_value_states,
                past_key_values=past_key_values,
                attention_mask=attention_mask,
                **kwargs,
            )
        output, weights = self.hibrids_forward(
            hidden_states, key_value_states, past_key_values, attention_mask, link
        )
        return self.hibrids_outputs(output, weights, past_key_values, **kwargs)

    def hibrids_outputs(
        self, output: torch.Tensor, weights: torch.Tensor, past_key_values: Any, **kwargs: Any
    ):
        """What the base attention class returns: BART's (output, weights)."""
        return output, weights

    def hibrids_forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor,
        past_key_values: Any,
        attention_mask: torch.Tensor | None,
        link: _CrossAttentionLink,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention output (after ``out_proj``) and the (B, H, T, L) probabilities."""
        batch, steps, _ = hidden_states.shape
        query = self.q_proj(hidden_states)
        if self.base.pre_scaled_query:
            query = query * self.scaling
        query = query.view(batch, steps, -1, self.head_dim).transpose(1, 2)
        keys, values = _cross_keys_values(
            self, key_value_states, past_key_values, (self.k_proj, self.v_proj), self.head_dim
        )
        scaling = 1.0 if self.base.pre_scaled_query else self.scaling
        output, weights = self.role.attend(self, query, keys, values, attention_mask, link, scaling)
        return self.out_proj(output.reshape(batch, steps, -1)), weights
