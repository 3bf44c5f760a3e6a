"""InstructSum (Nishida et al.) at CPU scale on QMSum: no instruction vs full attention vs the cached model.

Three small T5s of the same shape, trained from random init with the same data order, steps and seed on
QMSum train queries (general + specific), scored on the val ("dev") split; the test split is never read:

* ``no-instruction``: plain T5 reading the paper's prompt without an instruction (Appendix B.1),
  ``Summarize the following article. Article: {S}``; the query is dropped from training and evaluation.
* ``full``: plain T5 reading the paper's prompt with the query as instruction, full attention.
* ``instructsum``: the same T5 converted to InstructSum before training (the block mask: source tokens never
  see the instruction), evaluated twice: ``cached`` (each distinct source encoded once into a
  :class:`~synopsis.models.instructsum.SourceCache`, then only the instruction tokens run against its keys
  and values) and ``block-mask`` (the whole prompt re-encoded with the block mask, as ``--no-cache``). Both
  must give the same summaries; the per-instruction encoder time of each is measured.

The source of a specific query is its ``relevant_text_span`` (QMSum's annotated turns), of a general query
the whole meeting, then truncated to ``max_source_length`` tokens: with the whole meeting cut to 512 tokens
the answer is almost never in the source. Writes ``table.md``, ``results.json`` and ``instructsum.png``.
The model-level cache API is used here (experiments do not import summarizers).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from synopsis.config import AT_LEAST_ONE, NON_NEGATIVE, DecodingOptions, Range, to_dict
from synopsis.data.example import Example, write_examples
from synopsis.errors import InputError
from synopsis.experiments.common import Seq2SeqExperimentConfig, seq2seq_run_config
from synopsis.io import open_for_atomic_write, write_json
from synopsis.models.lengths import generate_kwargs
from synopsis.training.objectives import METRICS, score_summaries
from synopsis.training.seq2seq import load_examples, train_seq2seq

logger = logging.getLogger(__name__)

VARIANTS = ("no-instruction", "full", "instructsum")
SOURCES = ("relevant-span", "meeting")
#: ROUGE-L the paper reports with FLAN-T5-Large on its own dataset (not QMSum), for scale only.
PAPER_ROUGE_L = (45.56, 44.93)


@dataclass(kw_only=True)
class InstructSumExperimentConfig(Seq2SeqExperimentConfig):
    """Small T5s from random init on QMSum queries; every variant: the same shape, data order and steps.
    ``train_examples`` / ``dev_examples`` default to all 1,257 train / 272 val queries; ``max_source_length``
    is the whole input (with an instruction, its part takes up to 128 of it); ``max_target_length``: the
    answer tokens trained on (QMSum answers: median 82)."""

    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    source: str = "relevant-span"  # "relevant-span": a specific query's annotated turns; "meeting": all turns
    queries: str = "all"  # QMSum query lists: general, specific or all
    dev_examples: int | None = None
    d_model: int = 128
    d_ff: int = 512
    heads: int = 4
    dropout: float = 0.0
    batch_size: int = 8
    learning_rate: float = 2e-3
    warmup_steps: int = 20
    max_steps: int = 120
    max_target_length: int = 64
    eval_max_length: int = 64
    eval_batch_size: int = 16
    no_repeat_ngram_size: int = 3

    RANGES: ClassVar[dict[str, Range]] = {
        **Seq2SeqExperimentConfig.RANGES,
        **dict.fromkeys(("d_ff", "heads", "eval_batch_size"), AT_LEAST_ONE),
        "no_repeat_ngram_size": NON_NEGATIVE,
    }

    def validate(self) -> None:
        if not self.variants or any(v not in VARIANTS for v in self.variants):
            raise ValueError(
                f"variants must be a non-empty subset of {', '.join(VARIANTS)}, got {self.variants}"
            )
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {self.source!r}")
        if self.queries not in ("general", "specific", "all"):
            raise ValueError(f"queries must be general, specific or all, got {self.queries!r}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by heads {self.heads}")


def no_instruction_lead() -> str:
    """The paper's lead-in without an instruction and without a title (QMSum meetings have none)."""
    from synopsis.models.instructsum import prompt_parts

    _, source = prompt_parts(None, None, "X")
    return source[: -len("X")]


# ------------------------------------------------------------------------------------------------ data
def _prepare_data(cfg: InstructSumExperimentConfig, data_dir: Path, out: Path) -> dict[str, Path]:
    """QMSum train/val as synopsis JSONL, with and without the query as instruction."""
    from synopsis.data.readers import read_corpus

    paths = {}
    out.mkdir(parents=True, exist_ok=True)
    for split, name, limit in (("train", "train", cfg.train_examples), ("val", "dev", cfg.dev_examples)):
        examples: list[Example] = []
        for example in read_corpus(
            "qmsum",
            data_dir / "qmsum",
            split=split,
            queries=cfg.queries,
            relevant_span_only=cfg.source == "relevant-span",
        ):
            examples.append(example)
            if limit is not None and len(examples) >= limit:
                break
        paths[name] = out / f"{name}.jsonl"
        paths[f"{name}-no-instruction"] = out / f"{name}_no_instruction.jsonl"
        write_examples(examples, paths[name])
        write_examples(
            [dataclasses.replace(e, instruction=None) for e in examples], paths[f"{name}-no-instruction"]
        )
        logger.info("qmsum %s: %d queries", split, len(examples))
    return paths


def _base_model(cfg: InstructSumExperimentConfig, data_dir: Path, directory: Path) -> Path:
    """A T5 config + the T5 SentencePiece tokenizer (no weights: every run starts from random_init)."""
    import shutil
    import tempfile

    from transformers import T5Config, T5TokenizerFast

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(data_dir / "tokenizers" / "t5" / "spiece.model", tmp)
        tokenizer = T5TokenizerFast.from_pretrained(tmp)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=cfg.d_model,
        d_kv=cfg.d_model // cfg.heads,
        d_ff=cfg.d_ff,
        num_layers=cfg.layers,
        num_decoder_layers=cfg.layers,
        num_heads=cfg.heads,
        dropout_rate=cfg.dropout,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    directory.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# ------------------------------------------------------------------------------------------ evaluation
@torch.inference_mode()
def _dev_loss(model: Any, inputs: Any, sources: list[Any], targets: list[list[int]], size: int) -> float:
    """Teacher-forced cross-entropy per target token (first reference), the whole dev set."""
    total, tokens = 0.0, 0
    for start in range(0, len(sources), size):
        batch = inputs.model_inputs(
            inputs.collate(sources[start : start + size], targets[start : start + size])
        )
        count = int((batch["labels"] != -100).sum())
        total += model(**batch).loss.item() * count
        tokens += count
    return total / max(tokens, 1)


def _generation(cfg: InstructSumExperimentConfig) -> dict[str, Any]:
    """The same greedy decoding for every variant, at most ``eval_max_length`` summary tokens, whatever the
    checkpoint's generation config says (converting to InstructSum writes the paper's ``max_new_tokens``
    192; :func:`~synopsis.models.lengths.generate_kwargs` unsets it)."""
    decoding = generate_kwargs(DecodingOptions(num_beams=1, max_length=cfg.eval_max_length))
    return {**decoding, "no_repeat_ngram_size": cfg.no_repeat_ngram_size}


@torch.inference_mode()
def _predict(
    model: Any, tokenizer: Any, inputs: Any, sources: list[Any], cfg: InstructSumExperimentConfig
) -> list[str]:
    """Greedy summaries from full encoder passes (InstructSum: the block mask, no cache)."""
    predictions: list[str] = []
    for start in range(0, len(sources), cfg.eval_batch_size):
        chunk = inputs.collate(sources[start : start + cfg.eval_batch_size])
        batch = inputs.model_inputs(chunk, model.device)
        output = model.generate(**batch, **_generation(cfg))
        predictions += tokenizer.batch_decode(output, skip_special_tokens=True)
    return [p.strip() for p in predictions]


@torch.inference_mode()
def _cached_run(
    model: Any, tokenizer: Any, sources: list[Any], cfg: InstructSumExperimentConfig
) -> dict[str, Any]:
    """Cached summaries, and per example the encoder time of a full block-mask pass vs the cached one.

    Both the timed encodings and the summaries go through :meth:`SourceCache.encode_prompts`, the path the
    summarizer takes. The two timings alternate example by example, so a change in machine load hits both
    alike. The source pass of a distinct source is timed apart: it is paid once per document, not per
    instruction.
    """
    from synopsis.models.instructsum import PromptIds, SourceCache

    encoder = model.get_encoder()
    cache = SourceCache(max_bytes=1 << 30)
    prompts = [PromptIds.from_segments(e.input_ids, e.segment_ids) for e in sources]
    full_ms, cached_ms, source_ms, max_diff = [], [], [], 0.0
    for encoding, prompt in zip(sources, prompts, strict=True):
        ids = torch.tensor([encoding.input_ids])
        start = time.perf_counter()
        full = encoder(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            segment_ids=torch.tensor([encoding.segment_ids]),
        ).last_hidden_state
        full_ms.append(1000 * (time.perf_counter() - start))
        source_ids = torch.tensor([prompt.source_ids])
        if cache.get(model, source_ids) is None:
            start = time.perf_counter()
            cache.get_or_encode(model, source_ids)
            source_ms.append(1000 * (time.perf_counter() - start))
        start = time.perf_counter()
        outputs = cache.encode_prompts(model, [prompt]).encoder_outputs  # a cache hit: the instruction pass
        cached_ms.append(1000 * (time.perf_counter() - start))
        max_diff = max(max_diff, float((outputs.last_hidden_state - full).abs().max()))
    predictions: list[str] = []
    for start in range(0, len(prompts), cfg.eval_batch_size):
        output = cache.generate(model, prompts[start : start + cfg.eval_batch_size], **_generation(cfg))
        predictions += tokenizer.batch_decode(output, skip_special_tokens=True)
    return {
        "predictions": [p.strip() for p in predictions],
        "full_encoder_ms": full_ms,
        "cached_instruction_ms": cached_ms,
        "source_pass_ms": source_ms,
        "distinct_sources": len(source_ms),
        "max_encoder_diff": max_diff,
    }


def _evaluate(
    run_dir: Path, dev: list[Example], cfg: InstructSumExperimentConfig, lead: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows for one trained model (two for InstructSum) and, for InstructSum, the cache check."""
    from synopsis.devices import resolve_device
    from synopsis.models.inputs import Seq2SeqInputs
    from synopsis.models.instructsum import is_instructsum
    from synopsis.models.seq2seq import load_seq2seq

    model, tokenizer = load_seq2seq(run_dir / "best")
    model.to(resolve_device(None))  # experiment --device (auto: a GPU when torch sees one)
    model.eval()
    inputs = Seq2SeqInputs(
        model.config,
        tokenizer,
        max_source_length=cfg.max_source_length,
        max_target_length=cfg.max_target_length,
        prefix=lead,
    )
    sources = inputs.encode_sources([e.document for e in dev], [e.instruction for e in dev])
    targets = inputs.encode_targets([e.references[0] for e in dev])
    references = [e.references for e in dev]
    loss = _dev_loss(model, inputs, sources, targets, cfg.eval_batch_size)
    start = time.perf_counter()
    predictions = _predict(model, tokenizer, inputs, sources, cfg)
    seconds = time.perf_counter() - start
    mode = "block-mask" if is_instructsum(model) else "full attention"
    rows = [
        {"mode": mode, **score_summaries(predictions, references), "dev_loss": loss, "eval_seconds": seconds}
    ]
    outputs: dict[str, Any] = {
        "predictions": {mode: predictions},
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    if is_instructsum(model):
        start = time.perf_counter()
        cached = _cached_run(model, tokenizer, sources, cfg)
        seconds = time.perf_counter() - start
        same = sum(a == b for a, b in zip(cached["predictions"], predictions, strict=True))
        rows[0]["encoder_ms_per_instruction"] = statistics.median(cached["full_encoder_ms"])
        rows.insert(
            0,
            {
                "mode": "cached",
                **score_summaries(cached["predictions"], references),
                "dev_loss": loss,  # the same function as the block-mask pass (teacher forcing)
                "eval_seconds": seconds,
                "encoder_ms_per_instruction": statistics.median(cached["cached_instruction_ms"]),
            },
        )
        outputs["predictions"]["cached"] = cached.pop("predictions")
        outputs["cache"] = {
            "identical_predictions": same,
            "total": len(predictions),
            "distinct_sources": cached["distinct_sources"],
            "max_encoder_diff": cached["max_encoder_diff"],
            "median_full_encoder_ms": statistics.median(cached["full_encoder_ms"]),
            "median_cached_instruction_ms": statistics.median(cached["cached_instruction_ms"]),
            "median_source_pass_ms": statistics.median(cached["source_pass_ms"]),
            "total_full_encoder_ms": sum(cached["full_encoder_ms"]),
            "total_cached_ms": sum(cached["cached_instruction_ms"]) + sum(cached["source_pass_ms"]),
        }
    return rows, outputs


# ------------------------------------------------------------------------------------------------ run
def run_instructsum_experiment(
    cfg: InstructSumExperimentConfig, output: str | Path, data_dir: str | Path
) -> str:
    """Train one model per variant, evaluate on QMSum dev; write table.md, results.json, instructsum.png.

    Runs that already exist in ``output`` are resumed (a finished run is only re-read).
    """
    output, data_dir = Path(output), Path(data_dir)
    if not (data_dir / "qmsum" / "train").is_dir() or not (data_dir / "qmsum" / "val").is_dir():
        raise InputError(
            f"{data_dir / 'qmsum'}: QMSum train/ and val/ not found (pass --data ../shared/data)"
        )
    wall = time.perf_counter()
    load_before = os.getloadavg()
    paths = _prepare_data(cfg, data_dir, output / "data")
    base = _base_model(cfg, data_dir, output / "base_model")
    lead = no_instruction_lead()
    rows, extra = [], {}
    for variant in cfg.variants:
        suffix = "-no-instruction" if variant == "no-instruction" else ""
        # one evaluation, at the end (the config has no eval_every): no model selection on dev
        run_config = seq2seq_run_config(
            cfg,
            model=str(base),
            output_dir=str(output / variant),
            train_path=str(paths["train" + suffix]),
            train_corpus="synopsis",
            dev_path=str(paths["dev" + suffix]),
            max_dev_examples=8,  # the trainer's end-of-run check only; the dev set is scored below
            all_references=True,
            random_init=True,
            convert={"method": "instructsum"} if variant == "instructsum" else None,
            source_prefix=lead,
            eval_batch_size=cfg.eval_batch_size,
            eval_no_repeat_ngram_size=cfg.no_repeat_ngram_size,
        )
        logger.warning("instructsum experiment: training %s", variant)
        start = time.perf_counter()
        resume = (Path(run_config.output_dir) / "checkpoints" / "latest").is_file()
        result = train_seq2seq(run_config, resume=resume, show_progress=False)
        train_seconds = time.perf_counter() - start
        dev = load_examples("synopsis", paths["dev" + suffix], None, None)
        variant_rows, outputs = _evaluate(output / variant, dev, cfg, lead)
        final_train_loss = result.history["train_loss"][-1][1] if result.history["train_loss"] else None
        for row in variant_rows:
            rows.append(
                {
                    "variant": variant,
                    **row,
                    "train_seconds": train_seconds,
                    "final_train_loss": final_train_loss,
                }
            )
        extra["parameters"] = outputs["parameters"]
        if "cache" in outputs:
            extra["cache"] = outputs["cache"]
        write_json(
            output / variant / "predictions.json",
            {"ids": [e.id for e in dev], "references": [e.references for e in dev], **outputs["predictions"]},
        )
    extra["wall_seconds"] = time.perf_counter() - wall
    extra["loadavg_before"], extra["loadavg_after"] = list(load_before), list(os.getloadavg())
    extra["torch_threads"] = torch.get_num_threads()
    extra["dev_examples"] = len(load_examples("synopsis", paths["dev"], None, None))
    extra["train_examples"] = len(load_examples("synopsis", paths["train"], None, None))
    table = _table(cfg, rows, extra)
    write_json(
        output / "results.json",
        {"config": to_dict(cfg), "rows": rows, **extra, "paper_rouge_l_flan_t5_large": list(PAPER_ROUGE_L)},
    )
    with open_for_atomic_write(output / "table.md") as handle:
        handle.write(table)
    _plot(rows, output / "instructsum.png")
    return table


def _label(row: dict[str, Any]) -> str:
    return row["variant"] if row["variant"] != "instructsum" else f"instructsum ({row['mode']})"


def _table(cfg: InstructSumExperimentConfig, rows: list[dict[str, Any]], extra: dict[str, Any]) -> str:
    source = (
        "a specific query's relevant_text_span turns (a general query: the whole meeting)"
        if cfg.source == "relevant-span"
        else "the whole meeting"
    )
    lines = [
        f"# InstructSum on QMSum, small T5s (d_model {cfg.d_model}, {cfg.layers}+{cfg.layers} layers, "
        f"{cfg.heads} heads, T5 vocabulary, {cfg.max_steps} steps of {cfg.batch_size} from random init)",
        "",
        f"{extra['train_examples']} QMSum train queries ({cfg.queries} queries), scored on all "
        f"{extra['dev_examples']} val (dev) queries. Source: {source}, truncated to {cfg.max_source_length} "
        f"tokens (prompt lead-in and EOS included); targets truncated to {cfg.max_target_length} tokens in "
        "training. Dev ROUGE F1 x 100 (rouge-score tokenisation, Porter stemming, max over references; "
        "rougeL = sentence-level LCS) of greedy summaries (no repeated trigrams, at most "
        f"{cfg.eval_max_length} tokens) from the final model; dev loss: teacher-forced cross-entropy per "
        "target token.",
        "",
        "| variant | ROUGE-1 | ROUGE-2 | ROUGE-L | dev loss | encoder ms / instruction | train s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ms = row.get("encoder_ms_per_instruction")
        lines.append(
            f"| {_label(row)} | {row['rouge1']:.2f} | {row['rouge2']:.2f} | {row['rougeL']:.2f} | "
            f"{row['dev_loss']:.4f} | {'' if ms is None else f'{ms:.1f}'} | {row['train_seconds']:.0f} |"
        )
    cache = extra.get("cache")
    if cache:
        lines += [
            "",
            f"Cached vs block-mask re-encoding: {cache['identical_predictions']}/{cache['total']} identical "
            f"summaries; largest encoder-state difference {cache['max_encoder_diff']:.1e}. Encoder time per "
            f"instruction (median, batch 1): {cache['median_cached_instruction_ms']:.1f} ms cached vs "
            f"{cache['median_full_encoder_ms']:.1f} ms full block-mask pass; the source pass, paid once per "
            f"distinct source ({cache['distinct_sources']} of {cache['total']}), "
            f"{cache['median_source_pass_ms']:.1f} ms.",
        ]
    before, after = extra["loadavg_before"], extra["loadavg_after"]
    lines += [
        "",
        f"Wall time {extra['wall_seconds'] / 60:.1f} min with {extra['torch_threads']} torch thread(s); load "
        f"average (1/5/15 min) {before[0]:.1f}/{before[1]:.1f}/{before[2]:.1f} at the start, "
        f"{after[0]:.1f}/{after[1]:.1f}/{after[2]:.1f} at the end (a shared machine).",
        "",
        f"These are {extra['parameters'] / 1e6:.1f}M-parameter models trained for minutes from random init; "
        "they do not reproduce the "
        f"paper's ROUGE-L ({PAPER_ROUGE_L[0]} / {PAPER_ROUGE_L[1]}, FLAN-T5-Large fine-tuned on its own "
        "instruction dataset). One seed; differences of a few tenths are within run-to-run noise.",
    ]
    return "\n".join(lines) + "\n"


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Dev ROUGE bars per variant, and the dev loss."""
    import matplotlib.pyplot as plt

    from synopsis.training.plots import save_figure  # selects the Agg backend, before any figure

    labels = [_label(row).replace(" (", "\n(") for row in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    width = 0.27
    for offset, metric in enumerate(METRICS):
        xs = [i + (offset - 1) * width for i in range(len(rows))]
        left.bar(xs, [row[metric] for row in rows], width, label=metric)
    left.set_xticks(range(len(rows)), labels, fontsize=8)
    left.set_ylabel("dev ROUGE F1 x 100")
    left.legend(fontsize=8)
    left.grid(axis="y", alpha=0.3)
    right.bar(range(len(rows)), [row["dev_loss"] for row in rows], 0.6, color="tab:gray")
    right.set_xticks(range(len(rows)), labels, fontsize=8)
    right.set_ylabel("dev loss (cross-entropy per token)")
    right.grid(axis="y", alpha=0.3)
    fig.suptitle("InstructSum on QMSum dev, small T5s from random init (not the paper's scale)")
    save_figure(fig, path)
