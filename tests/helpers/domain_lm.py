"""A tiny attributed corpus and model for the domain-LM tests (Wang et al.'s attributes: style x topic)."""

from __future__ import annotations

import json
import random

import torch

from synopsis.data.lm_corpus import AttributedDocument, TokenStream, build_vocabulary
from synopsis.models.domain_lm import DomainLM, DomainLMConfig

WORDS = {
    "spoken": ["uh", "um", "yeah", "you", "know"],
    "written": ["thus", "however", "which", "whereas", "hence"],
    "public": ["court", "law", "vote", "tax", "senate"],
    "everyday": ["dog", "dinner", "movie", "kids", "trip"],
}


def tiny_documents(lines_per_doc: int = 12, seed: int = 0) -> list[AttributedDocument]:
    rng = random.Random(seed)
    docs = []
    for style in ("spoken", "written"):
        for topic in ("public", "everyday"):
            pool = WORDS[style] + WORDS[topic] + ["and", "a", "is"]
            for d in range(3):
                lines = [[rng.choice(pool) for _ in range(8)] for _ in range(lines_per_doc)]
                docs.append(
                    AttributedDocument(f"{style}-{topic}-{d}", {"style": style, "topic": topic}, lines)
                )
    return docs


def write_jsonl(docs: list[AttributedDocument], path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for d in docs:
            text = "\n".join(" ".join(line) for line in d.lines)
            handle.write(json.dumps({"id": d.id, "text": text, "attributes": d.attributes}) + "\n")


def setup_training(seed: int = 0):
    docs = tiny_documents()
    vocab = build_vocabulary(docs, min_count=2)
    train = TokenStream.from_documents(docs[::2], vocab)
    dev = TokenStream.from_documents(docs[1::2], vocab)
    torch.manual_seed(seed)
    slots = ["style=spoken", "style=written", "topic=everyday", "topic=public"]
    model = DomainLM(DomainLMConfig(len(vocab), 16, 16, dropout=0.3, variant="in", attribute_slots=slots))
    return model, train, dev, vocab
