"""Issue 57 item 1: the bundled model only where it works. Its domain check asks "is this a paper abstract
like the model's training inputs?" (a style classifier read from ``style.json``), needs neither torch nor
the model's weights, and a summary the named model writes out of its domain carries a note."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from synopsis.cli import main
from synopsis.document import Document
from synopsis.errors import CheckpointError
from synopsis.summarizers.domain import (
    STYLE_FILE,
    StyleModel,
    bundled_domain_check,
    bundled_model_dir,
    style_tokens,
)

ROOT = Path(__file__).resolve().parents[1]
ABSTRACT = (ROOT / "examples" / "paper_abstract.txt").read_text(encoding="utf-8")


def _news(shared_data: Path) -> list[Document]:
    lines = (shared_data / "news" / "realsumm_cnndm.jsonl").read_text(encoding="utf-8").splitlines()
    return [Document.from_text(json.loads(line)["text"]) for line in lines]


def test_the_check_reads_no_torch_and_no_weights() -> None:
    code = (
        "import sys\n"
        "from synopsis.document import Document\n"
        "from synopsis.summarizers.domain import bundled_domain_check\n"
        f"far = bundled_domain_check().distances(Document.from_text({ABSTRACT!r}))\n"
        "print(far == [], 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "False"], out


def test_the_readme_example_is_in_domain_and_the_check_is_cached() -> None:
    check = bundled_domain_check()
    assert check is bundled_domain_check()
    assert check.distances(Document.from_text(ABSTRACT)) == []


def test_real_news_articles_are_not_paper_abstracts(shared_data: Path) -> None:
    """48 of 100 CNN/DailyMail articles passed the old check (length, headings, known words) and went to
    the bundled model; none of the 98 REALSumm articles (held out from fitting) does now."""
    check = bundled_domain_check()
    news = _news(shared_data)
    far = [check.distances(d) for d in news]
    assert all(far)
    style = [f for f in far if [d.measure for d in f] == ["style"]]
    assert len(style) >= 20  # the ones the old measures let through (24)
    assert style[0][0].brief.startswith("not a paper abstract (score ")


def test_most_scitldr_dev_abstracts_are_in_domain(shared_data: Path) -> None:
    rows = (shared_data / "scitldr" / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:100]
    check = bundled_domain_check()
    far = [check.distances(Document.from_sentences(json.loads(r)["source"])) for r in rows]
    assert sum(not f for f in far) >= 95
    assert all(d.measure == "style" for f in far for d in f)  # length, sections, vocabulary: all in


def test_ptb_escapes_read_as_the_characters_they_stand_for() -> None:
    assert style_tokens(["-", "lrb", "-", "`", "`", "x", "''", "-", "rrb", "-", "3.5"]) == [
        "(", "'", "'", "x", "''", ")", "<num>",
    ]  # fmt: skip


def test_the_style_resource_is_small_json_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    path = bundled_model_dir() / STYLE_FILE
    assert path.stat().st_size < 2**20
    style = StyleModel.load(bundled_model_dir())
    assert style is not None and 0 < style.threshold < 1 and style.weights
    assert StyleModel.load(tmp_path) is None  # a model of one's own has none: the other measures decide
    (tmp_path / STYLE_FILE).write_text('{"weights": {}}', encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"style\.json: not a style classifier"):
        StyleModel.load(tmp_path)


def test_the_named_model_out_of_its_domain_says_so_in_one_line(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    summarizer = PointerGeneratorSummarizer.from_pretrained()
    news = next(d for d in _news(shared_data) if d.num_words() < 500)
    (note,) = summarizer.notes([news])
    assert note is not None and "\n" not in note
    assert "not like its training abstracts" in note and "--method salient" in note
    assert summarizer.notes([Document.from_text(ABSTRACT)]) == [None]
    article = tmp_path / "article.txt"
    article.write_text(" ".join(s.text for s in news.sentences), encoding="utf-8")
    args = ["summarize", str(article), "--method", "pointer-generator", "--output-format", "json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "not like its training abstracts" in json.loads(captured.out)["note"]
    assert captured.err.count("not like its training abstracts") == 1
