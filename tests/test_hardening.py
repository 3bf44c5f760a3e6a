"""Issue 40 (hardening) on the CLI and the library: bounded reads, one-line errors instead of tracebacks,
resumes that refuse mixed output, linear cost of many sections. Each test failed before its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.cli import one_line_error
from helpers.cli import run_cli as run

from synopsis.errors import InputError
from synopsis.io import iter_jsonl, read_text

TEXT = "Rivers flooded the valley. Three bridges were closed.\n\nOfficials expect them to reopen."


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


# ----------------------------------------------------------------------------- 1: bounded reads
def test_read_bounded_stops_at_the_limit_of_a_file_that_reports_size_zero() -> None:
    from synopsis.io import read_bounded

    assert os.stat("/dev/zero").st_size == 0  # what --max-input-mb trusted
    with pytest.raises(InputError, match="larger than the 1 MB limit"):
        read_bounded("/dev/zero", 1024 * 1024)


def test_summarize_dev_zero_is_refused_at_the_document_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "summarize", "/dev/zero", "--method", "lead-3", "--max-input-mb", "1")
    one_line_error(code, err, "/dev/zero", "1 MB limit", "--max-input-mb")


def test_a_fifo_is_read_only_up_to_its_limit(tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    stop = threading.Event()

    def writer() -> None:
        try:
            with open(fifo, "wb") as handle:
                while not stop.is_set():
                    handle.write(b"word " * 4096)
        except BrokenPipeError:
            pass

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        with pytest.raises(InputError, match="larger than the 0.5 MB limit"):
            read_text(fifo, max_bytes=512 * 1024)
    finally:
        stop.set()
        thread.join(5)


def test_a_jsonl_line_without_end_stops_at_the_line_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import synopsis.io

    monkeypatch.setattr(synopsis.io, "MAX_LINE_BYTES", 1000)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "' + "x" * 5000 + '"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"c.jsonl:1: line longer than"):
        list(iter_jsonl(corpus))


def test_token_file_dev_zero_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "serve", "--auth-token-file", "/dev/zero", "--port", "1")
    one_line_error(code, err, "--auth-token-file", "/dev/zero", "limit")


def test_corpus_detection_reads_a_bounded_first_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import synopsis.data.readers as readers

    monkeypatch.setattr(readers, "MAX_LINE_BYTES", 1000)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("x" * 100_000, encoding="utf-8")
    with pytest.raises(InputError, match="first line is not JSON"):
        readers.detect_corpus(corpus)


# ----------------------------------------------------------------------------- 7: one line, not a traceback
def test_deeply_nested_json_document_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = tmp_path / "deep.json"
    document.write_text('{"paragraphs": ' + nested_json(100_000) + "}", encoding="utf-8")
    code, _, err = run(capsys, "summarize", document, "--method", "lead-3")
    one_line_error(code, err, "deep.json", "nested too deeply")


def test_document_json_sections_nested_past_the_recursion_limit_are_one_line(tmp_path: Path) -> None:
    from synopsis.document import Document

    data: dict = {"paragraphs": [["Deep."]]}
    for _ in range(5000):
        data = {"paragraphs": [], "sections": [data]}
    with pytest.raises(InputError, match="nested too deeply"):
        Document.from_dict(data)


@pytest.mark.parametrize("skip", [False, True])
def test_deeply_nested_jsonl_line(tmp_path: Path, skip: bool) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(nested_json(100_000) + '\n{"id": "a"}\n', encoding="utf-8")
    if skip:
        stats: dict[str, int] = {}
        assert [record for _, record in iter_jsonl(corpus, skip_bad_lines=True, stats=stats)] == [{"id": "a"}]
        assert stats["skipped"] == 1
    else:
        with pytest.raises(InputError, match=r"c.jsonl:1: malformed JSON \(nested too deeply\)"):
            list(iter_jsonl(corpus))


# ----------------------------------------------------------------------------- 8: symlink loop
def test_a_symlink_loop_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    code, _, err = run(capsys, "summarize", loop, "--method", "lead-3")
    one_line_error(code, err, "loop of symbolic links")


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    from tiny_models import save_tiny_bart

    return save_tiny_bart(tmp_path_factory.mktemp("bart") / "bart", shared_data / "tokenizers")


def _variant(tiny_bart: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(tiny_bart, tmp_path / "model"))


@pytest.mark.parametrize(("key", "value"), [("d_model", "NaN"), ("encoder_layers", '"abc"')])
def test_a_config_json_with_a_bad_size_is_one_line(
    tiny_bart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str
) -> None:
    model = _variant(tiny_bart, tmp_path)
    config = json.loads((model / "config.json").read_text())
    config[key] = "@@"
    (model / "config.json").write_text(json.dumps(config).replace('"@@"', value))
    document = tmp_path / "d.txt"
    document.write_text(TEXT)
    code, _, err = run(capsys, "summarize", document, "--model", model)
    one_line_error(code, err, "config.json", key)


def test_a_tokenizer_json_that_is_not_a_tokenizer_is_one_line(
    tiny_bart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _variant(tiny_bart, tmp_path)
    (model / "tokenizer.json").write_text('{"hello": 1}')
    document = tmp_path / "d.txt"
    document.write_text(TEXT)
    code, _, err = run(capsys, "summarize", document, "--model", model)
    one_line_error(code, err, "cannot load the tokenizer")


def test_pickled_weights_are_refused_with_the_command_that_converts_them(
    tiny_bart: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    import torch
    from safetensors.torch import load_file

    model = _variant(tiny_bart, tmp_path)
    torch.save(load_file(str(model / "model.safetensors")), model / "pytorch_model.bin")
    (model / "model.safetensors").unlink()
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("a pickle was loaded"))
    document = tmp_path / "d.txt"
    document.write_text(TEXT)
    code, _, err = run(capsys, "summarize", document, "--model", model)
    line = one_line_error(code, err, "pytorch_model.bin", "model.safetensors")
    command = line.split("first: ", 1)[1].replace("DIR", str(model))
    monkeypatch.undo()
    assert command.startswith("python -c ")
    subprocess.run([sys.executable, "-c", command[len("python -c ") :].split('"')[1], str(model)], check=True)
    assert (model / "model.safetensors").is_file()


def test_ctrl_c_while_the_command_loads_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys
    import tomllib

    from synopsis.__main__ import run as launcher

    class Interrupting:
        def find_spec(self, name: str, *_: object) -> None:
            if name == "synopsis.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "synopsis.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    assert launcher() == 130
    assert capsys.readouterr().err == "interrupted (Ctrl-C)\n"
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["synopsis"] == "synopsis.__main__:run"


# ----------------------------------------------------------------------------- 4: many sections, linear cost
def test_summarizing_many_sections_looks_at_each_section_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sections done after each batch are found from where the last batch stopped; the table from a
    summary node to its section was rebuilt for every batch (sections x batches lookups)."""
    import builtins

    from synopsis.document import Document, Section
    from synopsis.summarizers import load_summarizer
    from synopsis.summarizers import sections as by_section

    lookups = 0

    def counted_id(value: object) -> int:
        nonlocal lookups
        lookups += 1
        return builtins.id(value)

    monkeypatch.setattr(by_section, "id", counted_id, raising=False)
    lead = load_summarizer("lead-3")
    done: list[str | None] = []
    for count in (250, 2000):
        lookups = 0
        done.clear()
        children = [Section(heading=f"S{i}", paragraphs=[[f"Item {i} is here."]]) for i in range(count)]
        by_section.summarize_by_section(
            lead,
            [Document(Section(children=children))],
            batch_size=16,
            on_section=lambda _, s: done.append(s.heading),
        )
        assert done == [f"S{i}" for i in range(count)]
        assert lookups <= 3 * count, (count, lookups)


# ------------------------------------------------------------------------- 6: --resume refuses mixed output
def _corpus(path: Path, count: int) -> Path:
    rows = [
        {"id": f"doc{i}", "text": f"Document {i} opens here. It has a second sentence. Then a third one."}
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_resume_with_another_method_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus, output = _corpus(tmp_path / "c.jsonl", 4), tmp_path / "out.jsonl"
    args = ["summarize", corpus, "--corpus", "jsonl", "--output", output]
    assert run(capsys, *args, "--method", "lead-3")[0] == 0
    lines = output.read_text().splitlines()
    output.write_text("\n".join(lines[:2]) + "\n")  # as if it was stopped half-way
    code, _, err = run(capsys, *args, "--method", "lead-2", "--resume")
    one_line_error(code, err, "--resume", "method", '"lead-3" then, "lead-2" now')
    assert output.read_text().splitlines() == lines[:2]  # untouched
    assert run(capsys, *args, "--method", "lead-3", "--resume")[0] == 0
    assert output.read_text().splitlines() == lines


def test_resume_refuses_ids_that_are_not_in_the_corpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, output = _corpus(tmp_path / "c.jsonl", 3), tmp_path / "out.jsonl"
    args = ["summarize", corpus, "--corpus", "jsonl", "--output", output, "--method", "lead-3"]
    assert run(capsys, *args)[0] == 0
    with output.open("a") as handle:
        handle.write(json.dumps({"id": "stranger", "prediction": "Not from this corpus."}) + "\n")
    code, _, err = run(capsys, *args, "--resume")
    one_line_error(code, err, "out.jsonl:4", "'stranger'")


def test_resume_of_a_plain_output_longer_than_the_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, output = _corpus(tmp_path / "c.jsonl", 2), tmp_path / "out.txt"
    args = ["summarize", corpus, "--corpus", "jsonl", "--output", output, "--method", "lead-3"]
    assert run(capsys, *args)[0] == 0
    with output.open("a") as handle:
        handle.write("One line too many.\n")
    code, _, err = run(capsys, *args, "--resume")
    one_line_error(code, err, "3 predictions", "2 documents")


# ----------------------------------------------------------------------------- issue 50
def test_the_markdown_parser_stops_at_the_section_limit() -> None:
    """Before, the section limit was checked once the whole document was parsed: 1.2 million one-word
    headings took minutes and gigabytes first. Now markdown-it's block parser stops at the limit."""
    from synopsis.data.readers.markdown import parse_markdown_text
    from synopsis.document import ParseBudget, parse_budget

    with parse_budget(ParseBudget(sections=100, flags={"sections": "--max-sections"})) as budget:
        with pytest.raises(InputError, match=r"more than 100 sections.*\(--max-sections\)"):
            parse_markdown_text("#\nw.\n" * 200_000)
    assert budget.counted["sections"] == 101  # not 200,000


@pytest.mark.parametrize(
    ("text", "budget", "counted"),
    [
        ("w.\n\n" * 100_000, {"blocks": 50}, "blocks"),  # plain text: paragraphs split lazily
        ("w.\n\n" * 100_000, {"words": 50}, "words"),
        ("# T\n\n" + "- w.\n" * 100_000, {"blocks": 50}, "blocks"),  # Markdown list items
    ],
)
def test_readers_count_blocks_and_words_as_they_go(text: str, budget: dict, counted: str) -> None:
    from synopsis.data.readers import parse_document
    from synopsis.document import ParseBudget, parse_budget

    with parse_budget(ParseBudget(**budget)) as used:
        with pytest.raises(InputError, match="more than 50"):
            parse_document(text)
    assert used.counted[counted] == 51


def test_a_document_json_is_counted_and_its_nesting_bounded() -> None:
    from synopsis.document import Document, ParseBudget, parse_budget

    sections = [{"heading": f"S{i}", "paragraphs": [["W."]]} for i in range(1000)]
    with parse_budget(ParseBudget(sections=10)) as used:
        with pytest.raises(InputError, match="more than 10 sections"):
            Document.from_dict({"paragraphs": [], "sections": sections})
    assert used.counted["sections"] == 11
    data: dict = {"paragraphs": [["Deep."]]}
    for _ in range(150):  # within Python's recursion limit, past the sections' depth limit
        data = {"paragraphs": [], "sections": [data]}
    with pytest.raises(InputError, match="nested too deeply"):
        Document.from_dict(data)


def test_a_read_stops_when_its_request_has_ended() -> None:
    from synopsis.data.readers import parse_document
    from synopsis.document import ParseBudget, parse_budget

    ended = iter([False] * 5 + [True] * 10**6)
    with parse_budget(ParseBudget(cancelled=lambda: next(ended))) as used:
        with pytest.raises(InputError, match="its request ended"):
            parse_document("w.\n\n" * 10_000)
    assert used.counted["blocks"] < 10  # of 10,000


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"title": "T \ud800", "paragraphs": [["A b c."]]}, "doc.json.title"),
        ({"id": "x\udfff", "paragraphs": [["A b c."]]}, "doc.json.id"),
        ({"paragraphs": [], "sections": [{"heading": "H\ud800", "paragraphs": []}]}, ".sections[0].heading"),
        ({"paragraphs": [["A b c.", "D \udc00 e."]]}, "doc.json.paragraphs[0][1]"),
    ],
)
def test_a_lone_surrogate_in_document_json_is_one_line_and_leaves_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: dict, field: str
) -> None:
    """Before: a UnicodeEncodeError traceback that left an empty -o file and its sidecar behind."""
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(document), encoding="utf-8")  # ensure_ascii: the surrogate as \\ud800
    output = tmp_path / "out.txt"
    code, _, err = run(capsys, "summarize", path, "--method", "lead-3", "-o", output)
    one_line_error(code, err, field, "lone surrogate")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]


def test_a_jsonl_corpus_from_a_pipe_is_read_in_one_pass(tmp_path: Path) -> None:
    """Before: ``io.UnsupportedOperation`` (``seek(0)``) from a pipe or a FIFO."""
    import threading

    fifo = tmp_path / "corpus"
    os.mkfifo(fifo)
    lines = [json.dumps({"id": str(i), "text": f"Sentence {i} here. And more."}) for i in range(3)]

    def writer() -> None:
        with open(fifo, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        assert [where for where, _ in iter_jsonl(fifo)] == [f"{fifo}:{i}" for i in (1, 2, 3)]
    finally:
        thread.join(5)
    with pytest.raises(InputError, match="name its corpus with --corpus"):
        from synopsis.data.readers import detect_corpus

        detect_corpus("/dev/stdin" if not os.isatty(0) else fifo)


def test_a_jsonl_file_with_a_nul_in_its_head_is_still_refused_as_binary(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_bytes(b'{"id": "a"}\n{"x": "\x00"}\n')
    with pytest.raises(InputError, match="binary"):
        list(iter_jsonl(corpus, skip_bad_lines=True))


def test_a_deep_yaml_config_is_one_line(tmp_path: Path) -> None:
    """Before: a ``RecursionError`` traceback."""
    from synopsis.config import parse_overrides, read_config_file
    from synopsis.errors import ConfigError

    config = tmp_path / "deep.yaml"
    for depth in (2000, 40):
        config.write_text("a: " + "[" * depth + "]" * depth, encoding="utf-8")
        with pytest.raises(ConfigError, match="nested too deeply"):
            read_config_file(config)
    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_overrides(["a=" + "[" * 2000 + "]" * 2000])
    config.write_text("a: [[1, 2], {b: [3]}]", encoding="utf-8")
    assert read_config_file(config) == {"a": [[1, 2], {"b": [3]}]}


def test_a_resume_without_its_sidecar_records_the_earlier_lines_as_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, the new sidecar described only the second run, as if it had written every line."""
    corpus, output = _corpus(tmp_path / "c.jsonl", 4), tmp_path / "out.jsonl"
    args = ["summarize", corpus, "--corpus", "jsonl", "--output", output, "--method", "lead-3"]
    assert run(capsys, *args)[0] == 0
    lines = output.read_text().splitlines()
    output.write_text("\n".join(lines[:2]) + "\n")
    sidecar = tmp_path / "out.jsonl.run.json"
    sidecar.unlink()
    assert run(capsys, *args, "--resume")[0] == 0
    record = json.loads(sidecar.read_text())
    assert record["unrecorded_lines"] == 2 and record["method"] == "lead-3"
    assert output.read_text().splitlines() == lines
    assert run(capsys, *args, "--resume")[0] == 0  # the record still matches these options
    assert json.loads(sidecar.read_text())["unrecorded_lines"] == 2
