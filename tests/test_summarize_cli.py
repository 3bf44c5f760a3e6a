"""``synopsis summarize`` end to end: methods, corpus mode, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.fakes import fake_gpus

from synopsis.cli import main
from synopsis.data.example import Example, write_examples
from synopsis.devices import resolve_device
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
    # named: the default gives such text (not a paper abstract) to the extractive method (issue 57)
    args = ["summarize", str(corpus), "--corpus", "jsonl", "--method", "pointer-generator", "-o", str(out)]
    assert main(args) == 0
    err = capsys.readouterr().err
    minimum = bundled["min_length"]
    assert f"warning: short: document has 4 tokens, fewer than the minimum summary length {minimum}" in err
    assert "UserWarning" not in err
    predictions = [json.loads(line) for line in out.read_text().splitlines()]
    assert [p["id"] for p in predictions] == ["long", "short"] and all(p["prediction"] for p in predictions)


# ------------------------------------------------------------------------------ --device and --dtype
NO_GPU = "torch sees no CUDA GPU on this machine; use --device cpu or auto"


def test_a_gpu_torch_does_not_see_is_a_one_line_error_before_anything_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpus(monkeypatch, 0)
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT)
    corpus = ["summarize", str(tmp_path / "corpus.jsonl"), "--corpus", "jsonl"]
    for command in (["summarize", str(doc)], corpus):
        code, out, err = _run([*command, "--device", "cuda:7"], capsys)
        assert code == 2 and out == ""
        assert err == f"error: --device cuda:7: {NO_GPU}\n"


def test_device_cpu_runs_there_and_says_so_on_stderr_unless_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT)
    on_cpu = ["summarize", str(doc), "--method", "pointer-generator", "--device", "cpu"]
    code, out, err = _run(on_cpu, capsys)
    assert code == 0 and out.strip()
    assert [line for line in err.splitlines() if "runs on" in line] == ["model runs on cpu (float32)"]
    code, out, err = _run(["-q", *on_cpu], capsys)
    assert code == 0 and out.strip() and err == ""


def test_the_options_reach_load_summarizer_and_auto_picks_the_gpu_torch_sees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import synopsis.summarizers
    from synopsis.summarizers.extractive import LeadSummarizer

    fake_gpus(monkeypatch, 2)
    asked: list[dict[str, object]] = []

    def recording(*args: object, **kwargs: object) -> LeadSummarizer:
        asked.append(kwargs)
        return LeadSummarizer(1)

    monkeypatch.setattr(synopsis.summarizers, "load_summarizer", recording)
    doc = tmp_path / "doc.txt"
    doc.write_text(TEXT)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": TEXT}) + "\n")
    runs = {
        ("--dtype", "bf16"): (torch.device("cuda", 0), "bf16"),
        ("--device", "cuda:1"): (torch.device("cuda", 1), None),
        ("--device", "cpu", "--dtype", "fp16"): (torch.device("cpu"), "fp16"),
    }
    for flags, wanted in runs.items():
        for inputs in ([str(doc)], [str(corpus), "--corpus", "jsonl", "-o", str(tmp_path / "out.txt")]):
            code, _, err = _run(["summarize", *inputs, *flags], capsys)
            assert code == 0, err
            # auto and cpu reach it as they are, resolved when a model is placed (an extractive method
            # never loads torch)
            assert (resolve_device(asked[-1]["device"]), asked[-1]["dtype"]) == wanted
    code, _, err = _run(["summarize", str(doc), "--dtype", "fp64"], capsys)
    assert code == 2 and "fp32, bf16, fp16" in err


def test_a_launch_of_n_processes_keeps_one_gpu_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from synopsis.cli.summarize import process_device
    from synopsis.errors import InputError
    from synopsis.sharding import Shard

    fake_gpus(monkeypatch, 2)
    second = Shard(1, 2, torch.device("cuda", 1))  # the launcher's GPU of process 1
    assert process_device("auto", second) == process_device("cuda", second) == torch.device("cuda", 1)
    assert resolve_device(process_device("cpu", second)) == torch.device("cpu")
    with pytest.raises(InputError, match="2 processes were launched, one GPU each"):
        process_device("cuda:0", second)
    assert process_device("cuda:1", Shard()) == torch.device("cuda", 1)  # one process: any GPU


# ---------------------------------------------------------------------- issue 48 item 5: small things
def test_help_names_every_method_and_what_the_default_does(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    code, out, _ = _run(["summarize", "--help"], capsys)
    flat = re.sub(r"[\s│]+", " ", out)
    assert code == 0
    for method in ("pointer-generator:", "seq2seq:", "salient:", "centrality:", "lead-K:", "oracle:"):
        assert method in flat, method
    assert "Without it (the default): the bundled pointer-generator for a paper abstract" in flat


def test_a_dash_reads_standard_input_with_its_format_sniffed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    markdown = "# Floods\n\n## Valley\n\n" + TEXT + "\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(markdown))
    code, out, _ = _run(["summarize", "-", "--method", "lead-1", "--output-format", "json"], capsys)
    assert code == 0
    record = json.loads(out)
    assert record["prediction"] == "Rivers flooded the valley after a week of rain."
    assert record["summary"][0]["sources"][0]["path"] == [0]  # read as Markdown: under "## Valley"


def test_inputs_are_checked_before_any_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.cli import one_line_error

    from synopsis.cli.summarize import ModelSpec

    def no_load(self: ModelSpec) -> None:
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(ModelSpec, "load", no_load)
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n")
    one_line_error(*_run(["summarize", str(empty)], capsys)[::2], "empty")
    text = tmp_path / "notes.txt"
    text.write_text(TEXT)
    # --format json names the input's format: the error says where JSON output is asked for
    one_line_error(*_run(["summarize", str(text), "--format", "json"], capsys)[::2], "--output-format json")


def test_the_note_is_printed_once_and_empty_sections_not_at_all(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentence = "The committee approved the new budget for schools after a long debate about buses."
    parts = "\n\n".join(f"## Part {i}\n\n" + " ".join([sentence] * 3) for i in range(3))
    readme = tmp_path / "README.md"
    readme.write_text(f"# Tool\n\n{parts}\n\n## Empty\n\n```\nmake all\n```\n\n## Nothing\n")
    code, out, err = _run(["summarize", str(readme), "--by", "section"], capsys)
    assert code == 0
    assert "Extractive summary" not in out and err.count("Extractive summary") == 1
    assert "Empty" not in out and "Nothing" not in out and "# Part 1" in out
    code, out, err = _run(["summarize", str(readme), "--by", "section", "--output-format", "json"], capsys)
    assert json.loads(out)["note"].startswith("Extractive summary") and err.count("Extractive summary") == 1
