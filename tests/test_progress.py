"""The one progress reporter: plain lines when stderr is not a terminal, for every trainer and experiment."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from synopsis.cli import main
from synopsis.progress import ProgressReporter


def test_plain_lines_carry_the_note_and_a_new_phase(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SYNOPSIS_PROGRESS_INTERVAL", "0")
    caplog.set_level(logging.INFO, logger="synopsis")
    with ProgressReporter("train", 4, "steps", enabled=True) as progress:
        progress.advance(note="loss 2.500")
        progress.update("coverage", 2, completed=0)
        progress.advance(2)
    lines = [r.getMessage() for r in caplog.records if r.name == "synopsis.progress"]
    assert lines[0].startswith("train: 1/4 steps (25%)") and lines[0].endswith(", loss 2.500")
    assert lines[1].startswith("coverage: 2/2 steps (100%)")


def test_nested_reporters_share_one_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import synopsis.progress as progress_module

    monkeypatch.setattr(progress_module, "stderr_is_terminal", lambda: True)
    with ProgressReporter("runs", 2, "runs", enabled=True) as outer:
        with ProgressReporter("epoch 1", 3, "batches", enabled=True) as inner:
            assert inner._bar is outer._bar  # two live displays at once would be an error in rich
            inner.advance()
        outer.advance()
        assert len(outer._bar.tasks) == 1
    assert not progress_module._LIVE


def test_a_trainer_piped_to_a_file_prints_plain_progress_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``synopsis lm train`` with stderr captured (not a terminal): before, its rich bar printed nothing
    there; now a plain line per interval says the epoch, the batches done and the perplexity."""
    from helpers.domain_lm import tiny_documents, write_jsonl

    corpus = tmp_path / "tiny.jsonl"
    write_jsonl(tiny_documents(lines_per_doc=6), corpus)
    monkeypatch.setenv("SYNOPSIS_PROGRESS_INTERVAL", "0")
    args = ["lm", "train", "--corpus", str(corpus), "-o", str(tmp_path / "run"), "--max-epochs", "1"]
    assert main([*args, "--held-out", "style=written, topic=public"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("train epoch 1: ")]
    assert lines and "batches (" in lines[-1] and "ETA" in lines[-1] and ", ppl " in lines[-1], err
    assert "\x1b[" not in err  # no escape codes in a file
