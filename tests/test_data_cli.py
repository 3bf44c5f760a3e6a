"""``synopsis data convert|stats`` through ``synopsis.cli.main``: outputs, counts and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import run_cli as run

from synopsis.data.example import read_examples
from synopsis.data.readers import read_corpus
from synopsis.data.stats import corpus_stats


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def scitldr_lines(n: int = 3) -> list[str]:
    return [
        json.dumps({"paper_id": f"p{i}", "source": [f"Sentence {i}."], "target": [f"T {i}."]})
        for i in range(n)
    ]


# --------------------------------------------------------------------------- convert
def test_convert_scitldr_dev_writes_our_jsonl(shared_data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "dev.jsonl"
    code, stdout, _ = run(
        capsys, "data", "convert", "--corpus", "scitldr", "--input", shared_data / "scitldr",
        "--split", "dev", "--output", out,
    )  # fmt: skip
    assert code == 0
    assert "wrote 619 examples" in stdout and "skipped 0 bad lines" in stdout
    converted = [e.to_dict() for e in read_examples(out)]
    original = [e.to_dict() for e in read_corpus("scitldr", shared_data / "scitldr", split="dev")]
    assert converted == original


def test_convert_generic_jsonl_with_column_options(tmp_path: Path, capsys) -> None:
    source = tmp_path / "raw.jsonl"
    rows = [{"article": "The cat sat. The dog ran.", "highlights": ["H1", "H2"], "uid": "x"}]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    code, stdout, _ = run(
        capsys, "data", "convert", "--corpus", "jsonl", "--input", source, "--output", out,
        "--text-column", "article", "--summary-column", "highlights", "--id-column", "uid",
    )  # fmt: skip
    assert code == 0 and "wrote 1 examples" in stdout
    (example,) = read_examples(out)
    assert example.id == "x" and example.references == ["H1", "H2"]
    assert example.document.paragraphs == [["The cat sat.", "The dog ran."]]


def test_malformed_line_is_named_and_skip_bad_lines_reports_the_count(tmp_path: Path, capsys) -> None:
    lines = scitldr_lines()
    lines.insert(1, '{"paper_id": "broken", "source": [')
    source = tmp_path / "s.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    out.write_text("previous content\n")
    code, _, err = run(capsys, "data", "convert", "--corpus", "scitldr", "--input", source, "-o", out)
    assert_one_line_error(code, err, "s.jsonl:2", "malformed JSON")
    assert out.read_text() == "previous content\n"  # nothing overwritten
    code, stdout, _ = run(
        capsys, "data", "convert", "--corpus", "scitldr", "--input", source, "-o", out, "--skip-bad-lines"
    )
    assert code == 0 and "wrote 3 examples" in stdout and "skipped 1 bad lines" in stdout
    assert len(out.read_text().splitlines()) == 3


def test_convert_refuses_to_overwrite_its_input(tmp_path: Path, capsys) -> None:
    source = tmp_path / "s.jsonl"
    source.write_text("\n".join(scitldr_lines()) + "\n")
    code, _, err = run(capsys, "data", "convert", "--corpus", "scitldr", "--input", source, "-o", source)
    assert_one_line_error(code, err, "overwrite the input")


# --------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"", "file is empty"),
        (b"   \n\n\t \n", "file is empty"),
        (b"\x00\x01\x02binary\x00", "binary"),
        (b'{"paper_id": "caf\xe9"}\n', "not valid UTF-8"),
    ],
)
@pytest.mark.parametrize("command", ["convert", "stats"])
def test_bad_files_give_one_line_errors(
    tmp_path: Path, capsys, content: bytes, fragment: str, command
) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_bytes(content)
    out = tmp_path / "out.jsonl"
    convert = ["data", "convert", "--corpus", "scitldr", "--input", source, "-o", out]
    argv = convert if command == "convert" else []
    argv = argv or ["data", "stats", source, "--corpus", "scitldr"]
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, "bad.jsonl", fragment)
    assert not out.exists()


def test_missing_input_and_unknown_corpus(tmp_path: Path, capsys) -> None:
    code, _, err = run(capsys, "data", "stats", tmp_path / "nope.jsonl", "--corpus", "synopsis")
    assert_one_line_error(code, err, "nope.jsonl", "no such file")
    code, _, err = run(
        capsys, "data", "convert", "--corpus", "wiki", "--input", tmp_path, "-o", tmp_path / "o.jsonl"
    )
    assert_one_line_error(code, err, "unknown corpus 'wiki'")
    code, _, err = run(capsys, "data", "stats", tmp_path, "--corpus", "cnn")
    assert_one_line_error(code, err, "no .story files")


def test_option_the_corpus_does_not_take(shared_data: Path, capsys) -> None:
    args = ("data", "stats", shared_data / "scitldr", "--split", "dev", "--corpus", "scitldr")
    args += ("--text-column", "x")
    code, _, err = run(capsys, *args)
    assert_one_line_error(code, err, "corpus 'scitldr' has no option 'text_column'")


def test_a_50_mb_document_through_the_cli(tmp_path: Path, capsys) -> None:
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as handle:
        handle.truncate(50 * 1024 * 1024)
    code, _, err = run(capsys, "data", "stats", huge, "--corpus", "documents")
    assert_one_line_error(code, err, "huge.txt", "50.0 MB", "--max-input-mb")
    small = tmp_path / "small.txt"
    small.write_text("A short document. With two sentences.\n")
    code, out, _ = run(capsys, "data", "stats", small, "--max-input-mb", "0.5")
    assert code == 0 and "sentences per document" in out


def test_empty_corpus_does_not_replace_the_output(tmp_path: Path, capsys) -> None:
    source = tmp_path / "s.jsonl"
    source.write_text("\n".join(["{not json"] * 2) + "\n")
    out = tmp_path / "out.jsonl"
    out.write_text("keep\n")
    code, _, err = run(
        capsys, "data", "convert", "--corpus", "scitldr", "--input", source, "-o", out, "--skip-bad-lines"
    )
    assert_one_line_error(code, err, "no examples found")
    assert out.read_text() == "keep\n"


# --------------------------------------------------------------------------- stats
def test_stats_table_and_json_match_the_library(shared_data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "stats.json"
    code, stdout, _ = run(capsys, "data", "stats", shared_data / "scitldr", "--split", "dev", "--json", out)
    assert code == 0
    for label in ("examples", "words per document", "sentences per reference", "section depth"):
        assert label in stdout
    numbers = json.loads(out.read_text())
    expected = corpus_stats(read_corpus("scitldr", shared_data / "scitldr", split="dev"))
    assert numbers["examples"] == 619 == expected["examples"]
    assert numbers["document_words"] == pytest.approx(expected["document_words"])
    assert numbers["references_per_example"] == pytest.approx(expected["references_per_example"])
    assert numbers["references_per_example"] > 1.5  # dev has several TLDRs per paper
    raw = [json.loads(line) for line in (shared_data / "scitldr" / "dev.jsonl").read_text().splitlines()]
    words = [sum(len(s.split()) for s in r["source"]) for r in raw]
    assert numbers["document_words"]["mean"] == pytest.approx(sum(words) / len(words))
    assert numbers["document_words"]["max"] == max(words)


def test_stats_of_instruction_examples(tmp_path: Path, capsys) -> None:
    meeting = {
        "meeting_transcripts": [{"speaker": "A", "content": "We decided . Then we left ."}],
        "topic_list": [{"topic": "Decision", "relevant_text_span": [["0", "0"]]}],
        "general_query_list": [{"query": "Summarize.", "answer": "They decided. They left."}],
        "specific_query_list": [
            {"query": "What?", "answer": "A decision.", "relevant_text_span": [["0", "0"]]}
        ],
    }
    (tmp_path / "M1.json").write_text(json.dumps(meeting))
    out = tmp_path / "s.json"
    code, _, _ = run(capsys, "data", "stats", tmp_path, "--corpus", "qmsum", "--json", out)
    numbers = json.loads(out.read_text())
    assert code == 0
    assert numbers["examples"] == 2 and numbers["documents"] == 1 and numbers["with_instruction"] == 1.0
    assert numbers["section_depth_max"] == 1 and numbers["sections_mean"] == 1.0
    assert numbers["document_sentences"]["mean"] == 2 and numbers["reference_sentences"]["max"] == 2


def test_convert_a_folder_of_documents(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Title\n\n## Part\n\nSome text here. More text.\n")
    (folder / "b.txt").write_text("Plain text document.\n")
    (folder / "c.txt").write_text("   \n")
    out = tmp_path / "docs.jsonl"
    code, _, err = run(capsys, "data", "convert", "--input", folder, "-o", out)
    assert_one_line_error(code, err, "c.txt", "file is empty")
    code, stdout, _ = run(capsys, "data", "convert", "--input", folder, "-o", out, "--skip-bad-lines")
    assert code == 0 and "wrote 2 examples" in stdout and "skipped 1 bad lines" in stdout
    first, second = read_examples(out)
    assert (first.id, first.document.title, first.references) == ("a", "Title", [])
    assert first.document.sections[1].heading == "Part" and second.document.text == "Plain text document."
