"""Mixed precision (``precision: fp32|bf16|fp16``) in every trainer, and gradient checkpointing.

bf16 runs on CPU: each trainer's first steps in bf16 give losses close to fp32's (bf16 keeps 8 bits of
mantissa, about 2-3 significant digits, so the tolerance is a few 1e-2 relative) but not identical ones
(autocast did run), and the weights written stay fp32.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from synopsis.config import from_dict
from synopsis.errors import ConfigError
from synopsis.training.distributed import Distributed, resolve_precision

BF16_REL = 3e-2


def _close_but_not_equal(fp32: list[float], bf16: list[float]) -> None:
    assert len(fp32) == len(bf16) > 1
    assert bf16 == pytest.approx(fp32, rel=BF16_REL)
    assert bf16 != fp32  # autocast ran: bf16 rounding shows in the losses


# ------------------------------------------------------------------------------------------ the switch
def test_precision_defaults_to_the_launchers_and_is_checked(monkeypatch) -> None:
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    assert resolve_precision(None) == "fp32"
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")  # accelerate launch --mixed_precision bf16
    assert resolve_precision(None) == "bf16"
    assert resolve_precision("fp32") == "fp32"  # the config wins
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "fp8")
    with pytest.raises(ConfigError, match="ACCELERATE_MIXED_PRECISION=fp8"):
        resolve_precision(None)
    with pytest.raises(ConfigError, match="precision must be one of fp32, bf16, fp16, got 'half'"):
        resolve_precision("half")


def test_unsupported_launcher_flags_are_one_line_errors(monkeypatch) -> None:
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    with pytest.raises(ConfigError, match="--use_fsdp is not supported"):
        Distributed.launch()
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4")
    with pytest.raises(ConfigError, match="--gradient_accumulation_steps 4 is not used"):
        Distributed.launch()


def test_config_keys_are_checked() -> None:
    from synopsis.training.language_model import LMTrainConfig
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    with pytest.raises(ValueError, match="precision must be one of"):
        Seq2SeqTrainConfig(model="m", output_dir="o", train_path="t", precision="fp64")
    with pytest.raises(ConfigError, match="precision must be one of"):
        from_dict(PointerGeneratorTrainConfig, {"precision": "int8"})
    with pytest.raises(ValueError, match="training.precision must be one of"):
        LMTrainConfig(precision="x")


def test_fp16_scales_the_loss_skips_an_overflowing_step_and_saves_the_scaler() -> None:
    dist = Distributed.single()
    assert dist.precision.set("fp16") == "fp16"
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    batch = torch.full((2, 4), 1e2)  # a finite loss whose fp16 gradient, times the scale 2**16, overflows
    dist.backward(model, [(batch, False)], count=lambda b: 2, loss=lambda b: model(b).square().mean(), step=0)
    dist.clip_grad_norm_(model.parameters(), 1.0, optimizer)
    dist.precision.step(optimizer)
    assert torch.equal(model.weight, before)  # skipped
    state = dist.precision.state()["grad_scaler"]
    assert state["scale"] == 2.0**15  # halved
    restored = Distributed.single()
    restored.precision.set("fp16")
    restored.precision.restore({"grad_scaler": state})
    assert restored.precision.scaler.get_scale() == 2.0**15
    batch = torch.full((2, 4), 1e-2)  # small gradients: finite at the halved scale too
    optimizer.zero_grad()
    dist.backward(model, [(batch, False)], count=lambda b: 2, loss=lambda b: model(b).square().mean(), step=1)
    dist.precision.step(optimizer)
    assert not torch.equal(model.weight, before) and model.weight.dtype == torch.float32


# ------------------------------------------------------------------------------------------ trainers
def test_seq2seq_bf16_losses_close_to_fp32_and_fp32_checkpoints(shared_data: Path, tmp_path: Path) -> None:
    from helpers.tiny_models import save_tiny_bart

    from synopsis.data.example import write_examples
    from synopsis.data.readers import read_corpus
    from synopsis.training.seq2seq import Seq2SeqTrainConfig, Seq2SeqTrainer

    bart = save_tiny_bart(tmp_path / "bart", shared_data / "tokenizers", dropout=0.0)
    examples = read_corpus("scitldr", shared_data / "scitldr", split="dev")
    data = tmp_path / "train.jsonl"
    write_examples([e for _, e in zip(range(8), examples, strict=False)], data)
    losses = {}
    for precision in ("fp32", "bf16"):
        config = Seq2SeqTrainConfig(
            model=str(bart),
            output_dir=str(tmp_path / precision),
            train_path=str(data),
            max_dev_examples=2,
            max_source_length=48,
            max_target_length=12,
            batch_size=4,
            learning_rate=1e-3,
            max_steps=3,
            eval_every=1,
            eval_max_length=4,
            patience=0,
            precision=precision,
            gradient_checkpointing=precision == "bf16",  # recomputed under the same autocast
        )
        trainer = Seq2SeqTrainer(config, show_progress=False, distributed=Distributed.single())
        assert trainer.model.model.encoder.layers[0].gradient_checkpointing == (precision == "bf16")
        result = trainer.train()
        losses[precision] = [loss for _, loss in result.history["train_loss"]]
        saved = load_file(str(tmp_path / precision / "best" / "model.safetensors"))
        assert {tensor.dtype for tensor in saved.values()} == {torch.float32}
    _close_but_not_equal(losses["fp32"], losses["bf16"])


@pytest.mark.parametrize("coverage", [False, True])
def test_pointer_generator_bf16_losses_close_to_fp32(
    shared_data: Path, tmp_path: Path, coverage: bool
) -> None:
    from synopsis.data.example import write_examples
    from synopsis.data.readers import read_corpus
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig, Trainer

    corpus = tmp_path / "scitldr"
    for split, count in (("train", 16), ("dev", 4)):
        examples = read_corpus("scitldr", shared_data / "scitldr", split=split)
        write_examples([e for _, e in zip(range(count), examples, strict=False)], corpus / f"{split}.jsonl")
    losses = {}
    for precision in ("fp32", "bf16"):
        config = from_dict(
            PointerGeneratorTrainConfig,
            {
                "data": {"corpus": "jsonl", "path": str(corpus), "max_source_tokens": 48},
                "vocab": {"max_size": 300},
                "model": {"embedding_dim": 12, "hidden_dim": 16},
                "optim": {"batch_size": 4},
                "schedule": {"max_steps": 4, "eval_every": 4, "save_every": 4, "coverage_steps": 0},
                "precision": precision,
            },
        )
        trainer = Trainer(config, tmp_path / precision, progress=False, distributed=Distributed.single())
        trainer._prepare()
        # With coverage the custom attention's backward gets fp32 coverage beside bf16 gradients.
        trainer.model.config.coverage = coverage
        batches = trainer._batches()
        losses[precision] = [trainer.train_step(next(batches)) for _ in range(4)]
        trainer._save(is_best=True)
        saved = load_file(str(tmp_path / precision / "model" / "model.safetensors"))
        assert {tensor.dtype for tensor in saved.values()} == {torch.float32}
    _close_but_not_equal(losses["fp32"], losses["bf16"])


@pytest.mark.parametrize("variant", ["in", "out", "in_out"])
def test_domain_lm_bf16_losses_close_to_fp32(variant: str) -> None:
    from helpers.domain_lm import setup_training

    from synopsis.models.domain_lm import DomainLM
    from synopsis.training.language_model import LMTrainConfig, train_language_model

    losses: dict[str, list[float]] = {}
    for precision in ("fp32", "bf16"):
        model, train, dev, _ = setup_training()
        # out and in_out batches mixing attribute combinations go through the grouped output layer.
        model = DomainLM(dataclasses.replace(model.config, variant=variant))
        record: list[float] = losses.setdefault(precision, [])
        config = LMTrainConfig(batch_size=4, bptt=8, max_epochs=1, learning_rate=0.5, precision=precision)
        train_language_model(model, train, dev, config, on_batch=lambda e, b, loss, r=record: r.append(loss))
        assert {p.dtype for p in model.parameters()} == {torch.float32}
    _close_but_not_equal(losses["fp32"], losses["bf16"])


# ------------------------------------------------------------------------------------------ summarize --dtype
def test_summarize_dtype_casts_a_hugging_face_model(shared_data: Path, tmp_path: Path, capsys) -> None:
    from helpers.tiny_models import save_tiny_bart

    from synopsis.cli import main
    from synopsis.summarizers.seq2seq import Seq2SeqSummarizer

    bart = save_tiny_bart(tmp_path / "bart", shared_data / "tokenizers")
    stored = Seq2SeqSummarizer.from_pretrained(bart)
    assert {p.dtype for p in stored.model.parameters()} == {torch.float32}
    half = Seq2SeqSummarizer.from_pretrained(bart, dtype="bf16")
    assert {p.dtype for p in half.model.parameters()} == {torch.bfloat16}
    document = tmp_path / "doc.txt"
    document.write_text("The cat sat on the mat. It purred all day long.", encoding="utf-8")
    out = tmp_path / "out.txt"
    assert main(["summarize", str(document), "--model", str(bart), "--dtype", "bf16", "--min-length", "4",
                 "--max-length", "6", "-o", str(out)]) == 0  # fmt: skip
    assert out.read_text(encoding="utf-8").strip()
    assert main(["summarize", str(document), "--model", str(bart), "--dtype", "fp64"]) == 2
    assert main(["summarize", str(document), "--method", "lead-3", "--dtype", "bf16"]) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '--dtype': must be one of fp32, bf16, fp16, got 'fp64'" in err
    assert "--dtype applies to Hugging Face (seq2seq) models, not to lead-3" in err


# ------------------------------------------------------------------------------- LSTMs on every x86-64 CPU
_LSTM_UNDER_CPU_AUTOCAST = """
import torch
from synopsis.models.domain_lm import DomainLM, DomainLMConfig
from synopsis.models.pointer_generator import PointerGenerator, PointerGeneratorConfig

torch.manual_seed(0)
pg = PointerGenerator(PointerGeneratorConfig(vocab_size=30, embedding_dim=6, hidden_dim=8, coverage=True))
ids = torch.randint(4, 30, (2, 7))
ids[1, 5:] = 0  # padding
with torch.autocast("cpu", dtype=torch.bfloat16):
    out = pg(ids, torch.randint(4, 30, (2, 4)), torch.randint(4, 30, (2, 4)), ids, 0)
out.loss.backward()
assert torch.isfinite(out.loss)
for variant in ("baseline", "in", "out", "in_out"):
    lm = DomainLM(DomainLMConfig(30, 6, 8, num_layers=2, variant=variant, attribute_slots=["a=x", "a=y"]))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits, _ = lm(torch.randint(0, 30, (3, 5)), torch.tensor([[1, 0], [0, 1], [1, 1]]))
    logits.float().sum().backward()
print("ok")
"""


def test_lstm_models_train_under_cpu_bf16_autocast_where_onednn_has_no_bf16_lstm(tmp_path: Path) -> None:
    """oneDNN has a bf16 LSTM kernel only on some x86-64 CPUs; elsewhere (AVX2, some AVX-512 CPUs) a bf16
    ``torch.lstm`` fails ("could not create a primitive descriptor for the LSTM forward propagation
    primitive"). Capping oneDNN at AVX2 reproduces such a CPU anywhere: both LSTM models still run forward and
    backward under CPU bf16 autocast, because their recurrences run in float32 there."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    result = subprocess.run(
        [sys.executable, "-c", _LSTM_UNDER_CPU_AUTOCAST], env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"
