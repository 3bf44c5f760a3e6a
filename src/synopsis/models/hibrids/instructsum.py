"""HIBRIDS stacked on InstructSum's T5: section-tree biases with the exact source cache.

Registered as ``instructsum_hibrids_t5``; the config carries both methods (HIBRIDS' fields on
:class:`~synopsis.models.instructsum.InstructSumT5Config`).

The methods compose at T5's ``position_bias``. InstructSum (Nishida et al., section 3) masks the encoder's
self-attention into blocks (source tokens see only the source, instruction tokens see everything) and can
encode the source once and then each instruction against its cached keys and values; HIBRIDS (Cao & Wang,
ACL 2022, section 3) adds ``B^l[rel(x_i, y_j), h]`` to the scores of layer ``l``. Per layer the HIBRIDS
term :func:`~synopsis.models.hibrids.bias.pair_bias` of the query and key tokens' sections is added to that
layer's position bias only (T5 reuses the unbiased one in later layers):

* uncached (block-mask) pass: queries and keys are the prompt's tokens, the (B, H, L, L) token-pair bias;
* source pass of the cache: queries and keys are the source's tokens and their sections;
* instruction pass: the instruction tokens are node 0, the question node of the input builder's trees
  (a depth-1 child of the virtual root, as the public code's question chunk; as in the uncached pass);
  keys are ``[instruction; source]`` (aligned with the cache's key positions), so the bias is
  (N, H, L_I, L_I + L_S).

Each entry of the cache is the encoding of one source *and* its section tree
(:class:`~synopsis.models.instructsum.SourceCache`), so cached == uncached with the biases on. The decoder
is HIBRIDS' (the HIBRIDS-DEC bias on the last cross-attention), which reads ``section_ids`` laid out like
the encoder's states (:meth:`~synopsis.models.instructsum.SourceCache.encode_prompts` returns them). Zero
tables, or no section inputs, give InstructSum alone; ``convert hibrids`` on an InstructSum T5 and
``convert instructsum`` on a HIBRIDS T5 both give this type.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from transformers import AutoConfig, AutoModelForSeq2SeqLM

from synopsis.models.adaptation import forward_signature
from synopsis.models.hibrids.bias import HibridsConfigMixin, HibridsStackMixin, encoder_layout, pair_bias
from synopsis.models.hibrids.relations import ROOT_SECTION, SectionLayout
from synopsis.models.hibrids.t5 import HibridsT5EncoderAttention, HibridsT5Stack
from synopsis.models.instructsum.model import (
    InstructSumT5Attention,
    InstructSumT5Config,
    InstructSumT5ForConditionalGeneration,
    InstructSumT5Stack,
    _CachePass,
)


@strict
class InstructSumHibridsT5Config(HibridsConfigMixin, InstructSumT5Config):
    """:class:`~synopsis.models.instructsum.InstructSumT5Config` plus HIBRIDS' fields (``hibrids_encoder``,
    ``hibrids_decoder``, ``hibrids_selected``)."""

    model_type = "instructsum_hibrids_t5"


class InstructSumHibridsT5Attention(HibridsT5EncoderAttention, InstructSumT5Attention):
    """InstructSum's encoder self-attention with HIBRIDS' per-head table: the token-pair bias in the uncached
    pass (:class:`~synopsis.models.hibrids.t5.HibridsT5EncoderAttention`), :meth:`cache_pass_bias` in the
    cache passes."""

    def cache_pass_bias(self, state: _CachePass) -> torch.Tensor | None:
        if state.relations is None:
            return None
        return pair_bias(self.hibrids_bias.weight, state.relations, state.query_sections, state.key_sections)


class InstructSumHibridsT5Stack(HibridsStackMixin, InstructSumT5Stack):
    """InstructSum's encoder whose self-attention also gets the HIBRIDS bias: ``section_ids`` (B, L) and
    ``section_relations`` (B, S, S) of the prompt (uncached pass) or of the source part (cache passes).
    Arguments by keyword (:class:`~synopsis.models.hibrids.bias.HibridsStackMixin`)."""

    reads_sections = True

    def __init__(self, config: InstructSumHibridsT5Config) -> None:
        if config.hibrids_encoder:
            self.attention_class = InstructSumHibridsT5Attention
        super().__init__(config)

    @forward_signature(InstructSumT5Stack.forward, "section_ids", "section_relations")
    def forward(self, **kwargs: Any) -> Any:
        """:meth:`HibridsStackMixin.forward`, advertising InstructSum's inputs too (generate() checks the
        model inputs against the encoder's signature)."""
        return super().forward(**kwargs)

    def hibrids_value(
        self, section_ids: torch.Tensor | None, section_relations: torch.Tensor | None, kwargs: dict[str, Any]
    ) -> SectionLayout | None:
        """The layout of the prompt's tokens, or in a cache pass of the source part's (whatever the pass's
        own input: the instruction tokens)."""
        if kwargs.get("instructsum_cache") is None or section_ids is None:
            return super().hibrids_value(section_ids, section_relations, kwargs)
        source = _source(kwargs)
        return encoder_layout(
            self.config, section_ids, section_relations, section_ids.to(source.device), None
        )

    def hibrids_passing(self, value: Any, kwargs: dict[str, Any]) -> AbstractContextManager[None]:
        state = kwargs.get("instructsum_cache")
        if state is None:
            return super().hibrids_passing(value, kwargs)
        if value is not None:
            _cache_pass_sections(state, value, _source(kwargs).shape[1])
        return nullcontext()


def _source(kwargs: dict[str, Any]) -> torch.Tensor:
    """The encoder input of a call: ``input_ids``, else ``inputs_embeds``."""
    input_ids = kwargs.get("input_ids")
    return input_ids if input_ids is not None else kwargs["inputs_embeds"]


def _cache_pass_sections(state: _CachePass, layout: SectionLayout, queries: int) -> None:
    """The sections of a cache pass's queries and keys: the source's own (source pass), or node 0 (the
    question node) for the ``queries`` instruction tokens and ``[node 0 x queries; source sections]`` for
    the keys."""
    state.relations = layout.relations
    if state.mode == "record":
        state.query_sections = state.key_sections = layout.ids
        return
    root = torch.full(
        (layout.ids.shape[0], queries), ROOT_SECTION, dtype=torch.long, device=layout.ids.device
    )
    state.query_sections = root
    state.key_sections = torch.cat([root, layout.ids], dim=1)


class InstructSumHibridsT5ForConditionalGeneration(InstructSumT5ForConditionalGeneration):
    """InstructSum's T5 with HIBRIDS biases: pass ``segment_ids``, ``section_ids`` and ``section_relations``
    to forward/generate, or use :class:`~synopsis.models.instructsum.SourceCache` with prompts that carry
    their source's sections."""

    config_class = InstructSumHibridsT5Config
    encoder_class = InstructSumHibridsT5Stack
    decoder_class = HibridsT5Stack


# Like InstructSum's T5 this type has no bare-model class: AutoConfig and AutoModelForSeq2SeqLM only.
AutoConfig.register(InstructSumHibridsT5Config.model_type, InstructSumHibridsT5Config, exist_ok=True)
AutoModelForSeq2SeqLM.register(
    InstructSumHibridsT5Config, InstructSumHibridsT5ForConditionalGeneration, exist_ok=True
)
