"""HIBRIDS' section tree as tensors: relation buckets, section layouts, section marker tokens.

Cao & Wang, ACL 2022, section 3: a query token in section ``x`` and a key token in section ``y`` have the
relation ``(PathLen(x, y), LvlDiff(x, y))``; :func:`relation_buckets` maps every ordered pair of sections
to the row of a bias table (the full 419-pair index set plus an "other" bucket, or the 12 HIBRIDS-S
buckets). :func:`section_layout` checks a batch's ``section_ids``/``section_relations``. The SECTOK /
LVLSECTOK baselines (paper section 5) need only :func:`section_marker` and :func:`add_section_tokens`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import torch
from transformers import AddedToken, PreTrainedModel, PreTrainedTokenizerBase

# ---------------------------------------------------------------------- relation buckets

#: The paper's table covers |PathLen| <= 19 (section 3; the public code's index set).
MAX_PATH_LENGTH = 19


def _full_index() -> dict[tuple[int, int], int]:
    """Bucket of every live (PathLen, LvlDiff) pair, in the order the authors' public code numbers them.

    A tree path of length p goes u steps up and p - u steps down, so LvlDiff = p - 2u has the parity of p
    and |LvlDiff| <= |PathLen|; with |PathLen| <= 19 that leaves 419 pairs. Keeping the public numbering
    means a table trained with their code maps onto ours row for row.
    """
    index: dict[tuple[int, int], int] = {}
    for path in range(MAX_PATH_LENGTH + 1):
        for level in range(path % 2, path + 1, 2):
            for pair in ((path, level), (-path, level), (path, -level), (-path, -level)):
                index.setdefault(pair, len(index))
    return index


FULL_INDEX = _full_index()
#: Live (PathLen, LvlDiff) pairs of the full table.
FULL_RELATIONS = len(FULL_INDEX)
#: The full table's "other" bucket: every pair outside the index set (|PathLen| > 19, or a pair that no
#: tree can produce) shares this one learnable entry instead of raising.
FULL_OTHER_BUCKET = FULL_RELATIONS
assert FULL_RELATIONS == 419


class SelectedRelation(IntEnum):
    """HIBRIDS-S buckets (paper section 3, "HIBRIDS-S with selected relations"), from query x to key y.

    The first rule that holds wins, in this order; "after"/"before" is document (pre-order) order of y
    relative to x. Every pair of sections gets exactly one bucket.
    """

    SELF = 0  #: x and y are the same section (PathLen 0)
    CHILD = 1  #: y is a child of x (PathLen 1, LvlDiff +1)
    PARENT = 2  #: y is the parent of x (PathLen -1, LvlDiff -1)
    DESCENDANT = 3  #: y is a deeper descendant of x (PathLen = LvlDiff >= 2)
    ANCESTOR = 4  #: y is a more distant ancestor of x (PathLen = LvlDiff <= -2)
    NEXT_SIBLING = 5  #: y has x's parent and comes after x (PathLen 2, LvlDiff 0)
    PREVIOUS_SIBLING = 6  #: y has x's parent and comes before x (PathLen -2, LvlDiff 0)
    NEXT_IN_TEXT = 7  #: y is the very next section in document order (pre-order index + 1)
    PREVIOUS_IN_TEXT = 8  #: y is the section just before x in document order (pre-order index - 1)
    LATER_IN_TOP_SECTION = 9  #: y comes after x inside the same top-level (depth-1) section
    EARLIER_IN_TOP_SECTION = 10  #: y comes before x inside the same top-level (depth-1) section
    OTHER = 11  #: every other pair (e.g. sections in different top-level sections that are not adjacent)


def num_buckets(selected: bool = False) -> int:
    """Rows of a bias table: 419 live pairs + 1 "other" bucket, or the 12 HIBRIDS-S buckets."""
    return len(SelectedRelation) if selected else FULL_RELATIONS + 1


def _as_long(x: Any, name: str, dims: int) -> torch.Tensor:
    tensor = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    if tensor.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimensions, got shape {tuple(tensor.shape)}")
    return tensor.long()


def relation_buckets(
    path_len: np.ndarray | torch.Tensor,
    level_diff: np.ndarray | torch.Tensor,
    depth: np.ndarray | torch.Tensor | Sequence[int],
    *,
    selected: bool = False,
    order: np.ndarray | torch.Tensor | Sequence[int] | None = None,
) -> torch.LongTensor:
    """(S, S) bucket ids of every ordered pair of sections, for ``section_relations``.

    ``path_len`` and ``level_diff`` are the signed (S, S) arrays of
    :meth:`~synopsis.document.Document.tree_relations` (sections in pre-order, row = query section),
    ``depth`` the (S,) section depths (root 0). Full table (``selected=False``): the bucket of each
    (PathLen, LvlDiff) pair of the paper's index set, :data:`FULL_OTHER_BUCKET` for any other pair.
    HIBRIDS-S (``selected=True``): the :class:`SelectedRelation` of each pair. ``order``: each section's
    position in the text, when that is not its index (:func:`outside_node_relations`); HIBRIDS-S reads it
    for "after"/"before" and "next"/"previous in the text".
    """
    path = _as_long(path_len, "path_len", 2)
    level = _as_long(level_diff, "level_diff", 2).to(path.device)
    depths = _as_long(depth, "depth", 1).to(path.device)
    n = path.shape[0]
    if path.shape != (n, n) or level.shape != (n, n) or depths.shape != (n,):
        raise ValueError(
            f"expected (S, S), (S, S), (S,) arrays; got {tuple(path.shape)}, {tuple(level.shape)}, "
            f"{tuple(depths.shape)}"
        )
    if not selected:
        return _full_buckets(path, level)

    index = torch.arange(n, device=path.device)
    order = index if order is None else _as_long(order, "order", 1).to(path.device)
    later = order[None, :] > order[:, None]
    # A section's top-level section is the last depth-1 section at or before it in pre-order (outside
    # nodes, stored before the document's sections, are each their own).
    top = torch.where(depths == 1, index, -1).cummax(0).values
    top = torch.where(depths >= 1, top, -1)
    same_top = (top[:, None] == top[None, :]) & (top[:, None] >= 0)
    adjacent = (order[None, :] - order[:, None]).abs() == 1
    straight = (path.abs() == level.abs()) & (path.abs() >= 2)
    rules = [  # lowest precedence first: later rules overwrite earlier ones
        (same_top & later, SelectedRelation.LATER_IN_TOP_SECTION),
        (same_top & ~later & (path != 0), SelectedRelation.EARLIER_IN_TOP_SECTION),
        (adjacent & later, SelectedRelation.NEXT_IN_TEXT),
        (adjacent & ~later, SelectedRelation.PREVIOUS_IN_TEXT),
        ((path == 2) & (level == 0), SelectedRelation.NEXT_SIBLING),
        ((path == -2) & (level == 0), SelectedRelation.PREVIOUS_SIBLING),
        (straight & (level > 0), SelectedRelation.DESCENDANT),
        (straight & (level < 0), SelectedRelation.ANCESTOR),
        ((path.abs() == 1) & (level == 1), SelectedRelation.CHILD),
        ((path.abs() == 1) & (level == -1), SelectedRelation.PARENT),
        (path == 0, SelectedRelation.SELF),
    ]
    buckets = torch.full_like(path, int(SelectedRelation.OTHER))
    for condition, relation in rules:
        buckets = torch.where(condition, int(relation), buckets)
    return buckets


def _full_buckets(path: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    size = 2 * MAX_PATH_LENGTH + 1
    lookup = torch.full((size, size), FULL_OTHER_BUCKET, dtype=torch.long, device=path.device)
    for (p, lvl), bucket in FULL_INDEX.items():
        lookup[p + MAX_PATH_LENGTH, lvl + MAX_PATH_LENGTH] = bucket
    inside = (path.abs() <= MAX_PATH_LENGTH) & (level.abs() <= MAX_PATH_LENGTH)
    found = lookup[
        (path + MAX_PATH_LENGTH).clamp(0, size - 1),
        (level + MAX_PATH_LENGTH).clamp(0, size - 1),
    ]
    return torch.where(inside, found, FULL_OTHER_BUCKET)


#: The one numbering of section nodes (the package docstring points here). Nodes of the tree for tokens
#: outside every section, as in the authors' public code, where the chunk before the document (BOS), the
#: question chunk and the end chunk (EOS) are each a depth-1 child of a virtual root: the question
#: (InstructSum's instruction), the start (BOS, a prefix, a title) and the end. They come first in
#: ``section_relations``; document section k (pre-order, the root 0) is node ``k + OUTSIDE_NODES``. Inputs
#: made by hand without outside nodes number the document's sections from 0 (:data:`ROOT_SECTION`).
QUESTION_NODE, START_NODE, END_NODE = 0, 1, 2
OUTSIDE_NODES = 3


def outside_node_relations(
    path_len: np.ndarray, level_diff: np.ndarray, depth: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The document's (S, S) relations (:meth:`~synopsis.document.Document.tree_relations`) with the three
    outside nodes (:data:`QUESTION_NODE`, :data:`START_NODE`, :data:`END_NODE`) put first: (S+3, S+3)
    PathLen and LvlDiff, (S+3,) depths and each node's position in the text (question, start, the
    document's sections, end), for :func:`relation_buckets`.

    The document's root (depth 0) is the virtual root: an outside node is its child, so from an outside
    node to section k is ``depth(k) + 1`` steps and LvlDiff ``depth(k) - 1`` (to a top-level section:
    PathLen +-2, LvlDiff 0, siblings), and two outside nodes are siblings (PathLen +-2, LvlDiff 0).
    """
    sections = len(depth)
    count = sections + OUTSIDE_NODES
    depths = np.concatenate([np.ones(OUTSIDE_NODES, dtype=np.int64), np.asarray(depth, dtype=np.int64)])
    order = np.concatenate([[0, 1, count - 1], np.arange(2, sections + 2)]).astype(np.int64)
    steps = np.full((count, count), 2, dtype=np.int64)  # outside <-> outside: siblings under the root
    steps[:OUTSIDE_NODES, OUTSIDE_NODES:] = depths[None, OUTSIDE_NODES:] + 1
    steps[OUTSIDE_NODES:, :OUTSIDE_NODES] = depths[OUTSIDE_NODES:, None] + 1
    np.fill_diagonal(steps, 0)
    path = steps * np.sign(order[None, :] - order[:, None])
    path[OUTSIDE_NODES:, OUTSIDE_NODES:] = path_len
    level = depths[None, :] - depths[:, None]
    level[OUTSIDE_NODES:, OUTSIDE_NODES:] = level_diff
    return path, level, depths, order


def document_relation_buckets(document: Any, *, selected: bool = False) -> torch.LongTensor:
    """:func:`relation_buckets` of a :class:`~synopsis.document.Document` (all its sections, root first)."""
    path, level = document.tree_relations()
    return relation_buckets(path, level, [s.depth for s in document.sections], selected=selected)


def pad_section_relations(relations: Sequence[torch.Tensor | np.ndarray]) -> torch.LongTensor:
    """Stack per-document (S_i, S_i) bucket ids into (B, S_max, S_max), padding with -1 (never used)."""
    mats = [_as_long(r, "relations", 2) for r in relations]
    size = max((m.shape[0] for m in mats), default=0)
    device = mats[0].device if mats else None
    out = torch.full((len(mats), size, size), -1, dtype=torch.long, device=device)
    for b, m in enumerate(mats):
        out[b, : m.shape[0], : m.shape[1]] = m.to(device)
    return out


# ---------------------------------------------------------------------- SECTOK / LVLSECTOK markers

SECTION_MARKER_KINDS = ("sectok", "lvlsectok")


def section_marker(depth: int, kind: str) -> str:
    """The marker put at the start of a section of ``depth`` (1 = top level; the root has no heading).

    SECTOK uses one token for every section (``[SEC]``); LVLSECTOK one per depth (``[SEC-L1]``,
    ``[SEC-L2]``, ...) (paper section 5, "Comparisons").
    """
    if kind not in SECTION_MARKER_KINDS:
        raise ValueError(f"unknown section marker kind {kind!r} (expected one of {SECTION_MARKER_KINDS})")
    if depth < 1:
        raise ValueError(f"section markers start sections of depth >= 1 (the root has none), got {depth}")
    return "[SEC]" if kind == "sectok" else f"[SEC-L{depth}]"


def add_section_tokens(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, kind: str, max_depth: int
) -> dict[str, int]:
    """Add the markers of ``kind`` (depths 1..max_depth) as special tokens; returns marker -> id.

    Like Hie-BART's sentence marker, a marker swallows the space before it (``lstrip``, as BART's
    ``<mask>``), so the text around it tokenizes as without it; the embedding matrix grows when needed.
    """
    if max_depth < 1:
        raise ValueError(f"max_depth must be >= 1, got {max_depth}")
    depths = [1] if kind == "sectok" else range(1, max_depth + 1)
    markers = [section_marker(d, kind) for d in depths]
    vocab = tokenizer.get_vocab()
    new = [m for m in markers if m not in vocab]
    if new:
        tokenizer.add_tokens(
            [AddedToken(m, lstrip=True, rstrip=False, special=True, normalized=False) for m in new],
            special_tokens=True,
        )
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        model.resize_token_embeddings(len(tokenizer))
    return {m: tokenizer.convert_tokens_to_ids(m) for m in markers}


def add_qs_tokens(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> dict[str, int]:
    """Add the QS hierarchy markers ``[L↓] [L↑] [L-] [ANS]`` (paper section 4) as single tokens.

    They are *added* tokens, not special ones, so ``decode(..., skip_special_tokens=True)`` keeps them
    (a generated hierarchy must keep its markers); without them T5's vocabulary has no ``↓``/``↑`` and
    turns ``[L↓]`` and ``[L↑]`` into the same ``[L<unk>]``, so a hierarchy parses as one pair. Each new
    embedding (input and, when untied, output) starts as the mean of the embeddings of the pieces the
    marker was tokenized into before, so the model starts from what it read until now. Returns marker
    -> id; markers already in the vocabulary are left as they are.
    """
    from synopsis.qs import RESERVED

    vocab = tokenizer.get_vocab()
    new = [m for m in RESERVED if m not in vocab]
    pieces = {m: tokenizer(m, add_special_tokens=False)["input_ids"] for m in new}
    if new:
        tokenizer.add_tokens(
            [AddedToken(m, lstrip=True, rstrip=False, special=False, normalized=False) for m in new]
        )
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        # No mean resizing: every new row is set from its pieces below (and it cannot run on the meta
        # device, where --dry-run builds the model).
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    ids = {m: tokenizer.convert_tokens_to_ids(m) for m in RESERVED}
    inputs, outputs = model.get_input_embeddings(), model.get_output_embeddings()
    tables = [inputs.weight]
    if outputs is not None and outputs.weight.data_ptr() != inputs.weight.data_ptr():
        tables.append(outputs.weight)
    with torch.no_grad():
        for marker, parts in pieces.items():
            for table in tables:
                if parts:
                    table[ids[marker]] = table[torch.tensor(parts, device=table.device)].mean(0)
    return ids


# ---------------------------------------------------------------------- section tensors and biases

#: The node of tokens labelled -1 (padding, or inputs made by hand without outside nodes): node 0, the
#: document's root in a tree without outside nodes, the question node in one with them (the input builder
#: labels every real token, :data:`OUTSIDE_NODES`).
ROOT_SECTION = 0


@dataclass(frozen=True)
class SectionLayout:
    """Validated section inputs of one batch.

    ``ids`` (B, L): section (tree node) of each token, tokens labelled -1 mapped to node 0;
    ``num_sections`` is the zero "no section" slot, used only for LED's window positions past the
    sequence. ``relations`` (B, S, S): bucket ids, padding clamped to a valid bucket.
    """

    ids: torch.Tensor
    relations: torch.Tensor

    @property
    def num_sections(self) -> int:
        return int(self.relations.shape[-1])


def section_layout(
    section_ids: torch.Tensor | None,
    section_relations: torch.Tensor | None,
    *,
    length: int,
    buckets: int,
    device: torch.device | None = None,
) -> SectionLayout | None:
    """Check ``section_ids`` (B, length) and ``section_relations`` (B, S, S); None when neither is given.

    Both are moved to ``device`` (the model input's), so a collator may build them on the CPU.
    """
    if section_ids is None and section_relations is None:
        return None
    if section_ids is None or section_relations is None:
        raise ValueError("HIBRIDS needs both section_ids and section_relations (or neither)")
    if section_ids.dim() != 2 or section_relations.dim() != 3:
        raise ValueError(
            f"section_ids must be (batch, length) and section_relations (batch, S, S); got "
            f"{tuple(section_ids.shape)} and {tuple(section_relations.shape)}"
        )
    batch, size = section_relations.shape[0], section_relations.shape[-1]
    if section_relations.shape[1] != size or section_ids.shape != (batch, length):
        raise ValueError(
            f"section_ids {tuple(section_ids.shape)} and section_relations {tuple(section_relations.shape)} "
            f"do not match the input (batch {batch}, length {length})"
        )
    ids = section_ids.to(device=device, dtype=torch.long)
    relations = section_relations.to(device=device, dtype=torch.long)
    _check_below(ids, size, "section_ids refers to section {} but section_relations has only {} sections")
    _check_below(relations, buckets, "section_relations has bucket {}; the table has {}")
    # The input builder puts tokens outside every section on nodes of their own (question, start, end under
    # the virtual root, as the authors' public code; outside_node_relations); -1 is padding, or a hand-made
    # input whose tree has no such nodes: node 0, that tree's root.
    return SectionLayout(ids=torch.where(ids < 0, ROOT_SECTION, ids), relations=relations.clamp(min=0))


def _check_below(values: torch.Tensor, limit: int, message: str) -> None:
    """Refuse ``values >= limit`` without a host sync: the limits are shapes and config sizes, and on an
    accelerator (or under ``torch.compile``) the check is a device-side assertion; only CPU tensors, where
    reading the maximum costs no synchronisation, get the exact ValueError."""
    if not values.numel():
        return
    if values.device.type == "cpu" and not torch.compiler.is_compiling():
        largest = int(values.max())
        if largest >= limit:
            raise ValueError(message.format(largest, limit))
        return
    torch._assert_async((values < limit).all(), message.format(f"(>= {limit})", limit))
