"""End to end: a real ``synopsis summarize`` process interrupted mid-corpus by SIGINT (Ctrl-C) or SIGTERM,
then resumed, gives byte for byte the file of one uninterrupted run."""

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

# LEAD-2 slowed to 50 ms a document, so that the run is surely interrupted mid-way (the method is instant).
SLOW_ENTRY = """
import sys, time
from synopsis.summarizers.extractive import LeadSummarizer
original = LeadSummarizer.summarize
def slow(self, *args, **kwargs):
    time.sleep(0.05)
    return original(self, *args, **kwargs)
LeadSummarizer.summarize = slow
from synopsis.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _corpus(path: Path, count: int) -> Path:
    rows = [
        {
            "id": f"doc{i}",
            "text": f"Paper {i} studies rivers. Its second finding is on bridge {i}. A third one closes it.",
        }
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


SIGNALS = [(signal.SIGINT, 130, "interrupted (Ctrl-C)"), (signal.SIGTERM, 143, "terminated (SIGTERM)")]


@pytest.mark.parametrize(("signum", "status", "word"), SIGNALS)
def test_interrupted_corpus_run_resumes_to_the_same_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], signum: int, status: int, word: str
) -> None:
    corpus = _corpus(tmp_path / "docs.jsonl", 120)
    args = ["summarize", str(corpus), "--corpus", "jsonl", "--method", "lead-2"]
    full = tmp_path / "full.jsonl"
    assert main([*args, "-o", str(full)]) == 0
    expected = full.read_bytes()
    capsys.readouterr()

    partial = tmp_path / "partial.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_ENTRY, *args, "-o", str(partial)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.exists() and partial.read_bytes().count(b"\n") >= 10:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err

    # A valid partial file: whole JSON lines only, a prefix of the uninterrupted run's file.
    data = partial.read_bytes()
    lines = data.split(b"\n")
    assert lines[-1] == b"" and 10 <= len(lines) - 1 < 120
    assert all(json.loads(line)["prediction"] for line in lines[:-1])
    assert expected.startswith(data)
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"{word}: {len(lines) - 1} of 120 predictions are in {partial}"), last
    assert last.endswith(
        f"resume with: synopsis summarize {corpus} --corpus jsonl --method lead-2 -o {partial} --resume"
    )
    assert "Traceback" not in err

    assert main([*args, "-o", str(partial), "--resume"]) == 0
    assert partial.read_bytes() == expected
