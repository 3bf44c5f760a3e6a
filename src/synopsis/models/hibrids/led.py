"""HIBRIDS on LED (Cao & Wang, ACL 2022, section 3), registered as ``hibrids_led``.

LED's banded encoder gets the bias only on its (B, L, H, 2w+1) window and on the global columns/rows (the
paper's equation; ``hibrids_global_bias: false`` leaves the global ones out, as the public code). LED's
modules pass no extra arguments, so LED gets its section inputs through a per-model slot that the model
sets for the duration of one call; each layer copies the slot's value into its own keyword arguments
*before* gradient checkpointing wraps it, so recomputation in the backward pass sees the same inputs.
Every such per-call value (the slots, each attention's section state and band bias) is held per thread
(:class:`_PerThread`), so one model object may run several batches at once, one per thread, as the
service's batch workers do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from torch.nn import functional as F
from transformers import LEDConfig
from transformers.models.led.modeling_led import (
    LEDDecoder,
    LEDDecoderAttention,
    LEDDecoderLayer,
    LEDEncoder,
    LEDEncoderLayer,
    LEDEncoderSelfAttention,
    LEDForConditionalGeneration,
    LEDModel,
    LEDPreTrainedModel,
)

from synopsis.models.adaptation import AdaptedModel, forward_signature, register
from synopsis.models.hibrids.bias import (
    BIAS,
    LED_ATTENTION,
    HibridsBias,
    HibridsConfigMixin,
    HibridsCrossAttentionMixin,
    HibridsStackMixin,
    _CrossAttentionLink,
    fused_pair_bias_fits,
    pair_bias,
    section_terms,
    window_bias,
    window_index,
)
from synopsis.models.hibrids.relations import SectionLayout, num_buckets


@strict
class HibridsLEDConfig(HibridsConfigMixin, LEDConfig):
    """:class:`~transformers.LEDConfig` + which HIBRIDS biases the model has (see the module docstring).

    ``hibrids_global_bias``: the encoder bias also on the global tokens' rows (global queries on every key)
    and columns (every query on a global key), as the paper's equation puts it on every attention score
    (the default, and what checkpoints saved before the option computed); False: on the sliding band only,
    as the authors' public code (``hierarchical_bias/modeling_led.py``) adds it.
    """

    model_type = "hibrids_led"
    hibrids_global_bias: bool = True


_CALLS = threading.local()


class _PerThread:
    """An attribute whose value each thread has on its own (``None`` until it sets one): the per-call state
    LED's modules keep between the steps of one call, which concurrent calls on other threads must not see.
    Held in one thread-local table keyed by the object, so the modules stay copyable and picklable."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def _table(self) -> dict[tuple[int, str], Any]:
        table = getattr(_CALLS, "table", None)
        if table is None:
            table = _CALLS.table = {}
        return table

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return self._table().get((id(obj), self.name))

    def __set__(self, obj: Any, value: Any) -> None:
        table = self._table()
        if value is None:
            table.pop((id(obj), self.name), None)
        else:
            table[(id(obj), self.name)] = value


class _Slot:
    """A value that the modules of one model see during a call (LED's modules pass no extra arguments)."""

    value = _PerThread()

    @contextmanager
    def holding(self, value: Any) -> Iterator[None]:
        previous, self.value = self.value, value
        try:
            yield
        finally:
            self.value = previous


@dataclass
class _LEDEncoderState:
    """Sections of one LED encoder call, padded to the window multiple, with the band index per window."""

    layout: SectionLayout
    _windows: dict[int, torch.Tensor] = field(default_factory=dict)

    def window_index(self, one_sided: int) -> torch.Tensor:
        if one_sided not in self._windows:
            self._windows[one_sided] = window_index(self.layout.ids, self.layout.num_sections, one_sided)
        return self._windows[one_sided]


class HibridsLEDEncoderSelfAttention(LEDEncoderSelfAttention):
    """Longformer self-attention with a per-head HIBRIDS table on the band and on global tokens (only on the
    band with ``hibrids_global_bias`` False, as the public code).

    The stock forward is kept; the bias enters through the three places where it builds scores:
    ``_sliding_chunks_query_key_matmul`` (its first call in a forward pass computes the band's
    query-key scores; the second only builds the padding mask), ``_concat_with_global_key_attn_probs``
    (local queries on global keys) and ``_compute_global_attn_output_from_hidden`` (global queries on
    every key, overridden since the stock method has no hook). ``hibrids_state`` is set by
    :class:`HibridsLEDEncoderLayer` for one call; it and the band's bias are held per thread.
    """

    hibrids_state = _PerThread()
    _band_bias = _PerThread()
    _band_terms = _PerThread()

    def __init__(self, config: HibridsLEDConfig, layer_id: int) -> None:
        super().__init__(config, layer_id)
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), self.num_heads)
        self.hibrids_global_bias = bool(config.hibrids_global_bias)
        # Per call (and thread): the section state; the gathered band bias (many sections) or its factors
        # (few sections).

    def forward(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        """Longformer's forward; with a section state, the band's bias for its query-key scores."""
        state = self.hibrids_state
        if state is not None:
            layout = state.layout
            if fused_pair_bias_fits(layout, self.head_dim):
                rows, one_hot = section_terms(self.hibrids_bias.weight, layout, hidden_states.dtype)
                self._band_terms = rows.transpose(1, 2), one_hot[:, :, None]  # (B, L, H, W), (B, L, 1, W)
            else:
                one_sided = self.one_sided_attn_window_size
                band = window_bias(
                    self.hibrids_bias.weight,
                    layout.relations,
                    state.window_index(one_sided),
                    hidden_states.shape[1],
                )
                self._band_bias = band.transpose(1, 2)  # (B, L, H, 2w+1), the layout of the band scores
        try:
            return super().forward(hidden_states, *args, **kwargs)
        finally:
            self._band_bias = self._band_terms = None

    def _sliding_chunks_query_key_matmul(
        self, query: torch.Tensor, key: torch.Tensor, window_overlap: int
    ) -> torch.Tensor:
        """The band's scores. Only the first call in a pass gets the bias (the query-key scores; the second
        builds the padding mask). With few sections the bias is folded into the band's own product
        (:func:`~synopsis.models.hibrids.bias.section_terms`: query rows of section values against key
        one-hots, appended to the scaled query and the key), so no (B, L, H, 2w+1) bias is gathered, and its
        gradient is the product's, not a scatter into the table from every band position."""
        if self._band_terms is not None:
            (rows, one_hot), self._band_terms = self._band_terms, None
            query = torch.cat([query, rows.to(query.dtype)], dim=-1)
            key = torch.cat([key, one_hot.to(key.dtype).expand(-1, -1, key.shape[2], -1)], dim=-1)
        scores = super()._sliding_chunks_query_key_matmul(query, key, window_overlap)
        if self._band_bias is not None:
            bias, self._band_bias = self._band_bias, None
            scores = scores + bias
        return scores

    def _global_section_ids(
        self,
        max_num_global: int,
        is_index_global_attn_nonzero: tuple,
        is_local_index_global_attn_nonzero: tuple,
    ) -> torch.Tensor:
        """(B, G) sections of each row's global tokens; unused global slots get no section."""
        layout = self.hibrids_state.layout
        ids = layout.ids.new_full((layout.ids.shape[0], int(max_num_global)), layout.num_sections)
        ids[is_local_index_global_attn_nonzero] = layout.ids[is_index_global_attn_nonzero]
        return ids

    def _concat_with_global_key_attn_probs(self, **kwargs: Any) -> torch.Tensor:
        """Stock local-query x global-key scores (B, L, H, G) plus the bias (LED passes them by keyword)."""
        scores = super()._concat_with_global_key_attn_probs(**kwargs)
        if self.hibrids_state is None or not self.hibrids_global_bias:
            return scores
        layout = self.hibrids_state.layout
        global_ids = self._global_section_ids(
            kwargs["max_num_global_attn_indices"],
            kwargs["is_index_global_attn_nonzero"],
            kwargs["is_local_index_global_attn_nonzero"],
        )
        bias = pair_bias(self.hibrids_bias.weight, layout.relations, layout.ids, global_ids)  # (B, H, L, G)
        return scores + bias.transpose(1, 2)

    def _compute_global_attn_output_from_hidden(self, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The stock global-query attention, or with a section state (and the bias on global tokens)
        :meth:`_biased_global_attention`."""
        if self.hibrids_state is None or not self.hibrids_global_bias:
            return super()._compute_global_attn_output_from_hidden(**kwargs)
        return self._biased_global_attention(**kwargs)

    def _biased_global_attention(
        self,
        hidden_states: torch.Tensor,
        max_num_global_attn_indices: int,
        is_local_index_global_attn_nonzero: tuple,
        is_index_global_attn_nonzero: tuple,
        is_local_index_no_global_attn_nonzero: tuple,
        is_index_masked: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Global queries on every key with the bias added: the stock computation (same operations in the
        same order), which has no hook for it."""
        seq_len, batch_size = hidden_states.shape[:2]
        num_global = int(max_num_global_attn_indices)
        heads, dim = self.num_heads, self.head_dim
        global_hidden = hidden_states.new_zeros(num_global, batch_size, self.embed_dim)
        global_hidden[is_local_index_global_attn_nonzero[::-1]] = hidden_states[
            is_index_global_attn_nonzero[::-1]
        ]
        global_query = self.query_global(global_hidden) / dim**0.5
        global_key = self.key_global(hidden_states)
        global_value = self.value_global(hidden_states)
        global_query = global_query.contiguous().view(num_global, batch_size * heads, dim).transpose(0, 1)
        global_key = global_key.contiguous().view(-1, batch_size * heads, dim).transpose(0, 1)
        global_value = global_value.contiguous().view(-1, batch_size * heads, dim).transpose(0, 1)
        scores = torch.bmm(global_query, global_key.transpose(1, 2)).view(
            batch_size, heads, num_global, seq_len
        )

        layout = self.hibrids_state.layout
        global_ids = self._global_section_ids(
            num_global, is_index_global_attn_nonzero, is_local_index_global_attn_nonzero
        )
        scores = scores + pair_bias(self.hibrids_bias.weight, layout.relations, global_ids, layout.ids)

        scores = scores.transpose(1, 2)
        scores[is_local_index_no_global_attn_nonzero[0], is_local_index_no_global_attn_nonzero[1], :, :] = (
            torch.finfo(scores.dtype).min
        )
        scores = scores.transpose(1, 2)
        scores = scores.masked_fill(is_index_masked[:, None, None, :], torch.finfo(scores.dtype).min)
        scores = scores.view(batch_size * heads, num_global, seq_len)
        probs_float = F.softmax(scores, dim=-1, dtype=torch.float32)
        probs = F.dropout(probs_float.type_as(scores), p=self.dropout, training=self.training)
        output = torch.bmm(probs, global_value)
        return (
            output.view(batch_size, heads, num_global, dim),
            probs.view(batch_size, heads, num_global, seq_len),
        )


class HibridsLEDEncoderLayer(LEDEncoderLayer):
    """LED encoder layer that hands the encoder's section state to its self-attention.

    The state is read in ``__call__``, before transformers' gradient checkpointing wraps ``forward``, so a
    recomputation in the backward pass replays the same state.
    """

    def __init__(self, config: HibridsLEDConfig, layer_id: int, slot: _Slot) -> None:
        super().__init__(config, layer_id)
        self.self_attn.longformer_self_attn = HibridsLEDEncoderSelfAttention(config, layer_id)
        self._hibrids_slot = slot

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("hibrids_state", self._hibrids_slot.value)
        return super().__call__(*args, **kwargs)

    def forward(self, *args: Any, hibrids_state: _LEDEncoderState | None = None, **kwargs: Any) -> Any:
        attention = self.self_attn.longformer_self_attn
        attention.hibrids_state = hibrids_state
        try:
            return super().forward(*args, **kwargs)
        finally:
            attention.hibrids_state = None


class _LEDCrossAttention(HibridsCrossAttentionMixin, LEDDecoderAttention):
    """LED's decoder cross-attention for the last two layers; the per-call link is set by the layer."""

    base = LED_ATTENTION  # LEDDecoderAttention takes no config and scales the query before the product
    hibrids_cross = _PerThread()  # set by the layer for one call, per thread

    def hibrids_outputs(
        self, output: torch.Tensor, weights: torch.Tensor, past_key_values: Any, **kwargs: Any
    ):
        """LED's attention returns (output, weights when asked, cache)."""
        return output, (weights if kwargs.get("output_attentions") else None), past_key_values


class HibridsLEDAlignmentAttention(_LEDCrossAttention):
    """LED's second-to-last cross-attention, computed once, its probabilities pooled (see BART's)."""


class HibridsLEDCrossAttention(_LEDCrossAttention):
    """LED's last cross-attention with the HIBRIDS-DEC table.

    The stock module accepts only a (B, 1, T, L) mask, but the bias differs per head, so with a bias
    this runs the stock cross-attention computation itself (same operations, same cache use).
    """

    role = BIAS


class HibridsLEDDecoderLayer(LEDDecoderLayer):
    """LED decoder layer that hands the decoder's per-call link to its cross-attention (see the encoder)."""

    def __init__(self, config: HibridsLEDConfig, layer_idx: int, slot: _Slot, attention: type) -> None:
        super().__init__(config, layer_idx=layer_idx)
        self.encoder_attn = attention(config, layer_idx)
        self._hibrids_slot = slot

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("hibrids_cross", self._hibrids_slot.value)
        return super().__call__(*args, **kwargs)

    def forward(self, *args: Any, hibrids_cross: _CrossAttentionLink | None = None, **kwargs: Any) -> Any:
        self.encoder_attn.hibrids_cross = hibrids_cross
        try:
            return super().forward(*args, **kwargs)
        finally:
            self.encoder_attn.hibrids_cross = None


class _LEDStackMixin(HibridsStackMixin):
    """A HIBRIDS stack of LED: its layers read the per-call value from a slot (LED's layers pass no extra
    arguments), and without explicit section inputs it takes the ones the model set for this call."""

    def _slots(self, inputs: _Slot | None) -> None:
        self._hibrids_inputs = inputs  # set by HibridsLEDModel for the duration of a call
        self._hibrids_layers = _Slot()

    def hibrids_value(
        self, section_ids: torch.Tensor | None, section_relations: torch.Tensor | None, kwargs: dict[str, Any]
    ) -> Any:
        inputs = self._hibrids_inputs
        if (
            section_ids is None
            and section_relations is None
            and inputs is not None
            and inputs.value is not None
        ):
            section_ids, section_relations = inputs.value
        return super().hibrids_value(section_ids, section_relations, kwargs)

    def hibrids_passing(self, value: Any, kwargs: dict[str, Any]) -> AbstractContextManager[None]:
        return self._hibrids_layers.holding(value)


class HibridsLEDEncoder(_LEDStackMixin, AdaptedModel, LEDEncoder):
    """LED's encoder with HIBRIDS self-attention; pads section ids to the window multiple like the input."""

    def __init__(self, config: HibridsLEDConfig, inputs: _Slot | None = None) -> None:
        super().__init__(config)
        self._slots(inputs)
        if config.hibrids_encoder:
            self.layers = nn.ModuleList(
                [
                    HibridsLEDEncoderLayer(config, i, self._hibrids_layers)
                    for i in range(config.encoder_layers)
                ]
            )
            self.post_init()

    def hibrids_value(
        self, section_ids: torch.Tensor | None, section_relations: torch.Tensor | None, kwargs: dict[str, Any]
    ) -> _LEDEncoderState | None:
        layout = super().hibrids_value(section_ids, section_relations, kwargs)
        if layout is None:
            return None
        window = max(self.config.attention_window)  # LEDEncoder pads the input to this multiple
        padding = (window - layout.ids.shape[1] % window) % window
        ids = F.pad(layout.ids, (0, padding), value=layout.num_sections)
        return _LEDEncoderState(SectionLayout(ids=ids, relations=layout.relations))


class HibridsLEDDecoder(_LEDStackMixin, AdaptedModel, LEDDecoder):
    """LED's decoder whose last layer's cross-attention gets the HIBRIDS-DEC bias."""

    hibrids_decoder_stack = True

    def __init__(self, config: HibridsLEDConfig, inputs: _Slot | None = None) -> None:
        super().__init__(config)
        self._slots(inputs)
        if config.hibrids_decoder:
            last = config.decoder_layers - 1
            slot = self._hibrids_layers
            self.layers[last - 1] = HibridsLEDDecoderLayer(
                config, last - 1, slot, HibridsLEDAlignmentAttention
            )
            self.layers[last] = HibridsLEDDecoderLayer(config, last, slot, HibridsLEDCrossAttention)
            self.post_init()


class _SectionInputs:
    """Mixin for LED's model classes: ``forward`` puts ``section_ids`` and ``section_relations`` in the slot
    that the encoder and decoder read during this call (LEDModel passes no extra arguments down)."""

    def hibrids_inputs(self, section_ids: torch.Tensor | None, section_relations: torch.Tensor | None) -> Any:
        """Context in which the encoder and decoder see these section inputs (no-op when both are None)."""
        if section_ids is None and section_relations is None:
            return nullcontext()
        return self.get_encoder()._hibrids_inputs.holding((section_ids, section_relations))

    def forward(
        self,
        *args: Any,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        with self.hibrids_inputs(section_ids, section_relations):
            return super().forward(*args, **kwargs)  # type: ignore[misc]


class HibridsLEDModel(_SectionInputs, AdaptedModel, LEDModel):
    """LED with HIBRIDS encoder/decoder; the section inputs go through the slot (:class:`_SectionInputs`)."""

    config_class = HibridsLEDConfig

    def __init__(self, config: HibridsLEDConfig) -> None:
        LEDPreTrainedModel.__init__(self, config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        inputs = _Slot()
        self.encoder = HibridsLEDEncoder(config, inputs)
        self.decoder = HibridsLEDDecoder(config, inputs)
        self.post_init()


class HibridsLEDForConditionalGeneration(_SectionInputs, AdaptedModel, LEDForConditionalGeneration):
    """LED with HIBRIDS biases; pass ``section_ids`` and ``section_relations`` to forward/generate."""

    config_class = HibridsLEDConfig

    def __init__(self, config: HibridsLEDConfig) -> None:
        LEDPreTrainedModel.__init__(self, config)
        self.led = HibridsLEDModel(config)
        self.final_logits_bias = nn.Buffer(torch.zeros((1, self.led.shared.num_embeddings)))
        self.lm_head = nn.Linear(config.d_model, self.led.shared.num_embeddings, bias=False)
        self.post_init()

    @forward_signature(LEDForConditionalGeneration.forward, "section_ids", "section_relations")
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`_SectionInputs.forward`, advertising LED's parameters (generate() checks its inputs
        against them)."""
        return super().forward(*args, **kwargs)


register(HibridsLEDConfig, HibridsLEDModel, HibridsLEDForConditionalGeneration)
