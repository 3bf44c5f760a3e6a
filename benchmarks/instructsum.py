"""InstructSum's source cache at t5-base size: encoder time and FLOPs per extra instruction, cached vs full.

The model is a random-init InstructSum T5 of t5-base's shape (12+12 layers, d_model 768, 12 heads of 64,
d_ff 3072, ReLU, 32,128 tokens). Inputs are random token ids: a ``--source-tokens`` source part (ending in
EOS) and a ``--instruction-tokens`` instruction part (the paper's average is 41.7 tokens).

Per round, alternating so that load from other processes hits every variant alike:

* **full, block mask**: the whole prompt ``[I; S]`` re-encoded with the InstructSum block mask (what
  ``--no-cache`` does, and what every instruction costs without the cache);
* **full, stock T5**: the same tokens through plain full self-attention (the paper's "Full" model);
* **cached**: only the instruction tokens against the stored K_S/V_S (:func:`encode_with_instruction`),
  ``--cached-repeats`` timed calls per round;
* **cached_path**: the same through :meth:`SourceCache.encode_prompts`, the one path the summarizer and
  the experiment take (cache lookup of the source, instruction pass, layout of the batch), as many calls;
* **source pass**: :func:`encode_source` (paid once per document).

Reported: median with min-max spread over all timed calls, one torch thread, and the machine load
(``os.getloadavg``) before and after. Outputs are checked: the cached encoder states equal the uncached
block-mask ones (max abs difference) and beam-search generation gives identical tokens.

FLOPs are analytic (:func:`synopsis.models.instructsum.encoder_flops`, 2 FLOPs per multiply-add): per
layer and new token ``8 d_model d_inner + 4 d_model d_ff`` (``6 d_model d_ff`` gated) for the linear
layers, plus ``4 L_keys d_inner`` for attention scores and the weighted sum. The paper's figures (FLAN-T5
Base full 174 GFLOPs, Large proposed 24 GFLOPs, both for a 1024-token input with ~41 instruction tokens)
count the linear layers only; the table shows both counts in the paper's shape.

    python benchmarks/instructsum.py       # prints tables, writes benchmarks/results/instructsum.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path


def t5_base_config():  # noqa: ANN201 - transformers is imported lazily
    from synopsis.models.instructsum import InstructSumT5Config

    return InstructSumT5Config(
        vocab_size=32128,
        d_model=768,
        d_kv=64,
        d_ff=3072,
        num_layers=12,
        num_decoder_layers=12,
        num_heads=12,
        feed_forward_proj="relu",
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )


def flan_config(size: str):  # noqa: ANN201
    from transformers import T5Config

    shapes = {
        "FLAN-T5-Base": dict(d_model=768, d_ff=2048, num_layers=12, num_heads=12),
        "FLAN-T5-Large": dict(d_model=1024, d_ff=2816, num_layers=24, num_heads=16),
    }
    return T5Config(d_kv=64, feed_forward_proj="gated-gelu", **shapes[size])


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def flops_table(args: argparse.Namespace) -> list[dict[str, object]]:
    """Encoder GFLOPs for one instruction: full re-encode vs cached, at the paper's and at our lengths."""
    from synopsis.models.instructsum import encoder_flops

    paper = {("FLAN-T5-Base", "full"): 174, ("FLAN-T5-Large", "proposed"): 24}
    rows = []
    models = [
        ("t5-base shape (this benchmark)", t5_base_config()),
        *((n, flan_config(n)) for n in paper_sizes()),
    ]
    for name, config in models:
        for label, total in (("paper: 1024-token input", 1024), ("ours: source + instruction", None)):
            n_instr = args.instruction_tokens
            n_total = total if total is not None else args.source_tokens + n_instr
            row: dict[str, object] = {"model": name, "setting": label, "input_tokens": n_total}
            for attention in (False, True):
                kind = "with_attention" if attention else "linear_only"
                full = encoder_flops(config, n_total, attention=attention)
                cached = encoder_flops(config, n_instr, key_tokens=n_total, attention=attention)
                row[f"full_gflops_{kind}"] = full / 1e9
                row[f"cached_gflops_{kind}"] = cached / 1e9
                row[f"ratio_{kind}"] = full / cached
            row["paper_full_gflops"] = paper.get((name, "full"))
            row["paper_proposed_gflops"] = paper.get((name, "proposed"))
            rows.append(row)
    return rows


def paper_sizes() -> tuple[str, ...]:
    return ("FLAN-T5-Base", "FLAN-T5-Large")


def run(args: argparse.Namespace) -> dict[str, object]:
    import torch
    from transformers import T5ForConditionalGeneration

    from synopsis.models.instructsum import (
        InstructSumT5ForConditionalGeneration,
        PromptIds,
        SourceCache,
        encode_source,
        encode_with_instruction,
    )

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = t5_base_config()
    config._attn_implementation = args.attn
    model = InstructSumT5ForConditionalGeneration(config).eval()
    stock = T5ForConditionalGeneration(model.config).eval()  # plain T5 with the same weights
    stock.load_state_dict(model.state_dict())
    stock.config._attn_implementation = args.attn

    generator = torch.Generator().manual_seed(1)
    source_ids = torch.randint(3, 32000, (1, args.source_tokens), generator=generator)
    source_ids[0, -1] = config.eos_token_id
    instruction_ids = torch.randint(3, 32000, (1, args.instruction_tokens), generator=generator)
    input_ids = torch.cat([instruction_ids, source_ids], dim=1)
    attention_mask = torch.ones_like(input_ids)
    segment_ids = torch.cat([torch.ones_like(instruction_ids), torch.zeros_like(source_ids)], dim=1)

    def full_block():  # noqa: ANN202
        return model.encoder(input_ids=input_ids, attention_mask=attention_mask, segment_ids=segment_ids)

    def full_stock():  # noqa: ANN202
        return stock.encoder(input_ids=input_ids, attention_mask=attention_mask)

    source = encode_source(model, source_ids)

    def cached():  # noqa: ANN202
        return encode_with_instruction(model, source, instruction_ids)

    cache = SourceCache()
    prompt = PromptIds(instruction_ids[0].tolist(), source_ids[0].tolist())
    cache.get_or_encode(model, source_ids)

    def cached_path():  # noqa: ANN202
        return cache.encode_prompts(model, [prompt])

    def source_pass():  # noqa: ANN202
        return encode_source(model, source_ids)

    timings: dict[str, list[float]] = {
        "full_block_mask": [],
        "full_stock_t5": [],
        "cached": [],
        "cached_path": [],
        "source_pass": [],
    }
    variants = {
        "full_block_mask": full_block,
        "full_stock_t5": full_stock,
        "cached": cached,
        "cached_path": cached_path,
        "source_pass": source_pass,
    }
    with torch.no_grad():
        for fn in variants.values():
            fn()  # warm-up
        for round_ in range(args.rounds):
            print(f"round {round_ + 1}/{args.rounds}", flush=True)
            for name, fn in variants.items():
                for _ in range(args.cached_repeats if name.startswith("cached") else 1):
                    start = time.perf_counter()
                    fn()
                    timings[name].append(time.perf_counter() - start)

        # identical outputs
        uncached = full_block().last_hidden_state
        outputs, mask = cached()
        max_diff = (outputs.last_hidden_state - uncached)[mask.bool()].abs().max().item()
        encoded = cached_path()
        path_outputs, path_mask = encoded.encoder_outputs, encoded.attention_mask
        path_diff = (path_outputs.last_hidden_state - uncached)[path_mask.bool()].abs().max().item()
        settings = dict(
            num_beams=2, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False
        )
        generated_full = model.generate(
            input_ids=input_ids, attention_mask=attention_mask, segment_ids=segment_ids, **settings
        )
        generated_cached = model.generate(encoder_outputs=outputs, attention_mask=mask, **settings)
    return {
        "timings": timings,
        "max_abs_diff_hidden": max_diff,
        "max_abs_diff_hidden_cached_path": path_diff,
        "identical_generation": bool(torch.equal(generated_full, generated_cached)),
        "generated_tokens": generated_full[0].tolist(),
        "cache_bytes_per_document": source.nbytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-tokens", type=int, default=1024)
    parser.add_argument("--instruction-tokens", type=int, default=41)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cached-repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa")
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "instructsum.json")
    args = parser.parse_args()

    import torch
    from rich.console import Console
    from rich.table import Table

    console = Console(width=170)
    load_before = os.getloadavg()
    started = time.perf_counter()
    result = run(args)
    load_after = os.getloadavg()
    stats = {name: summary(values) for name, values in result["timings"].items()}

    table = Table(
        title=f"InstructSum encoder time per instruction, t5-base shape, {args.threads} thread, {args.attn}"
    )
    for column in ("variant", "tokens run", "median s", "min-max s", "n", "full / this (median)"):
        table.add_column(column, justify="right")
    full_median = stats["full_block_mask"]["median"]
    tokens = {
        "full_block_mask": args.source_tokens + args.instruction_tokens,
        "full_stock_t5": args.source_tokens + args.instruction_tokens,
        "cached": args.instruction_tokens,
        "cached_path": args.instruction_tokens,
        "source_pass": args.source_tokens,
    }
    for name, s in stats.items():
        table.add_row(
            name,
            str(tokens[name]),
            f"{s['median']:.4f}",
            f"{s['min']:.4f}-{s['max']:.4f}",
            str(s["n"]),
            f"{full_median / s['median']:.1f}x",
        )
    console.print(table)
    speedup = full_median / stats["cached"]["median"]
    speedup_worst = stats["full_block_mask"]["min"] / stats["cached"]["max"]
    speedup_min = stats["full_block_mask"]["min"] / stats["cached"]["min"]  # least load-affected
    verdict = "met" if speedup >= 15 else "NOT met"
    console.print(
        f"each extra instruction: {speedup:.1f}x cheaper than re-encoding (median; min/min "
        f"{speedup_min:.1f}x; worst case min/max {speedup_worst:.1f}x); target >= 15x: {verdict}"
    )
    console.print(
        f"cached vs uncached encoder states: max abs diff {result['max_abs_diff_hidden']:.2e} "
        f"({result['max_abs_diff_hidden_cached_path']:.2e} through encode_prompts); "
        f"beam-2 generation of {args.new_tokens} tokens identical: {result['identical_generation']}; "
        f"cache per document: {result['cache_bytes_per_document'] / 2**20:.1f} MiB"
    )

    flops = flops_table(args)
    ftable = Table(title="Encoder GFLOPs for one instruction (analytic; linear layers only | with attention)")
    for column in (
        "model",
        "setting",
        "input tokens",
        "full",
        "proposed (cached)",
        "full / proposed",
        "paper",
    ):
        ftable.add_column(column, justify="right")
    for row in flops:
        paper = ", ".join(
            f"{kind} {row[f'paper_{kind}_gflops']}"
            for kind in ("full", "proposed")
            if row[f"paper_{kind}_gflops"]
        )
        ftable.add_row(
            str(row["model"]),
            str(row["setting"]),
            str(row["input_tokens"]),
            f"{row['full_gflops_linear_only']:.1f} | {row['full_gflops_with_attention']:.1f}",
            f"{row['cached_gflops_linear_only']:.1f} | {row['cached_gflops_with_attention']:.1f}",
            f"{row['ratio_linear_only']:.1f}x | {row['ratio_with_attention']:.1f}x",
            paper if row["setting"].startswith("paper") else "",
        )
    console.print(ftable)
    elapsed = time.perf_counter() - started
    console.print(f"load average before {load_before}, after {load_after}; total {elapsed:.0f} s")

    args.json.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "settings": {k: v for k, v in vars(args).items() if k != "json"},
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": load_after,
            "elapsed_s": elapsed,
        },
        "time_s": stats,
        "speedup_median": speedup,
        "speedup_min_over_min": speedup_min,
        "speedup_worst_case": speedup_worst,
        "target_15x_met": speedup >= 15,
        "max_abs_diff_hidden": result["max_abs_diff_hidden"],
        "max_abs_diff_hidden_cached_path": result["max_abs_diff_hidden_cached_path"],
        "identical_generation": result["identical_generation"],
        "cache_bytes_per_document": result["cache_bytes_per_document"],
        "flops": flops,
        "raw": result["timings"],
    }
    args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
