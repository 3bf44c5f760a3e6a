"""A probe whose answer depends on the section tree: base vs LVLSECTOK vs HIBRIDS-ENC vs HIBRIDS-ENC+DEC.

HIBRIDS (Cao & Wang, ACL 2022) biases attention by the section-tree relation (PathLen, LvlDiff) of every
token pair. The summarization runs on CPU cannot show whether that helps: 40 steps from scratch give the same
outputs for every variant. This probe asks a question that only the tree answers. A synthetic document (a
random tree of 3 levels, every section headed by one word, two filler sentences per section) has one
sentence marked with ``XMARK``. The target is the heading path of the section that holds it (``alpha > delta
> kappa``). Every variant reads the same text, headings included, so a flat model can still find the path. It
has to infer the tree from the order of the headings, where HIBRIDS gets it as attention biases and LVLSECTOK
as depth markers.

Every variant of one seed starts from the same random small BART (``small_bart_config``), converted
(``section-tokens --kind lvlsectok``, ``hibrids`` with or without the decoder table), and trains on the same
examples in the same order. Scores: exact match of the whole path and per-level accuracy, greedy decoding,
on held-out documents.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synopsis.document import Document, Section
from synopsis.experiments.small_bart import experiment_tokenizer, small_bart_config
from synopsis.io import write_json

logger = logging.getLogger(__name__)

PROBE_VARIANTS = ("base", "lvlsectok", "hibrids-enc", "hibrids-enc+dec")
MARK = "XMARK"
HEADINGS = (
    "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega orbit comet nebula quartz basalt "
    "granite marble cedar maple willow birch falcon heron"
).split()
FILLER = (
    "the a model data result method study value system table shows uses gives small large first second "
    "new old each many some more less high low good clear early late"
).split()


@dataclass
class ProbeConfig:
    """Sizes of the probe (defaults: a few minutes per run on one CPU thread)."""

    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    variants: list[str] = field(default_factory=lambda: list(PROBE_VARIANTS))
    train_documents: int = 2000
    test_documents: int = 200
    max_sections: int = 12
    steps: int = 600
    batch_size: int = 16
    learning_rate: float = 1e-3
    d_model: int = 64
    layers: int = 2
    heads: int = 4
    ffn_dim: int = 256
    dropout: float = 0.1
    vocab_size: int = 400
    max_source_length: int = 512
    max_target_length: int = 24

    def __post_init__(self) -> None:
        unknown = sorted(set(self.variants) - set(PROBE_VARIANTS))
        if unknown:
            raise ValueError(f"unknown probe variants {unknown}; choose from {', '.join(PROBE_VARIANTS)}")


def probe_document(rng: random.Random, max_sections: int) -> tuple[Document, str]:
    """A random 3-level tree with one marked sentence, and the heading path of the marked section."""
    words = rng.sample(HEADINGS, min(max_sections, len(HEADINGS)))
    root = Section(paragraphs=[[_sentence(rng)]])
    sections: list[Section] = []
    for _ in range(rng.randint(2, 4)):
        if len(sections) >= len(words):
            break
        top = root.add(Section(words[len(sections)], [[_sentence(rng), _sentence(rng)]]))
        sections.append(top)
        for _ in range(rng.randint(0, 2)):
            if len(sections) >= len(words):
                break
            child = top.add(Section(words[len(sections)], [[_sentence(rng), _sentence(rng)]]))
            sections.append(child)
            for _ in range(rng.randint(0, 1)):
                if len(sections) >= len(words):
                    break
                sections.append(child.add(Section(words[len(sections)], [[_sentence(rng), _sentence(rng)]])))
    marked = rng.choice(sections)
    paragraph = marked.paragraphs[0]
    index = rng.randrange(len(paragraph))
    paragraph[index] = f"{MARK} {paragraph[index]}"
    document = Document(root)
    path = [s.heading for s in document.sections if s.is_ancestor_of(marked) and s.heading] + [marked.heading]
    return document, " > ".join(path)


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(rng.randint(4, 7))) + "."


def path_scores(predictions: list[str], references: list[str]) -> dict[str, float]:
    """Exact match of the whole path and the share of reference levels predicted at their place."""
    exact, levels, total = 0, 0, 0
    for prediction, reference in zip(predictions, references, strict=True):
        got = [p.strip() for p in prediction.split(">")]
        want = [p.strip() for p in reference.split(">")]
        exact += got == want
        levels += sum(g == w for g, w in zip(got, want, strict=False))
        total += len(want)
    return {"exact_match": 100.0 * exact / len(references), "level_accuracy": 100.0 * levels / total}


def _variant(base: Any, tokenizer: Any, variant: str) -> tuple[Any, Any]:
    import copy

    from synopsis.models.seq2seq import convert_seq2seq

    model, tokenizer = copy.deepcopy(base), copy.deepcopy(tokenizer)
    if variant == "lvlsectok":
        model = convert_seq2seq("section-tokens", model, tokenizer, markers="lvlsectok", max_depth=3)
    elif variant.startswith("hibrids"):
        model = convert_seq2seq("hibrids", model, tokenizer, encoder=True, decoder=variant.endswith("dec"))
    return model, tokenizer


def _run(cfg: ProbeConfig, variant: str, seed: int, tokenizer: Any, data: dict[str, Any]) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForSeq2SeqLM

    from synopsis.devices import resolve_device
    from synopsis.models.inputs import Seq2SeqInputs

    torch.manual_seed(seed)
    base = AutoModelForSeq2SeqLM.from_config(small_bart_config(cfg, tokenizer))
    model, tok = _variant(base, tokenizer, variant)
    device = resolve_device(None)  # experiment hibrids-probe --device (auto: a GPU when torch sees one)
    model.to(device)
    inputs = Seq2SeqInputs(
        model.config, tok, max_source_length=cfg.max_source_length, max_target_length=cfg.max_target_length
    )
    train_sources = inputs.encode_sources([d for d, _ in data["train"]])
    train_targets = inputs.encode_targets([p for _, p in data["train"]])
    test_sources = inputs.encode_sources([d for d, _ in data["test"]])
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate)
    order = random.Random(seed)
    model.train()
    started = time.process_time()
    for _ in range(cfg.steps):
        rows = order.sample(range(len(train_sources)), cfg.batch_size)
        batch = inputs.collate([train_sources[r] for r in rows], [train_targets[r] for r in rows])
        loss = model(**inputs.model_inputs(batch, device)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    seconds = time.process_time() - started
    model.eval()
    predictions: list[str] = []
    with torch.no_grad():
        for start in range(0, len(test_sources), 50):
            batch = inputs.collate(test_sources[start : start + 50])
            fields = {k: v for k, v in inputs.model_inputs(batch, device).items() if k != "labels"}
            out = model.generate(**fields, num_beams=1, do_sample=False, max_new_tokens=cfg.max_target_length)
            predictions += [" ".join(t.split()) for t in tok.batch_decode(out, skip_special_tokens=True)]
    scores = path_scores(predictions, [p for _, p in data["test"]])
    final_loss = loss.item()  # once, after training: the only host sync of the loss
    logger.warning("probe %s seed %d: %s (final loss %.3f)", variant, seed, scores, final_loss)
    return {
        "variant": variant,
        "seed": seed,
        **scores,
        "final_loss": final_loss,
        "cpu_seconds": seconds,
        "examples": predictions[:3],
    }


def run_probe(cfg: ProbeConfig, output: str | Path, data_dir: str | Path) -> str:
    """Train every variant for every seed; write ``results.json`` and ``table.md``; return the table."""
    output = Path(output)
    rng = random.Random(12345)  # one data set for every seed and variant
    data = {
        "train": [probe_document(rng, cfg.max_sections) for _ in range(cfg.train_documents)],
        "test": [probe_document(rng, cfg.max_sections) for _ in range(cfg.test_documents)],
    }

    def texts() -> list[str]:
        out = []
        for document, path in data["train"]:
            out += [s.text for s in document.sentences] + [path]
            out += [s.heading for s in document.sections if s.heading]
        return out

    tokenizer = experiment_tokenizer(
        "corpus-bpe", Path(data_dir), output / "tokenizer", cfg.vocab_size, texts
    )
    load_before = os.getloadavg()
    rows = [_run(cfg, v, s, tokenizer, data) for s in cfg.seeds for v in cfg.variants]
    lines = [
        "| variant | exact match (%) | level accuracy (%) | final train loss | CPU s / run |",
        "|---|---|---|---|---|",
    ]
    for variant in cfg.variants:
        mine = [r for r in rows if r["variant"] == variant]

        def stat(key: str, rows: list[dict[str, Any]] = mine) -> str:
            values = [r[key] for r in rows]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            return f"{statistics.mean(values):.1f} +- {sd:.1f}"

        loss = statistics.mean(r["final_loss"] for r in mine)
        seconds = statistics.mean(r["cpu_seconds"] for r in mine)
        exact, levels = stat("exact_match"), stat("level_accuracy")
        lines.append(f"| {variant} | {exact} | {levels} | {loss:.3f} | {seconds:.0f} |")
    table = "\n".join(lines) + "\n"
    run = {"loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    write_json(output / "results.json", {"config": cfg.__dict__, "run": run, "rows": rows})
    (output / "table.md").write_text(table, encoding="utf-8")
    return table
