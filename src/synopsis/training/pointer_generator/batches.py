"""The pointer-generator trainer's data: the examples of a split, tokenised (article, summary) pairs, their
tensors (:func:`~synopsis.data.pointer_generator.encode_batch`, shared with the summarizer) and the batch
order of an epoch, a pure function of the seed and the epoch so that a resumed run sees the same batches."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from synopsis.data.example import Example
from synopsis.data.pointer_generator import Batch, document_words, encode_batch, summary_words
from synopsis.training.pointer_generator.config import DataConfig
from synopsis.vocab import Vocab


@dataclass
class Pair:
    """One tokenised (article, summary) training pair."""

    source: list[str]
    target: list[str]


def read_split(data: DataConfig, split: str | None, path: str | None = None) -> list[Example]:
    """Examples of one split, through the project's corpus readers (or our JSONL for ``corpus: jsonl``)."""
    path = path or data.path
    if data.corpus == "jsonl":
        from synopsis.data.example import read_examples

        folder = Path(path)
        return list(read_examples(folder / f"{split}.jsonl" if folder.is_dir() and split else folder))
    from synopsis.data.readers import read_corpus

    return list(read_corpus(data.corpus, path, split=split, **(data.corpus_options or {})))


def document_tokens(example_or_text: Example | str) -> list[str]:
    """Lowercased word tokens of an article, as the summarizer reads it (:func:`document_words`)."""
    if isinstance(example_or_text, Example):
        return document_words(example_or_text.document)
    return document_words(example_or_text)


def make_pairs(examples: Sequence[Example], all_references: bool, limit: int | None = None) -> list[Pair]:
    pairs = []
    for example in examples[:limit] if limit else examples:
        source = document_tokens(example)
        references = example.references if all_references else example.references[:1]
        for reference in references:
            target = summary_words(reference)
            if source and target:
                pairs.append(Pair(source, target))
    return pairs


def collate(pairs: Sequence[Pair], vocab: Vocab, max_source: int, max_target: int) -> Batch:
    """Tensors for a batch of training pairs (:func:`encode_batch`, shared with the summarizer)."""
    return encode_batch(vocab, [p.source for p in pairs], [p.target for p in pairs], max_source, max_target)


def batch_to(batch: Batch, device: torch.device) -> Batch:
    move = {k: getattr(batch, k) for k in ("input_ids", "extended_ids", "decoder_input_ids", "labels")}
    return dataclasses.replace(batch, **{k: v.to(device) for k, v in move.items() if v is not None})


def epoch_batches(
    num_pairs: int, lengths: Sequence[int], batch_size: int, seed: int, epoch: int
) -> list[list[int]]:
    """The batch order of one epoch, a pure function of (seed, epoch): shuffle, sort by length within
    chunks of 50 batches (less padding), then shuffle the batches."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(num_pairs))
    rng.shuffle(order)
    chunk = batch_size * 50
    batches = []
    for start in range(0, num_pairs, chunk):
        part = sorted(order[start : start + chunk], key=lambda i: lengths[i])
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches
