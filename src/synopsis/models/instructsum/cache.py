"""The InstructSum source cache: encode a source part once, then each instruction against it.

Nishida et al., section 3 (the source-representation cache). :func:`encode_source` keeps every layer's
``K_S``, ``V_S`` and the final ``H_S`` (a :class:`CachedSource`); :func:`encode_with_instruction` runs only
the instruction tokens against them; :class:`SourceCache` is a byte-bounded LRU of source encodings.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase, T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput

from synopsis.models.instructsum.model import (
    InstructSumT5Stack,
    _CachePass,
    _padding_mask,
    is_instructsum,
)
from synopsis.models.instructsum.prompts import (
    DEFAULT_MAX_INSTRUCTION_TOKENS,
    DEFAULT_MAX_SOURCE_TOKENS,
    PromptIds,
    collate_prompts,
    tokenize_prompt,
)

logger = logging.getLogger(__name__)


@dataclass
class CachedSource:
    """A source part encoded once: per-layer ``K_S``/``V_S`` and the final ``H_S``.

    ``keys[l]``, ``values[l]``: (B, heads, L_S, d_kv); ``hidden_states``: (B, L_S, d_model);
    ``attention_mask``: (B, L_S), 1 on real tokens (right-padded); ``input_ids``: (B, L_S).
    """

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    hidden_states: torch.Tensor
    attention_mask: torch.Tensor
    input_ids: torch.Tensor

    @property
    def batch_size(self) -> int:
        return self.hidden_states.shape[0]

    @property
    def length(self) -> int:
        return self.hidden_states.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes held by the tensors (what the :class:`SourceCache` budget counts)."""
        tensors = [*self.keys, *self.values, self.hidden_states, self.attention_mask, self.input_ids]
        return sum(t.numel() * t.element_size() for t in tensors)

    def expand(self, n: int) -> CachedSource:
        """A batch-1 encoding viewed as ``n`` rows (no copy), to pair with ``n`` instructions."""
        if self.batch_size == n:
            return self
        if self.batch_size != 1:
            raise ValueError(f"cannot expand a source encoding of batch {self.batch_size} to {n} rows")

        def grow(t: torch.Tensor) -> torch.Tensor:
            return t.expand(n, *t.shape[1:])

        return CachedSource(
            keys=tuple(map(grow, self.keys)),
            values=tuple(map(grow, self.values)),
            hidden_states=grow(self.hidden_states),
            attention_mask=grow(self.attention_mask),
            input_ids=grow(self.input_ids),
        )

    def as_encoder_outputs(self) -> tuple[BaseModelOutput, torch.Tensor]:
        """The encoding of a prompt with no instruction (all of it source): ``(encoder_outputs, mask)``."""
        return BaseModelOutput(last_hidden_state=self.hidden_states), self.attention_mask


def _encoder(model: Any) -> InstructSumT5Stack:
    encoder = model.get_encoder() if hasattr(model, "get_encoder") else model
    if not isinstance(encoder, InstructSumT5Stack):
        raise TypeError(
            f"the InstructSum cache needs an InstructSum model (see convert_to_instructsum), got "
            f"{type(model).__name__}"
        )
    return encoder


def _check_right_padded(mask: torch.Tensor, what: str) -> torch.Tensor:
    """Lengths of a right-padded 0/1 mask; refuses masks with holes or empty rows."""
    lengths = mask.sum(dim=1)
    positions = torch.arange(mask.shape[1], device=mask.device)
    if not torch.equal(mask.bool(), positions[None, :] < lengths[:, None]):
        raise ValueError(f"{what} must be right-padded (real tokens first, then padding)")
    if (lengths == 0).any():
        raise ValueError(f"{what}: a row has no real tokens")
    return lengths


@torch.no_grad()
def encode_source(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
) -> CachedSource:
    """Encode source parts alone (each layer: ``H_S = Attn(Q_S, K_S, V_S)``); keep ``K_S``, ``V_S``, ``H_S``.

    ``input_ids``: (B, L_S) source-part ids (ending with EOS), right-padded. Runs without gradients; use the
    model in eval mode (dropout would make the cache differ from an uncached pass).
    """
    encoder = _encoder(model)
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    _check_right_padded(attention_mask, "source attention_mask")
    state = _CachePass(mode="record")
    output = encoder(
        input_ids=input_ids, attention_mask=attention_mask, instructsum_cache=state, return_dict=True
    )
    return CachedSource(
        keys=tuple(state.keys),
        values=tuple(state.values),
        hidden_states=output.last_hidden_state,
        attention_mask=attention_mask.long(),
        input_ids=input_ids,
    )


@torch.no_grad()
def encode_with_instruction(
    model: Any,
    source: CachedSource,
    instruction_ids: torch.Tensor,
    instruction_mask: torch.Tensor | None = None,
) -> tuple[BaseModelOutput, torch.Tensor]:
    """Encode N instruction parts against a cached source: ``(encoder_outputs, attention_mask)``.

    Every layer computes ``H_I = Attn(Q_I, [K_I; K_S], [V_I; V_S])`` for the instruction tokens only. The
    result is laid out like the uncached pass of ``[I_n; S; padding]``: row ``n`` holds ``H_I`` of its real
    instruction tokens, then ``H_S``, then zeros; the returned 2D mask marks the real tokens. ``source`` has
    batch 1 (shared by all N instructions) or batch N (one source per instruction).
    """
    encoder = _encoder(model)
    if instruction_ids.dim() == 1:
        instruction_ids = instruction_ids[None]
    count, instruction_width = instruction_ids.shape
    device = instruction_ids.device
    if instruction_mask is None:
        instruction_mask = torch.ones_like(instruction_ids)
    instruction_lengths = _check_right_padded(instruction_mask, "instruction_mask")
    source = source.expand(count)
    source_lengths = source.attention_mask.sum(dim=1)
    dtype = source.hidden_states.dtype

    # Positions of the uncached row [I_n; S; pad]: instruction tokens 0..L_I-1, source tokens from L_I(n).
    steps = torch.arange(instruction_width, device=device)
    query_positions = steps[None, :].expand(count, -1)
    source_positions = instruction_lengths[:, None] + torch.arange(source.length, device=device)[None, :]
    key_positions = torch.cat([query_positions, source_positions], dim=1)
    keys_real = torch.cat([instruction_mask.bool(), source.attention_mask.bool()], dim=1)
    state = _CachePass(
        mode="extend",
        keys=list(source.keys),
        values=list(source.values),
        query_positions=query_positions,
        key_positions=key_positions,
    )
    output = encoder(
        input_ids=instruction_ids,
        attention_mask=_padding_mask(keys_real, instruction_width, dtype),
        instructsum_cache=state,
        return_dict=True,
    )

    # Lay [H_I; H_S] out like the uncached pass: row n = H_I[n, :L_I(n)], H_S[n, :L_S(n)], zeros.
    totals = instruction_lengths + source_lengths
    width = int(totals.max())
    slots = torch.arange(width, device=device)[None, :]
    in_instruction = slots < instruction_lengths[:, None]
    real = slots < totals[:, None]
    index = torch.where(in_instruction, slots, instruction_width + slots - instruction_lengths[:, None])
    index = torch.where(real, index, torch.zeros_like(index))
    both = torch.cat([output.last_hidden_state, source.hidden_states], dim=1)
    hidden = both.gather(1, index[..., None].expand(-1, -1, both.shape[-1]))
    hidden = hidden.masked_fill(~real[..., None], 0.0)
    return BaseModelOutput(last_hidden_state=hidden), real.long()


@dataclass
class _Entry:
    encoding: CachedSource
    model: weakref.ReferenceType[Any]
    nbytes: int


@dataclass
class _Flight:
    """One source being encoded: the threads that miss on the same key meanwhile wait for its result."""

    done: threading.Event = field(default_factory=threading.Event)
    result: CachedSource | None = None


class SourceCache:
    """A byte-bounded LRU of :class:`CachedSource` objects keyed by the source's token ids, and the one
    cached encoding path (:meth:`encode_prompts`, :meth:`generate`) the summarizer and the experiment take.

    The key is a SHA-256 of the source ids and the model's identity; a hit is also checked token by token
    against the stored ids, so a changed document is never served from the cache. Entries stay on the
    model's device. An encoding larger than ``max_bytes`` is returned but not stored. Thread-safe: the
    encoding runs outside the lock, and concurrent misses on one key encode it once (the others wait for
    that result). The counters ``hits``, ``misses``, ``evictions``, ``encodings`` and ``bytes`` are for
    monitoring and tests. Clear the cache (or make a new one) when the model's weights change.
    """

    def __init__(self, max_bytes: int = 1 << 30) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._in_flight: dict[str, _Flight] = {}
        self.encodings = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.bytes = 0

    @staticmethod
    def key(model: Any, input_ids: torch.Tensor) -> str:
        ids = input_ids.detach().reshape(-1).to("cpu", torch.int64).contiguous()
        digest = hashlib.sha256(ids.numpy().tobytes()).hexdigest()
        return f"{id(model)}:{digest}"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def get(self, model: Any, input_ids: torch.Tensor) -> CachedSource | None:
        """The stored encoding of exactly these source ids under this model, or None (counts a hit/miss)."""
        input_ids = input_ids if input_ids.dim() == 2 else input_ids[None]
        key = self.key(model, input_ids)
        with self._lock:
            entry = self._entries.get(key)
            if (
                entry is not None
                and entry.model() is model
                and entry.encoding.input_ids.shape == input_ids.shape
                and torch.equal(entry.encoding.input_ids, input_ids.to(entry.encoding.input_ids.device))
            ):
                self._entries.move_to_end(key)
                self.hits += 1
                return entry.encoding
            self.misses += 1
            return None

    def put(self, model: Any, encoding: CachedSource) -> bool:
        """Store an encoding (most recently used), evicting the least recently used ones to fit the budget."""
        size = encoding.nbytes
        if size > self.max_bytes:
            logger.info(
                "source encoding of %d bytes exceeds the cache budget of %d; not cached", size, self.max_bytes
            )
            return False
        key = self.key(model, encoding.input_ids)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old.nbytes
            while self._entries and self.bytes + size > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self.bytes -= evicted.nbytes
                self.evictions += 1
            self._entries[key] = _Entry(encoding, weakref.ref(model), size)
            self.bytes += size
        return True

    def get_or_encode(self, model: Any, input_ids: torch.Tensor) -> CachedSource:
        """The cached encoding of one source part (ids (L_S,) or (1, L_S), unpadded); encodes on a miss."""
        input_ids = input_ids if input_ids.dim() == 2 else input_ids[None]
        if input_ids.shape[0] != 1:
            raise ValueError("SourceCache stores one source at a time (ids of shape (L,) or (1, L))")
        key = self.key(model, input_ids)
        while True:
            encoding = self.get(model, input_ids)
            if encoding is not None:
                return encoding
            with self._lock:
                flight = self._in_flight.get(key)
                owner = flight is None
                if owner:
                    flight = self._in_flight[key] = _Flight()
            if not owner:  # another thread is encoding this source: wait for it
                flight.done.wait()
                result = flight.result
                if result is not None and torch.equal(result.input_ids.cpu(), input_ids.cpu()):
                    return result
                continue  # that encoding failed (or was another source): try again
            try:
                encoding = encode_source(model, input_ids)
                with self._lock:
                    self.encodings += 1
                flight.result = encoding
                self.put(model, encoding)
                return encoding
            finally:
                with self._lock:
                    self._in_flight.pop(key, None)
                flight.done.set()

    @torch.no_grad()
    def encode_prompts(
        self, model: Any, prompts: Sequence[PromptIds]
    ) -> tuple[BaseModelOutput, torch.Tensor]:
        """The encoder outputs of a batch of prompts, laid out as the uncached block-mask pass of the batch.

        The only place where cached encodings are made: each distinct source part is taken from the cache
        (or encoded once), then the instructions on it run together against its keys and values
        (:func:`encode_with_instruction`); a prompt without an instruction is all source, so its encoding is
        the source's. Row ``r`` holds ``[H_I; H_S]`` of ``prompts[r]`` right-padded with zeros to the longest
        prompt; the 2D mask marks the real tokens (what ``generate(encoder_outputs=..., attention_mask=...)``
        takes). Use the model in eval mode.
        """
        if not prompts:
            raise ValueError("encode_prompts needs at least one prompt")
        device = model.device
        groups: dict[tuple[int, ...], list[int]] = {}
        for row, prompt in enumerate(prompts):
            groups.setdefault(tuple(prompt.source_ids), []).append(row)
        width = max(len(p.input_ids) for p in prompts)
        hidden: torch.Tensor | None = None
        mask = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
        for source_ids, rows in groups.items():
            source = self.get_or_encode(model, torch.tensor([source_ids], dtype=torch.long, device=device))
            if hidden is None:
                size, dtype = source.hidden_states.shape[-1], source.hidden_states.dtype
                hidden = torch.zeros((len(prompts), width, size), dtype=dtype, device=device)
            alone = [r for r in rows if not prompts[r].instruction_ids]
            if alone:
                index = torch.tensor(alone, device=device)
                hidden[index, : source.length] = source.hidden_states
                mask[index, : source.length] = source.attention_mask
            asked = [r for r in rows if prompts[r].instruction_ids]
            if asked:
                parts = [PromptIds(prompts[r].instruction_ids, []) for r in asked]
                batch = collate_prompts(parts, model.config.pad_token_id or 0, device)
                outputs, real = encode_with_instruction(
                    model, source, batch["input_ids"], batch["attention_mask"]
                )
                index = torch.tensor(asked, device=device)
                hidden[index, : real.shape[1]] = outputs.last_hidden_state
                mask[index, : real.shape[1]] = real
        return BaseModelOutput(last_hidden_state=hidden), mask

    def generate(self, model: Any, prompts: Sequence[PromptIds], **generate_kwargs: Any) -> torch.Tensor:
        """``model.generate`` on :meth:`encode_prompts` of ``prompts``: the generated ids, a row a prompt."""
        outputs, mask = self.encode_prompts(model, prompts)
        return model.generate(encoder_outputs=outputs, attention_mask=mask, **generate_kwargs)


# --------------------------------------------------------------------------------------------- generation
@torch.no_grad()
def summarize_with_instructions(
    model: T5ForConditionalGeneration,
    tokenizer: PreTrainedTokenizerBase,
    article: str,
    instructions: Sequence[str | None],
    title: str | None = None,
    *,
    cache: SourceCache | None = None,
    use_cache: bool = True,
    max_source_tokens: int = DEFAULT_MAX_SOURCE_TOKENS,
    max_instruction_tokens: int = DEFAULT_MAX_INSTRUCTION_TOKENS,
    **generate_kwargs: Any,
) -> list[str]:
    """One summary per instruction (``None``: no instruction) of one article, in order.

    InstructSum model with ``use_cache``: :meth:`SourceCache.generate` (``cache``, or a cache for this call
    only). ``use_cache=False``: every prompt is encoded in full with the same block mask (for checking and
    timing). A plain T5 model reads the paper's prompt with full attention. ``generate_kwargs`` go to
    ``model.generate`` (e.g. ``num_beams=2, max_new_tokens=192`` as in the paper).
    """
    prompts = [
        tokenize_prompt(tokenizer, i, title, article, max_source_tokens, max_instruction_tokens)
        for i in instructions
    ]
    if is_instructsum(model) and use_cache:
        cache = SourceCache() if cache is None else cache
        generated = cache.generate(model, prompts, **generate_kwargs)
    else:
        batch = collate_prompts(prompts, tokenizer.pad_token_id, model.device)
        if not is_instructsum(model):
            batch.pop("segment_ids")
        generated = model.generate(**batch, **generate_kwargs)
    return [text.strip() for text in tokenizer.batch_decode(generated, skip_special_tokens=True)]
