"""``--method salient`` (and the default summary of any document that is not a paper abstract): central or
relevant sentences of the document, verbatim, each citing itself (see the package docstring)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from synopsis.config import DecodingOptions
from synopsis.document import Document
from synopsis.errors import SynopsisError
from synopsis.summarizers.base import SummarizerInfo
from synopsis.summarizers.citing import support
from synopsis.summarizers.extractive import _join, _Selecting
from synopsis.summarizers.salient.centrality import (
    BETA,
    LAMBDA1,
    SentenceVectors,
    TfidfVectors,
    budgeted_mmr,
    default_vectors,
    directed_centrality,
    embeddings_installed,
    mmr,
    normalised,
)
from synopsis.summarizers.salient.opening import opening
from synopsis.summarizers.salient.relevance import is_general, relevance
from synopsis.summarizers.salient.rules import (
    ANAPHORIC,
    first_word,
    is_cased,
    is_informative,
    is_transcript,
    spoken,
    stands_alone,
    title_names,
)
from synopsis.summarizers.salient.units import all_sources, brings_code, lead_in_units, unit_text
from synopsis.summarizers.schema import DocumentSummary, Source, SummarySentence
from synopsis.summarizers.sections import DEFAULT_MAX_WORDS, summarize_by_section
from synopsis.summarizers.windows import Window

#: A heading speaks for each sentence of a section of up to this many (:func:`_heading_weights`).
HEADING_SPAN = 20


@dataclass(frozen=True)
class Weights:
    """The few numbers and switches of the method, chosen on the dev sets (docs/results/default_quality.md,
    where ``benchmarks/default_quality.py --ablate`` measures each): PacSum's ``beta`` and ``lambda1``;
    ``opening``, the share of a sectioned document's score that its place in the opening gives;
    ``defining_first`` (its defining sentence leads); ``anaphora`` (a sentence opening with a pronoun only
    after the one before it); ``stand_alone`` (candidates must read on their own, :func:`stands_alone`);
    ``informative`` (candidates and graph only informative prose, :func:`is_informative`); ``trade_off``,
    MMR's relevance share in a section's ``k`` sentences."""

    beta: float = BETA
    lambda1: float = LAMBDA1
    opening: float = 0.15
    defining_first: bool = True
    anaphora: bool = True
    stand_alone: bool = True
    informative: bool = True
    trade_off: float = 0.7

    def __post_init__(self) -> None:
        for name in ("beta", "opening", "trade_off"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise SynopsisError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not -1.0 <= self.lambda1 <= 0.0:
            raise SynopsisError(f"lambda1 must be in [-1, 0], got {self.lambda1}")


class SalientSummarizer(_Selecting):
    """Whole sentences of the document: by document (and a by-section run's document summary) the most
    central ones within ``max_words`` words, or with an instruction the most relevant ones; by section the
    ``k`` most central of each section. See the package docstring."""

    takes_instructions = True
    options = ("k", "max_words")

    def __init__(
        self,
        k: int = 3,
        *,
        max_words: int = DEFAULT_MAX_WORDS,
        weights: Weights | None = None,
        vectors: SentenceVectors | None = None,
        graph_vectors: SentenceVectors | None = None,
    ) -> None:
        """``vectors``: the embeddings an instruction is matched with (default: all-MiniLM-L6-v2, loaded on
        first use); ``graph_vectors``: PacSum's sentence vectors (default: TF-IDF of each window)."""
        if k < 1:
            raise SynopsisError(f"salient needs k >= 1, got {k}")
        if max_words < 1:
            raise SynopsisError(f"max_words must be >= 1, got {max_words}")
        self.k = k
        self.max_words = max_words
        self.weights = weights or Weights()
        if vectors is not None:
            self.vectors = vectors  # else the default, loaded on first use
        self.graph_vectors = graph_vectors or TfidfVectors()

    @cached_property
    def vectors(self) -> SentenceVectors:
        """The sentence embeddings that relevance to an instruction reads (default: loaded on first use)."""
        return default_vectors()

    @property
    def _vectors_given(self) -> SentenceVectors | None:
        """The sentence embeddings given or loaded so far (``None``: the default, not loaded yet)."""
        return self.__dict__.get("vectors")

    @property
    def vectors_name(self) -> str:
        """Which sentence vectors an instruction is matched with (without loading the embedding model)."""
        vectors = self._vectors_given
        if vectors is None:
            return "all-MiniLM-L6-v2" if embeddings_installed() else TfidfVectors.name
        return str(getattr(vectors, "name", type(vectors).__name__))

    def for_document(
        self, document: Document, offsets: Sequence[tuple[int, int] | None] | None = None
    ) -> DocumentRun:
        """The run of one document: what it is (its names, casing, whether a transcript) and its lead-ins
        with what they introduce, found once for its section and document summaries."""
        return DocumentRun(self, document, offsets)

    # ------------------------------------------------------------------ the contract
    def select(self, document: Document, instruction: str | None = None, fallback: bool = True) -> list[int]:
        """The ``k`` chosen sentences of ``document`` as one window, indices in document order (see
        :meth:`DocumentRun.select`)."""
        run = self.for_document(document)
        return run.select([s.text for s in document.sentences], instruction, fallback)

    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any,
        decoding: DecodingOptions,
    ) -> list[str]:
        """By document: the document summary within ``max_words`` (:meth:`DocumentRun.document_summary`),
        one sentence (or lead-in unit) a line; a document without a sentence that qualifies gets its
        longest sentences ranked the same way."""
        out = []
        runs: dict[
            int, DocumentRun
        ] = {}  # one run per document: its sentences encoded once for every instruction
        for document, instruction in zip(documents, instructions, strict=True):
            if id(document) not in runs:
                runs[id(document)] = self.for_document(document)
            run = runs[id(document)]
            chosen = run.document_summary(instruction, self.max_words)
            if chosen:
                out.append(_join([s.text for s in chosen]))
            else:
                out.append(_join([document.sentences[i].text for i in self.select(document, instruction)]))
        return out

    def _by_section(
        self, documents: Sequence[Document], instructions: list[str | None], options: dict[str, Any]
    ) -> list[DocumentSummary]:
        """One document after another, its sections one at a time (each passed to ``on_section`` and counted
        by ``progress`` as soon as it is chosen: an extractive method needs no batches), then its document
        summary chosen over the whole document (:meth:`DocumentRun.document_summary`), not composed of the
        section summaries."""
        out = []
        offsets = options.get("offsets")
        for d, (document, instruction) in enumerate(zip(documents, instructions, strict=True)):
            run = self.for_document(document, offsets[d] if offsets is not None else None)
            (result,) = summarize_by_section(run, [document], [instruction], **_one_document(options, d))
            chosen = run.document_summary(instruction, options["max_words"])
            if chosen:
                result.summary = chosen
            out.append(result)
        return out

    def describe(self) -> SummarizerInfo:
        return self._info(
            "salient",
            f"the document's most central sentences within --max-words (PacSum: directed centrality over "
            f"TF-IDF), {self.k} per section by section; an instruction picks the most relevant ones (BM25 + "
            f"{self.vectors_name})",
        )

    def _with_options(self, options: dict[str, Any]) -> SalientSummarizer:
        return type(self)(
            k=options.get("k", self.k),
            max_words=options.get("max_words", self.max_words),
            weights=self.weights,
            vectors=self._vectors_given,
            graph_vectors=self.graph_vectors,
        )

    def prepare(self) -> None:
        _ = self.vectors  # load the embedding model now


class DocumentRun(_Selecting):
    """One document's run of :class:`SalientSummarizer`: what the document is, found once, and the choices
    made over it (its section summaries, :meth:`summarize_windows`; its document summary,
    :meth:`document_summary`)."""

    takes_instructions = True

    def __init__(
        self,
        owner: SalientSummarizer,
        document: Document,
        offsets: Sequence[tuple[int, int] | None] | None = None,
    ) -> None:
        self.owner = owner
        self.document = document
        self.weights = owner.weights
        self.names = title_names(document.title)
        self.cased = is_cased(document)
        self.transcript = is_transcript(document)
        self.sources = all_sources(document, offsets)
        units = lead_in_units(
            document, self.sources, offsets is not None, self.names, self.cased, self.transcript
        ).values()
        #: the lead-ins with what they introduce, by the lead-in's ``(path, sentence)``
        self.units: dict[tuple[tuple[int, ...], int | None], list[Source]] = {
            (unit[0].path, unit[0].sentence): unit for unit in units
        }

    @cached_property
    def vectors(self) -> SentenceVectors:
        """The owner's sentence embeddings, each text encoded once in this run."""
        return _Remembered(self.owner.vectors)

    def describe(self) -> SummarizerInfo:
        return self.owner.describe()

    # ------------------------------------------------------------------ candidates
    def informative(self, text: str) -> bool:
        return not self.weights.informative or is_informative(text)

    def stands_alone(self, text: str) -> bool:
        return not self.weights.stand_alone or stands_alone(text, self.names, self.cased, self.transcript)

    def units_for(self, instruction: str | None) -> dict[tuple[tuple[int, ...], int | None], list[Source]]:
        """The lead-in units an instruction may use: all with one; without one, not those that bring a
        command (a command or a value would push prose out of a summary)."""
        return {key: unit for key, unit in self.units.items() if instruction or not brings_code(unit)}

    def candidates(self, texts: Sequence[str], instruction: str | None = None) -> list[int]:
        """Indices of the informative texts that stand alone, and, with an instruction, of the lead-ins shown
        with their command (vetted by :func:`lead_in_units`: a command has no final punctuation)."""
        commands = {unit_text(u) for u in self.units_for(instruction).values() if brings_code(u)}
        return [
            i
            for i, text in enumerate(texts)
            if text in commands or (self.informative(text) and self.stands_alone(text))
        ]

    # ------------------------------------------------------------------ a section's k sentences
    def select(
        self, texts: Sequence[str], instruction: str | None = None, fallback: bool = True
    ) -> list[int]:
        """The ``k`` chosen texts of one window, in order: by PacSum centrality over the window's informative
        texts (or relevance to a specific instruction), by MMR so that no two say the same. Without a
        candidate: none, or with ``fallback`` the longest texts ranked the same way."""
        instruction = None if instruction is None or is_general(instruction) else instruction
        pool = self.candidates(texts, instruction)
        if not pool and fallback:
            pool = sorted(sorted(range(len(texts)), key=lambda i: -len(texts[i]))[: max(self.owner.k, 20)])
        if not pool:
            return []
        graph = sorted(set(pool) | {i for i, t in enumerate(texts) if self.informative(t)})
        score, similarity = self._centrality(
            [spoken(texts[i]) for i in graph], [graph.index(i) for i in pool]
        )
        if instruction is not None:
            score = relevance(
                [texts[i] for i in pool], [spoken(texts[i]) for i in pool], instruction, self.vectors
            )
        return sorted(pool[i] for i in mmr(score, similarity, self.owner.k, self.weights.trade_off))

    def select_window(self, document: Document, instruction: str | None = None) -> list[int]:
        # By section a window without prose (a ToC, a code block, backchannels) contributes nothing.
        return self.select([s.text for s in document.sentences], instruction, fallback=False)

    def summarize_windows(
        self, windows: Sequence[Window], instructions: Sequence[str | None] | None = None,
        decoding: DecodingOptions | None = None,
    ) -> list[list[SummarySentence]]:
        """Each section's chosen sentences, a lead-in read and shown with what it introduces, each citing its
        sources."""
        instructions = list(instructions or [None] * len(windows))
        out = []
        for window, instruction in zip(windows, instructions, strict=True):
            known = self.units_for(instruction)
            units = [known.get((s.path, s.sentence), [s]) for s in window.sources]
            texts = [unit_text(u) if len(u) > 1 else t for u, t in zip(units, window.texts, strict=True)]
            picked = self.select(texts, instruction, fallback=False)
            out.append([SummarySentence(texts[i], units[i], support(texts[i], units[i])) for i in picked])
        return out

    def _centrality(self, graph_texts: list[str], pool: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """PacSum centrality (scaled to [0, 1]) of the ``pool`` positions among ``graph_texts`` (the graph's
        sentences in document order, TF-IDF vectors) and the pool's pairwise similarities."""
        vectors = self.owner.graph_vectors.encode(graph_texts)
        similarity = vectors @ vectors.T
        centrality = directed_centrality(similarity, self.weights.beta, self.weights.lambda1)
        return normalised(centrality[pool]), similarity[np.ix_(pool, pool)]

    # ------------------------------------------------------------------ the document summary
    def document_summary(self, instruction: str | None, max_words: int) -> list[SummarySentence]:
        """The document summary within ``max_words``, filled with whole candidates (sentences that stand
        alone, lead-ins with their lists): without an instruction (or with a general one, "Summarize the
        whole meeting") by PacSum centrality over the document's informative sentences, a sectioned
        document's opening weighted by ``weights.opening`` and its defining sentence first; with a specific
        instruction by relevance (:func:`~synopsis.summarizers.salient.relevance.relevance`, each candidate
        read under its heading, a transcript's turns with their neighbours). A sentence opening with a
        pronoun comes only after the sentence before it, and no sentence repeats a chosen one. Returned led
        by the defining sentence, then in document order, each citing itself; empty when nothing
        qualifies."""
        document, sentences = self.document, self.document.sentences
        instruction = None if instruction is None or is_general(instruction) else instruction
        units = {i: [self.sources[i]] for i in self.candidates([s.text for s in sentences])}
        brought = self.units_for(instruction)
        for i, source in enumerate(self.sources):
            if (source.path, source.sentence) in brought:
                units[i] = brought[(source.path, source.sentence)]
        words = {i: sum(len(s.text.split()) for s in unit) for i, unit in units.items()}  # as printed
        pool = sorted(i for i in units if words[i] <= max_words)
        if not pool:
            return []
        shown = {i: unit_text(units[i]) for i in pool}
        graph = sorted(set(pool) | {i for i, s in enumerate(sentences) if self.informative(s.text)})
        texts = [spoken(shown.get(i, sentences[i].text)) for i in graph]
        score, similarity = self._centrality(texts, [graph.index(i) for i in pool])
        first: int | None = None
        if instruction is not None:
            plain = [spoken(shown[i]) for i in pool]
            headed = [_under_heading(sentences[i].section, t) for i, t in zip(pool, plain, strict=True)]
            turns = _turns(document, pool) if self.transcript else None
            score = relevance(
                texts=[shown[i] for i in pool],
                plain=plain,
                instruction=instruction,
                vectors=self.vectors,
                headed=headed,
                heading_weight=_heading_weights(document, pool),
                turns=turns,
            )
        elif self.weights.opening:
            weight, first = opening(document, pool, self.names)
            score = (1 - self.weights.opening) * score + self.weights.opening * weight
            first = first if self.weights.defining_first else None
        sizes = np.array([words[i] for i in pool])
        after = _antecedents(document, pool) if self.weights.anaphora else None
        picked = budgeted_mmr(score, similarity, sizes, max_words, 1.0, first, after)
        cited = [units[pool[i]] for i in sorted(picked, key=lambda i: (i != first, i))]
        return [SummarySentence(unit_text(unit), unit, support(unit_text(unit), unit)) for unit in cited]


def _turns(document: Document, pool: list[int]) -> np.ndarray:
    """Each candidate's turn (a transcript's paragraph), numbered in document order."""
    numbers: dict[tuple[int, int], int] = {}
    for sentence in document.sentences:
        numbers.setdefault((sentence.section.index, sentence.paragraph), len(numbers))
    return np.array([numbers[(s.section.index, s.paragraph)] for s in (document.sentences[i] for i in pool)])


def _under_heading(section: Any, text: str) -> str:
    """``text`` under the heading of its section ("Termination: ..."), or alone in the preface."""
    heading = (section.heading or "").strip().rstrip(".:")
    return f"{heading}: {text}" if heading and section.parent is not None else text


def _heading_weights(document: Document, pool: list[int]) -> np.ndarray:
    """How much each candidate's heading says of it: half its relevance in a section of up to
    :data:`HEADING_SPAN` sentences, less in longer ones (a meeting's topic heads hundreds of turns, most of
    them about something else), none in the preface."""
    sizes = Counter(s.section.index for s in document.sentences)
    sections = [document.sentences[i].section for i in pool]
    return np.array(
        [0.0 if s.parent is None else 0.5 * min(1.0, HEADING_SPAN / sizes[s.index]) for s in sections]
    )


def _antecedents(document: Document, pool: list[int]) -> np.ndarray:
    """For each candidate (``pool``: sentence indices) the position in ``pool`` of the sentence it needs
    before it: the one before it in its paragraph when it opens with a pronoun (:data:`ANAPHORIC`: "It
    includes ..."), -2 when that one is no candidate or there is none, -1 for a sentence that needs none."""
    sentences = document.sentences
    position = {i: k for k, i in enumerate(pool)}
    out = np.full(len(pool), -1)
    for k, i in enumerate(pool):
        if first_word(spoken(sentences[i].text).split()) not in ANAPHORIC:
            continue
        before = i - 1
        same = before >= 0 and (sentences[before].section, sentences[before].paragraph) == (
            sentences[i].section,
            sentences[i].paragraph,
        )
        out[k] = position.get(before, -2) if same else -2
    return out


def _one_document(options: dict[str, Any], d: int) -> dict[str, Any]:
    """``summarize_by_section`` options for document ``d`` of a call, run alone: its offsets, callbacks given
    the call's position back, one window per call (so each section is emitted when chosen)."""
    out = {**options, "batch_size": 1}
    if options.get("offsets") is not None:
        out["offsets"] = [options["offsets"][d]]
    if options.get("on_section") is not None:
        on_section = options["on_section"]
        out["on_section"] = lambda _, section: on_section(d, section)
    out.pop("summarize_windows", None)  # its own: choosing sentences needs no batches shared with others
    return out


class _Remembered:
    """Sentence vectors remembered by text during one document's run, so that the section summaries and the
    document summary encode each sentence once."""

    def __init__(self, vectors: SentenceVectors) -> None:
        self.vectors = vectors
        self.name = getattr(vectors, "name", type(vectors).__name__)
        self.known: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(self.vectors, TfidfVectors):  # fitted on the texts encoded together: not per text
            return self.vectors.encode(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            self.known.update(zip(missing, self.vectors.encode(missing), strict=True))
        if not texts:
            return self.vectors.encode([])
        return np.stack([self.known[t] for t in texts])
