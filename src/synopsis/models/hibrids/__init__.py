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
  sec(j)), h]``. ``hibrids_decoder_per_head: false`` (``convert hibrids --shared-decoder-table``) gives the
  authors' public code's one column shared by the heads; configs saved before the table was per head (no
  ``hibrids_decoder_per_head``) keep their one shared column. On LED the encoder bias also reaches the global
  tokens' rows and columns (the paper's equation), or only the sliding band (``hibrids_global_bias: false``,
  ``--band-only``, the public code).
* **HIBRIDS-S** (section 3, last paragraph): a small table over a few salient relations only
  (:func:`relation_buckets` with ``selected=True``).

How the pieces fit into ``transformers`` (no forked modeling files; attention modules are subclassed and
swapped in, like :mod:`synopsis.models.hie_bart`):

* Inputs. ``section_ids`` (B, L): each source token's node of the section tree, and ``section_relations``
  (B, S, S): bucket ids from :func:`relation_buckets` between those nodes, padded to the batch's largest S
  with -1 (rows no token points to are never used). The numbering is the one of :mod:`.relations`
  (:data:`OUTSIDE_NODES`, :data:`ROOT_SECTION`), documented there only: the input builder
  (:class:`~synopsis.models.inputs.Seq2SeqInputs`, through :class:`.inputs.HibridsInputs`, this method's input
  feature) gives tokens outside every section nodes of their own,
  the public code's question, start and end chunks (:func:`outside_node_relations`; a question input on
  BART/LED reads ``<s> question <s> document </s>``), and labels every real token; a token labelled -1
  (padding, inputs made by hand) is node 0, the root's relations, as query and as key. Both are ordinary
  ``forward``/``generate`` keyword arguments; ``generate()`` hands them to the encoder, expands them per
  beam and passes them to every decoder step. Passing neither gives no bias at all: the model then computes
  exactly the base model.
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
  inputs. Every such per-call value is held per thread, so one LED model runs several batches at once
  (the service's batch workers), each as it runs alone.

The package: :mod:`.relations` (buckets, section layouts, marker tokens), :mod:`.inputs` (what HIBRIDS and
SECTOK add to the encoder's input, :mod:`synopsis.models.features`), :mod:`.bias` (the bias math
and the attention helpers shared by the bases), one module per base (:mod:`.bart`, :mod:`.t5`,
:mod:`.led`), HIBRIDS stacked on Hie-BART (:mod:`.hie_bart`) and on InstructSum's T5
(:mod:`.instructsum`), and :mod:`.conversion`. Config, init,
registration and conversion come from :mod:`synopsis.models.adaptation`; the outer BART/T5 classes from
:mod:`synopsis.models.bases`. The encoder and decoder stacks take their arguments by keyword and pass the
base's through (:class:`~synopsis.models.hibrids.bias.HibridsStackMixin`).

Checkpoints: :func:`convert_to_hibrids` turns a loaded stock BART/T5/LED model into its HIBRIDS
counterpart with zero tables (so it computes exactly the base model until trained); the configs record
``hibrids_encoder``, ``hibrids_decoder`` and ``hibrids_selected`` and are registered with the Auto classes,
so ``AutoModelForSeq2SeqLM.from_pretrained`` rebuilds a saved HIBRIDS model with no extra flags.
Tables of a model built from its config (training from scratch) start as N(0, 0.02), as in the paper.

The SECTOK / LVLSECTOK baselines (paper section 5, "Comparisons") only need section-start marker tokens:
:func:`section_marker` and :func:`add_section_tokens`.
"""

from synopsis.models.hibrids.bart import (
    HibridsBartAlignmentAttention,
    HibridsBartConfig,
    HibridsBartCrossAttention,
    HibridsBartDecoder,
    HibridsBartEncoder,
    HibridsBartEncoderAttention,
    HibridsBartForConditionalGeneration,
    HibridsBartModel,
)
from synopsis.models.hibrids.bias import (
    HibridsBias,
    cross_attention_bias,
    pair_bias,
    pool_by_section,
    token_pair_bias,
    window_bias,
    window_index,
)
from synopsis.models.hibrids.conversion import convert_to_hibrids
from synopsis.models.hibrids.hie_bart import (
    HibridsHieBartAttention,
    HibridsHieBartConfig,
    HibridsHieBartForConditionalGeneration,
    HibridsHieBartModel,
)
from synopsis.models.hibrids.instructsum import (
    InstructSumHibridsT5Config,
    InstructSumHibridsT5ForConditionalGeneration,
)
from synopsis.models.hibrids.led import (
    HibridsLEDConfig,
    HibridsLEDEncoderSelfAttention,
    HibridsLEDForConditionalGeneration,
    HibridsLEDModel,
)
from synopsis.models.hibrids.relations import (
    END_NODE,
    FULL_INDEX,
    FULL_OTHER_BUCKET,
    FULL_RELATIONS,
    MAX_PATH_LENGTH,
    OUTSIDE_NODES,
    QUESTION_NODE,
    ROOT_SECTION,
    SECTION_MARKER_KINDS,
    START_NODE,
    SectionLayout,
    SelectedRelation,
    add_qs_tokens,
    add_section_tokens,
    document_relation_buckets,
    num_buckets,
    outside_node_relations,
    pad_section_relations,
    relation_buckets,
    section_layout,
    section_marker,
)
from synopsis.models.hibrids.t5 import (
    HibridsT5Config,
    HibridsT5EncoderAttention,
    HibridsT5ForConditionalGeneration,
    HibridsT5Model,
    T5AttentionBias,
)

__all__ = [
    "END_NODE",
    "FULL_INDEX",
    "FULL_OTHER_BUCKET",
    "FULL_RELATIONS",
    "MAX_PATH_LENGTH",
    "OUTSIDE_NODES",
    "QUESTION_NODE",
    "ROOT_SECTION",
    "SECTION_MARKER_KINDS",
    "START_NODE",
    "HibridsBartAlignmentAttention",
    "HibridsBartConfig",
    "HibridsBartCrossAttention",
    "HibridsBartDecoder",
    "HibridsBartEncoder",
    "HibridsBartEncoderAttention",
    "HibridsBartForConditionalGeneration",
    "HibridsBartModel",
    "HibridsBias",
    "HibridsHieBartAttention",
    "HibridsHieBartConfig",
    "HibridsHieBartForConditionalGeneration",
    "HibridsHieBartModel",
    "HibridsLEDConfig",
    "HibridsLEDEncoderSelfAttention",
    "HibridsLEDForConditionalGeneration",
    "HibridsLEDModel",
    "HibridsT5Config",
    "HibridsT5EncoderAttention",
    "HibridsT5ForConditionalGeneration",
    "HibridsT5Model",
    "InstructSumHibridsT5Config",
    "InstructSumHibridsT5ForConditionalGeneration",
    "SectionLayout",
    "SelectedRelation",
    "T5AttentionBias",
    "add_qs_tokens",
    "add_section_tokens",
    "convert_to_hibrids",
    "cross_attention_bias",
    "document_relation_buckets",
    "num_buckets",
    "outside_node_relations",
    "pad_section_relations",
    "pair_bias",
    "pool_by_section",
    "relation_buckets",
    "section_layout",
    "section_marker",
    "token_pair_bias",
    "window_bias",
    "window_index",
]
