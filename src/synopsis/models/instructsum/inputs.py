"""What InstructSum adds to the encoder's input (Nishida et al.), in the roles :mod:`..features` defines.

The paper's prompt (section 3, Appendix B.1), split so that every sentence of the article keeps its
labels: the instruction part (segment 1: the template's fixed words and the instruction's own, which alone
may be cut) and the source part (segment 0: ``Title: ... Article:`` and the article). Truncation gives each
part its own budget (:meth:`InstructSumInputs.kept`), so one cached source serves every instruction.
:class:`InstructionPromptInputs` (prompt layout) lays out the input of a plain T5 given an instruction (the
paper's T5 baseline); :class:`InstructSumInputs` (prompt layout and cached source) every input of an
InstructSum checkpoint, and each source as its source cache reads it. The segments themselves are the input
builder's (every token's segment); the registry says that an InstructSum model reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from synopsis.document import Document
from synopsis.models.features import (
    INSTRUCTION_SEGMENT,
    SOURCE_SEGMENT,
    CachedSourcePrompt,
    Limits,
    Piece,
    PromptLayout,
)
from synopsis.models.instructsum.cache import PromptIds
from synopsis.models.instructsum.prompts import (
    DEFAULT_MAX_SOURCE_TOKENS,
    INSTRUCTION_TEMPLATE,
    keep_within_budget,
    prompt_parts,
)

if TYPE_CHECKING:
    from synopsis.models.inputs import SourceEncoding


class InstructionPromptInputs(PromptLayout):
    """A plain T5 (any of its family) reads InstructSum's prompt when given an instruction (the paper's T5
    baseline), and its own input length; without one, the plain ``prefix + text``."""

    def owns_prompt(self, instruction: str | None) -> bool:
        return bool(instruction)

    def prompt(self, document: Document, body: list[Piece], instruction: str | None) -> list[Piece]:
        """The paper's prompt around ``body``: template words fixed, the instruction's own words cuttable."""
        article = "".join(p.text for p in body)
        instruction_text, source_text = prompt_parts(instruction, document.title, article)
        if not source_text.endswith(article):
            raise AssertionError("the source prompt must end with the article")
        pieces = []
        if instruction_text is not None:
            before, after = INSTRUCTION_TEMPLATE.split("{instruction}")
            words = instruction_text[len(before) : len(instruction_text) - len(after)]
            pieces.append(Piece(before, segment=INSTRUCTION_SEGMENT, cut=False))
            pieces.append(Piece(words, segment=INSTRUCTION_SEGMENT))
            pieces.append(Piece(after, segment=INSTRUCTION_SEGMENT, cut=False))
        lead = source_text[: len(source_text) - len(article)]
        pieces.append(Piece(lead if instruction_text is None else " " + lead, cut=False))
        return pieces + body

    def kept(
        self, special: np.ndarray, segments: np.ndarray, cuttable: np.ndarray, limits: Limits
    ) -> np.ndarray:
        """The whole input fits ``limits.source`` (the paper's first 1024 tokens); the instruction part gets
        ``limits.instruction`` of it and the source part (with its EOS) the rest, a fixed budget, so one
        cached source serves every instruction. Only the instruction's words and the article are cut, never
        the template or the title."""
        instruction = ~special & (segments == INSTRUCTION_SEGMENT)
        source = ~special & (segments == SOURCE_SEGMENT)
        source_budget = limits.source - int(special.sum())
        if instruction.any():
            source_budget -= limits.instruction
        return (
            special
            | keep_within_budget(instruction, cuttable, limits.instruction)
            | keep_within_budget(source, cuttable, max(source_budget, 1))
        )

    def prompt_room(self, instruction_length: int) -> int:
        """The instruction's own budget and the source part's fixed lead-in (``Title: ... Article:``), so that
        a window of text is read whole beside any instruction."""
        _, lead = prompt_parts("?", None, "")
        return instruction_length + len(self.tokenizer(lead, add_special_tokens=False)["input_ids"])


class InstructSumInputs(InstructionPromptInputs, CachedSourcePrompt):
    """InstructSum's prompt for every input; the model reads the paper's first 1024 tokens and decodes from
    a cached source part."""

    fixed_source_length = DEFAULT_MAX_SOURCE_TOKENS

    def owns_prompt(self, instruction: str | None) -> bool:
        return True

    def cached_prompt(self, source: SourceEncoding) -> PromptIds:
        """One encoded input as the source cache reads it (:class:`PromptIds`): its source and instruction
        parts, and for a model that reads sections (HIBRIDS on InstructSum) its section nodes and unpadded
        relations, so that a source's cache entry fits any batch."""
        fields = source.fields
        if "section_relations" not in fields:
            return PromptIds.from_segments(source.input_ids, source.segment_ids)
        return PromptIds.from_segments(
            source.input_ids, source.segment_ids, fields["section_ids"], fields["section_relations"]
        )
