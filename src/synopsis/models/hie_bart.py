"""Hie-BART (Akiyama, Tamura & Ninomiya, 2021): BART whose encoder self-attention has sentence-level heads.

In every encoder self-attention layer the first ``word_heads`` heads are ordinary token-to-token heads
and the remaining heads are *sentence-level*: their queries are the tokens, their keys and values are the
sentence vectors ``g_m`` (the mean of the layer's input hidden states over the tokens of sentence ``m``,
with averaging weights in the hidden states' dtype, so a float64 model follows the paper's equations to
float64 rounding) sent through the SAME key/value projections. The heads are concatenated in that order
and go through the layer's usual output projection, so Hie-BART has exactly BART's parameters: a stock
BART checkpoint loads unchanged, and with ``word_heads == encoder_attention_heads`` the model *is* BART.

Sentence boundaries come from the input ids: every sentence starts with ``config.sentence_start_token_id``.
As in the paper, the marker is BART's own [BOS] ``<s>`` by default (with its pretrained embedding): the
input's leading ``<s>`` starts the first sentence and one more ``<s>`` starts each following one. The
option ``sentence_start_token: <sent>`` adds a new special token instead (its embedding initialised to the
mean embedding; see :func:`synopsis.models.seq2seq.add_sentence_start_token`), which then starts every
sentence. A marker belongs to the sentence it starts. Tokens before the first marker belong to the first
sentence, and the final ``</s>`` to the last one. With no sentence heads no marker is inserted at all, so
the model reads exactly stock BART's input. Padding (``attention_mask == 0``) belongs to no sentence, and
sentences that exist only in other batch rows are masked out, so the split is correct for any batch size
and any padding side. An input with no marker at all is a single sentence; the sentence heads then attend
to the mean of the whole input (documented behaviour, tested).

The hook into ``transformers`` is minimal: :class:`HieBartAttention` replaces only the encoder layers'
``self_attn`` (same parameter names), and :class:`HieBartEncoder` computes the sentence membership once
per forward pass and hands it to every layer as keyword arguments. Because the membership is derived from
``input_ids`` inside the encoder, ``generate()`` needs nothing extra and its encoder-output caching works.

Methods stack on Hie-BART at the attention: :class:`HieBartAttention` takes an optional ``attention_bias``,
an additive per-head term on the word heads' scores, and :class:`HieBartEncoder` builds its layers'
attention from ``self_attention_class``; HIBRIDS on Hie-BART (:mod:`synopsis.models.hibrids.hie_bart`)
uses both. Config, init, registration and conversion (:func:`convert_to_hie_bart`) come from
:mod:`synopsis.models.adaptation`.
"""

from __future__ import annotations

from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from torch.nn import functional as F
from transformers import BartConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bart.modeling_bart import BartEncoder, eager_attention_forward

from synopsis.models.adaptation import AdaptedModel, DerivedConfig, stack_method
from synopsis.models.bases import (
    AdaptedBartForConditionalGeneration,
    AdaptedBartModel,
    BartEncoderAttention,
    method_classes,
)
from synopsis.models.features import TextMarkers

#: The paper's marker: every sentence starts with BART's own [BOS] ``<s>``, with its pretrained embedding.
DEFAULT_SENTENCE_START_TOKEN = "<s>"
#: The alternative kept as an option: a new ``<sent>`` token whose embedding starts as the mean embedding.
NEW_SENTENCE_START_TOKEN = "<sent>"


@strict
class HieBartConfig(DerivedConfig, BartConfig):
    """:class:`~transformers.BartConfig` plus the number of word-level heads and the sentence-start token.

    ``word_heads`` (1..encoder_attention_heads, default: all heads, i.e. stock BART) is the number of
    word-level heads in every encoder self-attention layer; the rest are sentence-level.
    ``sentence_start_token``: ``<s>`` (the paper's, default) or a new token such as ``<sent>``.
    """

    model_type = "hie_bart"

    word_heads: int | None = None
    sentence_start_token: str = DEFAULT_SENTENCE_START_TOKEN
    sentence_start_token_id: int | None = None

    def __post_init__(self, **kwargs: Any) -> None:
        super().__post_init__(**kwargs)
        heads = self.encoder_attention_heads
        if self.word_heads is None:
            self.word_heads = heads
        if not 1 <= self.word_heads <= heads:
            raise ValueError(
                f"word_heads must be in 1..{heads} (encoder_attention_heads), got {self.word_heads}"
            )

    @property
    def sentence_heads(self) -> int:
        return self.encoder_attention_heads - self.word_heads

    @classmethod
    def from_bart_config(cls, config: BartConfig, **overrides: Any) -> HieBartConfig:
        """A Hie-BART config with every setting of ``config`` (:meth:`DerivedConfig.from_base`)."""
        return cls.from_base(config, **overrides)


def sentence_membership(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    sentence_start_token_id: int,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Averaging weights ``(batch, n_sent, seq)`` in ``dtype`` and a sentence mask ``(batch, n_sent)``.

    Row ``m`` of the weights is ``1/|s_m|`` on the tokens of sentence ``m`` and 0 elsewhere, so
    ``weights @ hidden`` gives the sentence means ``g_m`` (Akiyama et al., section 3.1: the mean of the
    hidden states over the tokens of sentence m). ``dtype`` is the hidden states' (a float32 ``1/3``
    would put 1e-8 relative error into float64 means). ``n_sent`` is the batch maximum; shorter rows have
    masked (all-zero) sentences.
    """
    index = (input_ids == sentence_start_token_id).long().cumsum(-1) - 1
    index = index.clamp(min=0)  # tokens before the first marker (BOS) belong to the first sentence
    valid = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    n_sent = int(index.masked_fill(~valid, 0).max()) + 1
    sentences = torch.arange(n_sent, device=input_ids.device)
    members = (index[:, None, :] == sentences[None, :, None]) & valid[:, None, :]
    counts = members.sum(-1)
    weights = members.to(dtype) / counts.clamp(min=1)[..., None].to(dtype)
    return weights, counts > 0


class HieBartAttention(BartEncoderAttention):
    """Encoder self-attention with ``word_heads`` token heads followed by sentence-level heads.

    Same parameters as :class:`BartAttention`. Sentence heads need ``sentence_weights`` and
    ``sentence_mask`` from :func:`sentence_membership` (passed by :class:`HieBartEncoder`).
    """

    def __init__(self, config: HieBartConfig, layer_idx: int | None = None) -> None:
        super().__init__(config, layer_idx=layer_idx)
        self.word_heads = config.word_heads

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        sentence_weights: torch.Tensor | None = None,
        sentence_mask: torch.Tensor | None = None,
        attention_bias: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``attention_bias`` (B, H, L, L), optional: an additive per-head term on the word heads' token
        scores, the seam through which a method stacked on Hie-BART (HIBRIDS) biases the attention; the
        sentence heads' keys are sentences, so it has no say there."""
        batch, seq_len, _ = hidden_states.shape
        if attention_bias is not None:
            attention_mask = _add_to_mask(attention_mask, attention_bias[:, : self.word_heads])
        split = self.word_heads * self.head_dim  # the first `split` projection rows belong to word heads
        query = self.q_proj(hidden_states).view(batch, seq_len, -1, self.head_dim).transpose(1, 2)

        # Word-level heads: ordinary self-attention, through the configured attention backend (eager/sdpa).
        # Only the word heads' rows of W_K and W_V are applied to the tokens.
        word_rows = slice(None, split)
        key = _project(self.k_proj, hidden_states, word_rows)
        value = _project(self.v_proj, hidden_states, word_rows)
        key = key.view(batch, seq_len, -1, self.head_dim).transpose(1, 2)
        value = value.view(batch, seq_len, -1, self.head_dim).transpose(1, 2)
        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        dropout = self.dropout if self.training else 0.0
        word_output, word_weights = attention_interface(
            self,
            query[:, : self.word_heads],
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=self.scaling,
            **kwargs,
        )
        outputs = [word_output]  # (batch, seq, word_heads, head_dim)

        if self.word_heads < self.num_heads:
            if sentence_weights is None or sentence_mask is None:
                raise ValueError("Hie-BART sentence heads need sentence_weights and sentence_mask")
            outputs.append(
                self._sentence_attention(
                    hidden_states,
                    query[:, self.word_heads :],
                    sentence_weights,
                    sentence_mask,
                    split,
                    dropout,
                )
            )
        output = torch.cat(outputs, dim=2).reshape(batch, seq_len, -1)
        return self.out_proj(output), word_weights

    def _sentence_attention(
        self,
        hidden_states: torch.Tensor,
        query: torch.Tensor,
        sentence_weights: torch.Tensor,
        sentence_mask: torch.Tensor,
        split: int,
        dropout: float,
    ) -> torch.Tensor:
        """Token queries attend over sentence vectors; returns ``(batch, seq, sentence_heads, head_dim)``."""
        batch, n_sent = sentence_mask.shape
        sentences = sentence_weights.to(hidden_states.dtype) @ hidden_states  # g_m: (batch, n_sent, d_model)
        sentence_rows = slice(split, None)
        key = _project(self.k_proj, sentences, sentence_rows)  # the same W_K, W_V as the word heads use
        value = _project(self.v_proj, sentences, sentence_rows)
        key = key.view(batch, n_sent, -1, self.head_dim).transpose(1, 2)
        value = value.view(batch, n_sent, -1, self.head_dim).transpose(1, 2)
        scores = torch.matmul(query, key.transpose(-1, -2)) * self.scaling  # (batch, heads, seq, n_sent)
        scores = scores.masked_fill(~sentence_mask[:, None, None, :], torch.finfo(scores.dtype).min)
        probs = F.dropout(scores.softmax(dim=-1), p=dropout, training=self.training)
        return torch.matmul(probs, value).transpose(1, 2)


def _add_to_mask(attention_mask: torch.Tensor | None, bias: torch.Tensor) -> torch.Tensor:
    """An additive float mask of ``attention_mask`` (float, boolean or None) plus ``bias``."""
    if attention_mask is None:
        return bias
    if attention_mask.dtype == torch.bool:
        return bias.masked_fill(~attention_mask, torch.finfo(bias.dtype).min)
    return attention_mask + bias


def _project(linear: nn.Linear, x: torch.Tensor, rows: slice) -> torch.Tensor:
    """``linear(x)`` restricted to some output rows (the heads that need them)."""
    return F.linear(x, linear.weight[rows], None if linear.bias is None else linear.bias[rows])


class HieBartEncoder(AdaptedModel, BartEncoder):
    """BART's encoder with :class:`HieBartAttention` layers; finds the sentences once per forward pass."""

    #: The encoder self-attention; a method stacked on Hie-BART (HIBRIDS) swaps in a subclass.
    self_attention_class: type = HieBartAttention

    def __init__(self, config: HieBartConfig) -> None:
        super().__init__(config)
        for idx, layer in enumerate(self.layers):
            if not isinstance(layer.self_attn, self.self_attention_class):
                layer.self_attn = self.self_attention_class(config, layer_idx=idx)
        self.post_init()  # initialises only the new attention modules (transformers skips initialised ones)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> BaseModelOutput:
        if self.config.sentence_heads > 0:
            if input_ids is None:
                raise ValueError(
                    "Hie-BART finds sentences from input_ids; inputs_embeds alone is not supported"
                )
            if self.config.sentence_start_token_id is None:
                raise ValueError(
                    "Hie-BART config has no sentence_start_token_id; prepare the model with its tokenizer"
                )
            # the weights in the hidden states' dtype: the embeddings' (or inputs_embeds') own
            dtype = (inputs_embeds if inputs_embeds is not None else self.embed_tokens.weight).dtype
            kwargs["sentence_weights"], kwargs["sentence_mask"] = sentence_membership(
                input_ids, attention_mask, self.config.sentence_start_token_id, dtype=dtype
            )
        return super().forward(
            input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, **kwargs
        )


HieBartModel, HieBartForConditionalGeneration = method_classes(
    __name__,
    "HieBart",
    HieBartConfig,
    (AdaptedBartModel, AdaptedBartForConditionalGeneration),
    "BART with Hie-BART's sentence-level heads in the encoder self-attention.",
    encoder_class=HieBartEncoder,
)


def convert_to_hie_bart(
    model: PreTrainedModel, *, word_heads: int, sentence_start_token: str = DEFAULT_SENTENCE_START_TOKEN
) -> PreTrainedModel:
    """A BART (stock, Hie-BART or with other methods stacked: HIBRIDS gives ``hibrids_hie_bart``, its tables
    kept) with ``word_heads`` word-level heads and the rest sentence-level: the same weights, so with every
    head word-level it computes what ``model`` computes. Bad settings are a ValueError of
    :class:`HieBartConfig`; the sentence-start token's id is set with the tokenizer
    (:func:`synopsis.models.seq2seq.add_sentence_start_token`)."""
    return stack_method(model, "hie_bart", word_heads=word_heads, sentence_start_token=sentence_start_token)


class HieBartInputs(TextMarkers):
    """Hie-BART's input (Akiyama et al., 2021): the sentence-start token before every sentence, which the
    sentence-level heads read to find the sentences; none when every head is word-level (stock BART)."""

    def __init__(self, config: HieBartConfig, tokenizer: Any) -> None:
        super().__init__(config, tokenizer)
        self.sentence_marker = config.sentence_start_token if config.sentence_heads > 0 else None
