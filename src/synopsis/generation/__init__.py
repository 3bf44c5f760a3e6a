"""Decoding strategies, separate from the models (as OpenNMT-py's ``translate/``).

A model exposes a *step function* ``step(tokens, state, memory) -> (log_probs, state)``: ``tokens`` (N,) are
the previous tokens of N hypotheses, ``state`` is whatever the model carries between steps (reordered when
beams are reordered), ``memory`` is read-only per-document data (encoder outputs), one row per document still
searching: a beam search's N = B K hypotheses are K consecutive rows per document, which share that row.
``state`` and ``memory`` may be tensors or dataclasses / tuples / dicts of tensors with the batch first;
anything that is not a tensor is passed through unchanged. Score adjustments are logits processors
(:mod:`synopsis.generation.processors`), chosen by name from a generation config.
"""

from synopsis.generation.beam_search import Hypothesis, beam_search
from synopsis.generation.greedy import greedy_search
from synopsis.generation.penalties import length_normalize
from synopsis.generation.processors import (
    AllowedTokensProcessor,
    LogitsProcessor,
    LogitsProcessorList,
    MaxLengthProcessor,
    MinLengthProcessor,
    NoImmediateRepeatProcessor,
    NoRepeatNGramProcessor,
    build_processors,
    source_vocabulary_mask,
)

__all__ = [
    "AllowedTokensProcessor",
    "Hypothesis",
    "LogitsProcessor",
    "LogitsProcessorList",
    "MaxLengthProcessor",
    "MinLengthProcessor",
    "NoImmediateRepeatProcessor",
    "NoRepeatNGramProcessor",
    "beam_search",
    "build_processors",
    "greedy_search",
    "length_normalize",
    "source_vocabulary_mask",
]
