"""InstructSum prompts: the paper's templates, their token ids and segments, budgets and batches.

Nishida et al., section 3 and Appendix B.1. With an instruction the prompt is ``Instructions: {I} According
to the above instructions, summarize the following article. Title: {Ti} Article: {S}``; without one
``Summarize the following article. Title: {Ti} Article: {S}``. :func:`prompt_parts` splits it into the
instruction part (segment 1) and the source part (segment 0); without an instruction all of it is source.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

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


@dataclass(frozen=True)
class SourceSections:
    """The section tree of a source part, for a model that also reads HIBRIDS' section inputs.

    ``ids``: the section (tree node) of each source-part token (the start and end nodes outside every
    section, for the input builder's trees);
    ``relations``: the (S, S) relation bucket ids of the source's sections. Hashable: two prompts share a
    cached source encoding only when their source ids *and* their sections are equal.
    """

    ids: tuple[int, ...]
    relations: tuple[tuple[int, ...], ...]

    @classmethod
    def from_tensors(cls, ids: Sequence[int], relations: torch.Tensor | np.ndarray) -> SourceSections:
        table = np.asarray(relations.cpu() if isinstance(relations, torch.Tensor) else relations)
        return cls(tuple(int(i) for i in ids), tuple(tuple(int(v) for v in row) for row in table))

    def tensors(self, device: torch.device | str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``section_ids`` (1, L_S) and ``section_relations`` (1, S, S), as the model reads them."""
        ids = torch.tensor([self.ids], dtype=torch.long, device=device)
        relations = torch.tensor([self.relations], dtype=torch.long, device=device)
        return ids, relations.view(1, len(self.relations), len(self.relations))


@dataclass
class PromptIds:
    """One example's token ids in prompt order and their segments (1 instruction, 0 source); ``sections``
    the source part's section tree when the model reads one (HIBRIDS on InstructSum)."""

    instruction_ids: list[int]  # no special tokens; empty without an instruction
    source_ids: list[int]  # ends with EOS
    sections: SourceSections | None = None

    @classmethod
    def from_segments(
        cls,
        input_ids: Sequence[int],
        segment_ids: Sequence[int],
        section_ids: Sequence[int] | None = None,
        relations: torch.Tensor | np.ndarray | None = None,
    ) -> PromptIds:
        """Split a model input (instruction part, then source part) back into its two parts; with
        ``section_ids`` (one per input token) and the (S, S) ``relations``, keep the source part's tree."""
        instruction = [t for t, s in zip(input_ids, segment_ids, strict=True) if s == INSTRUCTION_SEGMENT]
        source = [t for t, s in zip(input_ids, segment_ids, strict=True) if s == SOURCE_SEGMENT]
        if list(input_ids) != instruction + source:
            raise ValueError("InstructSum inputs must be the instruction part, then the source part")
        sections = None
        if section_ids is not None and relations is not None:
            sections = SourceSections.from_tensors(list(section_ids)[len(instruction) :], relations)
        return cls(instruction, source, sections)

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
