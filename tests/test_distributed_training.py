"""Every trainer on two CPU processes (gloo), launched as users do (``torchrun ... synopsis train``,
``accelerate launch ... -m synopsis``), against the same config on one process: the same loss curve within
:data:`REL`, and a run stopped on one world size resumes on the other at the same step, with the same
losses and weights.

Tolerance: the two runs differ only in the order of floating-point sums (each process sums its share of a
batch, then the gradients are all-reduced), about 1e-7 relative per step; :data:`REL` = 1e-5 relative for
losses and :data:`ATOL` = 1e-5 absolute for weights leave room for that to accumulate over a few optimizer
steps. Dropout is 0 in all these runs: dropout masks come from each process's own RNG stream.

Select with ``-m distributed``; the launched runs are skipped (with the reason) where torchrun is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from synopsis.cli import main
from synopsis.config import from_dict
from synopsis.errors import ConfigError
from synopsis.training.distributed import Distributed, GlobalBatchSampler
from synopsis.training.pointer_generator import PointerGeneratorTrainConfig, Trainer
from synopsis.training.seq2seq import Seq2SeqTrainConfig, Seq2SeqTrainer, train_seq2seq

pytestmark = pytest.mark.distributed

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REL, ATOL = 1e-5, 1e-5


# ------------------------------------------------------------------------------------------ launching
def _launcher(name: str) -> str:
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        pytest.skip(f"{name} is not installed: the multi-process runs need it")
    return found


def _environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # `--no-python synopsis` finds this venv's script
        OMP_NUM_THREADS="1",
        HF_HOME=str(tmp_path / "hf_home"),  # no user `accelerate config` file changes the launch
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def torchrun(tmp_path: Path, *args: object) -> list[str]:
    launcher = [_launcher("torchrun"), "--standalone", "--nproc-per-node", "2", "--no-python", "synopsis"]
    return [*launcher, *map(str, args)]


def launched(command: list[str], tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(
        command, env=_environment(tmp_path), capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# ------------------------------------------------------------------------------------------ comparing
def assert_curves_match(two: dict[int, float], one: dict[int, float], steps: list[int]) -> float:
    """The two runs' losses agree within REL at every step; returns the largest relative difference."""
    assert steps and all(step in two and step in one for step in steps), (sorted(two), sorted(one), steps)
    worst = max(abs(two[s] - one[s]) / abs(one[s]) for s in steps)
    assert worst <= REL, {s: (two[s], one[s]) for s in steps}
    return worst


def assert_weights_match(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    worst = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    assert worst <= ATOL, worst
    return worst


def checkpoint_state(run: Path, step: int | None = None) -> dict:
    name = f"step-{step:08d}" if step is not None else (run / "checkpoints" / "latest").read_text().strip()
    return json.loads((run / "checkpoints" / name / "state.json").read_text())


# ------------------------------------------------------------------------------------------ the shared rules
def ranks(world_size: int) -> list[Distributed]:
    out = []
    for rank in range(world_size):
        out.append(Distributed(rank=rank, world_size=world_size))
    return out


@pytest.mark.parametrize(
    ("variable", "flag"),
    [("ACCELERATE_USE_FSDP", "--use_fsdp"), ("ACCELERATE_USE_DEEPSPEED", "--use_deepspeed")],
)
def test_fsdp_and_deepspeed_are_refused_with_the_reason(variable: str, flag: str, monkeypatch) -> None:
    """Not built: Accelerate runs FSDP and DeepSpeed on GPUs only (on CPU: DDP, or every process alone), so
    neither could be tested here; the one-line error says so and what to use instead."""
    monkeypatch.setenv(variable, "true")
    with pytest.raises(ConfigError) as error:
        Distributed.launch()
    message = str(error.value)
    assert "\n" not in message and f"accelerate launch {flag} is not supported" in message
    assert "Accelerate runs it on GPUs only" in message and "gradient_checkpointing: true" in message


def test_every_rank_gets_its_share_of_every_global_batch() -> None:
    batch = list(range(100, 107))  # 7 examples: not divisible by 2 or 3
    for world in (1, 2, 3):
        shares = [d.batches.shard(batch, micro_batch_size=2) for d in ranks(world)]
        assert len({len(parts) for parts in shares}) == 1  # the same number of passes everywhere
        real = sorted(i for parts in shares for p in parts if not p.filler for i in p.indices)
        assert real == batch and all(len(p.indices) <= 2 for parts in shares for p in parts)
    # fewer examples than processes (an epoch's short last batch): a filler keeps the passes aligned
    shares = [d.batches.shard([5], micro_batch_size=None) for d in ranks(2)]
    assert [[(p.indices, p.filler) for p in parts] for parts in shares] == [[([5], False)], [([5], True)]]
    with pytest.raises(ConfigError, match=r"optim.batch_size \(1\) is smaller than the number of processes"):
        ranks(2)[1].batches.require_size(1, "optim.batch_size")


def test_global_batch_order_resumes_from_any_position() -> None:
    def epoch(number: int) -> list[list[int]]:  # batches of 2, 2 and 1
        return [[number * 10 + i for i in range(start, min(start + 2, 5))] for start in range(0, 5, 2)]

    distributed = Distributed.single()
    straight = GlobalBatchSampler(distributed.batches, epoch, 0, 0, group=2)
    steps = [plan for plan, _ in zip(straight, range(6), strict=False)]
    position = steps[2]  # resume after the third step (it crossed into epoch 1)
    resumed = GlobalBatchSampler(distributed.batches, epoch, position.epoch, position.batch_in_epoch, group=2)
    again = [plan for plan, _ in zip(resumed, range(3), strict=False)]
    assert [p.parts for p in again] == [p.parts for p in steps[3:]]
    assert steps[0].parts[0].indices == [0, 1, 2, 3] and steps[1].parts[0].indices == [4, 10, 11]


# ------------------------------------------------------------------------------------------ pointer-generator
@pytest.fixture(scope="module")
def pg_corpus(shared_data: Path, tmp_path_factory) -> Path:
    from synopsis.data.example import write_examples
    from synopsis.data.readers import read_corpus

    folder = tmp_path_factory.mktemp("scitldr")
    for split, count in (("train", 20), ("dev", 3)):
        examples = read_corpus("scitldr", shared_data / "scitldr", split=split)
        write_examples([e for _, e in zip(range(count), examples, strict=False)], folder / f"{split}.jsonl")
    return folder


def pg_settings(corpus: Path) -> dict:
    return {
        "data": {"corpus": "jsonl", "path": str(corpus), "max_source_tokens": 40, "max_target_tokens": 10},
        "vocab": {"max_size": 300},
        "model": {"embedding_dim": 12, "hidden_dim": 16, "dropout": 0.0},
        "optim": {"batch_size": 5},  # 3 + 2 examples on two processes
        "schedule": {
            "max_steps": 2000,
            "eval_every": 1000,
            "save_every": 2,
            "log_every": 1,
            "coverage_steps": 0,
        },
    }


class RecordingTrainer(Trainer):
    """Records the (global) loss of every step."""

    def train_step(self, batch) -> float:  # noqa: ANN001
        loss = super().train_step(batch)
        self.losses[self.state["step"] + 1] = loss
        return loss


def pg_run(
    config: PointerGeneratorTrainConfig, out: Path, stop: int, resume: bool = False
) -> RecordingTrainer:
    trainer = RecordingTrainer(config, out, resume=resume, progress=False)
    trainer.losses = {}
    trainer.run(stop_at_step=stop)
    return trainer


def test_pointer_generator_two_processes_match_one_then_resume_on_one(
    pg_corpus: Path, tmp_path: Path
) -> None:
    """torchrun, 2 processes, stopped by SIGTERM after a few checkpoints; the main process says what it
    saved; its losses are the 1-process ones; the run then continues on 1 process exactly."""
    settings = pg_settings(pg_corpus)
    config_path = tmp_path / "pg.yaml"
    config_path.write_text(yaml.safe_dump(settings))
    run = tmp_path / "two"
    command = torchrun(tmp_path, "train", "pointer-generator", "-c", config_path, "-o", run, "--threads", "1")
    proc = subprocess.Popen(
        command, env=_environment(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    latest, deadline = run / "checkpoints" / "latest", time.monotonic() + 240
    while proc.poll() is None and time.monotonic() < deadline:
        if latest.exists() and int(latest.read_text().strip().split("-")[1]) >= 6:
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
    proc.send_signal(signal.SIGTERM)  # torchrun passes it on to both processes
    _, err = proc.communicate(timeout=120)
    said = [line for line in err.decode().splitlines() if line.startswith("terminated (SIGTERM): stopped at")]
    assert len(said) == 1 and "last checkpoint: " in said[0] and said[0].endswith("--resume"), err.decode()
    stopped = checkpoint_state(run)
    k = stopped["step"]
    assert len(stopped["rng_ranks"]) == 2  # each process's RNG states

    config = from_dict(PointerGeneratorTrainConfig, settings)
    one = pg_run(config, tmp_path / "one", stop=k + 4)  # the uninterrupted 1-process run
    two = {step: loss for step, loss in stopped["curves"]["train"]}
    figures = {"pg 1 vs 2 processes": assert_curves_match(two, one.losses, list(range(1, k + 1)))}

    resumed = pg_run(config, run, stop=k + 4, resume=True)  # 2 -> 1 process
    assert min(resumed.losses) == k + 1
    figures["pg resumed on 1"] = assert_curves_match(resumed.losses, one.losses, list(range(k + 1, k + 5)))
    figures["pg weights"] = assert_weights_match(resumed.model.state_dict(), one.model.state_dict())
    print(f"\nk={k} {figures}")


# ------------------------------------------------------------------------------------------ seq2seq
@pytest.fixture(scope="module")
def bart_dir(shared_data: Path, tmp_path_factory) -> Path:
    from helpers.tiny_models import save_tiny_bart

    return save_tiny_bart(
        tmp_path_factory.mktemp("bart"),
        shared_data / "tokenizers",
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )


@pytest.fixture(scope="module")
def s2s_corpus(shared_data: Path, tmp_path_factory) -> Path:
    from synopsis.data.example import write_examples
    from synopsis.data.readers import read_corpus

    path = tmp_path_factory.mktemp("s2s") / "train.jsonl"
    examples = read_corpus("scitldr", shared_data / "scitldr", split="train")
    write_examples([e for _, e in zip(range(10), examples, strict=False)], path)
    return path


S2S = {  # 10 pairs in batches of 4, 4, 2 per epoch; global batch 4 x 2: step 2 takes 2 + 4 across epochs.
    # One process runs 2 micro-batches a step, each of two processes 1 (gradient accumulation per world size).
    "batch_size": 4,
    "grad_accum_steps": 2,
    "max_steps": 3,
    "eval_every": 1,
    "learning_rate": 1e-3,
    "max_dev_examples": 2,
    "max_source_length": 48,
    "max_target_length": 12,
    "eval_max_length": 6,
    "all_references": False,
    "patience": 0,
}


def s2s_cli(model: Path, corpus: Path, out: Path, **extra: object) -> list[str]:
    settings = {**S2S, **extra}
    sets = [item for key, value in settings.items() for item in ("--set", f"{key}={json.dumps(value)}")]
    return ["train", "seq2seq", "--model", str(model), "--train", str(corpus), "-o", str(out), *sets]


def s2s_losses(run: Path) -> dict[int, float]:
    return {step: loss for step, loss in json.loads((run / "history.json").read_text())["train_loss"]}


def s2s_weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / f"step-{step:08d}" / "model.safetensors"))


def test_seq2seq_stopped_on_one_process_resumes_on_two(
    bart_dir: Path, s2s_corpus: Path, tmp_path: Path
) -> None:
    def config(out: Path) -> Seq2SeqTrainConfig:
        return Seq2SeqTrainConfig(model=str(bart_dir), output_dir=str(out), train_path=str(s2s_corpus), **S2S)

    one = train_seq2seq(config(tmp_path / "one"), show_progress=False)
    Seq2SeqTrainer(config(tmp_path / "part"), show_progress=False).train(stop_at_step=1)  # "killed" at 1
    launched(torchrun(tmp_path, *s2s_cli(bart_dir, s2s_corpus, tmp_path / "part"), "--resume"), tmp_path)
    history = json.loads((tmp_path / "part" / "history.json").read_text())
    assert [step for step, _ in history["train_loss"]] == [1, 2, 3]
    assert len(checkpoint_state(tmp_path / "part", 3)["rng_ranks"]) == 2  # steps 2 and 3 ran on 2 processes
    ones = {step: loss for step, loss in one.history["train_loss"]}
    worst = assert_curves_match(s2s_losses(tmp_path / "part"), ones, [2, 3])
    dev = {step: m["loss"] for step, m in history["dev"]}
    assert_curves_match(dev, {step: m["loss"] for step, m in one.history["dev"]}, [2, 3])
    weights = assert_weights_match(s2s_weights(tmp_path / "part", 3), s2s_weights(tmp_path / "one", 3))
    print(f"\nseq2seq 1 -> 2: loss {worst:.2e} weights {weights:.2e}")


def test_hie_bart_converted_under_accelerate_launch_matches_one_process(
    bart_dir: Path, s2s_corpus: Path, tmp_path: Path
) -> None:
    """``accelerate launch`` with its torchrun-style launcher (``--multi_gpu``; on a machine without GPUs
    our layer then asks for gloo on CPU), a structured method converted on the way (Hie-BART)."""
    convert = {"method": "hie-bart", "word_heads": 2}
    launcher = [_launcher("accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines",
                "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
                str(_free_port()), "-m", "synopsis"]  # fmt: skip
    launched([*launcher, *s2s_cli(bart_dir, s2s_corpus, tmp_path / "two", convert=convert)], tmp_path)
    one = Seq2SeqTrainConfig(
        model=str(bart_dir),
        output_dir=str(tmp_path / "one"),
        train_path=str(s2s_corpus),
        convert=convert,
        **S2S,
    )
    train_seq2seq(one, show_progress=False)
    saved = json.loads((tmp_path / "two" / "best" / "config.json").read_text())
    assert saved["model_type"] == "hie_bart"
    assert len(checkpoint_state(tmp_path / "two")["rng_ranks"]) == 2
    worst = assert_curves_match(s2s_losses(tmp_path / "two"), s2s_losses(tmp_path / "one"), [1, 2, 3])
    weights = assert_weights_match(s2s_weights(tmp_path / "two", 3), s2s_weights(tmp_path / "one", 3))
    print(f"\nhie-bart 1 vs 2: loss {worst:.2e} weights {weights:.2e}")


# ------------------------------------------------------------------------------------------ domain LM
def test_domain_lm_two_processes_match_one_then_resume_on_one(tmp_path: Path) -> None:
    """torchrun: the first epoch on 2 processes (5 rows of the stream: 3 + 2), the other two on 1."""
    from helpers.domain_lm import tiny_documents, write_jsonl

    write_jsonl(tiny_documents(lines_per_doc=6), tmp_path / "lm.jsonl")
    args = ["lm", "train", "--corpus", str(tmp_path / "lm.jsonl"), "--threads", "1", "--set",
            "training.batch_size=5", "--set", "training.bptt=8", "--set", "model.dropout=0"]  # fmt: skip
    one = tmp_path / "one"
    assert main([*args, "-o", str(one), "--max-epochs", "3"]) == 0
    run = tmp_path / "two_then_one"
    launched(torchrun(tmp_path, *args, "-o", run, "--max-epochs", "1"), tmp_path)
    assert len(checkpoint_state(run, 1)["rng_ranks"]) == 2
    figures = {"lm 1 vs 2 (epoch 1)": assert_lm_runs_match(run, one, [1])}
    assert main([*args, "-o", str(run), "--max-epochs", "3", "--resume"]) == 0
    figures["lm 2 -> 1 (epochs 2, 3)"] = assert_lm_runs_match(run, one, [1, 2, 3])
    weights = [load_file(str(r / "checkpoints" / "step-00000003" / "model.safetensors")) for r in (run, one)]
    figures["lm weights"] = assert_weights_match(*weights)
    print(f"\n{figures}")


def lm_history(run: Path) -> dict[str, dict[int, float]]:
    history = json.loads((run / "train_result.json").read_text())["history"]
    return {key: {h["epoch"]: h[key] for h in history} for key in ("train_perplexity", "dev_perplexity")}


def assert_lm_runs_match(run: Path, one: Path, epochs: list[int]) -> float:
    """Train and dev perplexity per epoch (dev perplexity: the weights after each epoch)."""
    a, b = lm_history(run), lm_history(one)
    return max(assert_curves_match(a[key], b[key], epochs) for key in a)
