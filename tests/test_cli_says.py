"""What the CLI and the service say (issue 60, item 5): the default's note names a checkpoint for what the
document is and is logged at INFO (the service: once per note); "model runs on" only when a model runs; the
counts on one screen agree; the run record names the method; ``synopsis models`` with an empty cache; the
usage line; ``--backend ctranslate2`` without CTranslate2."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.cli import one_line_error, run_cli

from synopsis.document import Document, Section
from synopsis.summarizers.pretrained import abstractive_hint, document_kind

ABSTRACT = Path(__file__).resolve().parents[1] / "examples" / "paper_abstract.txt"
SENTENCE = "The committee reviewed the budget and agreed to fund two new projects next year."


def _turns() -> Document:
    speakers = ("Professor A", "Grad B", "PhD C")
    turns = [[f"{speakers[i % 3]}: {SENTENCE}"] for i in range(30)]
    return Document(Section(paragraphs=turns))


def _paper() -> Document:
    headings = ("1 Introduction", "2 Related Work", "3 Method", "4 Experiments", "5 Conclusion")
    return Document(Section(children=[Section(heading=h, paragraphs=[[SENTENCE] * 5]) for h in headings]))


def _licence() -> Document:
    terms = (
        "The Licensor hereby grants you a worldwide licence to use the Software. The Software is provided "
        "without warranty of any kind, and in no event shall the Licensor be liable for any claim."
    )
    return Document(Section(heading=None, paragraphs=[[terms]] * 5), title="Terms")


def _prose() -> Document:
    return Document(Section(paragraphs=[[SENTENCE] * 5]))


@pytest.mark.parametrize(
    ("make", "kind", "model"),
    [
        (_turns, "dialogue", "philschmid/bart-large-cnn-samsum"),
        (_paper, "paper", "allenai/led-large-16384-arxiv"),
        (_licence, "legal", "google/pegasus-billsum"),
        (_prose, "prose", "facebook/bart-large-cnn"),
    ],
)
def test_the_note_names_a_checkpoint_for_what_the_document_is(make, kind: str, model: str) -> None:
    document = make()
    assert document_kind(document) == kind
    hint = abstractive_hint(document)
    assert f"name the pretrained model {model} (" in hint
    assert "--model" not in hint and "serve" not in hint  # words for every adapter, no flag


def test_the_default_logs_its_note_at_info_and_the_service_says_each_note_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from synopsis.cli.serve import OnceFilter, _log_config
    from synopsis.summarizers import load_summarizer

    default = load_summarizer(device="cpu")
    document = _paper()
    with caplog.at_level("INFO", logger="synopsis"):
        default.summarize([document])
    notes = [r for r in caplog.records if "Extractive summary" in r.getMessage()]
    assert [r.levelname for r in notes] == ["INFO"]  # news for the reader, not a warning
    assert "model runs on" not in caplog.text  # salient sentences: the bundled model never ran
    config = _log_config("info")
    assert config["handlers"]["stderr"]["filters"] == ["once"]  # the service's one handler
    once = OnceFilter(limit=2)
    logger = "synopsis.summarizers.default"
    records = [logging.LogRecord(logger, logging.INFO, "", 0, m, None, None) for m in "aabca"]
    assert [once.filter(r) for r in records] == [True, False, True, True, True]  # "a" was forgotten
    other = logging.LogRecord("synopsis.serve", logging.INFO, "", 0, "b", None, None)
    assert once.filter(other) and once.filter(other)  # only the notes are said once


def _long_markdown(tmp_path: Path) -> Path:
    parts = ["# Widget guide\n\nThis guide explains the widget, which many teams use every day.\n"]
    for i in range(12):
        said = " ".join(f"Sentence {j} of part {i + 1} tells how teams use widgets." for j in range(8))
        parts.append(f"## Part {i + 1}\n\n{said}\n")
    path = tmp_path / "guide.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _cli(*args: str, env: dict[str, str] | None = None, code: str = "") -> subprocess.CompletedProcess[str]:
    program = f"{code}\nimport sys\nfrom synopsis.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=120,
    )  # fmt: skip


def test_one_screen_counts_the_same_words_and_sections(tmp_path: Path) -> None:
    done = _cli("summarize", str(_long_markdown(tmp_path)), env={"SYNOPSIS_PROGRESS_INTERVAL": "0"})
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "model runs on" not in err  # the default wrote the document's own sentences: no model ran
    longer = next(line for line in err.splitlines() if "longer than the model's input" in line)
    note = next(line for line in err.splitlines() if "Extractive summary" in line)
    assert not note.startswith("warning:")
    words = re.search(r"not one \(([\d,]+) words, 12 sections\)", note)  # the API's document.words
    assert words and longer.startswith(f"guide: {words[1]} words (") and "tokens), longer than" in longer
    bar = [line for line in err.splitlines() if line.startswith("summarizing")]
    assert bar and all(line.startswith("summarizing the opening and 12 sections: ") for line in bar)
    assert "/13 parts (" in bar[-1]


def test_the_run_record_names_the_method_that_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text(SENTENCE + " " + SENTENCE.replace("two", "three"), encoding="utf-8")
    for given, method in (([], "default"), (["--method", "lead-3"], "lead-3")):
        out = tmp_path / f"out-{method}.md"
        code, _, err = run_cli(capsys, "summarize", doc, "-o", out, *given)
        assert code == 0, err
        record = json.loads(out.with_name(out.name + ".run.json").read_text())
        assert record["method"] == method


def test_models_with_an_empty_cache_names_the_bundled_model_and_how_to_add_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    code, out, _ = run_cli(capsys, "models")
    assert code == 0
    assert "the bundled pointer-generator" in out and "--model facebook/bart-large-cnn" in out


def test_the_usage_line_names_the_inputs_as_click_does(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "summarize", "--help")
    assert code == 0
    assert "Usage: synopsis summarize [OPTIONS] INPUTS..." in out


def test_ctranslate2_absent_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    model = tmp_path / "bart"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "bart"}')
    done = _cli(
        "summarize", str(ABSTRACT), "--model", str(model), "--backend", "ctranslate2",
        code="import sys; sys.modules['ctranslate2'] = None  # as where the ct2 extra is not installed",
    )  # fmt: skip
    one_line_error(done.returncode, done.stderr, "pip install 'synopsis[ct2]'")
