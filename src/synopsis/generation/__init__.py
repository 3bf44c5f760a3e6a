"""Decoding strategies, separate from the models (as OpenNMT-py's ``translate/``).

A model exposes a *step function* ``step(tokens, state, memory) -> (log_probs, state)``: ``tokens`` (N,) are
the previous tokens of N hypotheses, ``state`` is whatever the model carries between steps (reordered when
beams are reordered), ``memory`` is read-only per-document data (encoder outputs; expanded once per beam).
``state`` and ``memory`` may be tensors or dataclasses / tuples / dicts of tensors with the batch first;
anything that is not a tensor is passed through unchanged.
"""

from synopsis.generation.beam_search import Hypothesis, beam_search
from synopsis.generation.greedy import greedy_search
from synopsis.generation.penalties import length_normalize

__all__ = ["Hypothesis", "beam_search", "greedy_search", "length_normalize"]
