"""The GPU check (issue 39): one command that fits a short window of GPU time (under 8 minutes on one H100).

Usage::

    python benchmarks/gpu_check.py [--tokenizers ../shared/data/tokenizers] \\
        [--json benchmarks/results/gpu_check.json] [--markdown docs/results/gpu.md]
    python benchmarks/gpu_check.py --smoke --json /tmp/gpu.json --markdown /tmp/gpu.md   # CPU, < 60 s

What it measures, every result into one JSON and the Markdown tables (with the device's name):

1. **Trainers' steps**: two optimizer steps of each trainer's model (seq2seq: BART, Hie-BART, HIBRIDS on
   BART and on LED, InstructSum on T5; the pointer-generator with coverage; the domain LM, baseline, ``in``
   and ``in_out``) in fp32, bf16 and fp16, through the trainers' own precision path
   (:class:`~synopsis.training.distributed.Distributed`: autocast, the fp16 loss scaler, clipping): finite
   loss or the error, seconds a step, peak memory.
2. **Plans against the GPU**: each memory plan (``device_type: cuda``) against
   ``torch.cuda.max_memory_allocated()`` of two AdamW steps of the same configuration at its real width
   (the three rows issue 39 measured, the pointer-generator's and the LM's); the CUDA context measured
   (device memory in use minus what torch reserved) beside the plan's figure.
3. **Decoding** on the summarize path (the service's batcher calls the same ``summarize``): documents/s
   and peak memory of the bundled pointer-generator and of a random bart-large-width model, batch 1 and
   32, beside Hugging Face ``generate`` on the same model and inputs (our overhead: summarize's time over
   generate's; target <= 1.10x); the same on the CPU.

``--smoke`` runs every part with tiny sizes on the CPU (no plan measurement: there is no
``max_memory_allocated`` there), as ``tests/test_gpu_check.py`` does in CI.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from synopsis.devices import compute_device, resolve_device
from synopsis.document import Document
from synopsis.training.distributed import PRECISIONS, Distributed

ROOT = Path(__file__).resolve().parents[1]
GB = 1e9
#: issue 39's H100 measurements (max_memory_allocated, bytes): name -> bytes
ISSUE_MEASURED = {"hie-bart fp32": 26.2e9, "hie-bart bf16 ckpt": 11.6e9, "hibrids-led bf16 ckpt": 28.6e9}


# ----------------------------------------------------------------------------------------------- inputs
def documents(count: int, words: int, sections: int = 4) -> list[Document]:
    """``count`` synthetic documents of about ``words`` words in ``sections`` headed sections."""
    vocabulary = "the model reads long documents and writes short summaries of their sections".split()
    out = []
    for number in range(count):
        parts = []
        per_section = max(1, words // sections)
        for section in range(sections):
            sentences, written = [], 0
            while written < per_section:
                start = (number + section + written) % len(vocabulary)
                sentence = " ".join(vocabulary[(start + i) % len(vocabulary)] for i in range(12))
                sentences.append(sentence.capitalize() + ".")
                written += 12
            parts.append(f"Section {section + 1}\n\n" + " ".join(sentences))
        out.append(Document.from_text("\n\n".join(parts), id=f"doc-{number}"))
    return out


def tokenizer_for(family: str, tokenizers: Path) -> Any:
    from transformers import T5Tokenizer

    from synopsis.models.seq2seq import bart_tokenizer_from_files

    if family == "t5":
        with tempfile.TemporaryDirectory() as directory:
            shutil.copy(tokenizers / "t5" / "spiece.model", directory)
            return T5Tokenizer.from_pretrained(directory)
    return bart_tokenizer_from_files(tokenizers / "gpt2" / "vocab.json", tokenizers / "gpt2" / "merges.txt")


def seq2seq_model(
    family: str, widths: dict[str, Any], tokenizer: Any, method: tuple[str, dict] | None
) -> Any:
    """A random ``family`` model (bart, led, t5) at ``widths`` on the current default device, converted to
    ``method`` (its name and options) when given."""
    from transformers import AutoModelForSeq2SeqLM, BartConfig, LEDConfig, T5Config

    from synopsis.models.seq2seq import convert_seq2seq

    ids = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id}
    if family == "t5":
        config = T5Config(
            vocab_size=len(tokenizer), decoder_start_token_id=tokenizer.pad_token_id, **ids, **widths
        )
    else:
        ids.update(bos_token_id=tokenizer.bos_token_id, decoder_start_token_id=tokenizer.eos_token_id)
        config = {"bart": BartConfig, "led": LEDConfig}[family](vocab_size=len(tokenizer), **ids, **widths)
    model = AutoModelForSeq2SeqLM.from_config(config)
    if method is not None:
        model = convert_seq2seq(method[0], model, tokenizer, **method[1])
    return model


def seq2seq_batch(model: Any, tokenizer: Any, batch: int, source: int, target: int, device: Any) -> dict:
    """A training batch of ``batch`` synthetic documents cut to ``source`` / ``target`` tokens."""
    from synopsis.models.inputs import Seq2SeqInputs

    inputs = Seq2SeqInputs(model.config, tokenizer, max_source_length=source, max_target_length=target)
    docs = documents(batch, source // 2)  # about two tokens a word: cut to ``source``
    summaries = [" ".join(d.sentences[0].text for _ in range(max(1, target // 12))) for d in docs]
    record = inputs.collate(inputs.encode_sources(docs), inputs.encode_targets(summaries))
    return inputs.model_inputs(record, device)


# ------------------------------------------------------------------------------------------- measuring
def _sync(device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_peak(device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _peak(device: Any) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def train_steps(
    make: Callable[[], tuple[Any, Callable[[], torch.Tensor]]], device: Any, precision: str,
    steps: int = 2, checkpointing: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """``steps`` AdamW steps of the model ``make()`` builds (with its loss closure) through the trainers'
    precision path; the loss, seconds a step and the peak memory, or the error in one line."""
    _reset_peak(device)
    try:
        with torch.device(device):
            model, compute_loss = make()
        model.to(device).train()
        if checkpointing:
            from synopsis.models.seq2seq import enable_gradient_checkpointing

            enable_gradient_checkpointing(model)
        dist = Distributed.single(device)
        dist.precision.set(precision)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        seconds, values = [], []
        for step in range(steps):
            _sync(device)
            started = time.perf_counter()
            optimizer.zero_grad(set_to_none=True)
            result = dist.backward(
                model, [(None, False)], count=lambda _: 1, loss=lambda _: compute_loss(), step=step
            )
            dist.clip_grad_norm_(model.parameters(), 1.0, optimizer)
            dist.precision.step(optimizer)
            _sync(device)
            seconds.append(time.perf_counter() - started)
            values.append(result.mean)
        out = {
            "ok": all(math.isfinite(v) for v in values),
            "loss": values[-1],
            "seconds_per_step": seconds[-1],
        }
    except (RuntimeError, ValueError, torch.OutOfMemoryError) as err:
        out = {"ok": False, "error": " ".join(str(err).split())[:300]}
        if device.type == "cpu" and precision == "fp16" and "LSTM" in str(err):
            out["expected"] = "the CPU (oneDNN) has no fp16 LSTM kernel; fp16 training is for GPUs"
    out["peak_bytes"] = _peak(device)
    return out


def pointer_generator_loss(vocab: int, embedding: int, hidden: int, source: int, target: int, batch: int):  # noqa: ANN201
    def make() -> tuple[Any, Callable[[], torch.Tensor]]:
        from synopsis.models.pointer_generator import PointerGenerator, PointerGeneratorConfig

        model = PointerGenerator(PointerGeneratorConfig(
            vocab_size=vocab, embedding_dim=embedding, hidden_dim=hidden, coverage=True))  # fmt: skip
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(5, vocab, (batch, source), generator=generator).to(model.embedding.weight.device)
        labels = torch.randint(5, vocab, (batch, target), generator=generator).to(ids.device)
        decoder_ids = torch.cat([torch.full_like(labels[:, :1], 2), labels[:, :-1]], dim=1)
        return model, lambda: model(ids, decoder_ids, labels, ids, 0).loss

    return make


def domain_lm_loss(variant: str, vocab: int, embedding: int, hidden: int, bptt: int, batch: int):  # noqa: ANN201
    def make() -> tuple[Any, Callable[[], torch.Tensor]]:
        from synopsis.models.domain_lm import DomainLM, DomainLMConfig

        slots = ["style=spoken", "style=written", "topic=public", "topic=everyday"]
        model = DomainLM(DomainLMConfig(vocab_size=vocab, embedding_dim=embedding, hidden_dim=hidden,
                                        variant=variant, attribute_slots=slots))  # fmt: skip
        device = model.output_weight.device
        generator = torch.Generator().manual_seed(0)
        ids = torch.randint(0, vocab, (batch, bptt + 1), generator=generator).to(device)
        mask = (torch.rand(batch, len(slots), generator=generator) < 0.5).float().to(device)

        def loss() -> torch.Tensor:
            logits, _ = model(ids[:, :-1], mask)
            return torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())

        return model, loss

    return make


def seq2seq_loss(
    family: str, widths: dict, method: tuple | None, sizes: tuple[int, int, int], tokenizers: Path
):  # noqa: ANN201
    def make() -> tuple[Any, Callable[[], torch.Tensor]]:
        tokenizer = tokenizer_for(family, tokenizers)
        model = seq2seq_model(family, widths, tokenizer, method)
        batch, source, target = sizes
        fields = seq2seq_batch(model, tokenizer, batch, source, target, torch.get_default_device())
        return model, lambda: model(**fields).loss

    return make


# ------------------------------------------------------------------------------------------------ sizes
def sizes(smoke: bool) -> dict[str, Any]:
    """Every configuration of the check, tiny with ``smoke``."""
    small = dict(d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
                 decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64)  # fmt: skip
    t5 = dict(d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=2, num_heads=4)
    if not smoke:
        small.update(d_model=512, encoder_layers=4, decoder_layers=4, encoder_ffn_dim=2048,
                     decoder_ffn_dim=2048,
                     encoder_attention_heads=8, decoder_attention_heads=8)  # fmt: skip
        t5.update(d_model=512, d_kv=64, d_ff=2048, num_layers=4, num_decoder_layers=4, num_heads=8)
    led = dict(small, attention_window=[16 if smoke else 256] * small["encoder_layers"],
               max_encoder_position_embeddings=4096, max_decoder_position_embeddings=1024)  # fmt: skip
    bart_large = dict(d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
                      decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096)  # fmt: skip
    hie = ("hie-bart", {"word_heads": 2 if smoke else 6, "sentence_start_token": "<s>"})
    hibrids = ("hibrids", {"encoder": True, "decoder": True, "selected": False})
    step = (2, 64, 16) if smoke else (8, 512, 128)
    long = (1, 128, 16) if smoke else (2, 4096, 256)
    pg = (2000, 16, 32, 50, 10, 2) if smoke else (50004, 128, 256, 400, 100, 16)
    lm = (2000, 16, 16, 8, 4) if smoke else (20000, 200, 200, 35, 64)
    trainers = [
        ("seq2seq BART", "bart", small, None, step),
        ("seq2seq Hie-BART", "bart", small, hie, step),
        ("seq2seq HIBRIDS-BART", "bart", small, hibrids, step),
        ("seq2seq HIBRIDS-LED", "led", led, hibrids, long),
        ("seq2seq InstructSum-T5", "t5", t5, ("instructsum", {}), step),
    ]
    big = dict(bart_large, max_position_embeddings=1024)
    led_default = {}  # LEDConfig's defaults: LED-large widths, a 512-token window, 16,384 positions
    hie14 = ("hie-bart", {"word_heads": 14, "sentence_start_token": "<s>"})
    plans = [  # name, family, widths, method, (batch, source, target), precision, checkpointing
        ("hie-bart fp32", "bart", big, hie14, (8, 1024, 1024), "fp32", False),
        ("hie-bart bf16 ckpt", "bart", big, hie14, (8, 1024, 1024), "bf16", True),
        ("hibrids-led bf16 ckpt", "led", led_default, hibrids, (4, 16384, 512), "bf16", True),
    ]
    if smoke:
        plans = [("bart fp32 (tiny)", "bart", small, None, step, "fp32", False)]
    return {"trainers": trainers, "pg": pg, "lm": lm, "plans": plans,
            "decoding_model": small if smoke else big, "decode_batches": (1, 4) if smoke else (1, 32),
            "documents": 4 if smoke else 64, "words": 60 if smoke else 600}  # fmt: skip


# ----------------------------------------------------------------------------------------------- parts
def check_trainers(device: Any, config: dict, tokenizers: Path) -> list[dict]:
    rows = []
    makers: list[tuple[str, Callable]] = [
        (name, seq2seq_loss(family, widths, method, step, tokenizers))
        for name, family, widths, method, step in config["trainers"]
    ]
    makers.append(("pointer-generator (coverage)", pointer_generator_loss(*config["pg"])))
    makers += [(f"domain LM {v}", domain_lm_loss(v, *config["lm"])) for v in ("baseline", "in", "in_out")]
    for name, make in makers:
        for precision in PRECISIONS:
            result = train_steps(make, device, precision)
            rows.append({"trainer": name, "precision": precision, **result})
            print(f"train {name} {precision}: {result}", file=sys.stderr)
    return rows


def check_plans(device: Any, config: dict, tokenizers: Path) -> list[dict]:
    from synopsis.training.memory import seq2seq_plan

    rows = []
    for name, family, widths, method, (batch, source, target), precision, checkpointing in config["plans"]:
        with torch.device("meta"):
            model = seq2seq_model(family, widths, tokenizer_for(family, tokenizers), method)
        plan = seq2seq_plan(
            model.config, model=name, source=source, target=target, global_batch=batch, largest_pass=batch,
            devices=1, precision=precision, checkpointing=checkpointing, device_memory_gb=None,
            parameters=sum(p.numel() for p in model.parameters()), device_type="cuda",
        )  # fmt: skip
        row = {"configuration": name, "plan_bytes": plan.allocated_bytes, "attention": plan.attention,
               "issue_measured_bytes": ISSUE_MEASURED.get(name)}  # fmt: skip
        if device.type == "cuda":
            make = seq2seq_loss(family, widths, method, (batch, source, target), tokenizers)
            result = train_steps(make, device, precision, checkpointing=checkpointing)
            row.update(measured=result)
            if result.get("peak_bytes"):
                row["plan_over_measured"] = plan.allocated_bytes / result["peak_bytes"]
        rows.append(row)
        print(f"plan {row}", file=sys.stderr)
    return rows


def _time(call: Callable[[], Any], device: Any) -> float:
    _sync(device)
    started = time.perf_counter()
    call()
    _sync(device)
    return time.perf_counter() - started


def check_decoding(device: Any, config: dict, tokenizers: Path) -> list[dict]:
    """Documents/s of summarize (and of HF generate on the same inputs) per model and batch size."""
    from synopsis.config import DecodingOptions
    from synopsis.summarizers import load_summarizer
    from synopsis.summarizers.seq2seq import Seq2SeqSummarizer

    options = {"num_beams": 4, "min_length": 10, "max_length": 48, "no_repeat_ngram_size": 3}
    docs = documents(config["documents"], config["words"])
    tokenizer = tokenizer_for("bart", tokenizers)
    torch.manual_seed(0)
    with torch.device(device):
        random_bart = seq2seq_model("bart", config["decoding_model"], tokenizer, None).eval()
    models = {
        "pointer-generator (bundled)": load_summarizer("pointer-generator", device=device),
        "BART (random, bart-large width)": Seq2SeqSummarizer.from_model(random_bart, tokenizer),
    }
    decoding = DecodingOptions(**options)
    rows = []
    for name, summarizer in models.items():
        for batch in config["decode_batches"]:
            count = min(len(docs), max(batch, 8 if batch == 1 else 2 * batch))
            chunks = [docs[i : i + batch] for i in range(0, count, batch)]
            summarizer.summarize(chunks[0][:1], decoding=decoding)  # warm-up: kernels, allocator
            _reset_peak(device)
            ours = _time(
                lambda s=summarizer, c=chunks: [s.summarize(chunk, decoding=decoding) for chunk in c], device
            )
            row = {"model": name, "batch": batch, "documents": count, "documents_per_s": count / ours,
                   "peak_bytes": _peak(device)}  # fmt: skip
            if isinstance(summarizer, Seq2SeqSummarizer):  # the same inputs straight into generate()
                inputs = summarizer.inputs
                fields = [
                    inputs.model_inputs(inputs.collate(inputs.encode_sources(c)), device) for c in chunks
                ]

                def generate(s: Any = summarizer, f: list = fields) -> None:
                    with torch.inference_mode():
                        for batch_fields in f:
                            s.model.generate(**batch_fields, **s.decoder.settings(decoding))

                theirs = _time(generate, device)
                row.update(generate_documents_per_s=count / theirs, overhead=ours / theirs)
            rows.append({"device": str(device), **row})
            print(f"decode {rows[-1]}", file=sys.stderr)
    return rows


def device_facts(device: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"device": str(device), "torch": torch.__version__}
    if device.type == "cuda":
        torch.zeros(1, device=device)  # make the context
        free, total = torch.cuda.mem_get_info(device)
        facts.update(name=torch.cuda.get_device_name(device), cuda=torch.version.cuda, memory_bytes=total,
                     context_bytes=total - free - torch.cuda.memory_reserved(device))  # fmt: skip
    else:
        facts["name"] = "CPU"
    return facts


# ---------------------------------------------------------------------------------------------- report
def _gb(value: Any) -> str:
    return "-" if value is None else f"{value / GB:.2f}"


def markdown(results: dict[str, Any]) -> str:
    facts = results["facts"]
    lines = [
        f"# GPU check ({'smoke, ' if results['smoke'] else ''}{facts['name']})", "",
        f"`python benchmarks/gpu_check.py{' --smoke' if results['smoke'] else ''}` on {facts['name']} "
        f"({facts['device']}; torch {facts['torch']}); {results['seconds']:.0f} s in all. "
        "GB = 10^9 bytes.", "",
        "## Trainers: two optimizer steps", "",
        "| trainer | precision | ok | loss | s / step | peak GB | error |", "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for r in results["trainers"]:
        loss = f"{r['loss']:.3f}" if "loss" in r else "-"
        step = f"{r['seconds_per_step']:.3f}" if "seconds_per_step" in r else "-"
        ok = "yes" if r["ok"] else "no (expected)" if r.get("expected") else "NO"
        error = r.get("expected") or r.get("error", "")
        lines.append(
            f"| {r['trainer']} | {r['precision']} | {ok} | {loss} | {step} | {_gb(r['peak_bytes'])} "
            f"| {error} |"
        )
    lines += ["", "## Memory plans against `torch.cuda.max_memory_allocated()`", "",
              f"CUDA context measured: {_gb(facts.get('context_bytes'))} GB.", "",
              "| configuration | plan GB | measured GB | plan / measured | issue's H100 GB | attention |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for r in results["plans"]:
        measured = (r.get("measured") or {}).get("peak_bytes")
        ratio = f"{r['plan_over_measured']:.2f}" if "plan_over_measured" in r else "-"
        lines.append(f"| {r['configuration']} | {_gb(r['plan_bytes'])} | {_gb(measured)} | {ratio} | "
                     f"{_gb(r['issue_measured_bytes'])} | {r['attention']} |")  # fmt: skip
    lines += ["", "## Decoding (summarize path) beside Hugging Face `generate`", "",
              "| device | model | batch | documents | docs/s | generate docs/s | overhead | peak GB |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results["decoding"]:
        theirs = f"{r['generate_documents_per_s']:.2f}" if "overhead" in r else "-"
        overhead = f"{r['overhead']:.2f}x" if "overhead" in r else "-"
        lines.append(f"| {r['device']} | {r['model']} | {r['batch']} | {r['documents']} | "
                     f"{r['documents_per_s']:.2f} | {theirs} | {overhead} | "
                     f"{_gb(r['peak_bytes'])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def run(smoke: bool, tokenizers: Path, device_spec: str = "auto") -> dict[str, Any]:
    device = torch.device("cpu") if smoke else resolve_device(device_spec)
    config = sizes(smoke)
    started = time.perf_counter()
    results: dict[str, Any] = {"smoke": smoke, "facts": device_facts(device)}
    # the random inputs are far from any model's training data: its warnings would flood the output
    logging.getLogger("synopsis").setLevel(logging.ERROR)
    with compute_device(str(device)):
        results["trainers"] = check_trainers(device, config, tokenizers)
        results["plans"] = check_plans(device, config, tokenizers)
        results["decoding"] = check_decoding(device, config, tokenizers)
        if device.type == "cuda":  # the same decoding on the CPU, for the ratio
            cpu = {**config, "documents": 32, "decode_batches": (1, 32)}
            results["decoding"] += check_decoding(torch.device("cpu"), cpu, tokenizers)
    results["seconds"] = time.perf_counter() - started
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (CI)")
    parser.add_argument("--device", default="auto", help="the GPU to check (auto, cuda, cuda:N)")
    parser.add_argument("--tokenizers", type=Path, default=ROOT.parent / "shared" / "data" / "tokenizers")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "gpu_check.json")
    parser.add_argument("--markdown", type=Path, default=ROOT / "docs" / "results" / "gpu.md")
    args = parser.parse_args(argv)
    results = run(args.smoke, args.tokenizers, args.device)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(markdown(results), encoding="utf-8")
    failed = [
        f"{r['trainer']} {r['precision']}" for r in results["trainers"] if not (r["ok"] or r.get("expected"))
    ]
    print(f"{results['seconds']:.0f} s; failed: {', '.join(failed) or 'none'}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
