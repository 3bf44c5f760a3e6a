"""Logits processors: small, checked score adjustments that compose as a list (Hugging Face's idiom).

A processor takes the tokens generated so far by N hypotheses, ``(N, t)`` without BOS, and their next-token
log-probabilities ``(N, V)``, and returns adjusted log-probabilities (never modifying its input in place).
Decoders apply a :class:`LogitsProcessorList` at every step; :func:`build_processors` chooses processors by
the names of the generation config's fields, so a model's ``generation_config.json`` decides them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch


class LogitsProcessor(ABC):
    @abstractmethod
    def __call__(self, tokens: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor: ...

    def select_documents(self, documents: torch.Tensor) -> LogitsProcessor:
        """This processor for the ``documents`` (indices, in order) of its batch only, when a decoder drops
        finished documents; a processor that keeps nothing per document is unchanged."""
        return self


class LogitsProcessorList(list):
    """Processors applied in order."""

    def __call__(self, tokens: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        for processor in self:
            log_probs = processor(tokens, log_probs)
        return log_probs

    def select_documents(self, documents: torch.Tensor) -> LogitsProcessorList:
        """Each processor for the ``documents`` of its batch only (see ``LogitsProcessor``)."""
        return LogitsProcessorList(processor.select_documents(documents) for processor in self)


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


class MinLengthProcessor(LogitsProcessor):
    """Forbid EOS while the hypothesis, with the token being chosen, would be shorter than ``min_length``."""

    def __init__(self, min_length: int, eos_id: int) -> None:
        self.min_length = _check_int("min_length", min_length, 0)
        self.eos_id = _check_int("eos_id", eos_id, 0)

    def __call__(self, tokens: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        if tokens.size(1) + 1 >= self.min_length:
            return log_probs
        log_probs = log_probs.clone()
        log_probs[:, self.eos_id] = float("-inf")
        return log_probs


class MaxLengthProcessor(LogitsProcessor):
    """Force EOS as the ``max_length``-th token (EOS counted), so that a decoder run for ``max_length`` steps
    ends every hypothesis with at most ``max_length - 1`` words and EOS, none cut without it (Hugging Face's
    ``ForcedEOSTokenLogitsProcessor``)."""

    def __init__(self, max_length: int, eos_id: int) -> None:
        self.max_length = _check_int("max_length", max_length, 1)
        self.eos_id = _check_int("eos_id", eos_id, 0)

    def __call__(self, tokens: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        if tokens.size(1) + 1 < self.max_length:
            return log_probs
        forced = torch.full_like(log_probs, float("-inf"))
        forced[:, self.eos_id] = 0.0
        return forced


def _keep_a_way_out(blocked: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
    """A row that a ban would leave with no finite score keeps its unbanned scores, so a hypothesis can
    always continue or end instead of becoming -inf everywhere (the trap of naive blocking)."""
    # A row's max is -inf exactly when every score is -inf (log-probabilities are never +inf): one reduction
    # per row instead of a boolean (N, V) copy and a second pass, which cost 15% of a batched beam step.
    dead = blocked.amax(dim=-1).eq(float("-inf")) & log_probs.amax(dim=-1).ne(float("-inf"))
    if dead.any():
        blocked[dead] = log_probs[dead]
    return blocked


class NoRepeatNGramProcessor(LogitsProcessor):
    """Forbid tokens that would repeat an n-gram already in the hypothesis (trigram blocking, Paulus et al.,
    2018)."""

    def __init__(self, ngram_size: int) -> None:
        self.n = _check_int("no_repeat_ngram_size", ngram_size, 1)

    def __call__(self, tokens: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        n = self.n
        if tokens.size(1) < n - 1:
            return log_probs
        blocked = log_probs.clone()
        for row, history in enumerate(tokens.tolist()):
            prefix = tuple(history[len(history) - (n - 1) :]) if n > 1 else ()
            banned = {
                history[i + n - 1]
                for i in range(len(history) - n + 1)
                if tuple(history[i : i + n - 1]) == prefix
            }
            if banned:
                blocked[row, list(banned)] = float("-inf")
        return _keep_a_way_out(blocked, log_probs)


class NoImmediateRepeatProcessor(LogitsProcessor):
    """Forbid the token just generated ("architecture architecture"): a unigram repeat that n-gram blocking
    with n >= 2 lets through."""

    def __call__(self, tokens: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        if tokens.size(1) == 0:
            return log_probs
        blocked = log_probs.clone()
        blocked.scatter_(1, tokens[:, -1:], float("-inf"))
        return _keep_a_way_out(blocked, log_probs)


class AllowedTokensProcessor(LogitsProcessor):
    """Admit only the tokens each document allows: ``allowed`` is a (B, V) boolean mask over the (extended)
    vocabulary, one row per document; the N = B x K hypotheses of a beam search are K consecutive rows per
    document (as the decoders lay them out). Used to keep a copy model's content words on its source where
    the source is far from its training data (every other token stays free: see
    :func:`source_vocabulary_mask`)."""

    def __init__(self, allowed: torch.Tensor) -> None:
        if allowed.dim() != 2 or allowed.dtype != torch.bool:
            raise ValueError("allowed must be a (documents, vocabulary) boolean mask")
        self.allowed = allowed

    def __call__(self, tokens: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
        rows, width = log_probs.shape
        if rows % self.allowed.size(0) or width > self.allowed.size(1):
            raise ValueError(
                f"{rows} hypotheses of width {width} do not fit a mask of {tuple(self.allowed.shape)}"
            )
        allowed = self.allowed[:, :width].repeat_interleave(rows // self.allowed.size(0), dim=0)
        return _keep_a_way_out(log_probs.masked_fill(~allowed, float("-inf")), log_probs)

    def select_documents(self, documents: torch.Tensor) -> AllowedTokensProcessor:
        return AllowedTokensProcessor(self.allowed.index_select(0, documents.to(self.allowed.device)))


def source_vocabulary_mask(
    sources: list[list[int]], free: torch.Tensor, width: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """A (B, width) mask for :class:`AllowedTokensProcessor`: the ids of each document's source tokens,
    plus the ``free`` ids (a (V,) boolean mask: function words, punctuation, EOS) for every document."""
    mask = torch.zeros(len(sources), width, dtype=torch.bool, device=device)
    mask[:, : free.numel()] |= free.to(device)
    for row, ids in enumerate(sources):
        if ids:
            mask[row, torch.tensor(ids, dtype=torch.long, device=device)] = True
    return mask


#: Processors by the name of the generation-config field that turns them on.
PROCESSORS = {
    "min_length": lambda value, eos_id: MinLengthProcessor(value, eos_id) if value > 1 else None,
    "no_repeat_ngram_size": lambda value, eos_id: NoRepeatNGramProcessor(value) if value > 0 else None,
    "no_immediate_repeat": lambda value, eos_id: NoImmediateRepeatProcessor() if value else None,
}


def build_processors(settings: dict[str, Any], eos_id: int) -> LogitsProcessorList:
    """The processors a generation config asks for, in the order of :data:`PROCESSORS`.

    ``settings`` maps field names to values (e.g. ``dataclasses.asdict(generation_config)``); fields that are
    not processors (beam size, lengths) are ignored.
    """
    processors = LogitsProcessorList()
    for name, make in PROCESSORS.items():
        if name in settings and settings[name] is not None:
            processor = make(settings[name], eos_id)
            if processor is not None:
                processors.append(processor)
    return processors
