"""``synopsis summarize --method pointer-generator``: batched beam search with a pointer-generator model.

Articles are lowercased and word-tokenised as in training (See et al. lowercase everything); summaries are
detokenised lightly (no space before punctuation, first letter capitalised) and stay lowercase otherwise.
Without a path, the model bundled in ``synopsis/resources/pointer_generator/`` is loaded (no network).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from synopsis.config import DECODING_OPTIONS, NO_DECODING, DecodingOptions
from synopsis.devices import resolve_device
from synopsis.document import Document
from synopsis.errors import CheckpointError, ConfigError, InputError
from synopsis.generation.config import GENERATION_CONFIG_FILE, GenerationConfig
from synopsis.io import read_json
from synopsis.summarizers.base import Summarizer, SummarizerInfo, per_call_option, place_model
from synopsis.summarizers.decoders.base import MAPPED_VALUES
from synopsis.summarizers.domain import (
    Distance,
    DomainCheck,
    ModelScope,
    StyleModel,
    bundled_domain_check,
)
from synopsis.summarizers.domain import bundled_model_dir as bundled_model_dir

logger = logging.getLogger(__name__)

_NO_SPACE_BEFORE = re.compile(r" ([.,;:!?)\]}%])")
_NO_SPACE_AFTER = re.compile(r"([(\[{]) ")
_SENTENCE_START = re.compile(r"(^|[.!?] )([a-z])")


def detokenize(tokens: Sequence[str]) -> str:
    """Light detokenisation of lowercased word tokens: no space before closing punctuation, every sentence's
    first letter capitalised (the model's output is otherwise lowercase)."""
    text = _NO_SPACE_AFTER.sub(r"\1", _NO_SPACE_BEFORE.sub(r"\1", " ".join(tokens)))
    return _SENTENCE_START.sub(lambda m: m.group(1) + m.group(2).upper(), text)


def _sentence_spans(words: Sequence[str]) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of a generated word list: a sentence ends with ".", "!" or "?"."""
    spans, start = [], 0
    for i, word in enumerate(words):
        if word in (".", "!", "?"):
            spans.append((start, i + 1))
            start = i + 1
    if start < len(words):
        spans.append((start, len(words)))
    return [(a, b) for a, b in spans if any(any(c.isalnum() for c in w) for w in words[a:b])]


def _select_rows(batch: Any, index: Any) -> Any:
    """The rows ``index`` of an encoded batch (padding and OOV lists kept as they are)."""
    import dataclasses

    return dataclasses.replace(
        batch,
        input_ids=batch.input_ids.index_select(0, index),
        extended_ids=batch.extended_ids.index_select(0, index),
        oovs=[batch.oovs[i] for i in index.tolist()],
    )


class PointerGeneratorSummarizer(Summarizer):
    """Summarises a batch of documents with one batched beam search (or greedy with ``num_beams=1``)."""

    def __init__(
        self,
        model: Any,
        vocab: Any,
        generation: GenerationConfig | None = None,
        style: StyleModel | None = None,
    ) -> None:
        """``style``: the model's "is it a paper abstract?" classifier (``style.json`` beside its weights;
        the bundled model has one), a measure of its domain check."""
        from synopsis.models.pointer_generator import document_words

        self.model = model.eval()
        self.vocab = vocab
        self.generation = generation or GenerationConfig()
        #: the stored settings with a call's decoding options on top, mapped once per distinct value
        self.generation_for = functools.lru_cache(maxsize=MAPPED_VALUES)(self.generation.with_options)
        self.style = style
        self._free: Any = None  # the (V,) mask of _free_ids, built on first use
        profile = model.config.source_profile
        reads = self.generation.max_source_tokens
        bundled = bundled_domain_check() if style is not None else None
        if bundled is not None and bundled.check is not None and style is bundled.check.style:
            if (bundled.reads, bundled.vocab.fingerprint) == (reads, vocab.fingerprint):
                self.scope = bundled  # the bundled model: the check the default routes by, one cache
                return
        check = None if profile is None else DomainCheck.from_profile(profile, style)
        #: what the model reads of each document and how far it is from its domain, once per document
        self.scope = ModelScope(check, vocab, reads, document_words)

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path | None = None,
        *,
        device: Any = "auto",
        **settings: Any,
    ) -> PointerGeneratorSummarizer:
        """Load a model directory (``None``: the bundled model) onto ``device`` (``auto``: a GPU when torch
        sees one, else the CPU; :func:`~synopsis.summarizers.base.place_model`); ``settings`` override this
        decoder's own settings in its ``generation_config.json`` (``max_source_tokens``,
        ``no_immediate_repeat``, ``length_penalty_kind``; ``None``: as stored). Decoding options (beams,
        lengths, ...) are given per call (``summarize(..., decoding=...)``), on top of the stored ones.
        """
        from synopsis.config import from_dict
        from synopsis.models.pointer_generator import PointerGenerator

        per_call = sorted(name for name in settings if name in DECODING_OPTIONS)
        if per_call:
            raise per_call_option(per_call[0])
        known = {f.name for f in fields(GenerationConfig)} - set(DECODING_OPTIONS)
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
        directory = bundled_model_dir() if path is None else Path(path)
        if path is None and not (directory / "model.safetensors").is_file():
            raise CheckpointError(
                f"{directory}: the bundled pointer-generator model is missing from this install"
            )
        resolve_device(device)  # an unusable device is refused before the weights are read
        model, vocab = PointerGenerator.from_pretrained(directory)
        # the bundled model's style check is the one the default routes by (read once per process)
        if path is None:
            check = bundled_domain_check().check
            style = None if check is None else check.style
        else:
            style = StyleModel.load(directory)
        model = place_model(model, device)
        defaults: dict[str, Any] = {}
        generation_file = directory / GENERATION_CONFIG_FILE
        if generation_file.is_file():
            defaults = read_json(generation_file, "a generation config", CheckpointError, dict)
        given = {name: value for name, value in settings.items() if value is not None}
        generation = from_dict(GenerationConfig, {**defaults, **given}, "generation options")
        return cls(model, vocab, generation, style)

    decoding_options = tuple(DECODING_OPTIONS)

    def describe(self) -> SummarizerInfo:
        return self._info("pointer-generator", "pointer-generator + coverage")

    # ------------------------------------------------------------------ decoding
    def check_decoding(self, decoding: DecodingOptions | None) -> DecodingOptions:
        checked = super().check_decoding(decoding)
        self.generation_for(checked)  # min <= max against the stored lengths, before any work
        return checked

    def generate(
        self,
        articles: Sequence[Sequence[str]],
        min_length: int | None = None,
        decoding: DecodingOptions | None = None,
    ) -> list[list[str]]:
        """Summaries as word lists for already-tokenised (lowercased) articles, all decoded in one batch
        with ``decoding`` on top of the stored settings (:meth:`GenerationConfig.with_options`, the one place
        they are mapped: lengths in words).

        ``min_length`` overrides the minimum summary length (in words) for these articles.
        """
        import torch

        from synopsis.models.pointer_generator import encode_batch

        device = self.device
        batch = encode_batch(
            self.vocab, articles, max_source=self.generation.max_source_tokens, device=device
        )
        generation = self.generation_for(decoding or NO_DECODING)
        with torch.inference_mode():
            hypotheses = self._search(batch, generation, min_length)
        return [self.vocab.decode(h.tokens, oovs) for h, oovs in zip(hypotheses, batch.oovs, strict=True)]

    def _search(
        self,
        batch: Any,
        generation: GenerationConfig,
        min_length: int | None,
        allowed: Any = None,
        attention: bool = False,
    ) -> list[Any]:
        """The best hypothesis per article of one batched search; ``allowed`` (a (B, V) mask) restricts the
        tokens each article may produce; with ``attention``, each hypothesis's ``trace`` is its (T + 1, L)
        attention history (one row per generated token, EOS included), carried in the decoder state so that
        the search reorders it with the beams."""
        import torch

        from synopsis.generation import (
            AllowedTokensProcessor,
            MaxLengthProcessor,
            beam_search,
            build_processors,
            greedy_search,
        )

        g, vocab = generation, self.vocab
        min_length = g.min_length if min_length is None else min_length

        def step(tokens: Any, state: Any, memory: Any) -> tuple[Any, Any]:
            if not attention:
                out = self.model.decode_step(tokens, state, memory)
                return out.probs.log(), out.state  # log(0) = -inf marks ids outside this article's OOV list
            model_state, history = state
            out = self.model.decode_step(tokens, model_state, memory)
            return out.probs.log(), (out.state, torch.cat([history, out.attention.unsqueeze(1)], dim=1))

        memory, state = self.model.encode(batch.input_ids, batch.extended_ids, batch.num_oovs)
        trace = None
        if attention:
            state = (
                state,
                batch.input_ids.new_zeros(
                    (batch.input_ids.size(0), 0, batch.input_ids.size(1)), dtype=torch.float
                ),
            )
            trace = lambda state, row: state[1][row]  # noqa: E731 - one expression
        # The decoders count EOS as a token; min/max_length here count words (as --max-length's help says):
        # at most max_length words, then EOS, forced last.
        processors = build_processors({**asdict(g), "min_length": min_length + 1}, vocab.eos_id)
        if allowed is not None:
            processors.append(AllowedTokensProcessor(allowed))
        processors.append(MaxLengthProcessor(g.max_length + 1, vocab.eos_id))
        common = dict(
            batch_size=batch.input_ids.size(0),
            bos_id=vocab.bos_id,
            eos_id=vocab.eos_id,
            max_length=g.max_length + 1,
            processors=processors,
            trace=trace,
        )
        if g.num_beams == 1:
            return greedy_search(step, state, memory, **common)
        return beam_search(
            step,
            state,
            memory,
            num_beams=g.num_beams,
            length_penalty=g.length_penalty,
            length_penalty_kind=g.length_penalty_kind,
            **common,
        )

    # ------------------------------------------------------------------ by section, with sources
    #: Keep content words on the window when summarizing by section (see :meth:`summarize_windows`).
    restrict_to_source: bool = True

    def input_capacity(self) -> int | None:
        return self.generation.max_source_tokens

    def input_length(self, text: str) -> int:
        from synopsis.models.pointer_generator import document_words

        return len(document_words(text))

    def _free_ids(self) -> Any:
        """(V,) mask of the ids every window may produce: EOS and tokens without content (function words,
        punctuation); cached."""
        import torch

        from synopsis.text import FUNCTION_WORDS

        free = self._free
        if free is None:
            free = torch.tensor(
                [w in FUNCTION_WORDS or not any(c.isalnum() for c in w) for w in self.vocab.tokens],
                dtype=torch.bool,
            )
            for special in (self.vocab.pad_id, self.vocab.unk_id, self.vocab.bos_id):
                free[special] = False
            free[self.vocab.eos_id] = True
            self._free = free
        return free

    def summarize_windows(
        self,
        windows: Sequence[Any],
        instructions: Sequence[str | None] | None = None,
        decoding: DecodingOptions | None = None,
    ) -> list[list[Any]]:
        """Each window summarized in one batched search; every summary sentence cites, for each of its
        content words, the window sentence holding it with the most attention over the sentence's steps: the
        copy distribution ``(1 - p_gen) a^t`` of See et al. (2017, eq. 9) puts a copied word's mass exactly
        there. With :attr:`restrict_to_source`, content words not in the window are banned
        (:class:`~synopsis.generation.AllowedTokensProcessor`): far from its training data the model writes
        words of its prior ("we propose a novel method") that no input sentence supports."""
        import torch

        from synopsis.generation import source_vocabulary_mask
        from synopsis.models.pointer_generator import document_words, encode_batch
        from synopsis.summarizers.citing import cited_sentence

        if not windows:
            return []
        capacity = self.generation.max_source_tokens
        articles, owners = [], []
        for window in windows:
            words, owner = [], []
            for i, text in enumerate(window.texts):
                tokens = document_words(text)
                words.extend(tokens)
                owner.extend([i] * len(tokens))
            articles.append(words[:capacity])
            owners.append(owner[:capacity])
        device = self.device
        batch = encode_batch(self.vocab, articles, max_source=capacity, device=device)
        allowed = None
        if self.restrict_to_source:
            width = len(self.vocab) + batch.num_oovs
            ids = batch.extended_ids.masked_fill(batch.input_ids.eq(self.vocab.pad_id), self.vocab.eos_id)
            allowed = source_vocabulary_mask(ids.tolist(), self._free_ids(), width, device)
        generation = self.generation_for(self.check_decoding(decoding))
        min_lengths = [min(len(a), generation.min_length) for a in articles]
        out: list[list[Any]] = [[] for _ in windows]
        with torch.inference_mode():
            for min_length in sorted(set(min_lengths)):
                rows = [i for i, m in enumerate(min_lengths) if m == min_length]
                index = torch.tensor(rows, device=device)
                sub = _select_rows(batch, index)
                hypotheses = self._search(
                    sub,
                    generation,
                    min_length,
                    None if allowed is None else allowed.index_select(0, index),
                    attention=True,
                )
                for r, row in enumerate(rows):
                    words = self.vocab.decode(hypotheses[r].tokens, batch.oovs[row])
                    window = windows[row]
                    sentences = []
                    for start, end in _sentence_spans(words):
                        text = detokenize(words[start:end])
                        weights = hypotheses[r].trace[start:end, : len(owners[row])].sum(0).tolist()
                        mass = [0.0] * len(window.sources)
                        for position, weight in enumerate(weights):
                            mass[owners[row][position]] += weight
                        sentences.append(cited_sentence(text, window.sources, mass))
                    out[row] = sentences
        return out

    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any,
        decoding: DecodingOptions,
    ) -> list[str]:
        """Instructions are ignored: the pointer-generator is not controllable."""
        least = self.generation_for(decoding).min_length
        articles, min_lengths = [], []
        for i, document in enumerate(documents):
            name = document.id or f"document {i + 1}"
            tokens, far = self.scope.words_and_distances(document)
            if not tokens:
                raise InputError(f"{name}: document is empty; nothing to summarize")
            if len(tokens) < least:
                # A summary need not be longer than its document: lower the minimum for this one only.
                logger.warning(
                    "%s: document has %d tokens, fewer than the minimum summary length %d; "
                    "its summary may be as short as the document",
                    name,
                    len(tokens),
                    least,
                )
            note = self.scope.note(far)
            if note:
                logger.warning("%s: %s", name, note)
            articles.append(tokens)
            min_lengths.append(min(len(tokens), least))
        summaries: list[str] = [""] * len(articles)
        # Documents that share a minimum length are decoded together (normally: all of them).
        for min_length in sorted(set(min_lengths)):
            rows = [i for i, m in enumerate(min_lengths) if m == min_length]
            made = self.generate([articles[i] for i in rows], min_length, decoding)
            for row, words in zip(rows, made, strict=True):
                summaries[row] = detokenize(words)
        return summaries

    def distances(self, document: Document) -> list[Distance]:
        """How ``document`` is far from this model's inputs (:class:`DomainCheck`); empty: in its domain,
        or the model records no inputs."""
        return self.scope.words_and_distances(document)[1]

    def scope_note(self, document: Document) -> str | None:
        """One line saying how ``document`` is far from the inputs the model was trained for (much longer,
        sectioned, mostly unknown words) and what suits it better; ``None`` if it is not far, or if the
        model does not record its inputs (``config.source_profile``)."""
        return self.scope.note(self.distances(document))

    def notes(self, documents: Sequence[Document]) -> list[str | None]:
        return [self.scope_note(document) for document in documents]

    def generation_options(self) -> dict[str, Any]:
        return asdict(self.generation)
