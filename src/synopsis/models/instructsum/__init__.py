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

Modules: :mod:`~synopsis.models.instructsum.prompts` (templates, token ids, budgets, batches),
:mod:`~synopsis.models.instructsum.inputs` (the prompt as the input builder lays it out, its input feature),
:mod:`~synopsis.models.instructsum.model` (config, block mask, attention, encoder, conversion) and
:mod:`~synopsis.models.instructsum.cache` (the source cache and the one cached encoding path). Importing the
package registers the model type with the ``transformers`` Auto classes.

Hooks into ``transformers`` (no forked modeling code): :class:`InstructSumT5Config` subclasses
``T5Config``; :class:`InstructSumT5Stack` is T5's encoder stack that builds the 4D float block mask from
``segment_ids`` and ``attention_mask``; :class:`InstructSumT5Attention` replaces only the encoder
self-attention modules (same parameters) so that a layer can record or reuse the source keys and values.
The public ``attention_mask`` stays 2D (T5 reuses it for cross-attention). ``segment_ids`` survive
``generate()``: the encoder consumes them and the decoder never sees them.
"""

from synopsis.models.instructsum.cache import (
    CachedSource,
    EncodedPrompts,
    SourceCache,
    encode_source,
    encode_with_instruction,
    summarize_with_instructions,
)
from synopsis.models.instructsum.model import (
    InstructSumT5Attention,
    InstructSumT5Config,
    InstructSumT5ForConditionalGeneration,
    InstructSumT5Stack,
    block_attention_mask,
    convert_to_instructsum,
    encoder_flops,
    is_instructsum,
)
from synopsis.models.instructsum.prompts import (
    DEFAULT_MAX_INSTRUCTION_TOKENS,
    DEFAULT_MAX_SOURCE_TOKENS,
    INSTRUCTION_SEGMENT,
    INSTRUCTION_TEMPLATE,
    NO_INSTRUCTION_TEMPLATE,
    SOURCE_SEGMENT,
    SOURCE_TEMPLATE,
    PromptIds,
    SourceSections,
    collate_prompts,
    full_prompt,
    instruction_prompt,
    keep_within_budget,
    prompt_parts,
    source_prompt,
    tokenize_prompt,
)

__all__ = [
    "DEFAULT_MAX_INSTRUCTION_TOKENS",
    "DEFAULT_MAX_SOURCE_TOKENS",
    "INSTRUCTION_SEGMENT",
    "INSTRUCTION_TEMPLATE",
    "NO_INSTRUCTION_TEMPLATE",
    "SOURCE_SEGMENT",
    "SOURCE_TEMPLATE",
    "CachedSource",
    "EncodedPrompts",
    "InstructSumT5Attention",
    "InstructSumT5Config",
    "InstructSumT5ForConditionalGeneration",
    "InstructSumT5Stack",
    "PromptIds",
    "SourceCache",
    "SourceSections",
    "block_attention_mask",
    "collate_prompts",
    "convert_to_instructsum",
    "encode_source",
    "encode_with_instruction",
    "encoder_flops",
    "full_prompt",
    "instruction_prompt",
    "is_instructsum",
    "keep_within_budget",
    "prompt_parts",
    "source_prompt",
    "summarize_with_instructions",
    "tokenize_prompt",
]
