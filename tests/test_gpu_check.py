"""``benchmarks/gpu_check.py --smoke``: every part of the GPU check runs on the CPU with tiny sizes, well
under a minute, and writes its JSON and Markdown (the GPU run itself: docs/results/gpu.md)."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _gpu_check():  # noqa: ANN202 - the benchmark script as a module
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_runs_every_part_on_the_cpu(shared_data: Path, tmp_path: Path) -> None:
    out, table = tmp_path / "gpu.json", tmp_path / "gpu.md"
    started = time.perf_counter()
    tokenizers = str(shared_data / "tokenizers")
    args = ["--smoke", "--tokenizers", tokenizers, "--json", str(out), "--markdown", str(table)]
    code = _gpu_check().main(args)
    assert time.perf_counter() - started < 60
    assert code == 0
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["smoke"] and results["facts"]["name"] == "CPU"
    trainers = {(r["trainer"], r["precision"]) for r in results["trainers"]}
    names = {name for name, _ in trainers}
    assert {"seq2seq HIBRIDS-LED", "pointer-generator (coverage)", "domain LM in_out"} <= names
    assert len(trainers) == 3 * len(names)  # fp32, bf16, fp16 each
    # every step finished with a finite loss, but for the CPU's missing fp16 LSTM kernel
    for row in results["trainers"]:
        assert row["ok"] or (row["precision"] == "fp16" and row.get("expected")), row
    assert all(r["ok"] for r in results["trainers"] if r["trainer"] == "domain LM in_out")
    assert results["plans"] and all(r["plan_bytes"] > 0 for r in results["plans"])
    decoding = results["decoding"]
    models = {"pointer-generator (bundled)", "BART (random, bart-large width)"}
    assert {r["model"] for r in decoding} == models
    assert all(r["overhead"] > 0 for r in decoding if r["model"].startswith("BART"))
    text = table.read_text(encoding="utf-8")
    for heading in ("# GPU check (smoke, CPU)", "## Trainers", "## Memory plans", "## Decoding"):
        assert heading in text
