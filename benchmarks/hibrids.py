"""HIBRIDS vs the base LED at real input lengths: training-step time and peak memory, and the decoder bias.

Models: a small-width LED (``--d-model`` 128, 2+2 layers, 4 heads, window ``--window`` 512) at the real
input lengths of the paper (4k and 16k tokens), with ``--sections`` sections in a three-level tree, the
tokens split into contiguous runs over them in document order (BOS/EOS outside any section), global
attention on BOS, 128 target tokens, batch 1. Peers, each in its own subprocess (so that the peak RSS
from ``resource.getrusage`` is that configuration's alone):

* ``base``: stock ``LEDForConditionalGeneration``;
* ``enc``: HIBRIDS-ENC (synopsis.models.hibrids, bias gathered per layer from the S x S relation ids);
* ``enc+dec``: HIBRIDS-ENC + HIBRIDS-DEC;
* ``lxl``: the public code's way to the same encoder bias: the data collator materialises an (L, L)
  bucket-id matrix for every batch, cuts the band out of it and every layer looks its table up on the
  band (re-implemented here for measurement; the (L, L) build is part of the timed step, as it is part of
  every batch). It is given a memory cap (``--memory-cap-gb``) so that it reports an OOM instead of
  taking the shared machine down.

A step is forward + backward. The configurations alternate within each round (``--rounds``) so that load
from other processes hits them alike; lengths up to 8k get one untimed warm-up step per process.
Reported: median step time (process CPU time, which one-threaded runs on a loaded box perturb far less
than wall time, and wall time) with the min-max spread, the ratio of medians to ``base``, peak RSS, and
the 1-minute load average around every run (the box is shared; one torch thread everywhere). Inputs up
to 8k tokens get ``--steps`` timed steps per process, longer ones ``--steps-long``.

Decoder bias (``dec-*`` rows): the cost of the bias alone, forward + backward, for T target steps over
L source tokens: HIBRIDS' O(T x S) form (pool the previous layer's attention per section, mix with the
S x S table, gather to tokens) against the public code's form (an (L, L) index, its (L, L) bias values,
and a (T x L) @ (L x L) product). Peak RSS above the process's baseline is reported.

    python benchmarks/hibrids.py      # prints a table, writes benchmarks/results/hibrids.json
    python benchmarks/hibrids.py --real-width   # bart-base width rows, writes results/hibrids_real_width.json

Real width (``--real-width``): BART, T5 and LED at bart-base width (d_model 768, 6+6 layers, 12 heads, FFN
3072; LED window 1024), a 1,000-token document in 20 sections (``--real-length``, ``--real-sections``),
128 target tokens, batch 1, stock vs HIBRIDS-ENC+DEC (random tables) in one process, steps interleaved
(``--real-rounds`` each, one untimed warm-up each), process CPU time, one thread.
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

MODEL_KINDS = ("base", "enc", "enc+dec", "lxl")
DECODER_KINDS = ("dec-ours", "dec-lxl")


# ----------------------------------------------------------------------------- inputs
def build_document(sections: int):
    """A three-level section tree with ``sections`` nodes besides the root (6 top-level sections)."""
    from synopsis.document import Document, Section

    root = Section()
    tops = [root.add(Section(f"{i + 1}")) for i in range(6)]
    nodes = list(tops)
    i = 0
    while len(nodes) < sections:  # alternate subsections and sub-subsections, round robin
        parent = tops[i % len(tops)]
        if i % 3 == 2 and parent.children:
            parent = parent.children[-1]
        nodes.append(parent.add(Section(f"{len(nodes) + 1}")))
        i += 1
    return Document(root)


def section_inputs(length: int, sections: int):
    """(1, L) section ids (contiguous runs in pre-order, BOS/EOS outside) and the (1, S+1, S+1) buckets."""
    import torch

    from synopsis.models.hibrids import document_relation_buckets

    document = build_document(sections)
    count = len(document.sections)  # the root is section 0 and gets no tokens here
    body = length - 2
    ids = torch.tensor([1 + i * (count - 1) // body for i in range(body)])
    section_ids = torch.cat([torch.tensor([-1]), ids, torch.tensor([-1])])[None]
    return section_ids, document_relation_buckets(document)[None]


def led_config(args: argparse.Namespace, length: int):
    from transformers import LEDConfig

    config = LEDConfig(
        vocab_size=1000,
        d_model=args.d_model,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads,
        encoder_ffn_dim=4 * args.d_model,
        decoder_ffn_dim=4 * args.d_model,
        attention_window=[args.window, args.window],
        max_encoder_position_embeddings=length,
        max_decoder_position_embeddings=256,
    )
    config._attn_implementation = "eager"
    return config


# ----------------------------------------------------------------------------- the public code's approach
def lxl_attention_class():
    """LED encoder self-attention adding ``table[band_ids]`` to its band scores, as the public code does."""
    import torch
    from torch import nn
    from transformers.models.led.modeling_led import LEDEncoderSelfAttention

    from synopsis.models.hibrids import num_buckets

    class LxLBandAttention(LEDEncoderSelfAttention):
        band_ids: torch.Tensor | None = None  # (B, L, 2w+1) bucket ids, set before every step

        def __init__(self, config, layer_id: int) -> None:
            super().__init__(config, layer_id)
            self.table = nn.Embedding(num_buckets(), self.num_heads)
            nn.init.normal_(self.table.weight, std=0.02)
            self._first = False

        def forward(self, *args, **kwargs):
            self._first = True
            try:
                return super().forward(*args, **kwargs)
            finally:
                self._first = False

        def _sliding_chunks_query_key_matmul(self, query, key, window_overlap):
            scores = super()._sliding_chunks_query_key_matmul(query, key, window_overlap)
            if self._first:  # the first call computes the query-key band scores
                self._first = False
                scores = scores + self.table(LxLBandAttention.band_ids).transpose(2, 3)
            return scores

    return LxLBandAttention


def lxl_band_ids(section_ids, relations, one_sided: int):
    """Materialise the (L, L) bucket-id matrix of every token pair, then cut out the (1, L, 2w+1) band."""
    sections = section_ids[0]
    inside = sections >= 0
    sec = sections.clamp(min=0)
    full = relations[0][sec[:, None], sec[None, :]]  # (L, L) int64, as the public collator builds it
    full.masked_fill_(~(inside[:, None] & inside[None, :]), 0)  # the public code uses bucket 0 there
    length = full.shape[0]
    band = full.new_zeros(length, 2 * one_sided + 1)
    for d in range(2 * one_sided + 1):
        offset = d - one_sided
        diagonal = full.diagonal(offset)
        if offset >= 0:
            band[: length - offset, d] = diagonal
        else:
            band[-offset:, d] = diagonal
    del full
    return band[None]


# ----------------------------------------------------------------------------- child processes
def run_model(kind: str, length: int, args: argparse.Namespace) -> dict[str, object]:
    import torch
    from transformers import LEDForConditionalGeneration

    from synopsis.models.hibrids import HibridsLEDConfig, HibridsLEDForConditionalGeneration

    torch.manual_seed(0)
    config = led_config(args, length)
    if kind == "base":
        model = LEDForConditionalGeneration(config)
    elif kind == "lxl":
        model = LEDForConditionalGeneration(config)
        attention = lxl_attention_class()
        for i, layer in enumerate(model.led.encoder.layers):
            layer.self_attn.longformer_self_attn = attention(config, i)
    else:
        hibrids_config = HibridsLEDConfig.from_base(
            config, hibrids_encoder=True, hibrids_decoder=kind == "enc+dec"
        )
        model = HibridsLEDForConditionalGeneration(hibrids_config)  # tables N(0, 0.02)
    model.train()
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(4, 1000, (1, length), generator=generator)
    ids[0, 0], ids[0, -1] = config.bos_token_id, config.eos_token_id
    glob = torch.zeros_like(ids)
    glob[0, 0] = 1
    labels = torch.randint(4, 1000, (1, args.target), generator=generator)
    section_ids, relations = section_inputs(length, args.sections)
    extra = {"section_ids": section_ids, "section_relations": relations} if kind in ("enc", "enc+dec") else {}
    build_times: list[float] = []

    def step() -> None:
        if kind == "lxl":
            start = time.perf_counter()
            attention.band_ids = lxl_band_ids(section_ids, relations, args.window // 2)
            build_times.append(time.perf_counter() - start)
        model.zero_grad(set_to_none=True)
        model(input_ids=ids, global_attention_mask=glob, labels=labels, **extra).loss.backward()
        if kind == "lxl":
            attention.band_ids = None

    short = length <= args.warmup_below
    if short:
        step()
        build_times.clear()
    wall, cpu = [], []
    for _ in range(args.steps if short else args.steps_long):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    out: dict[str, object] = {
        "train_step": cpu,
        "train_step_wall": wall,
        "sections": int(relations.shape[-1]),
    }
    if build_times:
        out["lxl_index_build"] = build_times
    return out


def run_decoder_bias(kind: str, length: int, args: argparse.Namespace) -> dict[str, object]:
    """The decoder bias alone, forward + backward (alpha = a previous layer's attention, requires grad)."""
    import torch

    from synopsis.models.hibrids import cross_attention_bias, num_buckets, pool_by_section, section_layout

    torch.manual_seed(0)
    section_ids, relations = section_inputs(length, args.sections)
    layout = section_layout(section_ids, relations, length=length, buckets=num_buckets())
    table = torch.nn.Parameter(torch.randn(num_buckets(), 1) * 0.02)
    scores = torch.randn(1, args.heads, args.target, length, requires_grad=True)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times, wall = [], []
    for _ in range(args.steps + 1):
        start, start_cpu = time.perf_counter(), time.process_time()
        alpha = scores.softmax(-1)
        if kind == "dec-ours":
            bias = cross_attention_bias(pool_by_section(alpha, layout), table, layout)
        else:  # the public code's form: (L, L) ids -> (L, L) values -> (T x L) @ (L x L)
            sec = layout.ids[0]
            values = torch.nn.functional.pad(table[:, 0], (0, 1))  # + a zero entry for "no section"
            slots = layout.num_sections
            pair = torch.where(
                (sec[:, None] < slots) & (sec[None, :] < slots),
                relations[0][sec.clamp(max=slots - 1)[:, None], sec.clamp(max=slots - 1)[None, :]],
                num_buckets(),
            )  # (L, L) int64
            bias = torch.matmul(alpha, values[pair][None, None])  # (1, H, T, L)
            del pair
        bias.sum().backward()
        times.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "bias_step": times[1:],
        "bias_step_wall": wall[1:],
        "extra_peak_mb": round(peak - baseline, 1),
        "sections": layout.num_sections,
    }


def child(kind: str, length: int, args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    cap = int(args.memory_cap_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))  # OOM is reported, the shared box survives
    load_before = os.getloadavg()[0]
    try:
        out = run_decoder_bias(kind, length, args) if kind in DECODER_KINDS else run_model(kind, length, args)
    except (MemoryError, RuntimeError) as err:
        if not isinstance(err, MemoryError) and "alloc" not in str(err).lower():
            raise
        out = {"error": f"out of memory under the {args.memory_cap_gb:g} GB cap ({str(err)[:80]})"}
    out.update(
        kind=kind,
        length=length,
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        load=[load_before, os.getloadavg()[0]],
    )
    print(json.dumps(out))


# ----------------------------------------------------------------------------- parent
# ----------------------------------------------------------------------------- real width, one process
REAL_WIDTH = {"d_model": 768, "layers": 6, "heads": 12, "ffn": 3072}


def real_width_model(family: str):
    """A random stock model at bart-base width (d 768, 6+6 layers, 12 heads, FFN 3072), eval-free."""
    import torch
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        LEDConfig,
        LEDForConditionalGeneration,
        T5Config,
        T5ForConditionalGeneration,
    )

    w = REAL_WIDTH
    torch.manual_seed(0)
    if family == "bart":
        config = BartConfig(
            vocab_size=50265, d_model=w["d_model"], encoder_layers=w["layers"], decoder_layers=w["layers"],
            encoder_attention_heads=w["heads"], decoder_attention_heads=w["heads"], encoder_ffn_dim=w["ffn"],
            decoder_ffn_dim=w["ffn"], max_position_embeddings=1024,
        )  # fmt: skip
        config._attn_implementation = "sdpa"
        return BartForConditionalGeneration(config)
    if family == "t5":
        config = T5Config(
            vocab_size=32128, d_model=w["d_model"], d_kv=w["d_model"] // w["heads"], d_ff=w["ffn"],
            num_layers=w["layers"], num_decoder_layers=w["layers"], num_heads=w["heads"],
            pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
        )  # fmt: skip
        config._attn_implementation = "sdpa"
        return T5ForConditionalGeneration(config)
    config = LEDConfig(
        vocab_size=50265, d_model=w["d_model"], encoder_layers=w["layers"], decoder_layers=w["layers"],
        encoder_attention_heads=w["heads"], decoder_attention_heads=w["heads"], encoder_ffn_dim=w["ffn"],
        decoder_ffn_dim=w["ffn"], attention_window=[1024] * w["layers"], max_encoder_position_embeddings=4096,
        max_decoder_position_embeddings=1024,
    )  # fmt: skip
    return LEDForConditionalGeneration(config)


def run_real_width(args: argparse.Namespace) -> dict[str, object]:
    """Stock vs HIBRIDS-ENC+DEC training steps (forward + backward) at real width, interleaved in one
    process (stock, HIBRIDS, HIBRIDS, stock, ... so drifting machine load hits both alike), one thread."""
    import torch

    from synopsis.models.hibrids import convert_to_hibrids

    torch.set_num_threads(args.threads)
    length, target = args.real_length, args.target
    section_ids, relations = section_inputs(length, args.real_sections)
    results = {}
    for family in args.families:
        stock = real_width_model(family).train()
        hibrids = convert_to_hibrids(stock).train()
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(4, 30000, (1, length), generator=generator)
        labels = torch.randint(4, 30000, (1, target), generator=generator)
        common = {"input_ids": ids, "labels": labels}
        if family == "led":
            glob = torch.zeros_like(ids)
            glob[:, 0] = 1
            common["global_attention_mask"] = glob
        extra = {"section_ids": section_ids, "section_relations": relations}

        def step(model, inputs) -> float:
            began = time.process_time()
            model(**inputs).loss.backward()
            model.zero_grad(set_to_none=True)
            return time.process_time() - began

        step(stock, common)  # warm-up, untimed
        step(hibrids, {**common, **extra})
        times: dict[str, list[float]] = {"stock": [], "hibrids": []}
        for round_ in range(args.real_rounds):
            order = ("stock", "hibrids") if round_ % 2 == 0 else ("hibrids", "stock")
            for name in order:
                model, inputs = (stock, common) if name == "stock" else (hibrids, {**common, **extra})
                times[name].append(step(model, inputs))
        ratios = [h / s for h, s in zip(times["hibrids"], times["stock"], strict=True)]
        results[family] = {
            "stock_s": times["stock"],
            "hibrids_s": times["hibrids"],
            "ratio_of_medians": statistics.median(times["hibrids"]) / statistics.median(times["stock"]),
            "round_ratios": ratios,
            "load_after": os.getloadavg(),
        }
        print(
            f"{family}: stock {spread(times['stock'])} s, HIBRIDS-ENC+DEC {spread(times['hibrids'])} s, "
            f"ratio of medians {results[family]['ratio_of_medians']:.3f} "
            f"(per-round {min(ratios):.2f}-{max(ratios):.2f}); load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        del stock, hibrids
    return {
        "setting": {
            **REAL_WIDTH, "length": length, "sections": args.real_sections, "target": target,
            "rounds": args.real_rounds, "threads": args.threads, "load_before": args.load_before,
        },
        "results": results,
        "machine": platform.platform(),
    }  # fmt: skip


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--kinds", nargs="+", default=[*MODEL_KINDS, *DECODER_KINDS])
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--window", type=int, default=512, help="LED attention window (two-sided)")
    parser.add_argument("--sections", type=int, default=60)
    parser.add_argument("--target", type=int, default=128, help="target tokens T")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per process (short inputs)")
    parser.add_argument("--steps-long", type=int, default=1, help="timed steps per process above 8k")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--decoder-rounds", type=int, default=1, help="rounds of the dec-* runs")
    parser.add_argument("--warmup-below", type=int, default=8192, help="one warm-up step up to this length")
    parser.add_argument("--memory-cap-gb", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "hibrids.json")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "LENGTH"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--real-width",
        action="store_true",
        help="Only the real-width rows: stock vs HIBRIDS-ENC+DEC at bart-base width, interleaved.",
    )
    parser.add_argument("--families", nargs="+", default=["bart", "t5", "led"])
    parser.add_argument("--real-length", type=int, default=1000)
    parser.add_argument("--real-sections", type=int, default=20)
    parser.add_argument("--real-rounds", type=int, default=4)
    args = parser.parse_args()

    if args.real_width:
        args.load_before = os.getloadavg()
        report = run_real_width(args)
        path = args.json.with_name("hibrids_real_width.json")
        path.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {path}")
        return

    if args.one:
        child(args.one[0], int(args.one[1]), args)
        return

    from rich.console import Console
    from rich.table import Table

    console = Console(width=170)
    passthrough = [
        f"--d-model={args.d_model}",
        f"--heads={args.heads}",
        f"--window={args.window}",
        f"--sections={args.sections}",
        f"--target={args.target}",
        f"--steps={args.steps}",
        f"--steps-long={args.steps_long}",
        f"--warmup-below={args.warmup_below}",
        f"--memory-cap-gb={args.memory_cap_gb}",
        f"--threads={args.threads}",
    ]
    runs: list[dict[str, object]] = []
    started = time.perf_counter()
    for round_ in range(args.rounds):
        for length in args.lengths:
            for kind in args.kinds:
                if kind in DECODER_KINDS and round_ >= args.decoder_rounds:
                    continue
                console.print(f"round {round_ + 1}/{args.rounds}: {kind} at {length} tokens", style="dim")
                out = subprocess.run(
                    [sys.executable, __file__, "--one", kind, str(length), *passthrough],
                    capture_output=True,
                    text=True,
                )
                lines = out.stdout.strip().splitlines()
                if out.returncode != 0 or not lines:
                    tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
                    row = {"kind": kind, "length": length, "error": f"exit {out.returncode}: {tail[:120]}"}
                else:
                    row = json.loads(lines[-1])
                row["round"] = round_
                runs.append(row)
                if "error" in row:
                    console.print(f"  {row['error']}", style="yellow")
    elapsed = time.perf_counter() - started

    rows = []
    for length in args.lengths:
        by_kind = {}
        for kind in args.kinds:
            mine = [r for r in runs if r["kind"] == kind and r["length"] == length]
            times = [t for r in mine for t in r.get("train_step", r.get("bias_step", []))]
            wall = [t for r in mine for t in r.get("train_step_wall", r.get("bias_step_wall", []))]
            errors = sorted({str(r["error"]) for r in mine if "error" in r})
            by_kind[kind] = {
                "kind": kind,
                "length": length,
                "cpu_times_s": times,
                "median_s": statistics.median(times) if times else None,
                "wall_times_s": wall,
                "median_wall_s": statistics.median(wall) if wall else None,
                "peak_rss_mb": max(
                    (float(r["peak_rss_mb"]) for r in mine if "peak_rss_mb" in r), default=None
                ),
                "extra_peak_mb": max(
                    (float(r["extra_peak_mb"]) for r in mine if "extra_peak_mb" in r), default=None
                ),
                "lxl_index_build_s": [t for r in mine for t in r.get("lxl_index_build", [])] or None,
                "load": [r["load"] for r in mine if "load" in r],
                "errors": errors,
            }
        base = by_kind.get("base", {})
        for kind, row in by_kind.items():
            if kind in MODEL_KINDS and base.get("median_s") and row["median_s"]:
                row["ratio_to_base"] = row["median_s"] / base["median_s"]
                row["wall_ratio_to_base"] = row["median_wall_s"] / base["median_wall_s"]
            rows.append(row)

    table = Table(title=f"HIBRIDS vs LED (d_model {args.d_model}, {args.heads} heads, window {args.window}, "
                        f"{args.sections} sections, T={args.target}, batch 1, 1 thread)")  # fmt: skip
    for column in ("tokens", "config", "CPU s/step: median (min-max)", "ratio", "wall s/step", "wall ratio",
                   "peak RSS MB", "extra peak MB", "load (1 min)", "note"):  # fmt: skip
        table.add_column(column, justify="right")
    for row in rows:
        loads = [x for pair in row["load"] for x in pair]
        note = "; ".join(row["errors"])
        if row["lxl_index_build_s"]:
            note = (
                note + "; " if note else ""
            ) + f"(L,L) build {statistics.median(row['lxl_index_build_s']):.2f} s"
        table.add_row(
            str(row["length"]),
            row["kind"],
            spread(row["cpu_times_s"]) if row["cpu_times_s"] else "-",
            f"{row['ratio_to_base']:.3f}" if row.get("ratio_to_base") else "-",
            spread(row["wall_times_s"]) if row["wall_times_s"] else "-",
            f"{row['wall_ratio_to_base']:.3f}" if row.get("wall_ratio_to_base") else "-",
            f"{row['peak_rss_mb']:.0f}" if row["peak_rss_mb"] else "-",
            f"{row['extra_peak_mb']:.0f}" if row["extra_peak_mb"] is not None else "-",
            f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-",
            note,
        )
    console.print(table)
    console.print(
        "step: forward + backward (dec-*: the decoder bias alone), process CPU time (one thread; less "
        "sensitive than wall time to the shared box's load) and wall time; ratio: median / base median; "
        f"target: HIBRIDS <= 1.15x base. Total {elapsed / 60:.1f} min."
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "one")}
    payload = {
        "settings": settings,
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "total_minutes": round(elapsed / 60, 2),
        },
        "rows": rows,
        "raw": runs,
    }
    args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    console.print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
