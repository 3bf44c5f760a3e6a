"""What HIBRIDS adds to the encoder's input (Cao & Wang, 2022), in the roles :mod:`..features` defines.

:class:`HibridsInputs` (text markers and fields): on each source, ``section_ids``, every token's node of
the section tree (numbered as :mod:`.relations` documents, the tokens outside every section on nodes of
their own), and ``section_relations``, the tree's unpadded (S+3, S+3) relation buckets; both padded into
the batch, the fields the model reads; and a question input laid out as the authors' public code does on
a tokenizer with a BOS (``<s> question <s> document </s>``). Only a HIBRIDS model computes the document's
tree relations.
:class:`SectionMarkerInputs` (text markers): the SECTOK / LVLSECTOK baselines' marker before every section
(paper section 5, "Comparisons"), for a checkpoint whose config records ``section_markers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from synopsis.document import Document, Section
from synopsis.models.features import INSTRUCTION_SEGMENT, InputFields, TextMarkers, pad_rows
from synopsis.models.hibrids.relations import (
    END_NODE,
    OUTSIDE_NODES,
    QUESTION_NODE,
    START_NODE,
    outside_node_relations,
    pad_section_relations,
    relation_buckets,
    section_marker,
)
from synopsis.models.registry import config_setting

if TYPE_CHECKING:
    from synopsis.models.inputs import SourceEncoding


def section_nodes(sections: np.ndarray, segments: np.ndarray, leading_bos_asks: bool = False) -> np.ndarray:
    """HIBRIDS' node of every token (``sections``: its document section, -1 outside every section), in the
    numbering of :mod:`.relations`: a token outside every section is the question node (instruction), the
    start node (before the document's last section token) or the end node (after it: EOS), as the public
    code's chunks.
    ``leading_bos_asks``: the first token is the tokenizer's BOS before a question, which the public code
    puts in the question chunk (``[<s>] + question``; see :attr:`HibridsInputs.question_start`)."""
    inside = sections >= 0
    last = int(np.flatnonzero(inside)[-1]) if inside.any() else -1
    outside = np.where(np.arange(len(sections)) > last, END_NODE, START_NODE)
    outside = np.where(segments == INSTRUCTION_SEGMENT, QUESTION_NODE, outside)
    if leading_bos_asks and (segments == INSTRUCTION_SEGMENT).any():
        outside[0] = QUESTION_NODE
    return np.where(inside, sections + OUTSIDE_NODES, outside)


class HibridsInputs(TextMarkers, InputFields):
    """Section-tree nodes per token and the tree's relation buckets (``hibrids_selected``: HIBRIDS-S's).

    ``question_start``: the token that starts the document after a question, the tokenizer's BOS when it
    puts one first (BART, LED: the public code's ``[<s>] + question + [<s>] + document + [</s>]``, the
    leading ``<s>`` in the question chunk and the second alone as the start chunk; issue 51 item 1), else
    None (T5 has no BOS)."""

    def __init__(self, config: Any, tokenizer: Any) -> None:
        super().__init__(config, tokenizer)
        self.selected = bool(config.hibrids_selected)
        bos = tokenizer.bos_token_id
        ids = tokenizer("x")["input_ids"] if bos is not None else []
        self.question_start = tokenizer.bos_token if ids and ids[0] == bos else None

    def source_fields(self, document: Document, source: SourceEncoding) -> dict[str, Any]:
        """``section_ids``: each kept token's node; ``section_relations``: the (S+3, S+3) bucket ids of the
        document's section tree with the nodes of the tokens outside every section (question, start, end;
        :func:`~synopsis.models.hibrids.relations.outside_node_relations`), for every section whether or
        not truncation kept its tokens, unpadded."""
        ids = source.input_ids
        leading_bos = self.question_start is not None and bool(ids) and ids[0] == self.tokenizer.bos_token_id
        sections = np.asarray(source.document_section_ids, dtype=np.int64)
        segments = np.asarray(source.segment_ids, dtype=np.int64)
        path, level = document.tree_relations()
        depths = np.array([s.depth for s in document.sections], dtype=np.int64)
        path, level, depth, order = outside_node_relations(path, level, depths)
        return {
            "section_ids": section_nodes(sections, segments, leading_bos).tolist(),
            "section_relations": relation_buckets(path, level, depth, selected=self.selected, order=order),
        }

    def batch_fields(self, sources: Sequence[SourceEncoding], batch: dict[str, torch.Tensor]) -> dict:
        width = batch["input_ids"].shape[1]
        left = self.tokenizer.padding_side == "left"
        return {
            "section_ids": pad_rows((s.section_ids for s in sources), width, -1, left=left),
            "section_relations": pad_section_relations([s.section_relations for s in sources]),
        }


class SectionMarkerInputs(TextMarkers):
    """SECTOK (``[SEC]``) or LVLSECTOK (``[SEC-L1]``, ... up to ``section_marker_max_depth``) before the
    first sentence of every section below the root, as the config records them."""

    def __init__(self, config: Any, tokenizer: Any) -> None:
        super().__init__(config, tokenizer)
        self.kind = config_setting(config, "section_markers")
        self.max_depth = int(config_setting(config, "section_marker_max_depth") or 1)

    def section_marker(self, section: Section) -> str | None:
        return section_marker(min(section.depth, self.max_depth), self.kind) if section.depth >= 1 else None
