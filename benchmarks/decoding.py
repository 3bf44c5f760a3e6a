"""Decoding speed of a stock seq2seq checkpoint: synopsis's backends (``auto``, the default; ``torch``;
``ctranslate2`` in float32 and int8) and bare Hugging Face ``generate()``, side by side on the same weights
(issues 52 and 61).

The model is BART at bart-base width (6+6 layers, d_model 768, 12 heads, FFN 3072) with random weights and
the bundled GPT-2 BPE tokenizer, saved once into ``--workdir``; the documents are the first ``--documents``
SciTLDR dev abstracts, each cut to ``--source-tokens`` tokens, and every backend reads the same token ids
(the summarizer's inputs; ``generate`` gets them as tensors). For each beam width, no-repeat n-gram size
(``--no-repeat``, 0: none) and batch size the backends take turns (``--rounds`` rounds, each summarizing
every document in batches), and each one's median time gives documents/s; agreement is the share of
summaries identical to bare ``generate()``'s. Random weights decode to the length limit, so every summary
is ``--max-length`` summary tokens (``generate()`` gets ``max_length`` one more: it counts the decoder's start
token): the work per document is fixed, and agreement is over every token. ``auto`` is ``--backend auto``:
CTranslate2 where it writes ``generate()``'s tokens (greedy, or beams without n-gram blocking), torch
otherwise; its row says which it chose.

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

from synopsis.config import DecodingOptions, use_threads
from synopsis.data.readers import read_corpus
from synopsis.models.seq2seq import bart_tokenizer_from_files
from synopsis.summarizers import load_summarizer

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SYNOPSIS_SHARED_DATA", ROOT.parent / "shared" / "data"))
BART_BASE = {
    "d_model": 768, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 12,
    "decoder_attention_heads": 12, "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072,
}  # fmt: skip
BACKENDS = ("auto", "torch", "generate", "ctranslate2-float32", "ctranslate2-int8")


def save_model(directory: Path, early_stopping: bool = False) -> Path:
    """bart-base width, random weights (seed 0), the bundled tokenizer; reused when already there.
    ``early_stopping``: its generation config says ``early_stopping=True`` (as BART-large-CNN's does)."""
    if early_stopping:
        import shutil

        from transformers import GenerationConfig

        target = directory.with_name(directory.name + "-early-stopping")
        if not (target / "model.safetensors").is_file():
            plain = save_model(directory)
            shutil.copytree(plain, target, ignore=shutil.ignore_patterns(".ctranslate2"), dirs_exist_ok=True)
            config = GenerationConfig.from_pretrained(target)
            config.update(num_beams=4, early_stopping=True)
            config.save_pretrained(target)
        return target
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


def summarizers(model: Path, source_tokens: int) -> dict[str, Any]:
    """Each backend's summarizer (the ctranslate2 ones convert on first use: timed apart)."""
    common = {"max_source_length": source_tokens}
    out = {"torch": load_summarizer(model=model, backend="torch", **common)}
    started = time.perf_counter()
    out["ctranslate2-float32"] = load_summarizer(model=model, backend="ctranslate2", **common)
    out["first load, converting (s)"] = time.perf_counter() - started
    started = time.perf_counter()
    out["ctranslate2-int8"] = load_summarizer(
        model=model, backend="ctranslate2", compute_type="int8", **common
    )
    out["later load, cached (s)"] = time.perf_counter() - started
    out["auto"] = load_summarizer(model=model, **common)  # the default backend
    return out


def bare_generate(
    torch_side: Any, documents: list[Any], options: dict[str, int], max_length: int
) -> list[str]:
    """Hugging Face ``generate()`` on the torch summarizer's own model and input ids; ``max_length`` summary
    tokens are ``generate()``'s ``max_length + 1`` (it counts the decoder's start token)."""
    batch = torch_side.inputs.collate(torch_side.inputs.encode_sources(documents, [None] * len(documents)))
    with torch.inference_mode():
        inputs = torch_side.inputs.model_inputs(batch, torch_side.device)
        output = torch_side.model.generate(**inputs, **options, max_length=max_length + 1)
    texts = torch_side.tokenizer.batch_decode(
        output, skip_special_tokens=True, clean_up_tokenization_spaces=False
    )
    return [text.strip() for text in texts]


def run(
    backend: str, loaded: dict[str, Any], documents: list[Any], options: dict[str, int], batch: int,
    max_length: int,
) -> tuple[float, list[str], str]:
    """Seconds to summarize ``documents`` in batches of ``batch`` with one backend, the summaries, and what
    decoded them (``auto``'s choice)."""
    summaries: list[str] = []
    started = time.perf_counter()
    decoded_by = "torch"
    for start in range(0, len(documents), batch):
        part = documents[start : start + batch]
        if backend == "generate":
            summaries += bare_generate(loaded["torch"], part, options, max_length)
        else:
            decoding = DecodingOptions(**options, max_length=max_length)
            decoded_by = loaded[backend].backend_for(decoding)
            summaries += loaded[backend].summarize(part, decoding=decoding)
    return time.perf_counter() - started, summaries, decoded_by  # fmt: skip


def measure(loaded: dict[str, Any], documents: list[Any], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    backends = [name for name in BACKENDS if name not in args.skip]
    for beams in args.beams:
        for no_repeat in args.no_repeat:
            options = {"num_beams": beams, "no_repeat_ngram_size": no_repeat}
            for name in backends[:2]:  # auto's first use of a backend loads it: once, untimed
                loaded[name].check_decoding(DecodingOptions(**options, max_length=args.max_length))
            for batch in args.batch_sizes:
                times: dict[str, list[float]] = {name: [] for name in backends}
                outputs: dict[str, list[str]] = {}
                chosen: dict[str, str] = {}
                for round_ in range(args.rounds):
                    order = backends if round_ % 2 == 0 else backends[::-1]  # alternate who goes first
                    for name in order:
                        seconds, outputs[name], chosen[name] = run(
                            name, loaded, documents, options, batch, args.max_length
                        )
                        times[name].append(seconds)
                rows += _rows(options, batch, times, outputs, chosen, len(documents))
    return rows


def _rows(
    options: dict[str, int], batch: int, times: dict[str, list[float]], outputs: dict[str, list[str]],
    chosen: dict[str, str], count: int,
) -> list[dict[str, Any]]:
    """One row per backend of one (beams, no-repeat, batch) cell, printed as it is made."""
    rows = []
    torch_rate = count / statistics.median(times["torch"])
    for name in times:
        rate = count / statistics.median(times[name])
        same = sum(a == b for a, b in zip(outputs[name], outputs["generate"], strict=True))
        decoded = f"{name} ({chosen[name]})" if name == "auto" else name
        rows.append({
            "beams": options["num_beams"], "no_repeat_ngram_size": options["no_repeat_ngram_size"],
            "batch": batch, "backend": decoded, "documents_per_s": round(rate, 3),
            "vs_torch": round(rate / torch_rate, 3), "identical_to_generate": f"{same}/{count}",
            "seconds": [round(t, 3) for t in times[name]],
        })  # fmt: skip
        print(f"beams {options['num_beams']} no-repeat {options['no_repeat_ngram_size']} batch {batch} "
              f"{decoded:26s} {rate:7.3f} docs/s {rate / torch_rate:5.2f}x torch, identical to generate "
              f"{same}/{count}", flush=True)  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=16)
    parser.add_argument("--source-tokens", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=64, help="summary tokens (--max-length)")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--no-repeat", type=int, nargs="+", default=[0], help="no_repeat_ngram_size values")
    parser.add_argument("--skip", nargs="*", default=[], choices=BACKENDS[3:], help="backends left out")
    parser.add_argument(
        "--early-stopping", action="store_true", help="a generation config with early_stopping=True"
    )
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="default: the library's (use_threads)")
    workdir = Path(tempfile.gettempdir()) / "synopsis-decoding-bench"
    parser.add_argument("--workdir", type=Path, default=workdir, help="where the model is saved")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    threads = use_threads(args.threads)
    model = save_model(args.workdir / "bart-base-random", args.early_stopping)
    examples = read_corpus("scitldr", SHARED / "scitldr", split="dev")
    documents = [example.document for _, example in zip(range(args.documents), examples, strict=False)]
    load_before = os.getloadavg()
    loaded = summarizers(model, args.source_tokens)
    rows = measure(loaded, documents, args)
    result = {
        "command": "python benchmarks/decoding.py " + " ".join(sys.argv[1:]),
        "model": "BART, bart-base width, random weights (seed 0), GPT-2 BPE"
        + (", generation config early_stopping=True" if args.early_stopping else ""),
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
