"""InstructSum: instruction-controlled summarization on T5 with a reusable source representation.

Method of Nishida et al., "InstructSum: 自然言語の指示による要約の生成制御" (NTT). Section 3 ("モデル") of
the paper defines the input format and the *source-representation cache* (内部表現保持モデル); Appendix B.1
gives the input without an instruction.

Prompts (paper, section 3 and Appendix B.1)
    with an instruction:  ``Instructions: {I} According to the above instructions, summarize the following
    article. Title: {Ti} Article: {S}``; without one: ``Summarize the following article. Title: {Ti}
    Article: {S}``. :func:`prompt_parts` splits the prompt into the *instruction part* (everything up to
    and including "... summarize the following article.") and the *source part* ("Title: ... Article:
    ..."). Without an instruction the whole prompt, fixed lead-in included, is the source part: the model
    then reads it with ordinary full attention, exactly like T5, and its encoding can be cached like any
    source. A missing or empty title drops the "Title: {Ti}" field.

Segments and the block mask (paper, section 3)
    Model inputs are the prompt's tokens in prompt order, ``[instruction part; source part + EOS; padding]``,
    with ``segment_ids`` 1 on instruction tokens and 0 on source tokens and padding. In every encoder
    self-attention layer a query ``q`` may attend to a key ``k`` iff ``k`` is a real token and (``q`` is
    an instruction token or ``k`` is a source token): source tokens attend only to source tokens,
    ``H_S = Attn(Q_S, K_S, V_S)``, and instruction tokens attend to everything,
    ``H_I = Attn(Q_I, [K_I; K_S], [V_I; V_S])``. Training uses the same mask, so the cached and the uncached
    encodings are the same function.

Relative positions
    Positions are token indices in the uncached row ``[I; S]``: instruction tokens ``0..L_I-1``, source
    tokens ``L_I..L_I+L_S-1``. T5's relative position bias depends only on ``key - query``, so the source
    rows (source keys only) are shift-invariant and equal a source-only pass at positions ``0..L_S-1``; the
    instruction rows are computed at instruction time, when ``L_I`` is known, with the same offsets as the
    uncached row. Both modes therefore see identical biases; no re-layout (such as source first) is needed.

The cache (paper, section 3)
    :func:`encode_source` runs the source part alone and keeps every layer's ``K_S``, ``V_S`` and the final
    ``H_S`` (a :class:`CachedSource`). :func:`encode_with_instruction` runs only the instruction tokens
    against those keys and values and returns ``[H_I; H_S]`` laid out exactly like the uncached pass plus
    its 2D attention mask, ready for ``model.generate(encoder_outputs=..., attention_mask=...)``. A second
    instruction on the same source skips the O(L_S^2) self-attention and the per-token work on the source.
    :class:`SourceCache` is a byte-bounded LRU of source encodings keyed by the source token ids.

Hooks into ``transformers`` (no forked modeling code): :class:`InstructSumT5Config` subclasses
``T5Config``; :class:`InstructSumT5Stack` is T5's encoder stack that builds the 4D float block mask from
``segment_ids`` and ``attention_mask``; :class:`InstructSumT5Attention` replaces only the encoder
self-attention modules (same parameters) so that a layer can record or reuse the source keys and values.
The public ``attention_mask`` stays 2D (T5 reuses it for cross-attention). ``segment_ids`` survive
``generate()``: the encoder consumes them and the decoder never sees them.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    PreTrainedTokenizerBase,
    T5Config,
    T5ForConditionalGeneration,
)
from transformers.modeling_outputs import BaseModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.t5.modeling_t5 import (
    T5Attention,
    T5PreTrainedModel,
    T5Stack,
    eager_attention_forward,
)

logger = logging.getLogger(__name__)

INSTRUCTION_SEGMENT = 1
SOURCE_SEGMENT = 0

#: The paper's prompt (section 3), split into its instruction part and its source part.
INSTRUCTION_TEMPLATE = (
    "Instructions: {instruction} According to the above instructions, summarize the following article."
)
SOURCE_TEMPLATE = "Title: {title} Article: {article}"
#: Without an instruction (paper, Appendix B.1); all of it is the source part.
NO_INSTRUCTION_TEMPLATE = "Summarize the following article. Title: {title} Article: {article}"

#: Token budgets. The paper reads the first 1024 tokens of the whole prompt. ``max_source_tokens`` is that
#: whole budget; with an instruction the instruction part gets ``max_instruction_tokens`` of it and the source
#: part the rest, fixed, so that one source encoding serves every instruction (a source cut according to
#: each instruction's length would differ from one instruction to the next). Within a part only the
#: instruction's or the article's own words are cut, never the template.
DEFAULT_MAX_SOURCE_TOKENS = 1024
DEFAULT_MAX_INSTRUCTION_TOKENS = 128

_SUPPORTED_ATTENTION = ("eager", "sdpa")


# --------------------------------------------------------------------------------------------- prompts
def instruction_prompt(instruction: str) -> str:
    """The instruction part: ``Instructions: {I} According to the above instructions, summarize ...``."""
    instruction = " ".join(instruction.split())
    if not instruction:
        raise ValueError("empty instruction; use source_prompt(..., with_instruction=False) instead")
    return INSTRUCTION_TEMPLATE.format(instruction=instruction)


def source_prompt(title: str | None, article: str, with_instruction: bool) -> str:
    """The source part: ``Title: {Ti} Article: {S}``, after ``Summarize the following article.`` if alone.

    Whitespace is normalised; a missing or empty ``title`` drops the ``Title: {Ti}`` field.
    """
    article = " ".join(article.split())
    title = " ".join((title or "").split())
    text = SOURCE_TEMPLATE.format(title=title, article=article) if title else f"Article: {article}"
    return text if with_instruction else f"Summarize the following article. {text}"


def prompt_parts(instruction: str | None, title: str | None, article: str) -> tuple[str | None, str]:
    """``(instruction_text, source_text)``; ``instruction_text`` is None without an instruction.

    The instruction text is segment 1, the source text segment 0. Joined by a space they are the paper's
    prompt string, which is what a plain T5 checkpoint reads (with full attention, no cache).
    """
    if instruction is None or not instruction.strip():
        return None, source_prompt(title, article, with_instruction=False)
    return instruction_prompt(instruction), source_prompt(title, article, with_instruction=True)


def full_prompt(instruction: str | None, title: str | None, article: str) -> str:
    """The paper's prompt as one string (for a plain T5 checkpoint, which has no segments)."""
    instruction_text, source_text = prompt_parts(instruction, title, article)
    return source_text if instruction_text is None else f"{instruction_text} {source_text}"


@dataclass
class PromptIds:
    """One example's token ids in prompt order and their segments (1 instruction, 0 source)."""

    instruction_ids: list[int]  # no special tokens; empty without an instruction
    source_ids: list[int]  # ends with EOS

    @property
    def input_ids(self) -> list[int]:
        return self.instruction_ids + self.source_ids

    @property
    def segment_ids(self) -> list[int]:
        return [INSTRUCTION_SEGMENT] * len(self.instruction_ids) + [SOURCE_SEGMENT] * len(self.source_ids)


def tokenize_prompt(
    tokenizer: PreTrainedTokenizerBase,
    instruction: str | None,
    title: str | None,
    article: str,
    max_source_tokens: int = DEFAULT_MAX_SOURCE_TOKENS,
    max_instruction_tokens: int = DEFAULT_MAX_INSTRUCTION_TOKENS,
) -> PromptIds:
    """Token ids of both parts: the instruction part without special tokens, the source part with its EOS.

    The whole prompt fits ``max_source_tokens`` (the paper's 1024): the instruction part gets
    ``max_instruction_tokens`` of it, the source part the rest (all of it without an instruction). Only
    the instruction's words and the article are cut, never the template (a warning is logged).
    """
    instruction_text, source_text = prompt_parts(instruction, title, article)
    article_text = " ".join(article.split())
    source_budget = max_source_tokens - (max_instruction_tokens if instruction_text is not None else 0)
    if source_budget < 2:
        raise ValueError(
            f"max_source_tokens {max_source_tokens} leaves {source_budget} tokens for the source part after "
            f"the instruction's {max_instruction_tokens}"
        )
    span = (len(source_text) - len(article_text), len(source_text))
    source_ids = _template_cut(tokenizer, source_text, span, source_budget, specials=True)
    instruction_ids: list[int] = []
    if instruction_text is not None:
        start = INSTRUCTION_TEMPLATE.index("{instruction}")
        span = (start, start + len(" ".join(instruction.split())))
        instruction_ids = _template_cut(
            tokenizer, instruction_text, span, max_instruction_tokens, specials=False
        )
    return PromptIds(list(instruction_ids), list(source_ids))


def keep_within_budget(part: np.ndarray, cuttable: np.ndarray, budget: int) -> np.ndarray:
    """Which tokens of one prompt part to keep within ``budget`` tokens: the part's fixed tokens (template,
    title) always, then its cuttable text (instruction words, article) from the start as room allows.
    Only a budget smaller than the fixed tokens alone cuts them (from the end, with everything else)."""
    fixed = part & ~cuttable
    text = part & cuttable
    keep = fixed | (text & (np.cumsum(text) <= budget - int(fixed.sum())))
    if int(fixed.sum()) > budget:
        keep = part & (np.cumsum(part) <= budget)
    return keep


def _template_cut(
    tokenizer: PreTrainedTokenizerBase, text: str, span: tuple[int, int], budget: int, specials: bool
) -> list[int]:
    """Token ids of ``text`` within ``budget``, cutting only tokens that start inside ``span`` (chars)."""
    encoded = tokenizer(
        text, add_special_tokens=specials, return_offsets_mapping=True, return_special_tokens_mask=True
    )
    ids = np.asarray(encoded["input_ids"], dtype=np.int64)
    special = np.asarray(encoded["special_tokens_mask"], dtype=bool)
    starts = np.asarray([a for a, _ in encoded["offset_mapping"]], dtype=np.int64)
    cuttable = (starts >= span[0]) & (starts < span[1])
    keep = special | keep_within_budget(~special, cuttable, budget - int(special.sum()))
    if keep.sum() < len(ids):
        logger.warning("prompt part truncated from %d to %d tokens", len(ids), int(keep.sum()))
    return ids[keep].tolist()


def collate_prompts(
    prompts: Sequence[PromptIds], pad_token_id: int, device: torch.device | str | None = None
) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``, 2D ``attention_mask`` and ``segment_ids`` (padding is segment 0)."""
    width = max(len(p.input_ids) for p in prompts)
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long, device=device)
    mask = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
    segments = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
    for row, prompt in enumerate(prompts):
        n = len(prompt.input_ids)
        ids[row, :n] = torch.tensor(prompt.input_ids, dtype=torch.long, device=device)
        mask[row, :n] = 1
        segments[row, :n] = torch.tensor(prompt.segment_ids, dtype=torch.long, device=device)
    return {"input_ids": ids, "attention_mask": mask, "segment_ids": segments}


# --------------------------------------------------------------------------------------------- config
@strict
class InstructSumT5Config(T5Config):
    """:class:`~transformers.T5Config` of a T5 whose encoder reads ``segment_ids`` with the block mask.

    It has no settings of its own: the model type alone marks a checkpoint as trained (or to be trained)
    with the InstructSum block mask, and ``from_pretrained`` of a saved checkpoint rebuilds the model.
    """

    model_type = "instructsum_t5"

    @classmethod
    def from_t5_config(cls, config: T5Config, **overrides: Any) -> InstructSumT5Config:
        """An InstructSum config with every setting of ``config`` (a stock T5 or InstructSum config)."""
        data = config.to_dict()
        for key in ("model_type", "architectures", "transformers_version"):
            data.pop(key, None)
        data.update(overrides)
        new = cls(**data)
        new._attn_implementation = config._attn_implementation
        return new


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
    bias from ``query_positions`` (N, L_I) and ``key_positions`` (N, L_I + L_S).
    """

    mode: Literal["record", "extend"]
    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)
    query_positions: torch.Tensor | None = None
    key_positions: torch.Tensor | None = None


class InstructSumT5Attention(T5Attention):
    """T5 encoder self-attention that can record (source pass) or reuse (instruction pass) K_S and V_S.

    Same parameters as :class:`T5Attention`; without an ``instructsum_cache`` argument it *is* T5Attention.
    """

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
        past_key_values: Any = None,
        instructsum_cache: _CachePass | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if instructsum_cache is None:
            return super().forward(
                hidden_states,
                mask=mask,
                key_value_states=key_value_states,
                position_bias=position_bias,
                past_key_values=past_key_values,
                **kwargs,
            )
        if key_value_states is not None or past_key_values is not None:
            raise ValueError("the InstructSum cache is for encoder self-attention only")
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
            position_bias=position_bias,
            **kwargs,
        )
        output = self.o(output.reshape(batch, length, -1).contiguous())
        return output, position_bias, weights

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
class InstructSumT5Stack(T5Stack):
    """T5's encoder stack with the InstructSum block mask and the source-cache hooks.

    ``forward(segment_ids=...)`` builds the 4D float block mask from ``segment_ids`` and the 2D
    ``attention_mask``; without ``segment_ids`` it is T5's encoder. Counters: ``full_passes`` (ordinary
    forward calls), ``source_passes`` (:func:`encode_source`), ``instruction_passes``
    (:func:`encode_with_instruction`), for tests and monitoring.
    """

    def __init__(self, config: T5Config) -> None:
        if config.is_decoder:
            raise ValueError("InstructSumT5Stack is an encoder (config.is_decoder must be False)")
        super().__init__(config)
        for index, block in enumerate(self.block):
            block.layer[0].SelfAttention = InstructSumT5Attention(
                config, has_relative_attention_bias=index == 0, layer_idx=index
            )
        self.post_init()
        self.reset_counters()

    @classmethod
    def is_custom_code(cls) -> bool:
        # transformers 5 treats classes defined outside the library as "custom code" and skips the init of
        # modules without parameters of their own (T5Attention, T5DenseActDense), which leaves their Linear
        # layers at N(0, initializer_factor = 1) instead of T5's scaled init. This class runs T5's own
        # _init_weights, so it is initialised as stock T5 is.
        return False

    def reset_counters(self) -> None:
        self.full_passes = 0
        self.source_passes = 0
        self.instruction_passes = 0

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        segment_ids: torch.LongTensor | None = None,
        instructsum_cache: _CachePass | None = None,
        **kwargs: Any,
    ) -> BaseModelOutput:
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
                dtype = self.embed_tokens.weight.dtype if inputs_embeds is None else inputs_embeds.dtype
                if attention_mask is not None and attention_mask.dim() != 2:
                    raise ValueError("with segment_ids, attention_mask must be the 2D (batch, length) mask")
                attention_mask = block_attention_mask(segment_ids, attention_mask, dtype)
        return super().forward(
            input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, **kwargs
        )

    def _check_attention(self) -> None:
        if self.config._attn_implementation not in _SUPPORTED_ATTENTION:
            raise ValueError(
                f"InstructSum's block mask and source cache support attn_implementation "
                f"{' or '.join(_SUPPORTED_ATTENTION)}, not {self.config._attn_implementation!r}"
            )


class InstructSumT5ForConditionalGeneration(T5ForConditionalGeneration):
    """T5 with the InstructSum encoder; exactly T5's parameters (a T5 checkpoint loads unchanged)."""

    config_class = InstructSumT5Config

    def __init__(self, config: InstructSumT5Config) -> None:
        # T5ForConditionalGeneration.__init__ with the InstructSum encoder (calling it would build and
        # discard a stock encoder).
        T5PreTrainedModel.__init__(self, config)
        self.model_dim = config.d_model
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        encoder_config = copy.deepcopy(config)
        encoder_config.is_decoder = False
        encoder_config.use_cache = False
        self.encoder = InstructSumT5Stack(encoder_config)
        decoder_config = copy.deepcopy(config)
        decoder_config.is_decoder = True
        decoder_config.num_layers = config.num_decoder_layers
        self.decoder = T5Stack(decoder_config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    @classmethod
    def is_custom_code(cls) -> bool:
        return False  # see InstructSumT5Stack.is_custom_code

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.BoolTensor | None = None,
        encoder_outputs: Any = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        segment_ids: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        """T5's forward; ``segment_ids`` (B, L) go to the encoder only (unused given encoder_outputs)."""
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                segment_ids=segment_ids,
                **kwargs,
            )
        return super().forward(
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            past_key_values=past_key_values,
            decoder_inputs_embeds=decoder_inputs_embeds,
            labels=labels,
            use_cache=use_cache,
            **kwargs,
        )


def convert_to_instructsum(model: T5ForConditionalGeneration) -> InstructSumT5ForConditionalGeneration:
    """The same weights in an InstructSum model (no new parameters); returns ``model`` if it already is one.

    The new model is on ``model``'s device and dtype, in its train/eval mode; ``synopsis convert`` (through
    ``synopsis.models.seq2seq.convert_seq2seq``) gives it the source's generation settings.
    """
    if isinstance(model, InstructSumT5ForConditionalGeneration):
        return model
    if not isinstance(model, T5ForConditionalGeneration):
        raise TypeError(f"InstructSum converts a T5ForConditionalGeneration, got {type(model).__name__}")
    parameter = next(model.parameters())
    config = InstructSumT5Config.from_t5_config(model.config)
    converted = InstructSumT5ForConditionalGeneration(config)
    converted.load_state_dict(model.state_dict(), strict=True)
    converted.to(device=parameter.device, dtype=parameter.dtype)
    converted.train(model.training)
    return converted


def is_instructsum(model: Any) -> bool:
    return isinstance(model, InstructSumT5ForConditionalGeneration)


# --------------------------------------------------------------------------------------------- the cache
@dataclass
class CachedSource:
    """A source part encoded once: per-layer ``K_S``/``V_S`` and the final ``H_S``.

    ``keys[l]``, ``values[l]``: (B, heads, L_S, d_kv); ``hidden_states``: (B, L_S, d_model);
    ``attention_mask``: (B, L_S), 1 on real tokens (right-padded); ``input_ids``: (B, L_S).
    """

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    hidden_states: torch.Tensor
    attention_mask: torch.Tensor
    input_ids: torch.Tensor

    @property
    def batch_size(self) -> int:
        return self.hidden_states.shape[0]

    @property
    def length(self) -> int:
        return self.hidden_states.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the tensors (what the :class:`SourceCache` budget counts)."""
        tensors = [*self.keys, *self.values, self.hidden_states, self.attention_mask, self.input_ids]
        return sum(t.numel() * t.element_size() for t in tensors)

    def expand(self, n: int) -> CachedSource:
        """A batch-1 encoding viewed as ``n`` rows (no copy), to pair with ``n`` instructions."""
        if self.batch_size == n:
            return self
        if self.batch_size != 1:
            raise ValueError(f"cannot expand a source encoding of batch {self.batch_size} to {n} rows")

        def grow(t: torch.Tensor) -> torch.Tensor:
            return t.expand(n, *t.shape[1:])

        return CachedSource(
            keys=tuple(map(grow, self.keys)),
            values=tuple(map(grow, self.values)),
            hidden_states=grow(self.hidden_states),
            attention_mask=grow(self.attention_mask),
            input_ids=grow(self.input_ids),
        )

    def as_encoder_outputs(self) -> tuple[BaseModelOutput, torch.Tensor]:
        """The encoding of a prompt with no instruction (all of it source): ``(encoder_outputs, mask)``."""
        return BaseModelOutput(last_hidden_state=self.hidden_states), self.attention_mask


def _encoder(model: Any) -> InstructSumT5Stack:
    encoder = model.get_encoder() if hasattr(model, "get_encoder") else model
    if not isinstance(encoder, InstructSumT5Stack):
        raise TypeError(
            f"the InstructSum cache needs an InstructSum model (see convert_to_instructsum), got "
            f"{type(model).__name__}"
        )
    return encoder


def _check_right_padded(mask: torch.Tensor, what: str) -> torch.Tensor:
    """Lengths of a right-padded 0/1 mask; refuses masks with holes or empty rows."""
    lengths = mask.sum(dim=1)
    positions = torch.arange(mask.shape[1], device=mask.device)
    if not torch.equal(mask.bool(), positions[None, :] < lengths[:, None]):
        raise ValueError(f"{what} must be right-padded (real tokens first, then padding)")
    if (lengths == 0).any():
        raise ValueError(f"{what}: a row has no real tokens")
    return lengths


@torch.no_grad()
def encode_source(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> CachedSource:
    """Encode source parts alone (each layer: ``H_S = Attn(Q_S, K_S, V_S)``); keep ``K_S``, ``V_S``, ``H_S``.

    ``input_ids``: (B, L_S) source-part ids (ending with EOS), right-padded. Runs without gradients; use the
    model in eval mode (dropout would make the cache differ from an uncached pass).
    """
    encoder = _encoder(model)
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    _check_right_padded(attention_mask, "source attention_mask")
    state = _CachePass(mode="record")
    output = encoder(
        input_ids=input_ids, attention_mask=attention_mask, instructsum_cache=state, return_dict=True
    )
    return CachedSource(
        keys=tuple(state.keys),
        values=tuple(state.values),
        hidden_states=output.last_hidden_state,
        attention_mask=attention_mask.long(),
        input_ids=input_ids,
    )


@torch.no_grad()
def encode_with_instruction(
    model: Any,
    source: CachedSource,
    instruction_ids: torch.Tensor,
    instruction_mask: torch.Tensor | None = None,
) -> tuple[BaseModelOutput, torch.Tensor]:
    """Encode N instruction parts against a cached source: ``(encoder_outputs, attention_mask)``.

    Every layer computes ``H_I = Attn(Q_I, [K_I; K_S], [V_I; V_S])`` for the instruction tokens only. The
    result is laid out like the uncached pass of ``[I_n; S; padding]``: row ``n`` holds ``H_I`` of its real
    instruction tokens, then ``H_S``, then zeros; the returned 2D mask marks the real tokens. ``source`` has
    batch 1 (shared by all N instructions) or batch N (one source per instruction).
    """
    encoder = _encoder(model)
    if instruction_ids.dim() == 1:
        instruction_ids = instruction_ids[None]
    count, instruction_width = instruction_ids.shape
    device = instruction_ids.device
    if instruction_mask is None:
        instruction_mask = torch.ones_like(instruction_ids)
    instruction_lengths = _check_right_padded(instruction_mask, "instruction_mask")
    source = source.expand(count)
    source_lengths = source.attention_mask.sum(dim=1)
    dtype = source.hidden_states.dtype

    # Positions of the uncached row [I_n; S; pad]: instruction tokens 0..L_I-1, source tokens from L_I(n).
    steps = torch.arange(instruction_width, device=device)
    query_positions = steps[None, :].expand(count, -1)
    source_positions = instruction_lengths[:, None] + torch.arange(source.length, device=device)[None, :]
    key_positions = torch.cat([query_positions, source_positions], dim=1)
    keys_real = torch.cat([instruction_mask.bool(), source.attention_mask.bool()], dim=1)
    state = _CachePass(
        mode="extend",
        keys=list(source.keys),
        values=list(source.values),
        query_positions=query_positions,
        key_positions=key_positions,
    )
    output = encoder(
        input_ids=instruction_ids,
        attention_mask=_padding_mask(keys_real, instruction_width, dtype),
        instructsum_cache=state,
        return_dict=True,
    )

    # Lay [H_I; H_S] out like the uncached pass: row n = H_I[n, :L_I(n)], H_S[n, :L_S(n)], zeros.
    totals = instruction_lengths + source_lengths
    width = int(totals.max())
    slots = torch.arange(width, device=device)[None, :]
    in_instruction = slots < instruction_lengths[:, None]
    real = slots < totals[:, None]
    index = torch.where(in_instruction, slots, instruction_width + slots - instruction_lengths[:, None])
    index = torch.where(real, index, torch.zeros_like(index))
    both = torch.cat([output.last_hidden_state, source.hidden_states], dim=1)
    hidden = both.gather(1, index[..., None].expand(-1, -1, both.shape[-1]))
    hidden = hidden.masked_fill(~real[..., None], 0.0)
    return BaseModelOutput(last_hidden_state=hidden), real.long()


@dataclass
class _Entry:
    encoding: CachedSource
    model: weakref.ReferenceType[Any]
    nbytes: int


@dataclass
class _Flight:
    """One source being encoded: the threads that miss on the same key meanwhile wait for its result."""

    done: threading.Event = field(default_factory=threading.Event)
    result: CachedSource | None = None


class SourceCache:
    """A byte-bounded LRU of :class:`CachedSource` objects keyed by the source's token ids.

    The key is a SHA-256 of the source ids and the model's identity; a hit is also checked token by token
    against the stored ids, so a changed document is never served from the cache. Entries stay on the
    model's device. An encoding larger than ``max_bytes`` is returned but not stored. Thread-safe: the
    encoding runs outside the lock, and concurrent misses on one key encode it once (the others wait for
    that result). The counters ``hits``, ``misses``, ``evictions``, ``encodings`` and ``bytes`` are for
    monitoring and tests. Clear the cache (or make a new one) when the model's weights change.
    """

    def __init__(self, max_bytes: int = 1 << 30) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._in_flight: dict[str, _Flight] = {}
        self.encodings = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.bytes = 0

    @staticmethod
    def key(model: Any, input_ids: torch.Tensor) -> str:
        ids = input_ids.detach().reshape(-1).to("cpu", torch.int64).contiguous()
        digest = hashlib.sha256(ids.numpy().tobytes()).hexdigest()
        return f"{id(model)}:{digest}"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def get(self, model: Any, input_ids: torch.Tensor) -> CachedSource | None:
        """The stored encoding of exactly these source ids under this model, or None (counts a hit/miss)."""
        input_ids = input_ids if input_ids.dim() == 2 else input_ids[None]
        key = self.key(model, input_ids)
        with self._lock:
            entry = self._entries.get(key)
            if (
                entry is not None
                and entry.model() is model
                and entry.encoding.input_ids.shape == input_ids.shape
                and torch.equal(entry.encoding.input_ids, input_ids.to(entry.encoding.input_ids.device))
            ):
                self._entries.move_to_end(key)
                self.hits += 1
                return entry.encoding
            self.misses += 1
            return None

    def put(self, model: Any, encoding: CachedSource) -> bool:
        """Store an encoding (most recently used), evicting the least recently used ones to fit the budget."""
        size = encoding.nbytes
        if size > self.max_bytes:
            logger.info(
                "source encoding of %d bytes exceeds the cache budget of %d; not cached", size, self.max_bytes
            )
            return False
        key = self.key(model, encoding.input_ids)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old.nbytes
            while self._entries and self.bytes + size > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.bytes -= evicted.nbytes
                self.evictions += 1
            self._entries[key] = _Entry(encoding, weakref.ref(model), size)
            self.bytes += size
        return True

    def get_or_encode(self, model: Any, input_ids: torch.Tensor) -> CachedSource:
        """The cached encoding of one source part (ids (L_S,) or (1, L_S), unpadded); encodes on a miss."""
        input_ids = input_ids if input_ids.dim() == 2 else input_ids[None]
        if input_ids.shape[0] != 1:
            raise ValueError("SourceCache stores one source at a time (ids of shape (L,) or (1, L))")
        key = self.key(model, input_ids)
        while True:
            encoding = self.get(model, input_ids)
            if encoding is not None:
                return encoding
            with self._lock:
                flight = self._in_flight.get(key)
                owner = flight is None
                if owner:
                    flight = self._in_flight[key] = _Flight()
            if not owner:  # another thread is encoding this source: wait for it
                flight.done.wait()
                result = flight.result
                if result is not None and torch.equal(result.input_ids.cpu(), input_ids.cpu()):
                    return result
                continue  # that encoding failed (or was another source): try again
            try:
                encoding = encode_source(model, input_ids)
                with self._lock:
                    self.encodings += 1
                flight.result = encoding
                self.put(model, encoding)
                return encoding
            finally:
                with self._lock:
                    self._in_flight.pop(key, None)
                flight.done.set()


# --------------------------------------------------------------------------------------------- generation
def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def summarize_with_instructions(
    model: T5ForConditionalGeneration,
    tokenizer: PreTrainedTokenizerBase,
    article: str,
    instructions: Sequence[str | None],
    title: str | None = None,
    *,
    cache: SourceCache | None = None,
    use_cache: bool = True,
    max_source_tokens: int = DEFAULT_MAX_SOURCE_TOKENS,
    max_instruction_tokens: int = DEFAULT_MAX_INSTRUCTION_TOKENS,
    **generate_kwargs: Any,
) -> list[str]:
    """One summary per instruction (``None``: no instruction) of one article, in order.

    InstructSum model with ``use_cache``: the source part is encoded once (or taken from ``cache``) and
    each instruction runs only its own tokens. ``use_cache=False``: every prompt is encoded in full with the
    same block mask (for checking and timing). A plain T5 model reads the paper's prompt with full attention.
    ``generate_kwargs`` go to ``model.generate`` (e.g. ``num_beams=2, max_new_tokens=192`` as in the paper).
    """
    device = model_device(model)
    prompts = [
        tokenize_prompt(tokenizer, i, title, article, max_source_tokens, max_instruction_tokens)
        for i in instructions
    ]
    texts: list[str | None] = [None] * len(prompts)
    if not is_instructsum(model) or not use_cache:
        for rows in _groups(prompts, lambda p: True):
            batch = collate_prompts([prompts[r] for r in rows], tokenizer.pad_token_id, device)
            if not is_instructsum(model):
                batch.pop("segment_ids")
            _decode_into(texts, rows, model.generate(**batch, **generate_kwargs), tokenizer)
        return [t or "" for t in texts]
    # Cached: group by source part (with and without an instruction the source texts differ).
    for rows in _groups(prompts, lambda p: tuple(p.source_ids)):
        source_ids = torch.tensor([prompts[rows[0]].source_ids], dtype=torch.long, device=device)
        source = (
            cache.get_or_encode(model, source_ids) if cache is not None else encode_source(model, source_ids)
        )
        with_instruction = [r for r in rows if prompts[r].instruction_ids]
        without = [r for r in rows if not prompts[r].instruction_ids]
        if without:
            outputs, mask = source.as_encoder_outputs()
            generated = model.generate(encoder_outputs=outputs, attention_mask=mask, **generate_kwargs)
            _decode_into(texts, without, generated.expand(len(without), -1), tokenizer)
        if with_instruction:
            batch = collate_prompts(
                [PromptIds(prompts[r].instruction_ids, []) for r in with_instruction],
                tokenizer.pad_token_id,
                device,
            )
            outputs, mask = encode_with_instruction(
                model, source, batch["input_ids"], batch["attention_mask"]
            )
            generated = model.generate(encoder_outputs=outputs, attention_mask=mask, **generate_kwargs)
            _decode_into(texts, with_instruction, generated, tokenizer)
    return [t or "" for t in texts]


def _groups(prompts: Sequence[PromptIds], key: Any) -> list[list[int]]:
    groups: dict[Any, list[int]] = {}
    for row, prompt in enumerate(prompts):
        groups.setdefault(key(prompt), []).append(row)
    return list(groups.values())


def _decode_into(
    texts: list[str | None], rows: Sequence[int], generated: torch.Tensor, tokenizer: PreTrainedTokenizerBase
) -> None:
    decoded = tokenizer.batch_decode(generated, skip_special_tokens=True)
    for row, text in zip(rows, decoded, strict=True):
        texts[row] = text.strip()


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
