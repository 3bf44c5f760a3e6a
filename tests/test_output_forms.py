"""``synopsis summarize``: one pipeline (request -> runner -> writer), so where the output goes never changes
what it holds, ``--by auto`` is decided per document, and ``--resume`` works on every line-by-line form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import one_line_error, run_cli

from synopsis.document import Document
from synopsis.pipeline import (
    ParsedDocument,
    RequestItem,
    RunHooks,
    SummarizeRunner,
    read_source,
)
from synopsis.summarizers.extractive import LeadSummarizer

LONG = """# Floods

The river rose in the night. Water covered the low fields.

## Damage

Three bridges were closed by the police. The old mill lost its roof in the storm.

## Response

Officials opened two shelters for families. Volunteers carried sandbags to the bank.
"""
SHORT = "Budget approved today. The council voted seven to two."
#: words one model call of the patched LEAD reads: LONG is longer, SHORT is not
CAPACITY = 20


@pytest.fixture
def documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """A long and a short document; LEAD with a bounded input, so that ``--by auto`` has a choice."""
    monkeypatch.setattr(LeadSummarizer, "input_capacity", lambda self: CAPACITY)
    long, short = tmp_path / "long.md", tmp_path / "short.txt"
    long.write_text(LONG)
    short.write_text(SHORT)
    return [long, short]


FORMS = {"text": ".txt", "markdown": ".md", "json": ".json", "jsonl": ".jsonl"}


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("by", ["auto", "section", "document"])
@pytest.mark.parametrize("which", ["both", "long", "short"])
def test_screen_and_output_file_hold_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], documents: list[Path], form: str, by: str, which: str
) -> None:
    inputs = {"both": documents, "long": documents[:1], "short": documents[1:]}[which]
    args = ["summarize", *inputs, "--method", "lead-1", "--by", by]
    code, screen, err = run_cli(capsys, *args, "--output-format", form)
    assert code == 0, err
    # the extension alone decides the form, and the file holds what the screen showed
    out = tmp_path / f"out{FORMS[form]}"
    code, printed, err = run_cli(capsys, *args, "-o", out)
    assert code == 0 and printed == "", err
    assert out.read_text() == screen
    # --output-format wins over the extension
    other = tmp_path / "other.out"
    assert run_cli(capsys, *args, "-o", other, "--output-format", form)[0] == 0
    assert other.read_text() == screen


def _records(capsys: pytest.CaptureFixture[str], *args: object) -> list[dict]:
    code, out, err = run_cli(capsys, "summarize", *args, "--output-format", "jsonl")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def test_auto_is_decided_per_document(capsys: pytest.CaptureFixture[str], documents: list[Path]) -> None:
    """Before: with -o, one long file made every file of the run go by section."""
    long, short = _records(capsys, *documents, "--method", "lead-1")
    assert long["id"] == str(documents[0]) and len(long["sections"]) == 2 and long["preface"] is not None
    assert short["id"] == str(documents[1]) and short["sections"] == [] and short["preface"] is None
    assert short["prediction"] == "Budget approved today."
    # each as it is alone
    assert _records(capsys, documents[0], "--method", "lead-1") == [long]
    assert _records(capsys, documents[1], "--method", "lead-1") == [short]


def test_json_is_one_value_and_jsonl_its_items(
    capsys: pytest.CaptureFixture[str], documents: list[Path]
) -> None:
    args = [*documents, "--method", "lead-1"]
    code, out, err = run_cli(capsys, "summarize", *args, "--output-format", "json")
    assert code == 0, err
    assert json.loads(out) == _records(capsys, *args)
    code, out, _ = run_cli(capsys, "summarize", documents[1], "--method", "lead-1", "--output-format", "json")
    assert json.loads(out) == _records(capsys, documents[1], "--method", "lead-1")[0]  # one: the object


def test_corpus_forms_keep_id_and_prediction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    rows = [{"id": "a", "text": LONG}, {"id": "b", "text": SHORT}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["summarize", corpus, "--corpus", "jsonl", "--method", "lead-2"]
    for form, suffix in FORMS.items():
        code, screen, err = run_cli(capsys, *args, "--output-format", form)
        assert code == 0, err
        out = tmp_path / f"p{suffix}"
        assert run_cli(capsys, *args, "-o", out)[0] == 0
        assert out.read_text() == screen, form
    lines = (tmp_path / "p.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["id"] for r in records] == ["a", "b"]
    assert all(set(r) >= {"id", "prediction", "summary", "sections"} for r in records)
    assert records[1]["prediction"] == "Budget approved today.\nThe council voted seven to two."
    assert json.loads((tmp_path / "p.json").read_text()) == records
    # a corpus's text: one prediction per line, what evaluate reads
    assert (tmp_path / "p.txt").read_text().splitlines()[
        1
    ] == "Budget approved today. The council voted seven to two."


def test_resume_works_on_line_forms_and_is_refused_on_whole_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], documents: list[Path]
) -> None:
    args = ["summarize", *documents, "--method", "lead-1"]
    full, part = tmp_path / "full.jsonl", tmp_path / "part.jsonl"
    assert run_cli(capsys, *args, "-o", full)[0] == 0
    part.write_bytes(full.read_bytes().split(b"\n")[0] + b"\n" + b'{"id": "sh')  # killed mid-line
    code, _, err = run_cli(capsys, *args, "-o", part, "--resume")
    assert code == 0, err
    assert part.read_bytes() == full.read_bytes()
    for name in ("x.json", "x.md", "x.txt"):
        code, _, err = run_cli(capsys, *args, "-o", tmp_path / name, "--resume")
        one_line_error(code, err, "--resume continues output written line by line")


def test_runner_keeps_the_items_order_when_by_is_mixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """By-document items share one model call, made first; by-section ones run in their place."""
    monkeypatch.setattr(LeadSummarizer, "input_capacity", lambda self: CAPACITY)
    summarizer = LeadSummarizer(1)
    calls: list[int] = []
    original = summarizer.summarize

    def counting(documents, instructions=None, references=None, **options):  # noqa: ANN001, ANN003, ANN202
        calls.append(len(documents))
        return original(documents, instructions, references, **options)

    summarizer.summarize = counting  # type: ignore[method-assign]
    short = ParsedDocument(Document.from_text(SHORT), "text", None)
    other = ParsedDocument(Document.from_text("Rain fell. Roads closed."), "text", None)
    long = ParsedDocument(read_source(LONG, "markdown").document, "markdown", None)
    items = [RequestItem("s", short), RequestItem("l", long), RequestItem("o", other)]
    heard: list[str] = []
    runner = SummarizeRunner(summarizer, batch_size=8)
    done = runner.run_items(items, RunHooks(summary=lambda s: heard.append(str(s.id))))
    assert [s.id for s in done] == heard == ["s", "l", "o"]
    assert [s.by for s in done] == ["document", "section", "document"]
    assert calls[0] == 2  # the two short documents in one call, before the long one's windows


def test_by_document_a_titled_summary_is_headed_as_by_section(
    capsys: pytest.CaptureFixture[str], documents: list[Path]
) -> None:
    long, short = documents
    args = ["summarize", long, "--method", "lead-1", "--by", "document"]
    for form, heading in (("text", '== summary of "Floods"'), ("markdown", '**Summary of "Floods"**')):
        code, out, err = run_cli(capsys, *args, "--output-format", form)
        assert code == 0, err
        assert out.splitlines() == [heading, "The river rose in the night."]
    (record,) = _records(capsys, *args[1:])
    assert (record["title"], record["prediction"]) == ("Floods", "The river rose in the night.")
    # an untitled document's summary is printed alone, as it always was
    assert run_cli(capsys, "summarize", short, "--method", "lead-1")[1] == "Budget approved today.\n"


def test_the_output_target_is_decided_once_from_the_flags(tmp_path: Path) -> None:
    """Issue 59: ``-o``, ``--output-format``, ``--resume`` and ``--corpus`` are one frozen value, whose form,
    JSONL-ness and line-by-line writing every part of the run reads instead of deriving them again."""
    import dataclasses

    from synopsis.cli.output import OutputTarget
    from synopsis.errors import InputError

    screen = OutputTarget.from_flags(None, None, False, False)
    assert (screen.path, screen.form, screen.jsonl, screen.line_by_line) == (None, "text", False, False)
    jsonl = OutputTarget.from_flags(tmp_path / "out.jsonl", None, True, False)
    assert (jsonl.form, jsonl.jsonl, jsonl.json, jsonl.line_by_line) == ("jsonl", True, True, True)
    flag_wins = OutputTarget.from_flags(tmp_path / "out.jsonl", "markdown", False, False)
    assert flag_wins.form == "markdown"
    corpus_text = OutputTarget.from_flags(tmp_path / "preds.txt", None, True, True)
    assert corpus_text.line_by_line and not corpus_text.jsonl
    with pytest.raises(dataclasses.FrozenInstanceError):
        screen.form = "json"  # type: ignore[misc]
    with pytest.raises(InputError, match="--resume continues a run that writes --output"):
        OutputTarget.from_flags(None, None, True, False).check()
    with pytest.raises(InputError, match="2 processes write one file"):
        screen.check(processes=2)
    whole = OutputTarget.from_flags(tmp_path / "out.md", None, True, False)
    with pytest.raises(InputError, match="holds markdown, written whole"):
        whole.check()
    jsonl.check(processes=4)  # a launch writes JSONL parts; --resume continues them
