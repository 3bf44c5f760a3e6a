"""Decoding speed of a stock seq2seq checkpoint: synopsis's default backend, bare Hugging Face ``generate()``
and ``--backend ctranslate2`` in float32 and int8, side by side on the same weights (issue 52).

The model is BART at bart-base width (6+6 layers, d_model 768, 12 heads, FFN 3072) with random weights and
the bundled GPT-2 BPE tokenizer, saved once into ``--workdir``; the documents are the first ``--documents``
SciTLDR dev abstracts, each cut to ``--source-tokens`` tokens, and every backend reads the same token ids
(the summarizer's inputs; ``generate`` gets them as tensors). For each beam width and batch size the
backends take turns (``--rounds`` rounds, each summarizing every document in batches), and each one's
median time gives documents/s; agreement is the share of summaries identical to bare ``generate()``'s.
Random weights decode to the length limit, so every summary is ``--max-length`` tokens: the work per
document is fixed, and agreement is over every token.

    python benchmarks/decoding.py --json benchmarks/results/decoding.json
    python benchmarks/decoding.py --documents 4 --rounds 1 --max-length 16      # a quick check that it runs

Target (issue 52): ctranslate2 float32 at least 1.4x the default backend at beam 4, batch 8, with
identical summaries.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import BartConfig, BartForConditionalGeneration

from synopsis.config import use_threads
from synopsis.data.readers import read_corpus
from synopsis.models.seq2seq import bart_tokenizer_from_files
from synopsis.summarizers import load_summarizer

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SYNOPSIS_SHARED_DATA", ROOT.parent / "shared" / "data"))
BART_BASE = {
    "d_model": 768, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 12,
    "decoder_attention_heads": 12, "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072,
}  # fmt: skip
BACKENDS = ("default", "generate", "ctranslate2-float32", "ctranslate2-int8")


def save_model(directory: Path) -> Path:
    """bart-base width, random weights (seed 0), the bundled tokenizer; reused when already there."""
    if (directory / "model.safetensors").is_file():
        return directory
    tokenizers = SHARED / "tokenizers" / "gpt2"
    tokenizer = bart_tokenizer_from_files(tokenizers / "vocab.json", tokenizers / "merges.txt")
    torch.manual_seed(0)
    special = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("pad", "bos", "eos")}
    end = tokenizer.eos_token_id  # BART starts decoding from </s> and ends on it at the length limit
    config = BartConfig(
        **BART_BASE, **special, vocab_size=len(tokenizer), decoder_start_token_id=end, forced_eos_token_id=end
    )
    BartForConditionalGeneration(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def summarizers(model: Path, source_tokens: int, max_length: int) -> dict[str, Any]:
    """Each backend's summarizer (the ctranslate2 ones convert on first use: timed apart)."""
    common = {"max_source_length": source_tokens, "max_length": max_length}
    out = {"default": load_summarizer(model=model, **common)}
    started = time.perf_counter()
    out["ctranslate2-float32"] = load_summarizer(model=model, backend="ctranslate2", **common)
    out["first load, converting (s)"] = time.perf_counter() - started
    started = time.perf_counter()
    out["ctranslate2-int8"] = load_summarizer(
        model=model, backend="ctranslate2", compute_type="int8", **common
    )
    out["later load, cached (s)"] = time.perf_counter() - started
    return out


def bare_generate(default: Any, documents: list[Any], beams: int, max_length: int) -> list[str]:
    """Hugging Face ``generate()`` on the default summarizer's own model and input ids."""
    batch = default.inputs.collate(default.inputs.encode_sources(documents, [None] * len(documents)))
    with torch.inference_mode():
        inputs = default.inputs.model_inputs(batch, default.device)
        output = default.model.generate(**inputs, num_beams=beams, max_length=max_length)
    return default._decode(output)


def run(
    backend: str, loaded: dict[str, Any], documents: list[Any], beams: int, batch: int, max_length: int
) -> tuple[float, list[str]]:
    """Seconds to summarize ``documents`` in batches of ``batch`` with one backend, and the summaries."""
    summaries: list[str] = []
    started = time.perf_counter()
    for start in range(0, len(documents), batch):
        part = documents[start : start + batch]
        if backend == "generate":
            summaries += bare_generate(loaded["default"], part, beams, max_length)
        else:
            summaries += loaded[backend].with_options(num_beams=beams).summarize(part)
    return time.perf_counter() - started, summaries


def measure(loaded: dict[str, Any], documents: list[Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for beams in args.beams:
        for batch in args.batch_sizes:
            times: dict[str, list[float]] = {name: [] for name in BACKENDS}
            outputs: dict[str, list[str]] = {}
            for round_ in range(args.rounds):
                order = BACKENDS if round_ % 2 == 0 else BACKENDS[::-1]  # alternate who goes first
                for name in order:
                    seconds, outputs[name] = run(name, loaded, documents, beams, batch, args.max_length)
                    times[name].append(seconds)
            rows += _rows(beams, batch, times, outputs, len(documents))
    return rows


def _rows(
    beams: int, batch: int, times: dict[str, list[float]], outputs: dict[str, list[str]], count: int
) -> list[dict[str, Any]]:
    """One row per backend of one (beams, batch) cell, printed as it is made."""
    rows = []
    default_rate = count / statistics.median(times["default"])
    for name in BACKENDS:
        rate = count / statistics.median(times[name])
        same = sum(a == b for a, b in zip(outputs[name], outputs["generate"], strict=True))
        rows.append({
            "beams": beams, "batch": batch, "backend": name, "documents_per_s": round(rate, 3),
            "vs_default": round(rate / default_rate, 3), "identical_to_generate": f"{same}/{count}",
            "seconds": [round(t, 3) for t in times[name]],
        })  # fmt: skip
        print(f"beams {beams} batch {batch} {name:20s} {rate:7.3f} docs/s {rate / default_rate:5.2f}x "
              f"default, identical to generate {same}/{count}", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=16)
    parser.add_argument("--source-tokens", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=64, help="generate()'s max_length")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="default: the library's (use_threads)")
    workdir = Path(tempfile.gettempdir()) / "synopsis-decoding-bench"
    parser.add_argument("--workdir", type=Path, default=workdir, help="where the model is saved")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    threads = use_threads(args.threads)
    model = save_model(args.workdir / "bart-base-random")
    examples = read_corpus("scitldr", SHARED / "scitldr", split="dev")
    documents = [example.document for _, example in zip(range(args.documents), examples, strict=False)]
    load_before = os.getloadavg()
    loaded = summarizers(model, args.source_tokens, args.max_length)
    rows = measure(loaded, documents, args)
    result = {
        "command": "python benchmarks/decoding.py " + " ".join(sys.argv[1:]),
        "model": "BART, bart-base width, random weights (seed 0), GPT-2 BPE",
        "documents": len(documents), "source_tokens": args.source_tokens, "max_length": args.max_length,
        "threads": threads, "cores": os.cpu_count(), "ctranslate2_intra_threads": threads,
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
        "first load, converting (s)": round(loaded["first load, converting (s)"], 2),
        "later load, cached (s)": round(loaded["later load, cached (s)"], 2),
        "rows": rows,
    }  # fmt: skip
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
