"""HIBRIDS: attention with hierarchical biases from the document's section tree.

Cao & Wang, "HIBRIDS: Attention with Hierarchical Biases for Structure-aware Long Document Summarization",
ACL 2022, section 3 ("HIBRIDS with Hierarchical Biases"). Every token belongs to a section of the document
tree; for a query token in section ``x`` and a key token in section ``y`` the paper takes two tree
distances, ``PathLen(x, y)`` (shortest tree path, positive when ``y`` comes later in the document) and
``LvlDiff(x, y) = depth(y) - depth(x)`` (see :meth:`synopsis.document.Document.tree_relations`), and
looks up a learnable bias for that pair:

* **HIBRIDS-ENC** (section 3, "Attention with Hierarchical Biases"): every encoder self-attention layer
  ``l`` and head ``h`` owns a table ``B^l[., h]``; ``score_ij = q_i . k_j / sqrt(d) + B^l[rel(x_i, y_j), h]``.
* **HIBRIDS-DEC**: only the last decoder layer's cross-attention gets a bias, from a per-head table (the
  paper: "each head maintains its own lookup table"), weighted by the previous (second-to-last) decoder
  layer's cross-attention probabilities ``alpha``: ``bias_tj^h = sum_k alpha_tk^h * B_dec[rel(sec(k),
  sec(j)), h]``. Configs saved before the table was per head (no ``hibrids_decoder_per_head``) keep their
  one shared column.
* **HIBRIDS-S** (section 3, last paragraph): a small table over a few salient relations only
  (:func:`relation_buckets` with ``selected=True``).

How the pieces fit into ``transformers`` (no forked modeling files; attention modules are subclassed and
swapped in, like :mod:`synopsis.models.hie_bart`):

* Inputs. ``section_ids`` (B, L): each source token's section (pre-order index within its document), -1
  for tokens outside any section (task prefix, BOS/EOS, a title, the root question, padding). **Such tokens
  belong to the tree's root node** (section 0, depth 0), as the authors' public code hangs them off a
  virtual root: they get the root's relations, as query and as key. ``section_relations`` (B, S, S):
  bucket ids from :func:`relation_buckets`, padded to the batch's largest S with -1 (or any valid bucket;
  rows no token points to are never used). Both are ordinary ``forward``/``generate`` keyword arguments;
  ``generate()`` hands them to the encoder, expands them per beam and passes them to every decoder step.
  Passing neither gives no bias at all: the model then computes exactly the base model.
* Memory. No (L, L) index is ever built. Per layer the (B, H, S+1, S+1) table of bias values is looked up
  once from the (S, S) relation ids (the extra row/column is the zero "no section" slot), then gathered to
  tokens: BART/T5 encoders get a (B, H, L, L) *float* bias (the size of their attention scores, which SDPA
  needs as an additive mask anyway); LED's banded encoder gets the bias only on its (B, L, H, 2w+1) window
  and on the global columns/rows. The decoder bias uses the O(T x S) form: the previous layer's attention
  is pooled per section, ``A_ts = sum_{k in s} alpha_tk``, then ``bias_tj = sum_s A_ts B_dec[rel(s, sec(j))]``
  -- never a T x L x L tensor.
* Attention backends. BART and T5 work under ``eager`` and ``sdpa``. BART's biased layers compute their
  attention directly (the bias added into the scores; SDPA with a float mask that needs a gradient would
  fall back to its slower math path anyway); T5's pass the bias with its ``position_bias``. LED only has its
  own (eager) attention.
* The decoder bias needs the second-to-last layer's cross-attention probabilities, which SDPA does not
  return. That layer's cross-attention is a subclass that computes its attention once, in the eager form,
  and pools its probabilities (before dropout) per section into a small per-call object that the decoder
  hands to both layers; the last layer's cross-attention reads it. Heads are paired as in the authors'
  public code: head ``h`` of the last layer is weighted by head ``h`` of the previous layer. With zero
  tables the model equals the base model (bit for bit under eager; to float rounding under SDPA, whose
  fused kernels round differently).
* LED's modules pass no extra arguments, so LED gets its section inputs through a per-model slot that
  the model sets for the duration of one call; each layer copies the slot's value into its own keyword
  arguments *before* gradient checkpointing wraps it, so recomputation in the backward pass sees the same
  inputs. (Not thread-safe: do not run one LED model object from several threads at once.)

Checkpoints: :func:`convert_to_hibrids` turns a loaded stock BART/T5/LED model into its HIBRIDS
counterpart with zero tables (so it computes exactly the base model until trained); the configs record
``hibrids_encoder``, ``hibrids_decoder`` and ``hibrids_selected`` and are registered with the Auto classes,
so ``AutoModelForSeq2SeqLM.from_pretrained`` rebuilds a saved HIBRIDS model with no extra flags.
Tables of a model built from its config (training from scratch) start as N(0, 0.02), as in the paper.

The SECTOK / LVLSECTOK baselines (paper section 5, "Comparisons") only need section-start marker tokens:
:func:`section_marker` and :func:`add_section_tokens`.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from torch.nn import functional as F
from transformers import (
    AddedToken,
    AutoConfig,
    AutoModel,
    AutoModelForSeq2SeqLM,
    BartConfig,
    LEDConfig,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    T5Config,
)
from transformers import initialization as init
from transformers.cache_utils import EncoderDecoderCache
from transformers.models.bart.modeling_bart import (
    BartAttention,
    BartDecoder,
    BartEncoder,
    BartForConditionalGeneration,
    BartModel,
    BartPreTrainedModel,
    BartScaledWordEmbedding,
)
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
from transformers.models.t5.modeling_t5 import (
    T5Attention,
    T5ForConditionalGeneration,
    T5Model,
    T5PreTrainedModel,
    T5Stack,
)

logger = logging.getLogger(__name__)

# ============================================================================ relation buckets

#: The paper's table covers |PathLen| <= 19 (section 3; the public code's index set).
MAX_PATH_LENGTH = 19
#: Initialisation of tables in models built from scratch ("like other weights", N(0, 0.02)).
HIBRIDS_INIT_STD = 0.02


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
) -> torch.LongTensor:
    """(S, S) bucket ids of every ordered pair of sections, for ``section_relations``.

    ``path_len`` and ``level_diff`` are the signed (S, S) arrays of
    :meth:`~synopsis.document.Document.tree_relations` (sections in pre-order, row = query section),
    ``depth`` the (S,) section depths (root 0). Full table (``selected=False``): the bucket of each
    (PathLen, LvlDiff) pair of the paper's index set, :data:`FULL_OTHER_BUCKET` for any other pair.
    HIBRIDS-S (``selected=True``): the :class:`SelectedRelation` of each pair.
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

    order = torch.arange(n, device=path.device)
    later = order[None, :] > order[:, None]
    # A section's top-level section is the last depth-1 section at or before it in pre-order.
    top = torch.where(depths == 1, order, -1).cummax(0).values
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


# ============================================================================ SECTOK / LVLSECTOK markers

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


# ============================================================================ section tensors and biases

#: The section that tokens outside every section belong to: the document's root (pre-order index 0).
ROOT_SECTION = 0


@dataclass(frozen=True)
class SectionLayout:
    """Validated section inputs of one batch.

    ``ids`` (B, L): section of each token, tokens outside any section mapped to the root (section 0);
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
    # Tokens outside every section (BOS/EOS, the task prefix, a title, the root question, padding) are the
    # tree's root node, as in the authors' public code, where such chunks hang off a virtual root: the
    # document's root (section 0, depth 0) is that node, so they get the root's relations to every section.
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


class HibridsBias(nn.Module):
    """A learnable table of attention biases: one row per relation bucket, one column per head."""

    def __init__(self, buckets: int, heads: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(buckets, heads))

    def extra_repr(self) -> str:
        return f"buckets={self.weight.shape[0]}, heads={self.weight.shape[1]}"


class _HibridsInit:
    """Mixin for the HIBRIDS model classes: new tables start as N(0, 0.02) (paper section 3)."""

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)  # type: ignore[misc]
        if isinstance(module, HibridsBias):
            init.normal_(module.weight, mean=0.0, std=HIBRIDS_INIT_STD)


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
    if module.config._attn_implementation == "sdpa":
        batch, heads, steps, dim = query.shape
        length = keys.shape[2]
        scores = torch.baddbmm(
            bias.expand(batch, heads, steps, length).reshape(batch * heads, steps, length),
            query.reshape(batch * heads, steps, dim),
            keys.reshape(batch * heads, length, dim).transpose(1, 2),
            alpha=scaling,
        ).view(batch, heads, steps, length)
    else:
        scores = torch.matmul(query, keys.transpose(2, 3)).mul_(scaling).add_(bias)
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill_(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores.add_(attention_mask)
    probs = F.softmax(scores, dim=-1)
    dropped = F.dropout(probs, p=module.dropout, training=module.training)
    return torch.matmul(dropped, values).transpose(1, 2).contiguous(), probs


def _probabilities(scores: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Softmax of attention scores under a float (additive) or boolean mask, as the stock layers do."""
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    return F.softmax(scores, dim=-1, dtype=torch.float32).to(scores.dtype)


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
    scores = torch.matmul(query, keys.transpose(2, 3)) * scaling
    if position_bias is not None:
        scores = scores + position_bias
    probs = _probabilities(scores, attention_mask)
    link.pooled = pool_by_section(probs, link.layout)
    dropped = F.dropout(probs, p=dropout, training=module.training)
    return torch.matmul(dropped, values).transpose(1, 2).contiguous(), probs


@dataclass
class _CrossAttentionLink:
    """Per decoder call: the sections, and the previous layer's attention pooled per section."""

    layout: SectionLayout
    pooled: torch.Tensor | None = None  # (B, H, T, S+1), set by the second-to-last layer


def _decoder_table_heads(config: PreTrainedConfig) -> int:
    """Columns of the decoder table: one per head (the paper), or 1 for configs saved before that."""
    heads = getattr(config, "decoder_attention_heads", None) or config.num_heads  # T5: num_heads
    return heads if config.hibrids_decoder_per_head else 1


class _HibridsConfigMixin:
    """``hibrids_decoder_per_head`` is False for configs saved before the decoder table was per head, so
    their (buckets, 1) tables load and compute as before; new configs default to per-head tables."""

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any) -> Any:
        if "hibrids_decoder_per_head" not in config_dict:
            config_dict = {**config_dict, "hibrids_decoder_per_head": False}
        return super().from_dict(config_dict, **kwargs)  # type: ignore[misc]


def _check_flags(config: PreTrainedConfig, decoder_layers: int) -> None:
    if config.hibrids_decoder and decoder_layers < 2:
        raise ValueError("HIBRIDS-DEC needs at least 2 decoder layers (it reads the second-to-last one)")


def _derived_config(cls: type, config: PreTrainedConfig, overrides: dict[str, Any]) -> Any:
    data = config.to_dict()
    for key in ("model_type", "architectures", "transformers_version"):
        data.pop(key, None)
    data.update(overrides)
    return cls(**data)


# ============================================================================ BART


@strict
class HibridsBartConfig(_HibridsConfigMixin, BartConfig):
    """:class:`~transformers.BartConfig` + which HIBRIDS biases the model has (see the module docstring)."""

    model_type = "hibrids_bart"

    hibrids_encoder: bool = True
    hibrids_decoder: bool = True
    hibrids_selected: bool = False
    hibrids_decoder_per_head: bool = True

    def __post_init__(self, **kwargs: Any) -> None:
        super().__post_init__(**kwargs)
        _check_flags(self, self.decoder_layers)

    @classmethod
    def from_base(cls, config: BartConfig, **overrides: Any) -> HibridsBartConfig:
        """A HIBRIDS config with every setting of ``config`` (a stock or HIBRIDS BART config)."""
        return _derived_config(cls, config, overrides)


class HibridsBartEncoderAttention(BartAttention):
    """BART encoder self-attention with a per-head HIBRIDS table (``hibrids_bias``)."""

    def __init__(self, config: HibridsBartConfig, layer_idx: int) -> None:
        super().__init__(
            embed_dim=config.d_model,
            num_heads=config.encoder_attention_heads,
            dropout=config.attention_dropout,
            config=config,
            layer_idx=layer_idx,
        )
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), self.num_heads)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        hibrids_layout: SectionLayout | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if hibrids_layout is None:
            return super().forward(hidden_states, attention_mask=attention_mask, **kwargs)
        _check_backend(self.config)
        bias = token_pair_bias(self.hibrids_bias.weight, hibrids_layout)
        batch, length, _ = hidden_states.shape
        shape = (batch, length, -1, self.head_dim)
        query = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        keys = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        values = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        output, weights = _biased_attention(
            self, query, keys, values, attention_mask, bias, scaling=self.scaling
        )
        return self.out_proj(output.reshape(batch, length, -1)), weights


class HibridsBartAlignmentAttention(BartAttention):
    """The second-to-last decoder layer's cross-attention: the stock computation (eager form, once), whose
    probabilities are also pooled per section for the last layer's bias (SDPA would not return them)."""

    def __init__(self, config: HibridsBartConfig, layer_idx: int) -> None:
        super().__init__(
            config.d_model,
            config.decoder_attention_heads,
            dropout=config.attention_dropout,
            is_decoder=True,
            config=config,
            layer_idx=layer_idx,
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values: Any = None,
        attention_mask: torch.Tensor | None = None,
        hibrids_cross: _CrossAttentionLink | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if hibrids_cross is None or key_value_states is None:
            return super().forward(
                hidden_states,
                key_value_states=key_value_states,
                past_key_values=past_key_values,
                attention_mask=attention_mask,
                **kwargs,
            )
        batch, steps, _ = hidden_states.shape
        query = self.q_proj(hidden_states).view(batch, steps, -1, self.head_dim).transpose(1, 2)
        keys, values = _cross_keys_values(
            self, key_value_states, past_key_values, (self.k_proj, self.v_proj), self.head_dim
        )
        output, weights = _attend_and_pool(
            self, query, keys, values, attention_mask, hibrids_cross, scaling=self.scaling,
            dropout=self.dropout,
        )  # fmt: skip
        return self.out_proj(output.reshape(batch, steps, -1)), weights


class HibridsBartCrossAttention(BartAttention):
    """The last decoder layer's cross-attention with the HIBRIDS-DEC table (one column per head)."""

    def __init__(self, config: HibridsBartConfig, layer_idx: int) -> None:
        super().__init__(
            config.d_model,
            config.decoder_attention_heads,
            dropout=config.attention_dropout,
            is_decoder=True,
            config=config,
            layer_idx=layer_idx,
        )
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), _decoder_table_heads(config))

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values: Any = None,
        attention_mask: torch.Tensor | None = None,
        hibrids_cross: _CrossAttentionLink | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        # pooled is None only when the previous layer was skipped (LayerDrop): no bias for that pass.
        if hibrids_cross is None or hibrids_cross.pooled is None or key_value_states is None:
            return super().forward(
                hidden_states,
                key_value_states=key_value_states,
                past_key_values=past_key_values,
                attention_mask=attention_mask,
                **kwargs,
            )
        _check_backend(self.config)
        bias = cross_attention_bias(hibrids_cross.pooled, self.hibrids_bias.weight, hibrids_cross.layout)
        batch, steps, _ = hidden_states.shape
        query = self.q_proj(hidden_states).view(batch, steps, -1, self.head_dim).transpose(1, 2)
        keys, values = _cross_keys_values(
            self, key_value_states, past_key_values, (self.k_proj, self.v_proj), self.head_dim
        )
        output, weights = _biased_attention(
            self, query, keys, values, attention_mask, bias, scaling=self.scaling
        )
        return self.out_proj(output.reshape(batch, steps, -1)), weights


class HibridsBartEncoder(_HibridsInit, BartEncoder):
    """BART's encoder with HIBRIDS self-attention; checks the section inputs once per forward pass."""

    def __init__(self, config: HibridsBartConfig) -> None:
        super().__init__(config)
        if config.hibrids_encoder:
            for idx, layer in enumerate(self.layers):
                layer.self_attn = HibridsBartEncoderAttention(config, layer_idx=idx)
            self.post_init()  # initialises only the new modules

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        if self.config.hibrids_encoder:
            source = input_ids if input_ids is not None else inputs_embeds
            layout = section_layout(
                section_ids,
                section_relations,
                length=source.shape[1],
                buckets=num_buckets(self.config.hibrids_selected),
                device=source.device,
            )
            if layout is not None:
                kwargs["hibrids_layout"] = layout
        return super().forward(
            input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, **kwargs
        )


class HibridsBartDecoder(_HibridsInit, BartDecoder):
    """BART's decoder whose last layer's cross-attention gets the HIBRIDS-DEC bias."""

    def __init__(self, config: HibridsBartConfig) -> None:
        super().__init__(config)
        if config.hibrids_decoder:
            last = len(self.layers) - 1
            self.layers[last - 1].encoder_attn = HibridsBartAlignmentAttention(config, layer_idx=last - 1)
            self.layers[last].encoder_attn = HibridsBartCrossAttention(config, layer_idx=last)
            self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        if self.config.hibrids_decoder and encoder_hidden_states is not None:
            layout = section_layout(
                section_ids,
                section_relations,
                length=encoder_hidden_states.shape[1],
                buckets=num_buckets(self.config.hibrids_selected),
                device=encoder_hidden_states.device,
            )
            if layout is not None:
                kwargs["hibrids_cross"] = _CrossAttentionLink(layout)  # a fresh link per call
        return super().forward(
            input_ids=input_ids,
            attention_mask=attention_mask,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )


class HibridsBartModel(_HibridsInit, BartModel):
    config_class = HibridsBartConfig

    def __init__(self, config: HibridsBartConfig) -> None:
        # BartModel.__init__ with the HIBRIDS encoder/decoder (calling it would build and discard stock ones).
        BartPreTrainedModel.__init__(self, config)
        embed_scale = config.d_model**0.5 if config.scale_embedding else 1.0
        self.shared = BartScaledWordEmbedding(
            config.vocab_size, config.d_model, config.pad_token_id, embed_scale=embed_scale
        )
        self.encoder = HibridsBartEncoder(config)
        self.decoder = HibridsBartDecoder(config)
        self.post_init()


class HibridsBartForConditionalGeneration(_HibridsInit, BartForConditionalGeneration):
    """BART with HIBRIDS biases; pass ``section_ids`` and ``section_relations`` to forward/generate."""

    config_class = HibridsBartConfig

    def __init__(self, config: HibridsBartConfig) -> None:
        BartPreTrainedModel.__init__(self, config)
        self.model = HibridsBartModel(config)
        self.final_logits_bias = nn.Buffer(torch.zeros((1, self.model.shared.num_embeddings)))
        self.lm_head = nn.Linear(config.d_model, self.model.shared.num_embeddings, bias=False)
        self.post_init()


# ============================================================================ T5


@strict
class HibridsT5Config(_HibridsConfigMixin, T5Config):
    """:class:`~transformers.T5Config` + which HIBRIDS biases the model has (see the module docstring)."""

    model_type = "hibrids_t5"

    hibrids_encoder: bool = True
    hibrids_decoder: bool = True
    hibrids_selected: bool = False
    hibrids_decoder_per_head: bool = True

    def __post_init__(self, **kwargs: Any) -> None:
        super().__post_init__(**kwargs)
        _check_flags(self, self.num_decoder_layers)

    @classmethod
    def from_base(cls, config: T5Config, **overrides: Any) -> HibridsT5Config:
        """A HIBRIDS config with every setting of ``config`` (a stock or HIBRIDS T5 config)."""
        return _derived_config(cls, config, overrides)


class HibridsT5EncoderAttention(T5Attention):
    """T5 encoder self-attention with a per-head HIBRIDS table.

    T5 computes its relative position bias in layer 0 and every later layer reuses the returned tensor,
    so the HIBRIDS bias is added for this layer only and the *unbiased* position bias is returned.
    """

    def __init__(self, config: HibridsT5Config, has_relative_attention_bias: bool, layer_idx: int) -> None:
        super().__init__(config, has_relative_attention_bias=has_relative_attention_bias, layer_idx=layer_idx)
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), self.n_heads)

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
        past_key_values: Any = None,
        hibrids_layout: SectionLayout | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if hibrids_layout is None:
            return super().forward(
                hidden_states, mask, key_value_states, position_bias, past_key_values, **kwargs
            )
        if self.config._attn_implementation not in ("eager", "sdpa"):
            raise ValueError(
                f"HIBRIDS supports the eager and sdpa attention implementations, "
                f"not {self.config._attn_implementation!r}"
            )
        length = hidden_states.shape[1]
        if position_bias is None:  # what T5Attention would compute (encoder: no cache, no offset)
            if self.has_relative_attention_bias:
                position_bias = self.compute_bias(length, length, device=hidden_states.device)
            else:
                position_bias = hidden_states.new_zeros((1, self.n_heads, length, length))
        bias = token_pair_bias(self.hibrids_bias.weight, hibrids_layout)
        output, _, weights = super().forward(
            hidden_states, mask, key_value_states, position_bias + bias, past_key_values, **kwargs
        )
        return output, position_bias, weights


class HibridsT5AlignmentAttention(T5Attention):
    """T5's second-to-last cross-attention, computed once, its probabilities pooled (see BART's)."""

    def __init__(self, config: HibridsT5Config, layer_idx: int) -> None:
        super().__init__(config, has_relative_attention_bias=False, layer_idx=layer_idx)

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
        past_key_values: Any = None,
        hibrids_cross: _CrossAttentionLink | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if hibrids_cross is None or key_value_states is None:
            return super().forward(
                hidden_states, mask, key_value_states, position_bias, past_key_values, **kwargs
            )
        batch, steps, _ = hidden_states.shape
        dim = self.key_value_proj_dim
        query = self.q(hidden_states).view(batch, steps, -1, dim).transpose(1, 2)
        keys, values = _cross_keys_values(self, key_value_states, past_key_values, (self.k, self.v), dim)
        if position_bias is None:  # cross-attention has no relative bias: T5Attention would use zeros
            position_bias = query.new_zeros((1, self.n_heads, steps, keys.shape[-2]))
        output, weights = _attend_and_pool(
            self,
            query,
            keys,
            values,
            mask,
            hibrids_cross,
            scaling=self.scaling,
            dropout=self.dropout if self.training else 0.0,
            position_bias=position_bias,
        )
        return self.o(output.reshape(batch, steps, -1)), position_bias, weights


class HibridsT5CrossAttention(T5Attention):
    """T5's last cross-attention with the HIBRIDS-DEC table; returns the unbiased position bias."""

    def __init__(self, config: HibridsT5Config, layer_idx: int) -> None:
        super().__init__(config, has_relative_attention_bias=False, layer_idx=layer_idx)
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), _decoder_table_heads(config))

    def forward(
        self,
        hidden_states: torch.Tensor,
        mask: torch.Tensor | None = None,
        key_value_states: torch.Tensor | None = None,
        position_bias: torch.Tensor | None = None,
        past_key_values: Any = None,
        hibrids_cross: _CrossAttentionLink | None = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if hibrids_cross is None or hibrids_cross.pooled is None or key_value_states is None:
            return super().forward(
                hidden_states, mask, key_value_states, position_bias, past_key_values, **kwargs
            )
        if self.config._attn_implementation not in ("eager", "sdpa"):
            raise ValueError(
                f"HIBRIDS supports the eager and sdpa attention implementations, "
                f"not {self.config._attn_implementation!r}"
            )
        bias = cross_attention_bias(hibrids_cross.pooled, self.hibrids_bias.weight, hibrids_cross.layout)
        if position_bias is None:  # cross-attention has no relative bias: T5Attention would use zeros
            position_bias = bias.new_zeros((1, self.n_heads, bias.shape[2], bias.shape[3]))
        output, _, weights = super().forward(
            hidden_states, mask, key_value_states, position_bias + bias, past_key_values, **kwargs
        )
        return output, position_bias, weights


class HibridsT5Stack(_HibridsInit, T5Stack):
    """T5's encoder or decoder stack with HIBRIDS attention; checks the section inputs once per call."""

    def __init__(self, config: HibridsT5Config) -> None:
        super().__init__(config)
        if not config.is_decoder and config.hibrids_encoder:
            for idx, block in enumerate(self.block):
                block.layer[0].SelfAttention = HibridsT5EncoderAttention(
                    config, has_relative_attention_bias=idx == 0, layer_idx=idx
                )
        if config.is_decoder and config.hibrids_decoder:
            last = len(self.block) - 1
            self.block[last - 1].layer[1].EncDecAttention = HibridsT5AlignmentAttention(config, last - 1)
            self.block[last].layer[1].EncDecAttention = HibridsT5CrossAttention(config, last)
        self.post_init()
        self.gradient_checkpointing = False

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        past_key_values: Any = None,
        use_cache: bool | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        buckets = num_buckets(self.config.hibrids_selected)
        if not self.config.is_decoder and self.config.hibrids_encoder:
            source = input_ids if input_ids is not None else inputs_embeds
            layout = section_layout(
                section_ids, section_relations, length=source.shape[1], buckets=buckets, device=source.device
            )
            if layout is not None:
                kwargs["hibrids_layout"] = layout
        if self.config.is_decoder and self.config.hibrids_decoder and encoder_hidden_states is not None:
            length, device = encoder_hidden_states.shape[1], encoder_hidden_states.device
            layout = section_layout(
                section_ids, section_relations, length=length, buckets=buckets, device=device
            )
            if layout is not None:
                kwargs["hibrids_cross"] = _CrossAttentionLink(layout)
        return super().forward(
            input_ids=input_ids,
            attention_mask=attention_mask,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            inputs_embeds=inputs_embeds,
            past_key_values=past_key_values,
            use_cache=use_cache,
            **kwargs,
        )


def _t5_stacks(config: HibridsT5Config) -> tuple[HibridsT5Stack, HibridsT5Stack]:
    """Encoder and decoder stacks configured as T5Model/T5ForConditionalGeneration do."""
    encoder_config = copy.deepcopy(config)
    encoder_config.is_decoder = False
    encoder_config.use_cache = False
    decoder_config = copy.deepcopy(config)
    decoder_config.is_decoder = True
    decoder_config.num_layers = config.num_decoder_layers
    return HibridsT5Stack(encoder_config), HibridsT5Stack(decoder_config)


class HibridsT5Model(_HibridsInit, T5Model):
    config_class = HibridsT5Config

    def __init__(self, config: HibridsT5Config) -> None:
        T5PreTrainedModel.__init__(self, config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder, self.decoder = _t5_stacks(config)
        self.post_init()


class HibridsT5ForConditionalGeneration(_HibridsInit, T5ForConditionalGeneration):
    """T5 with HIBRIDS biases; pass ``section_ids`` and ``section_relations`` to forward/generate."""

    config_class = HibridsT5Config

    def __init__(self, config: HibridsT5Config) -> None:
        T5PreTrainedModel.__init__(self, config)
        self.model_dim = config.d_model
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        self.encoder, self.decoder = _t5_stacks(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()


# ============================================================================ LED


@strict
class HibridsLEDConfig(_HibridsConfigMixin, LEDConfig):
    """:class:`~transformers.LEDConfig` + which HIBRIDS biases the model has (see the module docstring)."""

    model_type = "hibrids_led"

    hibrids_encoder: bool = True
    hibrids_decoder: bool = True
    hibrids_selected: bool = False
    hibrids_decoder_per_head: bool = True

    def __post_init__(self, **kwargs: Any) -> None:
        super().__post_init__(**kwargs)
        _check_flags(self, self.decoder_layers)

    @classmethod
    def from_base(cls, config: LEDConfig, **overrides: Any) -> HibridsLEDConfig:
        """A HIBRIDS config with every setting of ``config`` (a stock or HIBRIDS LED config)."""
        return _derived_config(cls, config, overrides)


class _Slot:
    """A value that the modules of one model see during a call (LED's modules pass no extra arguments)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None

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
    """Longformer self-attention with a per-head HIBRIDS table on the band and on global tokens.

    The stock forward is kept; the bias enters through the three places where it builds scores:
    ``_sliding_chunks_query_key_matmul`` (its first call in a forward pass computes the band's
    query-key scores; the second only builds the padding mask), ``_concat_with_global_key_attn_probs``
    (local queries on global keys) and ``_compute_global_attn_output_from_hidden`` (global queries on
    every key, overridden since the stock method has no hook). ``hibrids_state`` is set by
    :class:`HibridsLEDEncoderLayer` for one call.
    """

    def __init__(self, config: HibridsLEDConfig, layer_id: int) -> None:
        super().__init__(config, layer_id)
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), self.num_heads)
        self.hibrids_state: _LEDEncoderState | None = None
        self._band_bias: torch.Tensor | None = None

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        is_index_masked: torch.Tensor | None = None,
        is_index_global_attn: torch.Tensor | None = None,
        is_global_attn: bool | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, ...]:
        state = self.hibrids_state
        if state is not None:
            one_sided = self.one_sided_attn_window_size
            band = window_bias(
                self.hibrids_bias.weight,
                state.layout.relations,
                state.window_index(one_sided),
                hidden_states.shape[1],
            )
            self._band_bias = band.transpose(1, 2)  # (B, L, H, 2w+1), the layout of the band scores
        try:
            return super().forward(
                hidden_states,
                attention_mask=attention_mask,
                is_index_masked=is_index_masked,
                is_index_global_attn=is_index_global_attn,
                is_global_attn=is_global_attn,
                output_attentions=output_attentions,
            )
        finally:
            self._band_bias = None

    def _sliding_chunks_query_key_matmul(
        self, query: torch.Tensor, key: torch.Tensor, window_overlap: int
    ) -> torch.Tensor:
        scores = super()._sliding_chunks_query_key_matmul(query, key, window_overlap)
        if self._band_bias is not None:
            bias, self._band_bias = self._band_bias, None  # only the first call: the query-key scores
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

    def _concat_with_global_key_attn_probs(
        self,
        key_vectors: torch.Tensor,
        query_vectors: torch.Tensor,
        max_num_global_attn_indices: int,
        is_index_global_attn_nonzero: tuple,
        is_local_index_global_attn_nonzero: tuple,
        is_local_index_no_global_attn_nonzero: tuple,
    ) -> torch.Tensor:
        scores = super()._concat_with_global_key_attn_probs(
            key_vectors=key_vectors,
            query_vectors=query_vectors,
            max_num_global_attn_indices=max_num_global_attn_indices,
            is_index_global_attn_nonzero=is_index_global_attn_nonzero,
            is_local_index_global_attn_nonzero=is_local_index_global_attn_nonzero,
            is_local_index_no_global_attn_nonzero=is_local_index_no_global_attn_nonzero,
        )  # (B, L, H, G)
        if self.hibrids_state is None:
            return scores
        layout = self.hibrids_state.layout
        global_ids = self._global_section_ids(
            max_num_global_attn_indices, is_index_global_attn_nonzero, is_local_index_global_attn_nonzero
        )
        bias = pair_bias(self.hibrids_bias.weight, layout.relations, layout.ids, global_ids)  # (B, H, L, G)
        return scores + bias.transpose(1, 2)

    def _compute_global_attn_output_from_hidden(
        self,
        hidden_states: torch.Tensor,
        max_num_global_attn_indices: int,
        is_local_index_global_attn_nonzero: tuple,
        is_index_global_attn_nonzero: tuple,
        is_local_index_no_global_attn_nonzero: tuple,
        is_index_masked: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.hibrids_state is None:
            return super()._compute_global_attn_output_from_hidden(
                hidden_states=hidden_states,
                max_num_global_attn_indices=max_num_global_attn_indices,
                is_local_index_global_attn_nonzero=is_local_index_global_attn_nonzero,
                is_index_global_attn_nonzero=is_index_global_attn_nonzero,
                is_local_index_no_global_attn_nonzero=is_local_index_no_global_attn_nonzero,
                is_index_masked=is_index_masked,
            )
        # The stock computation (same operations in the same order) with the bias added to the scores.
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


class HibridsLEDAlignmentAttention(LEDDecoderAttention):
    """LED's second-to-last cross-attention, computed once, its probabilities pooled (see BART's)."""

    def __init__(self, config: HibridsLEDConfig, layer_idx: int) -> None:
        super().__init__(
            config.d_model,
            config.decoder_attention_heads,
            dropout=config.attention_dropout,
            is_decoder=True,
            layer_idx=layer_idx,
        )
        self.hibrids_cross: _CrossAttentionLink | None = None

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values: Any = None,
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
        link = self.hibrids_cross
        if link is None or key_value_states is None:
            return super().forward(
                hidden_states,
                key_value_states=key_value_states,
                past_key_values=past_key_values,
                attention_mask=attention_mask,
                output_attentions=output_attentions,
            )
        batch, steps, _ = hidden_states.shape
        query = self.q_proj(hidden_states) * self.scaling
        query = query.view(batch, steps, -1, self.head_dim).transpose(1, 2)
        keys, values = _cross_keys_values(
            self, key_value_states, past_key_values, (self.k_proj, self.v_proj), self.head_dim
        )
        output, weights = _attend_and_pool(
            self, query, keys, values, attention_mask, link, scaling=1.0, dropout=self.dropout
        )
        output = self.out_proj(output.reshape(batch, steps, -1))
        return output, (weights if output_attentions else None), past_key_values


class HibridsLEDCrossAttention(LEDDecoderAttention):
    """LED's last cross-attention with the HIBRIDS-DEC table.

    The stock module accepts only a (B, 1, T, L) mask, but the bias differs per head, so with a bias
    this runs the stock cross-attention computation itself (same operations, same cache use).
    """

    def __init__(self, config: HibridsLEDConfig, layer_idx: int) -> None:
        super().__init__(
            config.d_model,
            config.decoder_attention_heads,
            dropout=config.attention_dropout,
            is_decoder=True,
            layer_idx=layer_idx,
        )
        self.hibrids_bias = HibridsBias(num_buckets(config.hibrids_selected), _decoder_table_heads(config))
        self.hibrids_cross: _CrossAttentionLink | None = None

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        past_key_values: Any = None,
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, Any]:
        link = self.hibrids_cross
        if link is None or link.pooled is None or key_value_states is None:
            return super().forward(
                hidden_states,
                key_value_states=key_value_states,
                past_key_values=past_key_values,
                attention_mask=attention_mask,
                output_attentions=output_attentions,
            )
        bsz, tgt_len, embed_dim = hidden_states.shape
        heads, dim = self.num_heads, self.head_dim
        query = self.q_proj(hidden_states) * self.scaling
        keys, values = _cross_keys_values(
            self, key_value_states, past_key_values, (self.k_proj, self.v_proj), self.head_dim
        )
        query = query.view(bsz, tgt_len, heads, dim).transpose(1, 2).reshape(bsz * heads, tgt_len, dim)
        keys = keys.reshape(bsz * heads, -1, dim)
        values = values.reshape(bsz * heads, -1, dim)
        src_len = keys.shape[1]
        scores = torch.bmm(query, keys.transpose(1, 2)).view(bsz, heads, tgt_len, src_len)
        if attention_mask is not None:
            scores = scores + attention_mask
        scores = scores + cross_attention_bias(link.pooled, self.hibrids_bias.weight, link.layout)
        probs = F.softmax(scores.view(bsz * heads, tgt_len, src_len), dim=-1)
        weights = probs.view(bsz, heads, tgt_len, src_len) if output_attentions else None
        output = torch.bmm(F.dropout(probs, p=self.dropout, training=self.training), values)
        output = output.view(bsz, heads, tgt_len, dim).transpose(1, 2).reshape(bsz, tgt_len, embed_dim)
        return self.out_proj(output), weights, past_key_values


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


def _section_args(
    slot: _Slot | None, section_ids: torch.Tensor | None, section_relations: torch.Tensor | None
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Explicit section arguments, else the ones the model set for this call."""
    if section_ids is None and section_relations is None and slot is not None and slot.value is not None:
        return slot.value
    return section_ids, section_relations


class HibridsLEDEncoder(_HibridsInit, LEDEncoder):
    """LED's encoder with HIBRIDS self-attention; pads section ids to the window multiple like the input."""

    def __init__(self, config: HibridsLEDConfig, inputs: _Slot | None = None) -> None:
        super().__init__(config)
        self._hibrids_inputs = inputs  # set by HibridsLEDModel for the duration of a call
        self._hibrids_layers = _Slot()
        if config.hibrids_encoder:
            self.layers = nn.ModuleList(
                [
                    HibridsLEDEncoderLayer(config, i, self._hibrids_layers)
                    for i in range(config.encoder_layers)
                ]
            )
            self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        global_attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        state = None
        if self.config.hibrids_encoder:
            section_ids, section_relations = _section_args(
                self._hibrids_inputs, section_ids, section_relations
            )
            source = input_ids if input_ids is not None else inputs_embeds
            layout = section_layout(
                section_ids,
                section_relations,
                length=source.shape[1],
                buckets=num_buckets(self.config.hibrids_selected),
                device=source.device,
            )
            if layout is not None:
                window = max(self.config.attention_window)  # LEDEncoder pads the input to this multiple
                padding = (window - source.shape[1] % window) % window
                ids = F.pad(layout.ids, (0, padding), value=layout.num_sections)
                state = _LEDEncoderState(SectionLayout(ids=ids, relations=layout.relations))
        with self._hibrids_layers.holding(state):
            return super().forward(
                input_ids=input_ids,
                attention_mask=attention_mask,
                global_attention_mask=global_attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                return_dict=return_dict,
                **kwargs,
            )


class HibridsLEDDecoder(_HibridsInit, LEDDecoder):
    """LED's decoder whose last layer's cross-attention gets the HIBRIDS-DEC bias."""

    def __init__(self, config: HibridsLEDConfig, inputs: _Slot | None = None) -> None:
        super().__init__(config)
        self._hibrids_inputs = inputs
        self._hibrids_layers = _Slot()
        if config.hibrids_decoder:
            last = config.decoder_layers - 1
            slot = self._hibrids_layers
            self.layers[last - 1] = HibridsLEDDecoderLayer(
                config, last - 1, slot, HibridsLEDAlignmentAttention
            )
            self.layers[last] = HibridsLEDDecoderLayer(config, last, slot, HibridsLEDCrossAttention)
            self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        global_attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        link = None
        if self.config.hibrids_decoder and encoder_hidden_states is not None:
            section_ids, section_relations = _section_args(
                self._hibrids_inputs, section_ids, section_relations
            )
            layout = section_layout(
                section_ids,
                section_relations,
                length=encoder_hidden_states.shape[1],
                buckets=num_buckets(self.config.hibrids_selected),
                device=encoder_hidden_states.device,
            )
            link = None if layout is None else _CrossAttentionLink(layout)
        with self._hibrids_layers.holding(link):
            return super().forward(
                input_ids=input_ids,
                attention_mask=attention_mask,
                global_attention_mask=global_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
                encoder_attention_mask=encoder_attention_mask,
                past_key_values=past_key_values,
                inputs_embeds=inputs_embeds,
                use_cache=use_cache,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                return_dict=return_dict,
                **kwargs,
            )


class HibridsLEDModel(_HibridsInit, LEDModel):
    """LED with HIBRIDS encoder/decoder. LEDModel passes no extra arguments down, so the section inputs
    given here are put in a slot that the encoder and decoder read during this call."""

    config_class = HibridsLEDConfig

    def __init__(self, config: HibridsLEDConfig) -> None:
        LEDPreTrainedModel.__init__(self, config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self._hibrids_inputs = _Slot()
        self.encoder = HibridsLEDEncoder(config, self._hibrids_inputs)
        self.decoder = HibridsLEDDecoder(config, self._hibrids_inputs)
        self.post_init()

    def hibrids_inputs(self, section_ids: torch.Tensor | None, section_relations: torch.Tensor | None) -> Any:
        """Context in which the encoder and decoder see these section inputs (no-op when both are None)."""
        if section_ids is None and section_relations is None:
            return nullcontext()
        return self._hibrids_inputs.holding((section_ids, section_relations))

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.LongTensor | None = None,
        encoder_outputs: Any = None,
        global_attention_mask: torch.Tensor | None = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        with self.hibrids_inputs(section_ids, section_relations):
            return super().forward(
                input_ids=input_ids,
                attention_mask=attention_mask,
                decoder_input_ids=decoder_input_ids,
                decoder_attention_mask=decoder_attention_mask,
                encoder_outputs=encoder_outputs,
                global_attention_mask=global_attention_mask,
                past_key_values=past_key_values,
                inputs_embeds=inputs_embeds,
                decoder_inputs_embeds=decoder_inputs_embeds,
                use_cache=use_cache,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                return_dict=return_dict,
                **kwargs,
            )


class HibridsLEDForConditionalGeneration(_HibridsInit, LEDForConditionalGeneration):
    """LED with HIBRIDS biases; pass ``section_ids`` and ``section_relations`` to forward/generate."""

    config_class = HibridsLEDConfig

    def __init__(self, config: HibridsLEDConfig) -> None:
        LEDPreTrainedModel.__init__(self, config)
        self.led = HibridsLEDModel(config)
        self.final_logits_bias = nn.Buffer(torch.zeros((1, self.led.shared.num_embeddings)))
        self.lm_head = nn.Linear(config.d_model, self.led.shared.num_embeddings, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.LongTensor | None = None,
        encoder_outputs: Any = None,
        global_attention_mask: torch.Tensor | None = None,
        past_key_values: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        section_ids: torch.LongTensor | None = None,
        section_relations: torch.LongTensor | None = None,
        **kwargs: Any,
    ) -> Any:
        with self.led.hibrids_inputs(section_ids, section_relations):
            return super().forward(
                input_ids=input_ids,
                attention_mask=attention_mask,
                decoder_input_ids=decoder_input_ids,
                decoder_attention_mask=decoder_attention_mask,
                encoder_outputs=encoder_outputs,
                global_attention_mask=global_attention_mask,
                past_key_values=past_key_values,
                inputs_embeds=inputs_embeds,
                decoder_inputs_embeds=decoder_inputs_embeds,
                labels=labels,
                use_cache=use_cache,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                return_dict=return_dict,
                **kwargs,
            )


# ============================================================================ conversion and registration

#: base model_type -> (HIBRIDS config class, HIBRIDS model class, stock model class)
HIBRIDS_FAMILIES: dict[str, tuple[type, type, type]] = {
    "bart": (HibridsBartConfig, HibridsBartForConditionalGeneration, BartForConditionalGeneration),
    "t5": (HibridsT5Config, HibridsT5ForConditionalGeneration, T5ForConditionalGeneration),
    "led": (HibridsLEDConfig, HibridsLEDForConditionalGeneration, LEDForConditionalGeneration),
}
HIBRIDS_MODEL_TYPES = tuple(config.model_type for config, _, _ in HIBRIDS_FAMILIES.values())


def convert_to_hibrids(
    model: PreTrainedModel, *, encoder: bool = True, decoder: bool = True, selected: bool = False
) -> PreTrainedModel:
    """The HIBRIDS version of a loaded stock BART/T5/LED seq2seq model, with zero-initialised tables.

    Every weight of ``model`` is copied; the new tables (parameter names contain ``hibrids``) are zero,
    so the result computes exactly what ``model`` computes until it is trained. The config records the
    choice (``hibrids_encoder``, ``hibrids_decoder``, ``hibrids_selected``), so the saved model reloads
    through ``AutoModelForSeq2SeqLM.from_pretrained`` alone.
    """
    model_type = model.config.model_type
    if model_type not in HIBRIDS_FAMILIES:
        raise ValueError(
            f"HIBRIDS converts stock {', '.join(HIBRIDS_FAMILIES)} models, not model_type {model_type!r}"
        )
    config_class, model_class, stock_class = HIBRIDS_FAMILIES[model_type]
    if not isinstance(model, stock_class):
        raise ValueError(f"expected a {stock_class.__name__}, got {type(model).__name__}")
    if not (encoder or decoder):
        raise ValueError("HIBRIDS needs the encoder bias, the decoder bias or both")
    config = config_class.from_base(
        model.config, hibrids_encoder=encoder, hibrids_decoder=decoder, hibrids_selected=selected
    )
    config._attn_implementation = model.config._attn_implementation
    reference = next(model.parameters())
    hibrids = model_class(config).to(device=reference.device, dtype=reference.dtype)
    missing, unexpected = hibrids.load_state_dict(model.state_dict(), strict=False)
    not_hibrids = [name for name in missing if "hibrids" not in name]
    if unexpected or not_hibrids:
        raise RuntimeError(
            f"weights do not map onto the HIBRIDS model: missing {not_hibrids}, extra {unexpected}"
        )
    with torch.no_grad():
        for name, parameter in hibrids.named_parameters():
            if "hibrids" in name:
                parameter.zero_()
    hibrids.train(model.training)
    tables = sum(p.numel() for n, p in hibrids.named_parameters() if "hibrids" in n)
    logger.info(
        "converted %s to %s (encoder=%s, decoder=%s, selected=%s): %d zero-initialised bias parameters",
        type(model).__name__, model_class.__name__, encoder, decoder, selected, tables,
    )  # fmt: skip
    return hibrids


for _config, _model, _generation in (
    (HibridsBartConfig, HibridsBartModel, HibridsBartForConditionalGeneration),
    (HibridsT5Config, HibridsT5Model, HibridsT5ForConditionalGeneration),
    (HibridsLEDConfig, HibridsLEDModel, HibridsLEDForConditionalGeneration),
):
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModel.register(_config, _model, exist_ok=True)
    AutoModelForSeq2SeqLM.register(_config, _generation, exist_ok=True)
