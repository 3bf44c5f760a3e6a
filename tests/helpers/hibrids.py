"""Shared by the tests (moved from tests/test_hibrids.py)."""

from __future__ import annotations

import torch
from transformers import (
    BartForConditionalGeneration,
    LEDForConditionalGeneration,
    T5ForConditionalGeneration,
)

from helpers.tiny_models import BOS, PAD, bart_config, led_config, t5_config
from synopsis.document import Document, Section
from synopsis.models.hibrids import (
    document_relation_buckets,
    pad_section_relations,
)


# ----------------------------------------------------------------------------- documents and inputs
def two_documents() -> list[Document]:
    """Two section trees: root -> 1 (-> 1.1, 1.2), 2; and root -> 1, 2, 3."""
    a = Document(
        Section(
            children=[
                Section("One", [["a"]], children=[Section("One.1", [["b"]]), Section("One.2", [["c"]])]),
                Section("Two", [["d"]]),
            ]
        )
    )
    b = Document(Section(children=[Section("A", [["e"]]), Section("B", [["f"]]), Section("C", [["g"]])]))
    return [a, b]


def toy_inputs(
    lengths: list[int],
    vocab: int = 64,
    seed: int = 0,
    pad: int = PAD,
    bos: int | None = BOS,
    selected: bool = False,
):
    """Right-padded random token ids with their masks, section ids and padded relation buckets."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.randint(4, vocab, (len(lengths), width), generator=generator)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
        ids[b, n:] = pad
        if bos is not None:
            ids[b, 0] = bos
    docs = two_documents()[: len(lengths)]
    section_ids = section_ids_for(lengths, docs, width)
    relations = pad_section_relations([document_relation_buckets(d, selected=selected) for d in docs])
    return ids, mask, section_ids, relations


# ----------------------------------------------------------------------------- toy models
FAMILIES = {
    "bart": (bart_config, BartForConditionalGeneration),
    "t5": (t5_config, T5ForConditionalGeneration),
    "led": (led_config, LEDForConditionalGeneration),
}


def sharpen(model: torch.nn.Module) -> torch.nn.Module:
    """BART/LED's N(0, 0.02) init makes attention outputs negligible next to the residual stream (tables
    would barely show in the outputs): scale matrices to ~1/sqrt(d_model), queries and keys a bit more
    (peaked attention), and embeddings to logits of order 1."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                sharp = any(k in name for k in ("q_proj", "k_proj", "query", "key"))
                p.mul_(25.0 if "embed" in name or "shared" in name else 16.0 if sharp else 8.0)
    return model


def stock_model(family: str, attn: str = "eager", seed: int = 0):
    """A random stock model (T5's default init already has attention that matters)."""
    make_config, cls = FAMILIES[family]
    torch.manual_seed(seed)
    model = cls(make_config() if family == "led" else make_config(attn)).eval()
    return model if family == "t5" else sharpen(model)


def family_inputs(family: str, selected: bool = False) -> dict[str, torch.Tensor]:
    """A padded batch of two documents; LED's is several attention windows long with global tokens."""
    if family == "led":
        ids, mask, section_ids, relations = toy_inputs([100, 73], selected=selected)
        glob = torch.zeros_like(ids)
        glob[:, 0] = 1  # BOS (outside any section), as LED is used
        glob[0, 30] = 1  # and one token inside a section, so global rows and columns get a bias too
        extra = {"global_attention_mask": glob}
    elif family == "t5":
        ids, mask, section_ids, relations = toy_inputs([14, 10], pad=0, bos=None, selected=selected)
        extra = {}
    else:
        ids, mask, section_ids, relations = toy_inputs([14, 10], selected=selected)
        extra = {}
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "section_ids": section_ids,
        "section_relations": relations,
        **extra,
    }


def without_sections(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in inputs.items() if not k.startswith("section_")}


def section_ids_for(lengths: list[int], documents: list[Document], width: int) -> torch.Tensor:
    """Per document: BOS and EOS outside any section, the body split into runs over sections 1..S-1,
    and one token in the middle outside any section (a separator), right-padded with -1."""
    rows = []
    for length, doc in zip(lengths, documents, strict=True):
        body = length - 2
        sections = list(range(1, len(doc.sections)))
        ids = [sections[min(i * len(sections) // body, len(sections) - 1)] for i in range(body)]
        ids[body // 2] = -1
        rows.append([-1] + ids + [-1] + [-1] * (width - length))
    return torch.tensor(rows)


def _spread(model: torch.nn.Module) -> dict[str, float]:
    """Standard deviation of every weight matrix (the HIBRIDS tables apart)."""
    return {
        name: float(p.detach().float().std())
        for name, p in model.named_parameters()
        if p.dim() == 2 and "hibrids" not in name
    }
