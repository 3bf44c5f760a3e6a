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
    ``attention_mask``: (B, L_S), 1 on real tokens (right-padded); ``input_ids``: (B, L_S). For a model
    that reads HIBRIDS' section inputs, the source's ``section_ids`` (B, L_S) and ``section_relations``
    (B, S, S) it was encoded with (None otherwise): part of the encoding's identity.
    """

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]
    hidden_states: torch.Tensor
    attention_mask: torch.Tensor
    input_ids: torch.Tensor
    section_ids: torch.Tensor | None = None
    section_relations: torch.Tensor | None = None

    @property
    def sections(self) -> tuple[torch.Tensor, ...]:
        """The section inputs it was encoded with (empty without)."""
        return () if self.section_ids is None else (self.section_ids, self.section_relations)

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
        tensors += self.sections
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
            section_ids=None if self.section_ids is None else grow(self.section_ids),
            section_relations=None if self.section_relations is None else grow(self.section_relations),
        )

    def as_encoder_outputs(self) -> tuple[BaseModelOutput, torch.Tensor]:
        """The encoding of a prompt with no instruction (all of it source): ``(encoder_outputs, mask)``."""
        return BaseModelOutput(last_hidden_state=self.hidden_states), self.attention_mask


def _encoder(model: Any, sections: Any = None) -> InstructSumT5Stack:
    encoder = model if isinstance(model, InstructSumT5Stack) else model.get_encoder()
    if not isinstance(encoder, InstructSumT5Stack):
        raise TypeError(
            f"the InstructSum cache needs an InstructSum model (see convert_to_instructsum), got "
            f"{type(model).__name__}"
        )
    if sections is not None and not encoder.reads_sections:
        raise ValueError(f"{type(model).__name__} reads no section inputs (section_ids, section_relations)")
    return encoder


def _section_inputs(section_ids: torch.Tensor | None, relations: torch.Tensor | None) -> dict[str, Any]:
    """The encoder's keyword arguments for a source's sections (none without)."""
    if section_ids is None and relations is None:
        return {}
    return {"section_ids": section_ids, "section_relations": relations}


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
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    section_ids: torch.Tensor | None = None,
    section_relations: torch.Tensor | None = None,
) -> CachedSource:
    """Encode source parts alone (each layer: ``H_S = Attn(Q_S, K_S, V_S)``); keep ``K_S``, ``V_S``, ``H_S``.

    ``input_ids``: (B, L_S) source-part ids (ending with EOS), right-padded. ``section_ids`` (B, L_S) and
    ``section_relations`` (B, S, S): the source's section tree, for a model that reads one (HIBRIDS on
    InstructSum). Runs without gradients; use the model in eval mode (dropout would make the cache differ
    from an uncached pass).
    """
    sections = _section_inputs(section_ids, section_relations)
    encoder = _encoder(model, sections or None)
    if input_ids.dim() == 1:
        input_ids = input_ids[None]
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    _check_right_padded(attention_mask, "source attention_mask")
    state = _CachePass(mode="record")
    output = encoder(
        input_ids=input_ids,
        attention_mask=attention_mask,
        instructsum_cache=state,
        return_dict=True,
        **sections,
    )
    return CachedSource(
        keys=tuple(state.keys),
        values=tuple(state.values),
        hidden_states=output.last_hidden_state,
        attention_mask=attention_mask.long(),
        input_ids=input_ids,
        section_ids=section_ids,
        section_relations=section_relations,
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
        **_section_inputs(source.section_ids, source.section_relations),
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


def _matches(encoding: CachedSource, input_ids: torch.Tensor, sections: Sequence[torch.Tensor]) -> bool:
    """Whether ``encoding`` was made from exactly these source ids and section inputs."""
    stored = (encoding.input_ids, *encoding.sections)
    given = (input_ids, *sections)
    return len(stored) == len(given) and all(
        a.shape == b.shape and torch.equal(a, b.to(a.device)) for a, b in zip(stored, given, strict=True)
    )


@dataclass
class EncodedPrompts:
    """A batch of prompts encoded through the cache, laid out as the uncached block-mask pass of the batch.

    ``encoder_outputs`` (N, W, d_model) and the 2D ``attention_mask`` (N, W); for a model that reads HIBRIDS'
    section inputs also ``section_ids`` (N, W), laid out like the hidden states (instruction tokens and
    padding -1, i.e. node 0: the question node), and ``section_relations`` (N, S, S) padded with -1: what
    the decoder's HIBRIDS-DEC bias reads. :meth:`generate_kwargs` is what ``model.generate`` takes.
    """

    encoder_outputs: BaseModelOutput
    attention_mask: torch.Tensor
    section_ids: torch.Tensor | None = None
    section_relations: torch.Tensor | None = None

    def generate_kwargs(self) -> dict[str, Any]:
        kwargs = {"encoder_outputs": self.encoder_outputs, "attention_mask": self.attention_mask}
        return kwargs | _section_inputs(self.section_ids, self.section_relations)


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

    The key is a SHA-256 of the source ids (and, for a model that reads them, the source's section ids and
    relations) and the model's identity; a hit is also checked token by token against the stored ids and
    sections, so a changed document, or the same text under another section tree, is never served from the
    cache. Entries stay on the
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
    def key(model: Any, input_ids: torch.Tensor, *sections: torch.Tensor | None) -> str:
        """The entry's key: the model's identity and a digest of the source ids and ``sections``
        (``section_ids``, ``section_relations``; none for a model without section inputs)."""
        digest = hashlib.sha256()
        for tensor in (input_ids, *sections):
            if tensor is None:
                continue
            values = tensor.detach().to("cpu", torch.int64).contiguous()
            digest.update(repr(tuple(values.shape)).encode())  # (S, S) tables of other S never collide
            digest.update(values.numpy().tobytes())
        return f"{id(model)}:{digest.hexdigest()}"

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def get(self, model: Any, input_ids: torch.Tensor, *sections: torch.Tensor) -> CachedSource | None:
        """The stored encoding of exactly these source ids (and ``sections``: ``section_ids``,
        ``section_relations``) under this model, or None (counts a hit/miss)."""
        input_ids = input_ids if input_ids.dim() == 2 else input_ids[None]
        key = self.key(model, input_ids, *sections)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.model() is model and _matches(entry.encoding, input_ids, sections):
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
        key = self.key(model, encoding.input_ids, *encoding.sections)
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

    def get_or_encode(self, model: Any, input_ids: torch.Tensor, *sections: torch.Tensor) -> CachedSource:
        """The cached encoding of one source part (ids (L_S,) or (1, L_S), unpadded; ``sections``: its
        (1, L_S) ``section_ids`` and (1, S, S) ``section_relations`` for a model that reads them); encodes
        on a miss."""
        input_ids = input_ids if input_ids.dim() == 2 else input_ids[None]
        if input_ids.shape[0] != 1:
            raise ValueError("SourceCache stores one source at a time (ids of shape (L,) or (1, L))")
        key = self.key(model, input_ids, *sections)
        while True:
            encoding = self.get(model, input_ids, *sections)
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
                if result is not None and _matches(result, input_ids, sections):
                    return result
                continue  # that encoding failed (or was another source): try again
            try:
                encoding = encode_source(model, input_ids, None, *sections)
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
    def encode_prompts(self, model: Any, prompts: Sequence[PromptIds]) -> EncodedPrompts:
        """The encoder outputs of a batch of prompts, laid out as the uncached block-mask pass of the batch.

        The only place where cached encodings are made: each distinct source part (ids and, for a model
        that reads them, sections) is taken from the cache (or encoded once), then the instructions on it
        run together against its keys and values (:func:`encode_with_instruction`); a prompt without an
        instruction is all source, so its encoding is the source's. Row ``r`` holds ``[H_I; H_S]`` of
        ``prompts[r]`` right-padded with zeros to the longest prompt; the 2D mask marks the real tokens
        (see :class:`EncodedPrompts`). Use the model in eval mode.
        """
        if not prompts:
            raise ValueError("encode_prompts needs at least one prompt")
        device = model.device
        with_sections = [p.sections is not None for p in prompts]
        if any(with_sections) and not all(with_sections):
            raise ValueError("encode_prompts: either every prompt has its source's sections or none has")
        groups: dict[tuple[Any, ...], list[int]] = {}
        for row, prompt in enumerate(prompts):
            groups.setdefault((tuple(prompt.source_ids), prompt.sections), []).append(row)
        width = max(len(p.input_ids) for p in prompts)
        hidden: torch.Tensor | None = None
        mask = torch.zeros((len(prompts), width), dtype=torch.long, device=device)
        for (source_ids, sections), rows in groups.items():
            tree = () if sections is None else sections.tensors(device)
            ids = torch.tensor([source_ids], dtype=torch.long, device=device)
            source = self.get_or_encode(model, ids, *tree)
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
        encoded = EncodedPrompts(BaseModelOutput(last_hidden_state=hidden), mask)
        if all(with_sections):
            encoded.section_ids, encoded.section_relations = _batch_sections(prompts, width, device)
        return encoded

    def generate(self, model: Any, prompts: Sequence[PromptIds], **generate_kwargs: Any) -> torch.Tensor:
        """``model.generate`` on :meth:`encode_prompts` of ``prompts``: the generated ids, a row a prompt."""
        return model.generate(**self.encode_prompts(model, prompts).generate_kwargs(), **generate_kwargs)


def _batch_sections(
    prompts: Sequence[PromptIds], width: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, width) section ids laid out as the prompts' tokens (instruction and padding -1) and (N, S, S)
    relations padded with -1, the uncached pass's section inputs."""
    count = len(prompts)
    size = max(len(p.sections.relations) for p in prompts)
    ids = torch.full((count, width), -1, dtype=torch.long)
    relations = torch.full((count, size, size), -1, dtype=torch.long)
    for row, prompt in enumerate(prompts):
        start, tree = len(prompt.instruction_ids), prompt.sections
        ids[row, start : start + len(tree.ids)] = torch.tensor(tree.ids, dtype=torch.long)
        n = len(tree.relations)
        relations[row, :n, :n] = torch.tensor(tree.relations, dtype=torch.long).view(n, n)
    return ids.to(device), relations.to(device)


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
