"""Hie-BART vs stock BART at bart-base size: training step and generation time, and peak memory.

Both models are random-init bart-base (6+6 layers, d_model 768, 12 heads, 50,265 tokens; Hie-BART has
exactly the same parameters) and Hie-BART uses ``--word-heads`` word-level heads (default 10 of 12, i.e.
2 sentence-level heads per encoder layer). Inputs are random tokens with a sentence-start marker (the
last vocabulary id) every ``--sentence-tokens`` tokens, the same ids for both models.

For each input length, each model runs in its own subprocess (so that peak RSS, from
``resource.getrusage``, is that model's alone), alternating stock / Hie-BART for ``--rounds`` rounds so
that load from other processes hits both alike. Per subprocess: one warm-up, then ``--steps`` timed
forward+backward steps (batch 1, 128 target tokens) and ``--steps`` timed greedy generations of
``--new-tokens`` tokens (encoder once, with the KV cache). Reported: the median over all timed steps of each
model, their ratio, and the spread of that ratio over rounds (min-max of the per-round ratios of medians);
the machine's load average is recorded at the start and the end.

    python benchmarks/hie_bart.py        # prints a table, writes benchmarks/results/hie_bart.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Wall-clock seconds and the thread's CPU seconds (one thread: the work done, much less disturbed by load from
# other processes) of each timed step.
KINDS = ("train_step", "generate", "train_step_cpu", "generate_cpu")


def bart_base_config():  # noqa: ANN201 - transformers is imported lazily
    """bart-base's shape (6+6 layers, d_model 768, 12 heads, 50,265 tokens), for random-init benchmarks."""
    from transformers import BartConfig

    return BartConfig(
        vocab_size=50265,
        d_model=768,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=12,
        decoder_attention_heads=12,
        encoder_ffn_dim=3072,
        decoder_ffn_dim=3072,
        max_position_embeddings=1024,
    )


def build(kind: str, word_heads: int):
    import torch
    from transformers import BartForConditionalGeneration

    from synopsis.models.hie_bart import HieBartConfig, HieBartForConditionalGeneration

    torch.manual_seed(0)
    config = bart_base_config()
    if kind == "bart":
        return BartForConditionalGeneration(config)
    # built directly (not from a stock model in the same process) so that peak RSS counts one model
    hie_config = HieBartConfig.from_bart_config(
        config, word_heads=word_heads, sentence_start_token_id=config.vocab_size - 1
    )
    model = HieBartForConditionalGeneration(hie_config)
    return model


def run_one(kind: str, length: int, args: argparse.Namespace) -> dict[str, object]:
    """One model, one input length; runs inside its own process."""
    import torch

    torch.set_num_threads(args.threads)
    model = build(kind, args.word_heads)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(4, 50000, (1, length), generator=generator)
    ids[0, 0] = model.config.bos_token_id
    ids[0, 1 :: args.sentence_tokens] = model.config.vocab_size - 1  # the marker (Hie-BART's config)
    ids[0, -1] = model.config.eos_token_id
    mask = torch.ones_like(ids)
    labels = torch.randint(4, 50000, (1, 128), generator=generator)

    def train_step() -> None:
        model.train()
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()

    def generate() -> None:
        model.eval()
        with torch.inference_mode():
            model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                num_beams=1,
                do_sample=False,
            )

    timings: dict[str, list[float]] = {name: [] for name in KINDS}
    for name, fn in (("train_step", train_step), ("generate", generate)):
        fn()  # warm-up
        for _ in range(args.steps):
            start, cpu_start = time.perf_counter(), time.thread_time()
            fn()
            timings[name].append(time.perf_counter() - start)
            timings[f"{name}_cpu"].append(time.thread_time() - cpu_start)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    return {"kind": kind, "length": length, **timings, "peak_rss_mb": round(peak_mb, 1)}


def spread(row: dict, name: str) -> str:
    return f"{row[f'{name}_ratio']:.3f} [{row[f'{name}_ratio_min']:.3f}-{row[f'{name}_ratio_max']:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--word-heads", type=int, default=10)
    parser.add_argument("--sentence-tokens", type=int, default=25, help="tokens per sentence")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "hie_bart.json")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.one:  # child process
        print(json.dumps(run_one(args.one[0], int(args.one[1]), args)))
        return

    from rich.console import Console
    from rich.table import Table

    console = Console(width=220)
    results: dict[tuple[str, int], dict[str, list[float]]] = {}
    per_round: dict[tuple[str, int], list[dict[str, list[float]]]] = {}
    peaks: dict[tuple[str, int], float] = {}
    load_start = os.getloadavg()
    passthrough = [
        f"--word-heads={args.word_heads}",
        f"--sentence-tokens={args.sentence_tokens}",
        f"--steps={args.steps}",
        f"--new-tokens={args.new_tokens}",
        f"--threads={args.threads}",
    ]
    for round_ in range(args.rounds):
        for length in args.lengths:
            for kind in ("bart", "hie-bart"):
                console.print(f"round {round_ + 1}/{args.rounds}: {kind} at {length} tokens", style="dim")
                out = subprocess.run(
                    [sys.executable, __file__, "--one", kind, str(length), *passthrough],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                row = json.loads(out.stdout.strip().splitlines()[-1])
                entry = results.setdefault((kind, length), {name: [] for name in KINDS})
                for name in KINDS:
                    entry[name] += row[name]
                per_round.setdefault((kind, length), []).append({name: row[name] for name in KINDS})
                peaks[(kind, length)] = max(peaks.get((kind, length), 0.0), row["peak_rss_mb"])

    table = Table(title=f"Hie-BART ({args.word_heads}:{12 - args.word_heads} heads) vs BART, bart-base size")
    for column in ("input tokens", "fwd+bwd BART s", "fwd+bwd Hie s", "Hie/BART [round min-max]",
                   "Hie/BART CPU time", "generate BART s", "generate Hie s", "Hie/BART [round min-max]",
                   "Hie/BART CPU time", "peak RSS BART MB", "peak RSS Hie MB"):  # fmt: skip
        table.add_column(column, justify="right")
    rows = []
    for length in args.lengths:
        stock, hie = results[("bart", length)], results[("hie-bart", length)]
        row = {"length": length}
        for name in KINDS:
            row[f"{name}_bart_s"] = statistics.median(stock[name])
            row[f"{name}_hie_s"] = statistics.median(hie[name])
            row[f"{name}_ratio"] = row[f"{name}_hie_s"] / row[f"{name}_bart_s"]
            rounds = [
                statistics.median(h[name]) / statistics.median(b[name])
                for b, h in zip(per_round[("bart", length)], per_round[("hie-bart", length)], strict=True)
            ]
            row[f"{name}_round_ratios"] = rounds
            row[f"{name}_ratio_min"], row[f"{name}_ratio_max"] = min(rounds), max(rounds)
        row["peak_rss_bart_mb"], row["peak_rss_hie_mb"] = peaks[("bart", length)], peaks[("hie-bart", length)]
        rows.append(row)
        table.add_row(
            str(length),
            f"{row['train_step_bart_s']:.2f}",
            f"{row['train_step_hie_s']:.2f}",
            spread(row, "train_step"),
            spread(row, "train_step_cpu"),
            f"{row['generate_bart_s']:.2f}",
            f"{row['generate_hie_s']:.2f}",
            spread(row, "generate"),
            spread(row, "generate_cpu"),
            f"{row['peak_rss_bart_mb']:.0f}",
            f"{row['peak_rss_hie_mb']:.0f}",
        )
    console.print(table)
    load_end = os.getloadavg()
    console.print(
        f"times: wall clock (CPU time of the thread where marked), median over all timed steps "
        f"({args.rounds} alternating rounds x {args.steps} steps); "
        f"ratio spread: min-max over rounds; load average {load_start[0]:.2f} at the start, "
        f"{load_end[0]:.2f} at the end"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "one")}
    payload = {
        "settings": settings,
        "machine": {"python": platform.python_version(), "processor": platform.processor()},
        "load_average": {"start": list(load_start), "end": list(load_end)},
        "rows": rows,
        "raw": {f"{k}-{n}": v for (k, n), v in results.items()},
    }
    args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
