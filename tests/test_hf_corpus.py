"""``--corpus hf``: Hugging Face datasets (``save_to_disk`` folders, parquet, arrow) wherever a corpus is
read: ``data convert``, ``summarize``, ``train`` (``corpus_options``); the column options; one-line errors."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from synopsis.cli import main
from synopsis.data.readers import read_corpus
from synopsis.errors import InputError

datasets = pytest.importorskip("datasets", reason="the `hf` extra (datasets) is not installed")

ROWS = {
    "train": {
        "article": [
            "The cat sat on the mat. It purred.",
            "Dogs bark at night. Neighbours complain.",
            "Rain fell.",
        ],
        "highlights": ["A cat sat.", "Dogs bark.", "It rained."],
        "uid": ["t0", "t1", "t2"],
    },
    "validation": {"article": ["Birds sing in spring."], "highlights": ["Birds sing."], "uid": ["v0"]},
}
COLUMNS = {"text_column": "article", "summary_column": "highlights", "id_column": "uid"}


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    folder = tmp_path / "saved"
    datasets.DatasetDict({k: datasets.Dataset.from_dict(v) for k, v in ROWS.items()}).save_to_disk(
        str(folder)
    )
    return folder


def _ids(name: str, path: Path, split: str | None, **options: object) -> list[str]:
    return [e.id for e in read_corpus(name, path, split=split, **{**COLUMNS, **options})]


def test_save_to_disk_parquet_and_arrow_read_alike(saved: Path, tmp_path: Path) -> None:
    examples = list(read_corpus("hf", saved, split="train", **COLUMNS))
    assert [e.id for e in examples] == ["t0", "t1", "t2"]
    assert examples[0].references == ["A cat sat."] and examples[0].document.text.startswith("The cat sat")
    assert _ids("hf", saved, "validation") == ["v0"]

    hub = tmp_path / "hub" / "data"  # the Hub's parquet layout: data/<split>-00000-of-0000N.parquet
    hub.mkdir(parents=True)
    for split, rows in ROWS.items():
        datasets.Dataset.from_dict(rows).to_parquet(str(hub / f"{split}-00000-of-00001.parquet"))
    assert _ids("hf", hub.parent, "train") == ["t0", "t1", "t2"]
    assert _ids("hf", hub / "validation-00000-of-00001.parquet", None) == ["v0"]

    arrow = next((saved / "train").glob("*.arrow"))  # a save_to_disk shard is an Arrow stream file
    assert _ids("hf", arrow, None) == ["t0", "t1", "t2"]
    # without an id column the ids are <split>-<row>
    assert _ids("hf", saved, "train", id_column=None) == ["train-0", "train-1", "train-2"]


def test_errors_are_one_line(saved: Path, tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(InputError, match=r"no split 'test' \(splits: train, validation\)"):
        list(read_corpus("hf", saved, split="test", **COLUMNS))
    with pytest.raises(InputError, match=r"give --split \(splits: train, validation\)"):
        list(read_corpus("hf", saved, **COLUMNS))
    with pytest.raises(InputError, match=r"train\]: row 0: no column 'text' \(--text-column\)"):
        list(read_corpus("hf", saved, split="train"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no .parquet or .arrow files"):
        list(read_corpus("hf", tmp_path / "empty"))

    real_import = builtins.__import__

    def no_datasets(name: str, *args: object, **kwargs: object) -> object:
        if name == "datasets":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(InputError, match=r"needs the `datasets` package: pip install 'synopsis\[hf\]'"):
        list(read_corpus("hf", saved, split="train"))


def test_data_convert_and_summarize_read_hf(saved: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "train.jsonl"
    assert main(["data", "convert", "--corpus", "hf", "--input", str(saved), "--split", "train",
                 "--text-column", "article", "--summary-column", "highlights", "--id-column", "uid",
                 "-o", str(out)]) == 0  # fmt: skip
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["t0", "t1", "t2"] and records[1]["references"] == ["Dogs bark."]

    predictions = tmp_path / "lead.jsonl"
    assert main(["summarize", str(saved), "--corpus", "hf", "--split", "validation", "--method", "lead-1",
                 "--text-column", "article", "--id-column", "uid", "-o", str(predictions)]) == 0  # fmt: skip
    assert "v0" in predictions.read_text(encoding="utf-8")


def test_trainers_read_hf_with_corpus_options(saved: Path) -> None:
    from synopsis.config import from_dict
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig, read_split
    from synopsis.training.seq2seq import load_examples

    assert [e.id for e in load_examples("hf", saved, "train", 2, COLUMNS)] == ["t0", "t1"]
    data = {"corpus": "hf", "path": str(saved), "corpus_options": COLUMNS}
    config = from_dict(PointerGeneratorTrainConfig, {"data": data})
    assert [e.id for e in read_split(config.data, "validation")] == ["v0"]


def test_evaluate_reads_references_from_a_dataset(saved: Path, tmp_path: Path) -> None:
    predictions = tmp_path / "preds.txt"
    predictions.write_text("\n".join(ROWS["train"]["highlights"]) + "\n", encoding="utf-8")
    report = tmp_path / "scores.json"
    assert main(["evaluate", "-p", str(predictions), "-r", str(saved), "--corpus", "hf", "--split", "train",
                 "--text-column", "article", "--summary-column", "highlights", "--metrics", "rouge",
                 "--bootstrap", "0", "--json", str(report)]) == 0  # fmt: skip
    scores = json.loads(report.read_text(encoding="utf-8"))
    assert (
        scores["num_examples"] == 3 and scores["rouge"]["rouge1"]["fmeasure"] == 1.0
    )  # equal to the references
    wrong = tmp_path / "wrong.txt"
    wrong.write_text("Nothing alike here.\nNor here.\nNo.\n", encoding="utf-8")
    assert main(["evaluate", "-p", str(wrong), "-r", str(saved), "--corpus", "hf", "--split", "train",
                 "--text-column", "article", "--summary-column", "highlights", "--metrics", "rouge",
                 "--bootstrap", "0", "--json", str(report)]) == 0  # fmt: skip
    assert json.loads(report.read_text(encoding="utf-8"))["rouge"]["rouge1"]["fmeasure"] < 0.5
