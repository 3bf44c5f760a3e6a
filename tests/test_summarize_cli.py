"""``synopsis summarize`` end to end: methods, corpus mode, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import run_cli

from synopsis.cli import main
from synopsis.data.example import Example, write_examples
from synopsis.document import Document
from synopsis.summarizers.pointer_generator import bundled_model_dir

TEXT = (
    "Rivers flooded the valley after a week of rain. Three bridges were closed on Monday.\n\n"
    "Officials expect the bridges to reopen next week. A bakery in the town won an award."
)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(capsys, *args)


def test_lead_k_on_a_text_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT)
    code, out, _ = _run(["summarize", str(doc), "--method", "lead-2"], capsys)
    assert code == 0
    assert out.splitlines() == [
        "Rivers flooded the valley after a week of rain.",
        "Three bridges were closed on Monday.",
    ]


def test_corpus_mode_writes_predictions_by_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    examples = [
        Example("a", Document.from_text(TEXT), ["Bridges closed by floods reopen next week."]),
        Example("b", Document.from_sentences(["Cats sleep a lot.", "Dogs bark at night."]), ["Dogs bark."]),
    ]
    corpus = tmp_path / "corpus.jsonl"
    write_examples(examples, corpus)
    out_path = tmp_path / "pred.jsonl"
    code, _, err = _run(
        ["summarize", str(corpus), "--corpus", "synopsis", "--method", "oracle", "-o", str(out_path)], capsys
    )
    assert code == 0, err
    rows = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b"]
    assert rows[1]["prediction"] == "Dogs bark at night."
    assert rows[0]["prediction"].split("\n")[0] == "Officials expect the bridges to reopen next week."


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "file is empty"),
        (b"  \n\t\n", "file is empty"),
        (b"\x00\x01binary\x00", "binary"),
        (b"caf\xe9 au lait", "UTF-8"),
    ],
)
def test_bad_documents_get_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    doc = tmp_path / "bad.txt"
    doc.write_bytes(content)
    code, out, err = _run(["summarize", str(doc), "--method", "lead-3"], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and str(doc) in err
    assert "Traceback" not in err


def test_missing_file_unknown_method_and_misplaced_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["summarize", str(tmp_path / "nope.txt")], capsys)
    assert code == 2 and "no such file" in err
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT)
    code, _, err = _run(["summarize", str(doc), "--method", "lead3"], capsys)
    assert code == 2 and "unknown method 'lead3'" in err
    code, _, err = _run(["summarize", str(doc), "--method", "oracle"], capsys)
    assert code == 2 and "needs references" in err
    code, _, err = _run(["summarize", str(doc), "--method", "lead-3", "--word-heads", "4"], capsys)
    assert code == 2 and "--word-heads" in err


def test_huge_document_is_refused_quickly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)  # a sparse 50 MB file; refused before it is read
    code, _, err = _run(["summarize", str(big), "--method", "lead-3"], capsys)
    assert code == 2 and "--max-input-mb" in err and "50" in err


def test_corpus_with_a_very_short_document_is_summarized_with_a_one_line_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bundled model's minimum length (its generation_config.json) is lowered for a 4-token document: not
    a fatal error."""
    bundled = json.loads((bundled_model_dir() / "generation_config.json").read_text())
    corpus = tmp_path / "docs.jsonl"
    long_text = "The committee approved the new budget after a long debate about schools and roads. " * 3
    rows = [{"id": "long", "text": long_text}, {"id": "short", "text": "Budget approved today."}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "pred.jsonl"
    assert main(["summarize", str(corpus), "--corpus", "jsonl", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    minimum = bundled["min_length"]
    assert f"warning: short: document has 4 tokens, fewer than the minimum summary length {minimum}" in err
    assert "UserWarning" not in err
    predictions = [json.loads(line) for line in out.read_text().splitlines()]
    assert [p["id"] for p in predictions] == ["long", "short"] and all(p["prediction"] for p in predictions)
