"""Training, exact resume, the coverage phase, decoding and the CLI on tiny models with real SciTLDR data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from synopsis.cli import main
from synopsis.config import DecodingOptions, from_dict, to_dict
from synopsis.document import Document
from synopsis.errors import ConfigError, InputError
from synopsis.models.pointer_generator import PointerGenerator
from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer
from synopsis.training.pointer_generator import PointerGeneratorTrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory) -> Path:
    """The first 40 SciTLDR train and 4 dev papers, as our JSONL (read once, not per training run)."""
    from synopsis.data.example import write_examples
    from synopsis.data.readers import read_corpus

    folder = tmp_path_factory.mktemp("scitldr")
    for split, count in (("train", 40), ("dev", 4)):
        examples = read_corpus("scitldr", shared_data / "scitldr", split=split)
        write_examples([e for _, e in zip(range(count), examples, strict=False)], folder / f"{split}.jsonl")
    return folder


def tiny_config(corpus: Path, **schedule) -> PointerGeneratorTrainConfig:
    return from_dict(
        PointerGeneratorTrainConfig,
        {
            "data": {
                "corpus": "jsonl",
                "path": str(corpus),
                "max_source_tokens": 48,
                "max_target_tokens": 12,
            },
            "vocab": {"max_size": 300, "min_count": 1},
            "model": {"embedding_dim": 12, "hidden_dim": 16, "dropout": 0.3},  # dropout: RNG must resume too
            "optim": {"batch_size": 4},
            "schedule": {
                "max_steps": 8,
                "eval_every": 4,
                "save_every": 3,
                "coverage_steps": 3,
                "log_every": 2,
            }
            | schedule,
            "generation": {"min_length": 3, "max_length": 10, "max_source_tokens": 48},
        },
    )


class RecordingTrainer(Trainer):
    """Records the loss of every training step."""

    def train_step(self, batch) -> float:
        loss = super().train_step(batch)
        self.losses[self.state["step"] + 1] = loss
        return loss

    losses: dict[int, float]


def run(
    config: PointerGeneratorTrainConfig, out: Path, resume: bool = False, stop: int | None = None
) -> RecordingTrainer:
    trainer = RecordingTrainer(config, out, resume=resume, progress=False)
    trainer.losses = {}
    trainer.run(stop_at_step=stop)
    return trainer


def test_resume_after_a_kill_gives_identical_losses(corpus: Path, tmp_path: Path) -> None:
    config = tiny_config(corpus, eval_every=7)  # checkpoints at steps 3 and 6 (save_every), 7 (best)
    full = run(config, tmp_path / "full")
    # "Kill" after step 5: the last checkpoint is step 3, so steps 4 and 5 are redone after the resume.
    run(config, tmp_path / "killed", stop=5)
    resumed = run(config, tmp_path / "killed", resume=True)
    assert min(resumed.losses) == 4
    for step, loss in resumed.losses.items():
        assert loss == pytest.approx(full.losses[step], abs=1e-6), step
    final_a = PointerGenerator.from_pretrained(tmp_path / "full" / "model")[0].state_dict()
    final_b = PointerGenerator.from_pretrained(tmp_path / "killed" / "model")[0].state_dict()
    assert all(torch.allclose(final_a[k], final_b[k], atol=1e-6) for k in final_a)


def test_two_phase_schedule_and_outputs(corpus: Path, tmp_path: Path) -> None:
    trainer = run(tiny_config(corpus), tmp_path / "run")
    out = tmp_path / "run"
    assert trainer.state["phase"] == "coverage" and trainer.state["step"] == 8 + 3
    assert json.loads((out / "model" / "config.json").read_text())["coverage"] is True
    assert json.loads((out / "model_no_coverage" / "config.json").read_text())["coverage"] is False
    assert (out / "training_curve.png").stat().st_size > 1000
    curves = trainer.state["curves"]
    assert (
        len(curves["validation"]) == len(curves["validation_nll"]) == len(curves["validation_coverage"]) > 0
    )
    # The coverage loss counts in the selection loss only once the coverage phase has started.
    start = trainer.state["phase_start_step"]
    for (step, total), (_, nll) in zip(curves["validation"], curves["validation_nll"], strict=True):
        assert (total == pytest.approx(nll)) == (step <= start)
    # The exported model summarises real documents (batched), OOV words come out as words.
    summarizer = PointerGeneratorSummarizer.from_pretrained(out / "model")
    docs = [Document.from_text("zyzzyva " * 30 + "is a quokka."), Document.from_text("the model " * 20)]
    summaries = summarizer.summarize(docs, decoding=DecodingOptions(num_beams=3))
    assert len(summaries) == 2 and all(s.strip() for s in summaries)
    assert "<unk>" not in summaries[0]


def test_early_stopping_ends_the_main_phase(corpus: Path, tmp_path: Path) -> None:
    config = tiny_config(corpus, max_steps=1000, eval_every=1, patience=1, coverage_steps=0)
    # A large step size overshoots within a few steps (at 0.15 the loss falls for ~75 evaluations: 20+ s).
    config.optim.learning_rate = 3.0
    trainer = run(config, tmp_path / "run")
    assert trainer.state["step"] < 1000  # stopped by patience, not by max_steps
    losses = [loss for _, loss in trainer.state["curves"]["validation"]]
    # patience 1: it stops at the first evaluation that is no better than the best so far, not before
    improving = all(b < a for a, b in zip(losses[:-2], losses[1:-1], strict=True))
    assert improving and losses[-1] >= min(losses[:-1])


def test_refuses_to_overwrite_or_resume_wrongly(corpus: Path, tmp_path: Path) -> None:
    config = tiny_config(corpus)
    run(config, tmp_path / "run", stop=3)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "run").rglob("*") if p.is_file()}
    with pytest.raises(InputError, match="not empty"):
        Trainer(config, tmp_path / "run")
    changed = tiny_config(corpus, max_steps=9)
    with pytest.raises(ConfigError, match="differs"):
        Trainer(changed, tmp_path / "run", resume=True)
    with pytest.raises(InputError, match="nothing to resume"):
        Trainer(config, tmp_path / "empty", resume=True)
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / "run").rglob("*") if p.is_file()}
    assert before == after


def test_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("optim:\n  learning_rat: 0.1\n")
    assert (
        main(["train", "pointer-generator", "--config", str(bad), "--output-dir", str(tmp_path / "o")]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert "learning_rat" in err and len(err.splitlines()) == 1
    bad.write_text("optim:\n  batch_size: sixteen\n")
    assert (
        main(["train", "pointer-generator", "--config", str(bad), "--output-dir", str(tmp_path / "o")]) == 2
    )
    assert "batch_size" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_summarizer_rejects_empty_and_shortens_min_length_for_short_documents(
    corpus: Path, tmp_path: Path, caplog
) -> None:
    config = tiny_config(corpus, max_steps=2, eval_every=2, coverage_steps=0)
    run(config, tmp_path / "run")
    summarizer = PointerGeneratorSummarizer.from_pretrained(tmp_path / "run" / "model")
    five = DecodingOptions(min_length=5)
    with pytest.raises(InputError, match="empty"):
        summarizer.summarize(
            [Document.from_text("long enough text " * 5), Document.from_text("")], decoding=five
        )
    # A 2-token document in a corpus does not stop the run: its minimum drops to 2, the others keep 5.
    long_docs = [Document.from_text("the model reads long enough text here " * 3) for _ in range(2)]
    with caplog.at_level("WARNING", logger="synopsis"):
        summaries = summarizer.summarize(
            [long_docs[0], Document.from_text("too short"), long_docs[1]], decoding=five
        )
    assert "2 tokens, fewer than the minimum summary length 5" in caplog.text
    assert len(summaries) == 3 and all(summaries)
    assert summaries[0] == summaries[2] == summarizer.summarize(long_docs[:1], decoding=five)[0]
    assert all(len(s.split()) >= 5 for s in (summaries[0], summaries[2]))
    assert len(summaries[1].split()) >= 2
    with pytest.raises(ConfigError, match="num_beam"):
        PointerGeneratorSummarizer.from_pretrained(tmp_path / "run" / "model", num_beam=2)
    with pytest.raises(ConfigError, match="'num_beams' is a decoding option: give it per call"):
        PointerGeneratorSummarizer.from_pretrained(tmp_path / "run" / "model", num_beams=2)


def test_paper_config_runs_on_cnn_stories(shared_data: Path, tmp_path: Path) -> None:
    """configs/pointer_generator_cnndm.yaml as shipped, on the 20 shared CNN stories, for a few steps."""
    import yaml

    from synopsis.config import merge, parse_overrides

    data = yaml.safe_load((ROOT / "configs" / "pointer_generator_cnndm.yaml").read_text())
    paper = from_dict(PointerGeneratorTrainConfig, data)
    assert (paper.model.hidden_dim, paper.model.embedding_dim, paper.vocab.max_size) == (256, 128, 50_000)
    assert (paper.optim.learning_rate, paper.optim.initial_accumulator, paper.optim.max_grad_norm) == (
        0.15,
        0.1,
        2.0,
    )
    assert (paper.data.max_source_tokens, paper.data.max_target_tokens, paper.optim.batch_size) == (
        400,
        100,
        16,
    )
    assert (paper.generation.num_beams, paper.generation.min_length, paper.generation.max_length) == (
        4,
        35,
        120,
    )
    overrides = parse_overrides(
        [
            f"data.path={shared_data / 'cnndm_stories'}",
            "data.train_split=null",
            "data.dev_split=null",
            f"data.dev_path={shared_data / 'cnndm_stories'}",
            "model.hidden_dim=16",
            "model.embedding_dim=8",
            "schedule.max_steps=2",
            "schedule.eval_every=2",
            "schedule.coverage_steps=1",
        ]
    )
    config = from_dict(PointerGeneratorTrainConfig, merge(data, overrides))
    trainer = run(config, tmp_path / "cnn")
    assert trainer.state["step"] == 3
    summarizer = PointerGeneratorSummarizer.from_pretrained(tmp_path / "cnn" / "model")
    assert summarizer.generation.num_beams == 4


@pytest.mark.slow
def test_cli_resume_after_kill_9_matches_an_uninterrupted_run(corpus: Path, tmp_path: Path) -> None:
    """A real ``kill -9`` of ``synopsis train pointer-generator``, then ``--resume``: same final weights."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    config = tiny_config(corpus, max_steps=24, eval_every=12, save_every=2, coverage_steps=0)
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(to_dict(config)))
    run(config, tmp_path / "reference")

    def command(*extra: str) -> list[str]:
        entry = "import sys; from synopsis.cli import main; sys.exit(main(sys.argv[1:]))"
        return [sys.executable, "-c", entry, "train", "pointer-generator", "--threads", "1", "--quiet",
                "--output-dir", str(tmp_path / "killed"), *extra]  # fmt: skip

    proc = subprocess.Popen(
        command("--config", str(config_path)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    latest = tmp_path / "killed" / "checkpoints" / "latest"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if latest.exists() and int(latest.read_text().strip().split("-")[1]) >= 4:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "training finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = subprocess.run(command("--resume"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reference = PointerGenerator.from_pretrained(tmp_path / "reference" / "model")[0].state_dict()
    resumed = PointerGenerator.from_pretrained(tmp_path / "killed" / "model")[0].state_dict()
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)


def test_bundled_model_summarizes_a_real_abstract(shared_data: Path, tmp_path: Path, capsys) -> None:
    """``synopsis summarize FILE`` with no model argument uses the model shipped inside the package."""
    from synopsis.summarizers.pointer_generator import bundled_model_dir

    assert (bundled_model_dir() / "model.safetensors").stat().st_size <= 30 * 2**20
    record = json.loads((shared_data / "scitldr" / "dev.jsonl").read_text().splitlines()[0])
    document = tmp_path / "abstract.txt"
    document.write_text(" ".join(record["source"]))
    assert main(["summarize", str(document)]) == 0
    summary = capsys.readouterr().out.strip()
    assert len(summary.split()) >= PointerGeneratorSummarizer.from_pretrained().generation.min_length


def test_the_final_model_is_the_mean_of_the_last_coverage_checkpoints(corpus: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    config = tiny_config(corpus, coverage_steps=4, save_every=2, average_last=2)
    trainer = run(config, tmp_path / "run")
    start = trainer.state["phase_start_step"]
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))
    last_two = [d for d in checkpoints if int(d.name.split("-")[1]) > start][-2:]
    assert [int(d.name.split("-")[1]) for d in last_two] == [start + 2, start + 4]
    states = [load_file(str(d / "model.safetensors")) for d in last_two]
    final = load_file(str(tmp_path / "run" / "model" / "model.safetensors"))
    assert any(not torch.equal(states[0][k], states[1][k]) for k in final)
    for name, tensor in final.items():
        torch.testing.assert_close(tensor, (states[0][name] + states[1][name]) / 2)


def test_coverage_runs_share_their_start_and_the_final_model_is_the_mean_of_their_means(
    corpus: Path, tmp_path: Path
) -> None:
    """Two coverage runs (a model soup) from the same main-phase weights; an interruption in the second run
    resumes to the same final model."""
    from safetensors.torch import load_file

    config = tiny_config(corpus, coverage_steps=4, save_every=2, average_last=2, coverage_runs=2)
    full = run(config, tmp_path / "full")
    assert full.state["coverage_run"] == 2 and full.state["phase_start_step"] == 12  # main 8, run 1: 9-12

    def weights(path: Path) -> dict[str, torch.Tensor]:
        return load_file(str(path / "model.safetensors"))

    # Stopped in run 2's first step: run 1's checkpoints are still on disk, next to its mean.
    cut = tmp_path / "cut"
    run(config, cut, stop=13)
    run1 = [weights(cut / "checkpoints" / f"step-{step:08d}") for step in (10, 12)]
    mean1 = weights(cut / "coverage_runs" / "run-1")
    for name, tensor in mean1.items():
        torch.testing.assert_close(tensor, (run1[0][name] + run1[1][name]) / 2)
    start = weights(cut / "coverage_start")
    no_coverage = PointerGenerator.from_pretrained(cut / "model_no_coverage")[0].state_dict()
    assert all(torch.equal(start[name], no_coverage[name]) for name in start)

    resumed = run(config, cut, resume=True)
    assert min(resumed.losses) == 13
    for step, loss in resumed.losses.items():
        assert loss == pytest.approx(full.losses[step], abs=1e-6), step
    run2 = [weights(tmp_path / "full" / "checkpoints" / f"step-{step:08d}") for step in (14, 16)]
    mean1 = weights(tmp_path / "full" / "coverage_runs" / "run-1")
    final = weights(tmp_path / "full" / "model")
    assert any(not torch.equal(mean1[name], run2[1][name]) for name in final)
    for name, tensor in final.items():
        torch.testing.assert_close(tensor, (mean1[name] + (run2[0][name] + run2[1][name]) / 2) / 2)
        torch.testing.assert_close(weights(cut / "model")[name], tensor, atol=1e-6, rtol=1e-6)


def test_coverage_runs_combined_as_an_ensemble(corpus: Path, tmp_path: Path) -> None:
    """combine_runs: ensemble keeps the coverage runs' means as the members of one checkpoint (the training
    itself is the same as for their mean), which summarize loads as an ensemble."""
    from safetensors.torch import load_file

    from synopsis.models.pointer_generator import PointerGeneratorEnsemble

    config = tiny_config(corpus, coverage_steps=4, save_every=2, average_last=2, coverage_runs=2)
    config.schedule.combine_runs = "ensemble"
    run(config, tmp_path / "run")
    model, _ = PointerGenerator.from_pretrained(tmp_path / "run" / "model")
    assert isinstance(model, PointerGeneratorEnsemble) and model.config.ensemble_size == 2
    mean1 = load_file(str(tmp_path / "run" / "coverage_runs" / "run-1" / "model.safetensors"))
    run2 = [
        load_file(str(tmp_path / "run" / "checkpoints" / f"step-{s:08d}" / "model.safetensors"))
        for s in (14, 16)
    ]
    for name, tensor in model.members[0].state_dict().items():
        torch.testing.assert_close(tensor, mean1[name])
        torch.testing.assert_close(model.members[1].state_dict()[name], (run2[0][name] + run2[1][name]) / 2)
    summarizer = PointerGeneratorSummarizer.from_pretrained(tmp_path / "run" / "model")
    (summary,) = summarizer.summarize([Document.from_text("the model copies rare words from the article .")])
    assert summary


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"combine_runs": "soup"}, "'mean' or 'ensemble'"),
        ({"combine_runs": "ensemble"}, "coverage_runs >= 2"),
    ],
)
def test_combine_runs_is_checked(corpus: Path, schedule: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        tiny_config(corpus, **schedule)


class CoverageStartTrainer(Trainer):
    """Records the Adagrad state the coverage phase starts with."""

    def _start_coverage_phase(self) -> None:
        from synopsis.checkpoint import load_checkpoint

        self.main_phase_best = load_checkpoint(self.output_dir / "best").optimizer_state
        super()._start_coverage_phase()
        self.coverage_start = [
            {k: v.clone() for k, v in state.items()}
            for state in self.optimizer.state_dict()["state"].values()
        ]


@pytest.mark.parametrize("start", ["fresh", "carry"])
def test_the_coverage_phase_starts_with_fresh_or_carried_adagrad_accumulators(
    corpus: Path, tmp_path: Path, start: str
) -> None:
    """Issue 41 item 4: by default the coverage phase starts with Adagrad accumulators at the initial value,
    as the authors' convert_to_coverage_model (it restores weights, not Adagrad slots); ``carry`` keeps the
    best main-phase checkpoint's."""
    config = tiny_config(corpus, coverage_optimizer=start) if start == "carry" else tiny_config(corpus)
    assert config.schedule.coverage_optimizer == start
    trainer = CoverageStartTrainer(config, tmp_path / "run", progress=False)
    trainer.run()
    main_phase = trainer.main_phase_best
    initial = config.optim.initial_accumulator
    started = trainer.coverage_start
    assert main_phase is not None and len(started) == len(main_phase["state"])
    fresh = all(torch.all(s["sum"] == initial) and int(s["step"]) == 0 for s in started)
    carried = all(
        torch.equal(s["sum"], saved["sum"])
        for s, saved in zip(started, main_phase["state"].values(), strict=True)
    )
    assert (fresh, carried) == ((True, False) if start == "fresh" else (False, True))


def test_coverage_optimizer_is_checked(corpus: Path) -> None:
    with pytest.raises(ConfigError, match="'fresh' or 'carry'"):
        tiny_config(corpus, coverage_optimizer="reset")
