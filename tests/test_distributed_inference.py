"""Sharded inference: ``torchrun --nproc-per-node 2 --no-python synopsis summarize|evaluate ...`` on CPU
(gloo) gives byte for byte the file and the report of one process; interrupted runs resume with any number
of processes. The launches are real (two processes each); the rest runs in this process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from synopsis.cli import main
from synopsis.sharding import Shard, current_shard, part_path, part_record

BIN = Path(sys.executable).parent
TORCHRUN, SYNOPSIS = BIN / "torchrun", BIN / "synopsis"
LAUNCH_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE")

needs_torchrun = pytest.mark.skipif(
    not (TORCHRUN.exists() and SYNOPSIS.exists()), reason="torchrun or the synopsis script is not installed"
)

# LEAD-2 slowed to 0.1 s a document, so that the launch is surely interrupted mid-way.
SLOW_ENTRY = """
import sys, time
from synopsis.summarizers.extractive import LeadSummarizer
original = LeadSummarizer.summarize
def slow(self, *args, **kwargs):
    time.sleep(0.1)
    return original(self, *args, **kwargs)
LeadSummarizer.summarize = slow
from synopsis.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    return {**env, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}


def _torchrun(*args: str | Path, cwd: Path, processes: int = 2) -> subprocess.CompletedProcess[str]:
    command = [TORCHRUN, "--standalone", f"--nproc-per-node={processes}", "--no-python", SYNOPSIS, *args]
    return subprocess.run(
        [str(a) for a in command], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=240
    )


def _jsonl_corpus(path: Path, count: int) -> Path:
    text = "Paper {} studies rivers. Its second finding is on bridge {}. A third one ends it."
    rows = [{"id": f"doc{i}", "text": text.format(i, i)} for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ the split
def test_blocks_are_contiguous_cover_everything_and_differ_by_one_at_most() -> None:
    assert Shard(0, 2).blocks(5) == [range(0, 3), range(3, 5)]
    assert Shard(0, 2).blocks(1) == [range(0, 1), range(1, 1)]  # fewer items than processes
    assert Shard(2, 3).block(0) == range(0, 0)
    for world in (1, 2, 3, 8):
        for count in (0, 1, 5, 17, 64):
            blocks = Shard(0, world).blocks(count)
            assert [i for b in blocks for i in b] == list(range(count))
            assert max(map(len, blocks)) - min(map(len, blocks)) <= 1
    assert Shard().block(7) == range(7)


def test_one_process_creates_no_process_group_and_imports_nothing() -> None:
    code = (
        "import sys; from synopsis.sharding import current_shard; s = current_shard(); "
        "print(s.world, s.rank, s.device, 'torch' in sys.modules, 'accelerate' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["1", "0", "None", "False", "False"]
    assert current_shard() == Shard()


# ------------------------------------------------------------------------------------------ launches
@needs_torchrun
def test_sharded_lead3_equals_one_process_with_an_uneven_split(tmp_path: Path) -> None:
    corpus = _jsonl_corpus(tmp_path / "docs.jsonl", 5)  # 5 documents, 2 processes: blocks of 3 and 2
    args = ["summarize", "docs.jsonl", "--corpus", "jsonl", "--method", "lead-3"]
    assert main([*args[:1], str(corpus), *args[2:], "-o", str(tmp_path / "one.jsonl")]) == 0
    started = time.monotonic()
    run = _torchrun(*args, "-o", "two.jsonl", cwd=tmp_path)
    print(f"2-process lead-3 launch: {time.monotonic() - started:.1f} s")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    # no parts; each output's run record (for --resume) beside it
    names = ["docs.jsonl", "one.jsonl", "one.jsonl.run.json", "two.jsonl", "two.jsonl.run.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    assert run.stdout == "" and "Traceback" not in run.stderr
    assert "wrote 5 summaries to two.jsonl (2 processes)" in run.stderr


@needs_torchrun
def test_sharded_pointer_generator_equals_one_process(tmp_path: Path, shared_data: Path) -> None:
    """The bundled model on 5 SciTLDR dev papers in batches of 2: batches 1-2 on one process, 3 on the
    other; every paper is decoded in the same batch as in the one-process run."""
    from synopsis.data.example import write_examples
    from synopsis.data.readers import read_corpus

    examples = []
    for example in read_corpus("scitldr", shared_data / "scitldr", split="dev"):
        examples.append(example)
        if len(examples) == 5:
            break
    write_examples(examples, tmp_path / "papers.jsonl")
    args = ["summarize", "papers.jsonl", "--corpus", "synopsis", "--batch-size", "2", "--threads", "1"]
    one = tmp_path / "one.jsonl"
    assert main([args[0], str(tmp_path / "papers.jsonl"), *args[2:], "-o", str(one)]) == 0
    started = time.monotonic()
    run = _torchrun(*args, "-o", "two.jsonl", cwd=tmp_path)
    print(f"2-process pointer-generator launch: {time.monotonic() - started:.1f} s")
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "two.jsonl").read_bytes() == one.read_bytes()
    assert len(one.read_text().splitlines()) == 5


@needs_torchrun
def test_sharded_evaluate_prints_the_one_process_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    words = ["rivers", "bridges", "rain", "valley", "town", "award", "bakery", "officials", "week", "road"]
    refs, preds = [], []
    for i, (a, b, c) in enumerate(zip(words, words[1:], words[2:], strict=False)):  # 8: blocks of 4 and 4
        source = f"Long ago the {a} met the {c}. The {b} closed."
        reference = f"The {a} and the {b} closed on day {i}."
        refs.append({"id": f"d{i}", "references": [reference], "source": source})
        preds.append({"id": f"d{i}", "prediction": f"The {a} closed.\nThe {c} stayed {i}."})
    (tmp_path / "refs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in refs))
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    # METEOR (per example, split the same way as ROUGE and novel n-grams) and the Porter stemmer are left
    # out: importing NLTK and loading WordNet in every process would double the test's time (docs/
    # distributed.md records the same identity with both, on all of SciTLDR dev)
    metrics = "rouge,bleu,novel,repeat,length"
    args = ["evaluate", "-p", "preds.jsonl", "-r", "refs.jsonl", "--bootstrap", "200", "--metrics", metrics]
    args.append("--no-stemmer")
    monkeypatch.chdir(tmp_path)  # the report names its inputs as given: the same relative paths in both runs
    assert main([*args, "--json", "one.json"]) == 0
    one = capsys.readouterr().out
    started = time.monotonic()
    run = _torchrun(*args, "--json", "two.json", cwd=tmp_path)
    print(f"2-process evaluate launch: {time.monotonic() - started:.1f} s")
    assert run.returncode == 0, run.stderr
    assert run.stdout == one and "ci95" in (tmp_path / "two.json").read_text()
    assert (tmp_path / "two.json").read_bytes() == (tmp_path / "one.json").read_bytes()
    assert "Traceback" not in run.stderr


@needs_torchrun
def test_interrupted_launch_resumes_with_one_process_to_the_same_file(tmp_path: Path) -> None:
    corpus = _jsonl_corpus(tmp_path / "docs.jsonl", 40)
    args = ["summarize", str(corpus), "--corpus", "jsonl", "--method", "lead-2"]
    full, out = tmp_path / "full.jsonl", tmp_path / "out.jsonl"
    assert main([*args, "-o", str(full)]) == 0
    (tmp_path / "slow.py").write_text(SLOW_ENTRY)
    launch = [str(TORCHRUN), "--standalone", "--nproc-per-node=2", str(tmp_path / "slow.py"), *args]
    proc = subprocess.Popen(
        [*launch, "-o", str(out)], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    parts = [part_path(out, rank, 2) for rank in range(2)]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if sum(p.read_bytes().count(b"\n") for p in parts if p.exists()) >= 6:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the launch ended before it could be interrupted"
    proc.send_signal(signal.SIGTERM)  # torchrun passes it on to both processes
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert out.read_bytes() == b""  # only the main process writes it, at the end
    saved = [line for p in parts for line in p.read_text().splitlines()]
    assert 6 <= len(saved) < 40 and all(json.loads(line)["prediction"] for line in saved)
    main_line = next(
        line for line in err.splitlines() if line.startswith("terminated (SIGTERM): ") and " of 40 " in line
    )
    assert f"{len(saved)} of 40 predictions are saved in {out} and 2 part file(s)" in main_line
    assert main_line.endswith("--resume") and "kept for --resume" in main_line
    assert "terminated (SIGTERM): process 2 of 2: " in err

    assert main([*args, "-o", str(out), "--resume"]) == 0  # one process now
    assert out.read_bytes() == full.read_bytes()
    assert not any(p.exists() for p in parts)


# ------------------------------------------------------------------------------------------ one process
def test_resume_merges_part_files_of_any_launch_into_a_plain_text_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _jsonl_corpus(tmp_path / "docs.jsonl", 9)
    args = ["summarize", str(corpus), "--corpus", "jsonl", "--method", "lead-2"]
    full, out = tmp_path / "full.txt", tmp_path / "out.txt"
    assert main([*args, "-o", str(full)]) == 0
    lines = full.read_text().splitlines()
    lead = [line.replace(". ", ".\n", 1) for line in lines]  # the predictions as summarize makes them
    out.write_text(lines[0] + "\n" + lines[1] + "\n")  # what a one-process run wrote before it stopped
    part_path(out, 0, 3).write_text(part_record(2, "doc2", lead[2]) + part_record(3, "doc3", lead[3]))
    part_path(out, 2, 3).write_text(part_record(8, "doc8", lead[8]) + '{"index": 7, "id": "do')  # cut short
    capsys.readouterr()
    assert main([*args, "-o", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "dropped a last line cut short" in err
    assert f"resuming: {out} holds 2 of 9 predictions, its part files 3 more; 4 left" in err
    assert out.read_bytes() == full.read_bytes()
    names = ["docs.jsonl", "full.txt", "full.txt.run.json", "out.txt", "out.txt.run.json"]  # no parts left
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_part_file_of_another_corpus_is_an_error_and_a_fresh_run_removes_stale_parts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _jsonl_corpus(tmp_path / "docs.jsonl", 4)
    output = tmp_path / "o.jsonl"
    args = ["summarize", str(corpus), "--corpus", "jsonl", "--method", "lead-2", "-o", str(output)]
    stale = part_path(output, 1, 2)
    stale.write_text(part_record(1, "other-paper", "Something else."))
    capsys.readouterr()
    assert main([*args, "--resume"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: {stale}:1: example 1 'other-paper' is not in this corpus at that position; the part file "
        "belongs to another run (delete it, or run without --resume)"
    ]
    assert main(args) == 0  # a fresh run: the stale part goes
    assert not stale.exists() and len(output.read_text().splitlines()) == 4


def test_a_launch_without_output_is_refused_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Errors every process meets alike are printed by the main process only; the others exit 2 silently."""
    import synopsis.cli.launch as launch

    doc = tmp_path / "doc.txt"
    doc.write_text("Rivers flooded the valley. Three bridges closed.")
    for rank, message in ((0, "2 processes write one file: give --output (-o)"), (1, "")):
        monkeypatch.setattr(launch, "current_shard", lambda rank=rank: Shard(rank, 2))
        assert main(["summarize", str(doc), "--method", "lead-1"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and (message in captured.err if message else captured.err == "")
