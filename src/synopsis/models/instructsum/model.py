"""The InstructSum T5: its config, the block mask, the encoder attention and stack, conversion from T5.

Nishida et al., section 3: source tokens attend only to source tokens (``H_S = Attn(Q_S, K_S, V_S)``),
instruction tokens to everything (``H_I = Attn(Q_I, [K_I; K_S], [V_I; V_S])``). The attention layers can
record the source keys and values or reuse them; :mod:`synopsis.models.instructsum.cache` drives that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from huggingface_hub.dataclasses import strict
from transformers import AutoConfig, AutoModelForSeq2SeqLM, PreTrainedModel, T5Config
from transformers.modeling_outputs import BaseModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.t5.modeling_t5 import T5Attention, T5Stack, eager_attention_forward

from synopsis.models.adaptation import AdaptedModel, DerivedConfig, stack_method
from synopsis.models.bases import AdaptedT5ForConditionalGeneration
from synopsis.models.instructsum.prompts import INSTRUCTION_SEGMENT, SOURCE_SEGMENT

_SUPPORTED_ATTENTION = ("eager", "sdpa")
#: Arguments of T5's forward that are the decoder's (or the loss's): the encoder never sees them.
_DECODER_ARGUMENTS = frozenset(
    {
        "decoder_input_ids",
        "decoder_attention_mask",
        "past_key_values",
        "decoder_inputs_embeds",
        "labels",
        "use_cache",
    }
)


# --------------------------------------------------------------------------------------------- config
@strict
class InstructSumT5Config(DerivedConfig, T5Config):
    """:class:`~transformers.T5Config` of a T5 whose encoder reads ``segment_ids`` with the block mask.

    It has no settings of its own: the model type alone marks a checkpoint as trained (or to be trained)
    with the InstructSum block mask, and ``from_pretrained`` of a saved checkpoint rebuilds the model.
    ``from_base`` (:class:`~synopsis.models.adaptation.DerivedConfig`) makes one from a T5 config.
    """

    model_type = "instructsum_t5"


# --------------------------------------------------------------------------------------------- masks
def block_attention_mask(
    segment_ids: torch.Tensor, attention_mask: torch.Tensor | None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The InstructSum encoder mask, ``(batch, 1, L, L)`` float: 0 where allowed, ``finfo.min`` elsewhere.

    Query ``q`` sees key ``k`` iff ``k`` is real (``attention_mask``) and (``q`` is an instruction token or
    ``k`` is a source token). With all ``segment_ids`` 0 it is T5's ordinary padding mask.
    """
    if segment_ids.dim() != 2:
        raise ValueError(f"segment_ids must be (batch, length), got shape {tuple(segment_ids.shape)}")
    if ((segment_ids != SOURCE_SEGMENT) & (segment_ids != INSTRUCTION_SEGMENT)).any():
        raise ValueError("segment_ids must be 1 (instruction) or 0 (source, padding)")
    real = torch.ones_like(segment_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    if real.shape != segment_ids.shape:
        raise ValueError(
            f"segment_ids {tuple(segment_ids.shape)} and attention_mask {tuple(real.shape)} differ in shape"
        )
    query_is_instruction = (segment_ids == INSTRUCTION_SEGMENT)[:, :, None]
    key_is_source = (segment_ids == SOURCE_SEGMENT)[:, None, :]
    allowed = real[:, None, :] & (query_is_instruction | key_is_source)
    mask = torch.zeros(allowed.shape, dtype=dtype, device=segment_ids.device)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]


def _padding_mask(keys_real: torch.Tensor, queries: int, dtype: torch.dtype) -> torch.Tensor:
    """``(batch, 1, queries, keys)`` float mask that hides the keys where ``keys_real`` is False."""
    mask = torch.zeros(
        (keys_real.shape[0], 1, queries, keys_real.shape[1]), dtype=dtype, device=keys_real.device
    )
    return mask.masked_fill(~keys_real[:, None, None, :], torch.finfo(dtype).min)


# --------------------------------------------------------------------------------------------- attention
@dataclass
class _CachePass:
    """Per-forward state handed to every encoder self-attention layer (as the ``instructsum_cache`` kwarg).

    ``record``: each layer stores its keys and values (the source pass). ``extend``: each layer appends the
    stored source keys/values to its own (the instruction pass); layer 0 computes the relative position
    bias from ``query_positions`` (N, L_I) and ``key_positions`` (N, L_I + L_S). A model that also reads
    HIBRIDS' section inputs (:mod:`synopsis.models.hibrids.instructsum`) gets the section of every query
    and key (``query_sections``, ``key_sections``, root = 0) and the (N, S, S) bucket ids ``relations``.
    """

    mode: Literal["record", "extend"]
    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)
    query_positions: torch.Tensor | None = None
    key_positions: torch.Tensor | None = None
    query_sections: torch.Tensor | None = None
    key_sections: torch.Tensor | None = None
    relations: torch.Tensor | None = None


class InstructSumT5Attention(T5Attention):
    """T5 encoder self-attention that can record (source pass) or reuse (instruction pass) K_S and V_S.

    Same parameters as :class:`T5Attention`; without an ``instructsum_cache`` argument it *is* T5Attention.
    """

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | None = None,
        *args: Any,
        instructsum_cache: _CachePass | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if instructsum_cache is None:
            return super().forward(hidden_states, mask, *args, **kwargs)
        # T5Attention's order after the mask (a subclass may pass them on by position)
        kwargs.update(zip(("key_value_states", "position_bias", "past_key_values"), args, strict=False))
        cross, past = kwargs.pop("key_value_states", None), kwargs.pop("past_key_values", None)
        if cross is not None or past is not None:
            raise ValueError("the InstructSum cache is for encoder self-attention only")
        position_bias = kwargs.pop("position_bias", None)
        batch, length, _ = hidden_states.shape
        shape = (batch, length, -1, self.key_value_proj_dim)
        query = self.q(hidden_states).view(shape).transpose(1, 2)
        key = self.k(hidden_states).view(shape).transpose(1, 2)
        value = self.v(hidden_states).view(shape).transpose(1, 2)
        if instructsum_cache.mode == "record":
            instructsum_cache.keys.append(key)
            instructsum_cache.values.append(value)
        else:  # extend: [K_I; K_S], [V_I; V_S]
            key = torch.cat([key, instructsum_cache.keys[self.layer_idx]], dim=2)
            value = torch.cat([value, instructsum_cache.values[self.layer_idx]], dim=2)
        if position_bias is None:
            position_bias = self._cache_position_bias(instructsum_cache, length, key.shape[2], query)
        extra = self.cache_pass_bias(instructsum_cache)
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        output, weights = attention(
            self,
            query,
            key,
            value,
            mask,
            dropout=self.dropout if self.training else 0.0,
            scaling=self.scaling,
            position_bias=position_bias if extra is None else position_bias + extra,
            **kwargs,
        )
        output = self.o(output.reshape(batch, length, -1).contiguous())
        return output, position_bias, weights  # later layers reuse the position bias, not this layer's term

    def cache_pass_bias(self, state: _CachePass) -> torch.Tensor | None:
        """An additive per-head term for this layer's scores in a cache pass (a method stacked on
        InstructSum overrides it; see :mod:`synopsis.models.hibrids.instructsum`)."""
        return None

    def _cache_position_bias(
        self, state: _CachePass, query_length: int, key_length: int, query: torch.Tensor
    ) -> torch.Tensor:
        if not self.has_relative_attention_bias:
            return torch.zeros(
                (1, self.n_heads, query_length, key_length), device=query.device, dtype=query.dtype
            )
        if state.key_positions is None:  # source pass: positions 0..L_S-1 (shift-invariant)
            return self.compute_bias(query_length, key_length, device=query.device)
        relative = state.key_positions[:, None, :] - state.query_positions[:, :, None]  # (N, L_I, L_I + L_S)
        buckets = self._relative_position_bucket(
            relative,
            bidirectional=True,
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
        )
        return self.relative_attention_bias(buckets).permute(0, 3, 1, 2)  # (N, heads, L_I, L_I + L_S)


# --------------------------------------------------------------------------------------------- encoder
class InstructSumT5Stack(AdaptedModel, T5Stack):
    """T5's encoder stack with the InstructSum block mask and the source-cache hooks.

    ``attention_class`` is the self-attention every block gets; ``reads_sections`` says whether the cache
    passes may hand the stack a source's section inputs (HIBRIDS on InstructSum).

    ``forward(segment_ids=...)`` builds the 4D float block mask from ``segment_ids`` and the 2D
    ``attention_mask``; without ``segment_ids`` it is T5's encoder. Counters: ``full_passes`` (ordinary
    forward calls), ``source_passes`` (:func:`encode_source`), ``instruction_passes``
    (:func:`encode_with_instruction`), for tests and monitoring.
    """

    attention_class: type[InstructSumT5Attention] = InstructSumT5Attention
    reads_sections = False

    def __init__(self, config: T5Config) -> None:
        if config.is_decoder:
            raise ValueError("InstructSumT5Stack is an encoder (config.is_decoder must be False)")
        super().__init__(config)
        for index, block in enumerate(self.block):
            block.layer[0].SelfAttention = self.attention_class(
                config, has_relative_attention_bias=index == 0, layer_idx=index
            )
        self.post_init()
        self.reset_counters()

    def reset_counters(self) -> None:
        self.full_passes = 0
        self.source_passes = 0
        self.instruction_passes = 0

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        *,
        segment_ids: torch.LongTensor | None = None,
        instructsum_cache: _CachePass | None = None,
        **kwargs: Any,
    ) -> BaseModelOutput:
        """T5's encoder (other arguments by keyword): ``segment_ids`` make the 2D ``attention_mask`` the block
        mask; ``instructsum_cache`` runs a source or an instruction pass of the cache instead."""
        if instructsum_cache is not None:
            # The cached passes need the same backends; flex_attention crashed there (munmap_chunk).
            self._check_attention()
            if segment_ids is not None:
                raise ValueError(
                    "segment_ids are for the uncached pass; the cache passes know their segments"
                )
            kwargs["instructsum_cache"] = instructsum_cache
            if instructsum_cache.mode == "record":
                self.source_passes += 1
            else:
                self.instruction_passes += 1
        else:
            self.full_passes += 1
            if segment_ids is not None:
                self._check_attention()
                embeds = kwargs.get("inputs_embeds")
                dtype = self.embed_tokens.weight.dtype if embeds is None else embeds.dtype
                if attention_mask is not None and attention_mask.dim() != 2:
                    raise ValueError("with segment_ids, attention_mask must be the 2D (batch, length) mask")
                attention_mask = block_attention_mask(segment_ids, attention_mask, dtype)
        return super().forward(input_ids, attention_mask, **kwargs)

    def _check_attention(self) -> None:
        if self.config._attn_implementation not in _SUPPORTED_ATTENTION:
            raise ValueError(
                f"InstructSum's block mask and source cache support attn_implementation "
                f"{' or '.join(_SUPPORTED_ATTENTION)}, not {self.config._attn_implementation!r}"
            )


class InstructSumT5ForConditionalGeneration(AdaptedT5ForConditionalGeneration):
    """T5 with the InstructSum encoder; exactly T5's parameters (a T5 checkpoint loads unchanged)."""

    config_class = InstructSumT5Config
    #: The encoder and decoder stacks (a method stacked on InstructSum swaps them).
    encoder_class: type[InstructSumT5Stack] = InstructSumT5Stack
    decoder_class: type[T5Stack] = T5Stack

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        *,
        encoder_outputs: Any = None,
        segment_ids: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        """T5's forward (keyword arguments after ``attention_mask``); ``segment_ids`` (B, L) go to the
        encoder only (unused given ``encoder_outputs``)."""
        if encoder_outputs is None:
            encoder_kwargs = {k: v for k, v in kwargs.items() if k not in _DECODER_ARGUMENTS}
            encoder_outputs = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, segment_ids=segment_ids, **encoder_kwargs
            )
        kwargs.pop("inputs_embeds", None)  # read by the encoder
        return super().forward(attention_mask=attention_mask, encoder_outputs=encoder_outputs, **kwargs)


def convert_to_instructsum(model: PreTrainedModel) -> InstructSumT5ForConditionalGeneration:
    """The same weights in an InstructSum model (no new parameters); returns ``model`` if it already is one.
    A HIBRIDS T5 becomes HIBRIDS on InstructSum (``instructsum_hibrids_t5``), its tables kept.

    The new model is on ``model``'s device and dtype, in its train/eval mode; ``synopsis convert`` (through
    ``synopsis.models.seq2seq.convert_seq2seq``) gives it the source's generation settings.
    """
    if isinstance(model, InstructSumT5ForConditionalGeneration):
        return model
    return stack_method(model, "instructsum")


def is_instructsum(model: Any) -> bool:
    return isinstance(model, InstructSumT5ForConditionalGeneration)


# --------------------------------------------------------------------------------------------- FLOPs
def encoder_flops(
    config: T5Config, query_tokens: int, key_tokens: int | None = None, attention: bool = True
) -> int:
    """Analytic forward FLOPs of T5's encoder (2 FLOPs per multiply-add) for ``query_tokens`` new tokens.

    Per layer and new token: Q, K, V and O projections ``8 d_model d_inner`` (``d_inner = heads x d_kv``),
    feed-forward ``4 d_model d_ff`` (``6 d_model d_ff`` when gated); attention scores and the weighted sum
    ``4 key_tokens d_inner`` (``key_tokens`` defaults to ``query_tokens``). ``attention=False`` counts the
    linear layers only (how the paper's figures count: FLAN-T5-Base, 1024 tokens -> 174 GFLOPs). Norms,
    softmax, biases and embeddings are ignored (< 1%).
    """
    key_tokens = query_tokens if key_tokens is None else key_tokens
    inner = config.num_heads * config.d_kv
    feed_forward = (6 if config.is_gated_act else 4) * config.d_model * config.d_ff
    per_token = 8 * config.d_model * inner + feed_forward
    if attention:
        per_token += 4 * key_tokens * inner
    return config.num_layers * query_tokens * per_token


AutoConfig.register(InstructSumT5Config.model_type, InstructSumT5Config, exist_ok=True)
AutoModelForSeq2SeqLM.register(InstructSumT5Config, InstructSumT5ForConditionalGeneration, exist_ok=True)
