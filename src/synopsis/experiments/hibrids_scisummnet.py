"""HIBRIDS at CPU scale on SciSummNet: base vs SECTOK vs LVLSECTOK vs HIBRIDS-ENC vs HIBRIDS-DEC.

Cao & Wang, "HIBRIDS: Attention with Hierarchical Biases for Structure-aware Long Document Summarization",
ACL 2022. Small BARTs trained from random init on SciSummNet (ACL papers with their section trees -> the
human summary), one per variant, all at the same size, steps, data order and seed, and all starting from
the *same* random base weights: the base model is built once (seeded) and saved, then converted per variant
(``section-tokens`` with SECTOK or LVLSECTOK markers; ``hibrids`` with only the encoder or only the decoder
tables, on the LVLSECTOK weights: the paper builds every HIBRIDS variant on LVLSECTOK).
The HIBRIDS tables start at zero (the converter's choice; the paper draws N(0, 0.02) when training from
scratch), so every variant computes exactly the base model at step 0 and a table cell that no training
pair ever reached is still exactly zero after training (Adam moves nothing without a gradient; weight decay
of zero is zero) -- the heatmap greys those cells out.

SciSummNet has no splits: papers sorted by id, the last ``dev_fraction`` of them are dev, the rest train
(symlinked into ``output/split/{train,dev}``). With ``drop_abstract`` the paper's abstract is removed from
the source (:func:`drop_abstract`): the human summary overlaps it heavily, so a model could copy from it
without reading the rest of the tree; the split is then written once as our JSONL
(``output/split/{train,dev}.jsonl``) and every run reads that. Writes ``table.md``, ``results.json``,
``scores.png`` (dev ROUGE and dev loss per variant) and ``bias_heatmap.png`` (learned biases indexed by
PathLen x LvlDiff, the shape of the paper's Table 5).
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from synopsis.config import AT_LEAST_ONE, Range, to_dict
from synopsis.data.example import write_examples
from synopsis.document import Document
from synopsis.errors import CheckpointError, InputError
from synopsis.experiments.common import plot_rouge_and_loss, seq2seq_run_config, train_run, write_results
from synopsis.experiments.small_bart import SmallBartExperimentConfig, experiment_tokenizer, small_bart_config
from synopsis.training.seq2seq import load_examples

logger = logging.getLogger(__name__)

#: variant name -> (the variant it is converted from, ``convert`` options), None: the saved random base model.
#: Every HIBRIDS variant is built on LVLSECTOK, as in the paper (section 5: "based on LVLSECTOK, we build
#: all HIBRIDS variants") and the public code (a depth token before each section in every HIBRIDS input).
VARIANTS: dict[str, tuple[str, dict[str, Any]] | None] = {
    "base": None,
    "sectok": ("base", {"method": "section-tokens", "markers": "sectok"}),
    "lvlsectok": ("base", {"method": "section-tokens", "markers": "lvlsectok"}),
    "hibrids-enc": ("lvlsectok", {"method": "hibrids", "encoder": True, "decoder": False}),
    "hibrids-dec": ("lvlsectok", {"method": "hibrids", "encoder": False, "decoder": True}),
}
#: relations of the paper's Table 5 discussion: (PathLen, LvlDiff) -> name (query section x, key section y)
NAMED_RELATIONS = {
    (0, 0): "self",
    (1, 1): "child",
    (-1, -1): "parent",
    (2, 0): "next sibling",
    (-2, 0): "previous sibling",
    (2, 2): "grandchild",
    (-2, -2): "grandparent",
}


@dataclass(kw_only=True)
class HibridsExperimentConfig(SmallBartExperimentConfig):
    """Small BARTs from random init on SciSummNet (paper -> human summary), one per HIBRIDS variant.
    ``layers``: HIBRIDS-DEC needs >= 2 decoder layers."""

    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    heads: int = 4
    dev_fraction: float = 0.1  # the last 10% of papers by id are dev
    tokenizer_examples: int = 300  # train papers the corpus BPE is trained on
    # SciSummNet's papers and summaries are long
    max_source_length: int = 1024
    max_target_length: int = 160
    eval_max_length: int = 128
    dev_examples: int = 50  # dev papers scored (the first of the dev split)
    batch_size: int = 8
    warmup_steps: int = 30
    drop_abstract: bool = False  # remove the paper's abstract from the source (see drop_abstract())

    RANGES: ClassVar[dict[str, Range]] = {
        **SmallBartExperimentConfig.RANGES,
        "heads": AT_LEAST_ONE,
        "tokenizer_examples": AT_LEAST_ONE,
        "dev_fraction": Range(0, 1, low_open=True, high_open=True),
    }

    def validate(self) -> None:
        super().validate()
        if not self.variants:
            raise ValueError("variants: give at least one of " + ", ".join(VARIANTS))
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown:
            raise ValueError(f"variants {unknown}: choose from {', '.join(VARIANTS)}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by heads {self.heads}")
        if self.layers < 2:
            raise ValueError("layers must be >= 2 (HIBRIDS-DEC weights the last layer by the one before)")


def split_papers(corpus: Path, out_dir: Path, dev_fraction: float) -> tuple[Path, Path, dict[str, Any]]:
    """Deterministic split by paper id: the last ``dev_fraction`` of the sorted ids are dev (symlinks)."""
    papers = sorted(p for p in corpus.iterdir() if p.is_dir() and (p / "Reference_XML").is_dir())
    if len(papers) < 2:
        raise InputError(f"{corpus}: fewer than 2 SciSummNet papers")
    n_dev = max(1, math.ceil(len(papers) * dev_fraction))
    parts = {"train": papers[:-n_dev], "dev": papers[-n_dev:]}
    dirs = {}
    for name, members in parts.items():
        directory = out_dir / name
        directory.mkdir(parents=True, exist_ok=True)
        for paper in members:
            link = directory / paper.name
            if not link.exists():
                link.symlink_to(paper.resolve(), target_is_directory=True)
        dirs[name] = directory
    info = {
        "papers": len(papers),
        "train": len(parts["train"]),
        "dev": n_dev,
        "first_dev_id": parts["dev"][0].name,
        "rule": f"papers sorted by id; the last {n_dev} ({dev_fraction:.0%}) are dev",
    }
    return dirs["train"], dirs["dev"], info


def drop_abstract(document: Document) -> bool:
    """Remove the paper's abstract from ``document`` (in place); return whether there was one.

    The abstract is a top-level section whose heading, without surrounding punctuation, is "Abstract" in
    any case: the SciSummNet reader heads the XML's ``<ABSTRACT>`` element so, and a few OCR-damaged papers
    have a ``<SECTION title="Abstract*">``. Sections whose title merely starts with "Abstract" ("Abstract 1
    Introduction": OCR joined the abstract to the next section) are kept, since dropping them would also
    drop the section they were joined to; papers without sections keep their abstract inside the loose text.
    """
    root = document.root
    kept = [c for c in root.children if not _is_abstract(c.heading)]
    if len(kept) == len(root.children):
        return False
    root.children = kept
    document.reindex()
    return True


def _is_abstract(heading: str | None) -> bool:
    return heading is not None and re.sub(r"^\W+|\W+$", "", heading).casefold() == "abstract"


def _source_split(
    cfg: HibridsExperimentConfig, train_dir: Path, dev_dir: Path, out_dir: Path, split: dict[str, Any]
) -> tuple[Path, Path, str]:
    """(train path, dev path, corpus name) the runs read: the SciSummNet folders, or with ``drop_abstract``
    our JSONL of the same papers without their abstracts (written once; ``split`` gets the counts)."""
    if not cfg.drop_abstract:
        return train_dir, dev_dir, "scisummnet"
    paths = {"train": out_dir / "train.jsonl", "dev": out_dir / "dev.jsonl"}
    for name, directory in (("train", train_dir), ("dev", dev_dir)):
        examples = load_examples("scisummnet", directory, None, None)
        dropped = sum(drop_abstract(e.document) for e in examples)
        split[f"{name}_abstracts_dropped"] = dropped
        split[f"{name}_without_abstract_section"] = len(examples) - dropped
        if not paths[name].is_file():
            write_examples(examples, paths[name])
    split["source"] = "the paper without its abstract (a top-level section headed Abstract)"
    return paths["train"], paths["dev"], "synopsis"


def _tokenizer(
    cfg: HibridsExperimentConfig, data_dir: Path, train_path: Path, corpus: str, out_dir: Path
) -> Any:
    def texts() -> list[str]:
        limit = cfg.tokenizer_examples
        if cfg.train_examples is not None:
            limit = min(limit, cfg.train_examples)
        out: list[str] = []
        for example in load_examples(corpus, train_path, None, limit):
            out += [s.text for s in example.document.sentences] + example.references
            out += [s.heading for s in example.document.sections if s.heading]
        return out

    return experiment_tokenizer(cfg.tokenizer, data_dir, out_dir, cfg.vocab_size, texts)


def _base_model(cfg: HibridsExperimentConfig, tokenizer: Any, directory: Path) -> Path:
    """A random BART (seeded) saved with its tokenizer: every variant is converted from these weights."""
    if (directory / "model.safetensors").is_file():
        return directory
    import torch
    from transformers import AutoModelForSeq2SeqLM

    torch.manual_seed(cfg.seed)
    model = AutoModelForSeq2SeqLM.from_config(small_bart_config(cfg, tokenizer))
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def _variant_model(cfg: HibridsExperimentConfig, base: Path, variant: str, models: Path) -> Path:
    """The variant's starting weights, converted from the variant it is built on (written once; a HIBRIDS
    variant converts the LVLSECTOK weights, which it shares with the LVLSECTOK run)."""
    recipe = VARIANTS[variant]
    if recipe is None:
        return base
    target = models / variant
    if (target / "config.json").is_file():
        return target
    import torch

    from synopsis.models.seq2seq import convert_checkpoint

    source = _variant_model(cfg, base, recipe[0], models)
    torch.manual_seed(cfg.seed)  # the section markers' new embeddings
    options = dict(recipe[1])
    return convert_checkpoint(options.pop("method"), source, target, **options)


def run_hibrids_experiment(cfg: HibridsExperimentConfig, output: str | Path, data_dir: str | Path) -> str:
    """Train one model per variant; write the table, JSON and the two PNGs; return the table.

    Runs that already exist in ``output`` are resumed (a finished run is only re-read).
    """
    output, data_dir = Path(output), Path(data_dir)
    corpus = data_dir / "scisummnet"
    if not corpus.is_dir():
        raise InputError(f"{corpus}: SciSummNet not found (pass --data ../shared/data)")
    started, load_before = time.perf_counter(), os.getloadavg()
    train_dir, dev_dir, split = split_papers(corpus, output / "split", cfg.dev_fraction)
    train_path, dev_path, source_corpus = _source_split(cfg, train_dir, dev_dir, output / "split", split)
    tokenizer = _tokenizer(cfg, data_dir, train_path, source_corpus, output / "tokenizer")
    base = _base_model(cfg, tokenizer, output / "models" / "base")
    rows, biases = [], {}
    for variant in cfg.variants:
        model_dir = _variant_model(cfg, base, variant, output / "models")
        run_config = seq2seq_run_config(
            cfg,
            model=str(model_dir),
            output_dir=str(output / "runs" / variant),
            train_path=str(train_path),
            train_corpus=source_corpus,
            dev_path=str(dev_path),
        )
        logger.warning("hibrids experiment: training %s", variant)
        rows.append({"variant": variant, **train_run(run_config, show_progress=False)})
        if variant.startswith("hibrids"):
            biases[variant] = learned_biases(Path(run_config.output_dir))
    wall = round(time.perf_counter() - started, 1)
    run_info = {"wall_seconds": wall, "loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    table = _table(cfg, rows, biases, split, run_info)
    results = {"config": to_dict(cfg), "split": split, "run": run_info, "rows": rows, "biases": biases}
    write_results(output, results, table)
    title = "HIBRIDS variants on SciSummNet, small models from scratch (not the paper's scale)"
    plot_rouge_and_loss(rows, "variant", output / "scores.png", title)
    _plot_biases(biases, output / "bias_heatmap.png")
    return table


def learned_biases(run_dir: Path) -> dict[str, Any]:
    """The HIBRIDS tables of the run's newest checkpoint, as PathLen x LvlDiff grids (loaded through the
    checkpoint store, so NaN or infinite weights are a :class:`~synopsis.errors.CheckpointError`).

    Tables (buckets x heads per layer; an older decoder table has one column) are averaged over heads.
    A cell is None where (PathLen, LvlDiff) is impossible, or where the table entry is exactly zero for
    every head (zero-initialised and never reached by a gradient: the relation never occurred).
    """
    from synopsis.checkpoint import MODEL_FILE, CheckpointManager, load_tensors
    from synopsis.models.hibrids import FULL_INDEX

    latest = CheckpointManager(run_dir).latest()
    if latest is None:
        raise CheckpointError(f"{run_dir}: no checkpoint to read the learned biases from")
    weights = load_tensors(latest / MODEL_FILE)
    tables = {name: w.float() for name, w in weights.items() if "hibrids" in name}
    seen = [
        pair
        for pair, bucket in FULL_INDEX.items()
        if any(bool((w[bucket] != 0).any()) for w in tables.values())
    ]
    path_max = max([abs(p) for p, _ in seen] + [4])
    level_max = max([abs(lvl) for _, lvl in seen] + [2])
    paths = list(range(-path_max, path_max + 1))
    levels = list(range(-level_max, level_max + 1))

    def grid(weight: Any) -> list[list[float | None]]:
        mean = weight.mean(dim=1)
        cells: list[list[float | None]] = []
        for level in levels:
            row: list[float | None] = []
            for path in paths:
                bucket = FULL_INDEX.get((path, level))
                live = bucket is not None and bool((weight[bucket] != 0).any())
                row.append(round(float(mean[bucket]), 5) if live else None)
            cells.append(row)
        return cells

    layers = {}
    for name, weight in sorted(tables.items()):
        part = "encoder" if ".encoder." in name else "decoder"
        number = next((int(t) for t in name.split(".") if t.isdigit()), 0)
        layers[f"{part} layer {number}"] = {"heads": int(weight.shape[1]), "grid": grid(weight)}
    return {"path_lengths": paths, "level_differences": levels, "seen_relations": len(seen), "tables": layers}


def _named_values(bias: dict[str, Any], table: str) -> dict[str, float | None]:
    grid = bias["tables"][table]["grid"]
    values = {}
    for (path, level), name in NAMED_RELATIONS.items():
        if path in bias["path_lengths"] and level in bias["level_differences"]:
            cell = grid[bias["level_differences"].index(level)][bias["path_lengths"].index(path)]
            values[name] = cell
    return values


def _last_table(bias: dict[str, Any]) -> str:
    names = list(bias["tables"])
    encoders = [n for n in names if n.startswith("encoder")]
    return encoders[-1] if encoders else names[-1]


def _table(
    cfg: HibridsExperimentConfig,
    rows: list[dict[str, Any]],
    biases: dict[str, Any],
    split: dict[str, Any],
    run: dict[str, Any],
) -> str:
    load = ", ".join(f"{x:.1f}" for x in run["loadavg_before"])
    load_after = ", ".join(f"{x:.1f}" for x in run["loadavg_after"])
    lines = [
        f"# HIBRIDS on SciSummNet, small BARTs ({cfg.heads} heads, d_model {cfg.d_model}, "
        f"{cfg.layers}+{cfg.layers} layers, {cfg.max_steps} steps of batch {cfg.batch_size} "
        "from random init)",
        "",
        f"Split: {split['rule']} ({split['train']} train / {split['dev']} dev papers; dev starts at "
        f"{split['first_dev_id']}); the first {cfg.train_examples or split['train']} train papers are used. "
        f"Source: the paper's sections{_abstract_note(split)}, first {cfg.max_source_length} tokens; target: "
        "the human summary, "
        f"first {cfg.max_target_length} tokens. Dev ROUGE F1 x 100 on the first {cfg.dev_examples} dev "
        "papers (rouge-score, Porter stemming; rougeL = sentence-level LCS), best evaluation of each run; "
        f"greedy decoding, no repeated trigrams, at most {cfg.eval_max_length} tokens. Dev loss: "
        "teacher-forced cross-entropy per target token, lowest over the evaluations. All variants start "
        "from the same random base weights (HIBRIDS on the LVLSECTOK conversion, as in the paper, its tables "
        "zero-initialised) with the same data order and "
        "seed.",
        "",
        "| variant | ROUGE-1 | ROUGE-2 | ROUGE-L | average | best step | dev loss | final dev loss "
        "| seconds |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['variant']} | {row['rouge1']:.2f} | {row['rouge2']:.2f} | {row['rougeL']:.2f} | "
            f"{row['average']:.2f} | {row['best_step']} | {row['dev_loss']:.6f} | "
            f"{row['final_dev_loss']:.6f} | {row['seconds']:.0f} |"
        )
    lines += [
        "",
        f"Wall time {run['wall_seconds']:.0f} s; load average (1, 5, 15 min) {load} before, "
        f"{load_after} after (2 CPU cores shared with other jobs).",
    ]
    if biases:
        lines += [
            "",
            "Learned biases (mean over heads) at the relations the paper discusses; '-' = never reached:",
            "",
            "| variant, table | " + " | ".join(NAMED_RELATIONS.values()) + " | relations seen |",
            "|---|" + "---|" * (len(NAMED_RELATIONS) + 1),
        ]
        for variant, bias in biases.items():
            table = _last_table(bias)
            values = _named_values(bias, table)
            cells = [
                "-" if values.get(name) is None else f"{values[name]:+.4f}"
                for name in NAMED_RELATIONS.values()
            ]
            lines.append(f"| {variant}, {table} | " + " | ".join(cells) + f" | {bias['seen_relations']} |")
    lines += [
        "",
        "These small models trained for minutes on CPU do NOT reproduce the paper's numbers (BART-large "
        "fine-tuned on GovReport / QSGen-Hier). They show that the variants train end to end on real "
        "section trees under one budget. Differences of this size are within run-to-run noise unless "
        "repeated over seeds; at this budget greedy summaries depend little on the input, so the dev loss "
        "is the more telling column.",
    ]
    return "\n".join(lines) + "\n"


def _abstract_note(split: dict[str, Any]) -> str:
    if "train_abstracts_dropped" not in split:
        return " (the abstract included)"
    kept = split["train_without_abstract_section"] + split["dev_without_abstract_section"]
    return (
        f" without the abstract (dropped from {split['train_abstracts_dropped']} train and "
        f"{split['dev_abstracts_dropped']} dev papers; {kept} papers have no section headed Abstract)"
    )


def _plot_biases(biases: dict[str, Any], path: Path) -> None:
    """One heatmap per HIBRIDS table (PathLen across, LvlDiff down); grey = impossible or never reached."""
    import matplotlib.pyplot as plt
    import numpy as np

    from synopsis.training.plots import save_figure  # selects the Agg backend, before any figure

    panels = [(variant, name, bias) for variant, bias in biases.items() for name in bias["tables"]]
    fig, axes = plt.subplots(
        1, max(1, len(panels)), figsize=(5.2 * max(1, len(panels)), 4.0), dpi=110, squeeze=False
    )
    if not panels:
        axes[0][0].text(0.5, 0.5, "no HIBRIDS variant in this run", ha="center", va="center")
        axes[0][0].axis("off")
    for ax, (variant, name, bias) in zip(axes[0], panels, strict=False):
        grid = np.array(
            [[np.nan if v is None else v for v in row] for row in bias["tables"][name]["grid"]], dtype=float
        )
        finite = grid[np.isfinite(grid)]
        limit = float(np.abs(finite).max()) if finite.size else 1.0
        cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#dddddd")
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=-limit, vmax=limit, aspect="auto")
        ax.set_xticks(range(len(bias["path_lengths"])), bias["path_lengths"], fontsize=7)
        ax.set_yticks(range(len(bias["level_differences"])), bias["level_differences"], fontsize=7)
        ax.set_xlabel("PathLen (x -> y; > 0: y later)")
        ax.set_ylabel("LvlDiff = depth(y) - depth(x)")
        heads = bias["tables"][name]["heads"]
        ax.set_title(f"{variant}: {name}" + (f" (mean of {heads} heads)" if heads > 1 else ""), fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.suptitle("Learned HIBRIDS biases (grey: impossible pair or never reached); small models, CPU scale")
    save_figure(fig, path)
