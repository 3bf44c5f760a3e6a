"""``train seq2seq --dry-run``: the memory plan from config.json alone (``train pointer-generator`` and ``lm
train --dry-run``: from their configs), and the estimator against the peak memory measured on CPU.

Measurement (:func:`_measure`, one process per configuration): one warm-up step of a tiny model of the same
family first (so that the lazily loaded kernels and the allocator's own pools are already counted in the
baseline), then the baseline = the process's peak RSS so far (``VmHWM`` of ``/proc/self/status``: not
``getrusage``'s ``ru_maxrss``, which keeps the peak of the parent that forked the process, here pytest);
then the model is built with random weights and trains two AdamW steps (autocast as configured); measured =
peak RSS - baseline. The plan's total (weights, gradients, optimizer state, activations) must be within
25% of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synopsis.cli import main

ROOT = Path(__file__).resolve().parents[1]

SMALL = {
    "bart": dict(
        vocab_size=8000, d_model=256, encoder_layers=4, decoder_layers=4, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024, max_position_embeddings=1024,
    ),
    "led": dict(
        vocab_size=8000, d_model=256, encoder_layers=4, decoder_layers=4, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024, attention_window=[256] * 4,
        max_encoder_position_embeddings=4096, max_decoder_position_embeddings=256,
    ),
    "t5": dict(
        vocab_size=8000, d_model=256, d_kv=64, d_ff=1024, num_layers=4, num_decoder_layers=4, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    ),
}  # fmt: skip
CASES = [  # (family, source tokens, target tokens, batch, precision, gradient checkpointing)
    ("bart", 1024, 64, 4, "fp32", False),
    ("led", 2048, 64, 2, "fp32", True),
    ("led", 2048, 64, 2, "bf16", True),  # 1.29 before LED's band probabilities were counted at 2 bytes
    ("t5", 1024, 64, 2, "bf16", True),
]


def _config(family: str, settings: dict):  # noqa: ANN202
    from transformers import BartConfig, LEDConfig, T5Config

    return {"bart": BartConfig, "led": LEDConfig, "t5": T5Config}[family](**settings)


def _measured_in_a_new_process(spec: dict) -> int:
    """The measured bytes of ``spec`` (:func:`_measure` or :func:`_measure_recurrent`) in a fresh process,
    one thread, so that nothing this process allocated counts."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]),
    }
    done = subprocess.run(
        [sys.executable, __file__, json.dumps(spec)], capture_output=True, text=True, env=env, check=True
    )
    return int(done.stdout.strip().splitlines()[-1])


def _peak_rss_kib() -> int:
    """This process's peak resident set size since its exec (Linux: VmHWM)."""
    status = Path("/proc/self/status").read_text(encoding="utf-8")
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def _measure(spec: dict) -> int:
    """In a child process: bytes of peak RSS above the baseline over two training steps (module docstring)."""
    import torch
    from transformers import AutoModelForSeq2SeqLM

    from synopsis.models.seq2seq import enable_gradient_checkpointing

    torch.set_num_threads(1)
    family, s, t, b = spec["family"], spec["source"], spec["target"], spec["batch"]
    generator = torch.Generator().manual_seed(0)
    vocab = SMALL[family]["vocab_size"]
    ids, labels = torch.randint(4, vocab, (b, s), generator=generator), torch.randint(4, vocab, (b, t))
    dtype = torch.bfloat16 if spec["precision"] == "bf16" else None

    def steps(model: torch.nn.Module, inputs: dict, count: int) -> None:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        if family == "led":
            inputs["global_attention_mask"] = torch.zeros_like(inputs["input_ids"])
            inputs["global_attention_mask"][:, 0] = 1
        for _ in range(count):
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=dtype, enabled=dtype is not None):
                loss = model(**inputs).loss
            loss.backward()
            optimizer.step()

    tiny = {**SMALL[family], "vocab_size": 128, "d_model": 32}
    tiny.update({k: 64 for k in ("encoder_ffn_dim", "decoder_ffn_dim", "d_ff") if k in tiny})
    tiny.update({"d_kv": 8} if "d_kv" in tiny else {})
    steps(AutoModelForSeq2SeqLM.from_config(_config(family, tiny)).train(), {
        "input_ids": ids[:1, :512] % 128, "labels": labels[:1] % 128}, 1)  # fmt: skip
    baseline = _peak_rss_kib()
    model = AutoModelForSeq2SeqLM.from_config(_config(family, SMALL[family])).train()
    if spec["checkpointing"]:
        enable_gradient_checkpointing(model)
    steps(model, {"input_ids": ids, "labels": labels}, 2)
    return (_peak_rss_kib() - baseline) * 1024


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="peak RSS is read from /proc (Linux)")
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[4]}-ckpt{int(c[5])}")
def test_plan_is_within_25_percent_of_the_measured_peak(case: tuple) -> None:
    from synopsis.training.memory import seq2seq_plan

    family, source, target, batch, precision, checkpointing = case
    spec = dict(family=family, source=source, target=target, batch=batch, precision=precision,
                checkpointing=checkpointing)  # fmt: skip
    measured = _measured_in_a_new_process(spec)
    plan = seq2seq_plan(
        _config(family, SMALL[family]), model=family, source=source, target=target, global_batch=batch,
        largest_pass=batch, devices=1, precision=precision, checkpointing=checkpointing,
        device_memory_gb=None, device_type="cpu",
    )  # fmt: skip
    ratio = plan.memory_per_device_bytes / measured
    assert 0.75 <= ratio <= 1.25, (measured, plan.to_json())


def test_dry_run_plans_from_config_json_alone(shared_data: Path, tmp_path: Path, capsys) -> None:
    """No weights in the directory (they are never read) and no data: the plan still comes out, with the
    parameter count of the real model built from that config."""
    from helpers.tiny_models import save_tiny_bart
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    model_dir = save_tiny_bart(tmp_path / "bart", shared_data / "tokenizers")
    (model_dir / "model.safetensors").unlink()
    out = tmp_path / "plan.json"
    args = ["train", "seq2seq", "--model", str(model_dir), "--dry-run", "--json", str(out),
            "--set", "max_source_length=64", "--set", "device_memory_gb=1",
            "--set", "precision=bf16"]  # fmt: skip
    assert main(args) == 0
    plan = json.loads(out.read_text())
    expected = sum(
        p.numel()
        for p in AutoModelForSeq2SeqLM.from_config(AutoConfig.from_pretrained(model_dir)).parameters()
    )
    assert plan["parameters"] == expected and isinstance(plan["memory_per_device_bytes"], int)
    parts = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes")
    assert plan["memory_per_device_bytes"] == sum(plan[k] for k in parts)
    assert plan["weights_bytes"] == 6 * expected and plan["optimizer_bytes"] == 8 * expected  # bf16, AdamW
    assert plan["fits"] is True and plan["source_tokens"] == 64
    assert "fits in 1 GiB per device" in capsys.readouterr().out
    assert not (tmp_path / "-").exists()  # no run directory

    # gradient checkpointing lowers the activations; a longer input raises them
    def activations(*sets: str) -> int:
        main([*args, *[x for s in sets for x in ("--set", s)]])
        return json.loads(out.read_text())["activations_bytes"]

    assert (
        activations("gradient_checkpointing=true")
        < plan["activations_bytes"]
        < activations("max_source_length=128")
    )


# ----------------------------------------------------------------------------- the recurrent trainers
_SLOTS = ["style=spoken", "style=written", "topic=public", "topic=everyday"]
RECURRENT_CASES = [  # (family, vocabulary, embedding, hidden, source, target / BPTT, batch, precision)
    ("pg", 20000, 128, 256, 400, 100, 8, "fp32"),
    ("pg", 5000, 128, 128, 800, 50, 8, "fp32"),
    ("lm", 20000, 200, 200, 0, 35, 64, "fp32"),
]


def _recurrent_model(family: str, vocab: int, embedding: int, hidden: int):  # noqa: ANN202
    """The pointer-generator with coverage (Adagrad) or the in_out domain LM over 4 slots (SGD)."""
    import torch

    if family == "pg":
        from synopsis.models.pointer_generator import PointerGenerator, PointerGeneratorConfig

        config = PointerGeneratorConfig(
            vocab_size=vocab, embedding_dim=embedding, hidden_dim=hidden, coverage=True
        )
        model = PointerGenerator(config).train()
        return model, torch.optim.Adagrad(model.parameters(), lr=0.15, initial_accumulator_value=0.1)
    from synopsis.models.domain_lm import DomainLM, DomainLMConfig

    config = DomainLMConfig(
        vocab_size=vocab, embedding_dim=embedding, hidden_dim=hidden, variant="in_out", attribute_slots=_SLOTS
    )
    model = DomainLM(config).train()
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _measure_recurrent(spec: dict) -> int:
    """As :func:`_measure`, for the trainers' own step: the pointer-generator's teacher-forced loss with 5
    copied OOVs, the LM's summed cross-entropy over one BPTT window of rows from 3 attribute combinations."""
    import torch
    from torch.nn import functional as F

    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)

    def steps(vocab: int, embedding: int, hidden: int, s: int, t: int, b: int, count: int) -> None:
        model, optimizer = _recurrent_model(spec["family"], vocab, embedding, hidden)
        for _ in range(count):
            optimizer.zero_grad(set_to_none=True)
            if spec["family"] == "pg":
                ids = torch.randint(4, vocab, (b, s), generator=generator)
                extended = ids.clone()
                extended[:, :5] = vocab + torch.arange(5)
                labels = torch.randint(4, vocab + 5, (b, t), generator=generator)
                decoder_ids = torch.cat([torch.full((b, 1), 2), labels[:, :-1]], 1)
                loss = model(ids, decoder_ids, labels, extended, 5).loss
            else:
                ids = torch.randint(4, vocab, (b, t + 1), generator=generator)
                mask = torch.tensor([[1.0, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1]])[torch.arange(b) % 3]
                logits, _ = model(ids[:, :-1], mask)
                loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()) * t
            loss.backward()
            optimizer.step()

    sizes = [spec[k] for k in ("vocab", "embedding", "hidden", "source", "target", "batch")]
    steps(128, 16, 16, min(sizes[3], 64), min(sizes[4], 16), 1, 1)  # warm-up: kernels, allocator pools
    baseline = _peak_rss_kib()
    steps(*sizes, 2)
    return (_peak_rss_kib() - baseline) * 1024


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="peak RSS is read from /proc (Linux)")
@pytest.mark.parametrize("case", RECURRENT_CASES, ids=lambda c: f"{c[0]}-V{c[1]}-s{c[4]}-t{c[5]}")
def test_recurrent_plans_are_within_25_percent_of_the_measured_peak(case: tuple) -> None:
    import torch

    from synopsis.training.memory import (
        lstm_lm_activation_bytes,
        parameter_bytes,
        pointer_generator_activation_bytes,
    )

    family, vocab, embedding, hidden, source, target, batch, precision = case
    spec = dict(family=family, vocab=vocab, embedding=embedding, hidden=hidden, source=source, target=target,
                batch=batch, precision=precision)  # fmt: skip
    measured = _measured_in_a_new_process(spec)
    with torch.device("meta"):
        parameters = sum(
            p.numel() for p in _recurrent_model(family, vocab, embedding, hidden)[0].parameters()
        )
    if family == "pg":
        activations = pointer_generator_activation_bytes(
            vocab=vocab, embedding=embedding, hidden=hidden, source=source, target=target, batch=batch,
            precision=precision,
        )  # fmt: skip
    else:
        activations = lstm_lm_activation_bytes(
            vocab=vocab, embedding=embedding, hidden=hidden, layers=1, bptt=target, batch=batch,
            precision=precision, groups=3,
        )  # fmt: skip
    optimizer = "adagrad" if family == "pg" else "sgd"
    planned = sum(parameter_bytes(parameters, precision, optimizer)) + activations
    assert 0.75 <= planned / measured <= 1.25, (case, measured, planned)


def test_pointer_generator_dry_run_plans_from_the_config_alone(tmp_path: Path, capsys) -> None:
    """No data (the config's paths do not exist here) and no run directory: the plan, with the parameter
    count of the model the trainer builds over a vocabulary of vocab.max_size words, Adagrad's state."""
    from synopsis.models.pointer_generator import PointerGenerator, PointerGeneratorConfig

    out = tmp_path / "plan.json"
    args = ["train", "pointer-generator", "--config", str(ROOT / "configs" / "pointer_generator_cnndm.yaml"),
            "--dry-run", "--json", str(out), "--set", "precision=fp32"]  # fmt: skip
    assert main(args) == 0
    plan = json.loads(out.read_text())
    model = PointerGenerator(PointerGeneratorConfig(vocab_size=50_004, embedding_dim=128, hidden_dim=256))
    expected = sum(p.numel() for p in model.parameters())
    assert plan["parameters"] == expected and isinstance(plan["memory_per_device_bytes"], int)
    parts = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes")
    assert plan["memory_per_device_bytes"] == sum(plan[k] for k in parts)
    assert plan["optimizer_bytes"] == 4 * expected and plan["weights_bytes"] == 4 * expected
    assert (plan["micro_batch"], plan["source_tokens"], plan["target_tokens"]) == (16, 400, 100)
    assert plan["fits"] is True and "fits in 16 GiB per device" in capsys.readouterr().out

    def activations(*sets: str) -> int:
        assert main([*args, *[x for s in sets for x in ("--set", s)]]) == 0
        return json.loads(out.read_text())["activations_bytes"]

    # two devices halve the per-device batch; a longer target and a larger vocabulary cost more
    assert activations("devices=2") < plan["activations_bytes"] < activations("data.max_target_tokens=120")
    assert plan["activations_bytes"] < activations("vocab.max_size=60000")
    assert main(["train", "pointer-generator", "--dry-run"]) == 2  # no --config: a one-line error
    assert "--dry-run needs --config" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- lm train --dry-run
LM_COMBINATIONS = [("spoken", "public"), ("written", "everyday"), ("spoken", "everyday")]


def _lm_corpus(path: Path, vocab: int) -> Path:
    """3 domains (attribute combinations over the 4 values of :data:`_SLOTS`), 10 documents each, every
    document holding all ``vocab`` words: the training part's vocabulary is all of them."""
    import random

    rng = random.Random(0)
    words = [f"w{i}" for i in range(vocab)]
    with open(path, "w", encoding="utf-8") as handle:
        for style, topic in LM_COMBINATIONS:
            for d in range(10):
                rng.shuffle(words)
                text = "\n".join(" ".join(words[i : i + 20]) for i in range(0, vocab, 20))
                record = {
                    "id": f"{style}-{topic}-{d}",
                    "text": text,
                    "attributes": {"style": style, "topic": topic},
                }
                handle.write(json.dumps(record) + "\n")
    return path


def _lm_dry_run(corpus: Path, out: Path, *sets: str) -> dict:
    args = ["lm", "train", "--corpus", str(corpus), "--variant", "in_out", "--dry-run", "--json", str(out),
            "--set", "min_count=1", *[x for s in sets for x in ("--set", s)]]  # fmt: skip
    assert main(args) == 0
    return json.loads(out.read_text())


def test_lm_dry_run_plans_the_model_the_trainer_builds(tmp_path: Path, capsys) -> None:
    """``lm train --dry-run``: no run directory needed or written; the parameters of the in_out model over
    the corpus's vocabulary, SGD (no optimizer state), the configured batch shared by the devices."""
    import re

    import torch

    from synopsis.models.domain_lm import DomainLM, DomainLMConfig

    corpus = _lm_corpus(tmp_path / "lm.jsonl", 500)
    plan = _lm_dry_run(corpus, tmp_path / "plan.json", "training.batch_size=8", "training.bptt=12",
                       "device_memory_gb=1")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lm.jsonl", "plan.json"]
    vocab = int(re.search(r"vocabulary ([\d,]+)", plan["model"]).group(1).replace(",", ""))
    assert 500 < vocab < 510  # the corpus's words and the vocabulary's specials
    config = DomainLMConfig(vocab_size=vocab, variant="in_out", attribute_slots=_SLOTS)
    with torch.device("meta"):
        expected = sum(p.numel() for p in DomainLM(config).parameters())
    assert plan["parameters"] == expected and isinstance(plan["memory_per_device_bytes"], int)
    parts = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes")
    assert plan["memory_per_device_bytes"] == sum(plan[k] for k in parts)
    assert plan["optimizer_bytes"] == 0 and plan["weights_bytes"] == 4 * expected
    assert (plan["micro_batch"], plan["target_tokens"], plan["fits"]) == (8, 12, True)
    assert "fits in 1 GiB per device" in capsys.readouterr().out
    halved = _lm_dry_run(corpus, tmp_path / "plan.json", "training.batch_size=8", "training.bptt=12",
                         "devices=2")  # fmt: skip
    assert halved["micro_batch"] == 4 and halved["activations_bytes"] < plan["activations_bytes"]
    assert halved["fits"] is None
    capsys.readouterr()
    assert main(["lm", "train", "--corpus", str(corpus)]) == 2  # a training run needs its directory
    assert "--output-dir is required (except with --dry-run)" in capsys.readouterr().err


LM_DRY_RUN_CASES = [  # (vocabulary, embedding, hidden, BPTT, batch)
    (8000, 200, 200, 35, 64),
    (5000, 100, 300, 16, 32),
]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="peak RSS is read from /proc (Linux)")
@pytest.mark.parametrize("case", LM_DRY_RUN_CASES, ids=lambda c: f"V{c[0]}-E{c[1]}-H{c[2]}-t{c[3]}-b{c[4]}")
def test_lm_dry_run_is_within_25_percent_of_the_measured_peak(case: tuple, tmp_path: Path) -> None:
    """The plan ``lm train --dry-run`` prints against one process's peak RSS over two SGD steps of the same
    model (:func:`_measure_recurrent`, as for the other trainers)."""
    import re

    vocab, embedding, hidden, bptt, batch = case
    corpus = _lm_corpus(tmp_path / "lm.jsonl", vocab - 4)
    plan = _lm_dry_run(corpus, tmp_path / "plan.json", f"model.embedding_dim={embedding}",
                       f"model.hidden_dim={hidden}", f"training.bptt={bptt}", f"training.batch_size={batch}",
                       "training.precision=fp32", "device_type=cpu")  # fmt: skip
    planned_vocab = int(re.search(r"vocabulary ([\d,]+)", plan["model"]).group(1).replace(",", ""))
    spec = dict(family="lm", vocab=planned_vocab, embedding=embedding, hidden=hidden, source=0, target=bptt,
                batch=batch, precision="fp32")  # fmt: skip
    measured = _measured_in_a_new_process(spec)
    print(f"\nlm dry-run {case}: planned {plan['memory_per_device_bytes']} measured {measured}")
    assert 0.75 <= plan["memory_per_device_bytes"] / measured <= 1.25, (case, measured, plan)


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    print(_measure_recurrent(spec) if spec["family"] in ("pg", "lm") else _measure(spec))
