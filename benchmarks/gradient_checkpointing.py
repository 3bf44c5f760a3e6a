"""Peak memory of one training step with and without ``gradient_checkpointing`` at 4k source tokens, CPU.

Models (random weights, built from their configs; width ``--d-model`` 256, 4 heads, FFN 4x, 6 encoder + 6
decoder layers, vocabulary 1000, batch 1, ``--target`` 128 target tokens, ``--tokens`` 4096 source tokens):

* ``led``: stock LED (window ``--window`` 512, global attention on BOS);
* ``hibrids_led``: HIBRIDS-ENC+DEC on that LED (``--sections`` 40 sections in a three-level tree);
* ``hie_bart``: Hie-BART (2 of 4 heads sentence-level, a sentence every 32 tokens; positions up to 4096);
* ``instructsum``: InstructSum on T5 (relative positions; a 16-token instruction before the source).

Each configuration runs in its own process under GNU ``/usr/bin/time -v``: forward + backward of one step
(no optimizer step: the weights, their gradients and the activations are what checkpointing trades). The
process also records its own peak RSS after building the model and the inputs (``before step``), so the
table shows the step's increment over that too. One torch thread (the box is shared).

    python benchmarks/gradient_checkpointing.py  # writes benchmarks/results/gradient_checkpointing.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = ("led", "hibrids_led", "hie_bart", "instructsum")


def _bart_sizes(args: argparse.Namespace) -> dict[str, int]:
    """The widths BART and LED share (LED is BART with banded encoder attention)."""
    return {
        "vocab_size": 1000,
        "d_model": args.d_model,
        "encoder_layers": args.layers,
        "decoder_layers": args.layers,
        "encoder_attention_heads": args.heads,
        "decoder_attention_heads": args.heads,
        "encoder_ffn_dim": 4 * args.d_model,
        "decoder_ffn_dim": 4 * args.d_model,
    }


def _led_config(args: argparse.Namespace):  # noqa: ANN202 - transformers is imported lazily
    from transformers import LEDConfig

    config = LEDConfig(
        **_bart_sizes(args),
        attention_window=[args.window] * args.layers,
        max_encoder_position_embeddings=args.tokens,
        max_decoder_position_embeddings=max(args.target, 256),
    )
    config._attn_implementation = "eager"
    return config


def build(kind: str, args: argparse.Namespace):  # noqa: ANN201
    """(model, inputs) of one configuration."""
    import torch

    generator = torch.Generator().manual_seed(1)
    length = args.tokens
    ids = torch.randint(4, 1000, (1, length), generator=generator)
    labels = torch.randint(4, 1000, (1, args.target), generator=generator)
    torch.manual_seed(0)
    if kind in ("led", "hibrids_led"):
        from transformers import LEDForConditionalGeneration

        config = _led_config(args)
        ids[0, 0], ids[0, -1] = config.bos_token_id, config.eos_token_id
        glob = torch.zeros_like(ids)
        glob[0, 0] = 1
        inputs = {"input_ids": ids, "global_attention_mask": glob, "labels": labels}
        if kind == "led":
            return LEDForConditionalGeneration(config), inputs
        sys.path.insert(0, str(HERE))
        from hibrids import section_inputs

        from synopsis.models.hibrids import HibridsLEDConfig, HibridsLEDForConditionalGeneration

        hibrids = HibridsLEDConfig.from_base(config, hibrids_encoder=True, hibrids_decoder=True)
        section_ids, relations = section_inputs(length, args.sections)
        inputs.update(section_ids=section_ids, section_relations=relations)
        return HibridsLEDForConditionalGeneration(hibrids), inputs
    if kind == "hie_bart":
        from transformers import BartConfig

        from synopsis.models.hie_bart import HieBartConfig, HieBartForConditionalGeneration

        sentence = 5
        base = BartConfig(
            **_bart_sizes(args),
            max_position_embeddings=length,
        )
        config = HieBartConfig.from_bart_config(
            base, word_heads=args.heads // 2, sentence_start_token_id=sentence
        )
        ids[ids == sentence] = 6
        ids[0, 1::32] = sentence
        ids[0, 0], ids[0, -1] = base.bos_token_id, base.eos_token_id
        return HieBartForConditionalGeneration(config), {"input_ids": ids, "labels": labels}
    if kind == "instructsum":
        from transformers import T5Config, T5ForConditionalGeneration

        from synopsis.models.instructsum import convert_to_instructsum

        config = T5Config(
            vocab_size=1000,
            d_model=args.d_model,
            d_kv=args.d_model // args.heads,
            d_ff=4 * args.d_model,
            num_layers=args.layers,
            num_decoder_layers=args.layers,
            num_heads=args.heads,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
        )
        segments = torch.zeros_like(ids)
        segments[0, :16] = 1  # the instruction comes first
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "segment_ids": segments}
        return convert_to_instructsum(T5ForConditionalGeneration(config)), {**inputs, "labels": labels}
    raise ValueError(kind)


def child(kind: str, checkpointing: bool, args: argparse.Namespace) -> None:
    import torch

    from synopsis.models.seq2seq import enable_gradient_checkpointing

    torch.set_num_threads(1)
    model, inputs = build(kind, args)
    model.train()
    if checkpointing:
        enable_gradient_checkpointing(model)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    model(**inputs).loss.backward()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    parameters = sum(p.numel() for p in model.parameters())
    print(
        json.dumps(
            {
                "before_step_mb": round(before, 1),
                "peak_mb": round(peak, 1),
                "seconds": round(seconds, 1),
                "parameters": parameters,
            }
        )
    )


def run(kind: str, checkpointing: bool, args: argparse.Namespace) -> dict[str, object]:
    command = [
        "/usr/bin/time", "-v", sys.executable, __file__, "--child", kind,
        "--checkpointing", str(int(checkpointing)),
        "--tokens", str(args.tokens), "--target", str(args.target), "--d-model", str(args.d_model),
        "--heads", str(args.heads), "--layers", str(args.layers), "--window", str(args.window),
        "--sections", str(args.sections),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{kind}: {done.stderr[-2000:]}")
    maxrss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out.update(
        model=kind, gradient_checkpointing=checkpointing, time_v_peak_rss_mb=round(int(maxrss[1]) / 1024, 1)
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--checkpointing", type=int, default=0)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--target", type=int, default=128)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--sections", type=int, default=40)
    parser.add_argument("--json", type=Path, default=HERE / "results" / "gradient_checkpointing.json")
    args = parser.parse_args()
    if args.child:
        child(args.child, bool(args.checkpointing), args)
        return
    rows = []
    print(
        "| model | checkpointing | params | peak RSS (time -v) | before step | step increment | step time |"
    )
    print("|---|---|---|---|---|---|---|")
    for kind in args.models.split(","):
        for checkpointing in (False, True):
            row = run(kind, checkpointing, args)
            rows.append(row)
            print(
                f"| {kind} | {'on' if checkpointing else 'off'} | {row['parameters'] / 1e6:.1f}M "
                f"| {row['time_v_peak_rss_mb']:.0f} MB | {row['before_step_mb']:.0f} MB "
                f"| {row['peak_mb'] - row['before_step_mb']:.0f} MB | {row['seconds']:.1f} s |",
                flush=True,
            )
    import torch
    import transformers

    settings = {k: v for k, v in vars(args).items() if k not in ("child", "checkpointing", "json")}
    meta = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": 1,
        "load_average": os.getloadavg(),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"settings": settings, "environment": meta, "rows": rows}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
