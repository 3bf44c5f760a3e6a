"""``synopsis experiment hibrids``: base, SECTOK, HIBRIDS-ENC, -DEC on SciSummNet (Cao & Wang, 2022)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers.data import missing_shared_data

from synopsis.cli import main
from synopsis.config import load_config
from synopsis.document import Document, Section
from synopsis.experiments.hibrids_scisummnet import HibridsExperimentConfig, drop_abstract, split_papers

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
ALL_VARIANTS = ["base", "sectok", "lvlsectok", "hibrids-enc", "hibrids-dec"]


def test_shipped_config_is_valid() -> None:
    config = load_config(HibridsExperimentConfig, CONFIGS / "hibrids_scisummnet.yaml")
    assert config.variants == ALL_VARIANTS
    assert config.d_model % config.heads == 0 and config.layers >= 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"variants": ["base", "hibrids-s"]}, "choose from"),
        ({"variants": []}, "at least one"),
        ({"d_model": 30, "heads": 4}, "divisible"),
        ({"layers": 1}, "layers must be >= 2"),
        ({"dev_fraction": 1.0}, "dev_fraction"),
        ({"tokenizer": "t5"}, "corpus-bpe or gpt2"),
    ],
)
def test_config_rejects_bad_values(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HibridsExperimentConfig(**options)


def test_shipped_1024_config_is_issue_27_11b() -> None:
    """1,024 source tokens, at least 1,500 steps, the abstract out of the source; the 512 config unchanged."""
    config = load_config(HibridsExperimentConfig, CONFIGS / "hibrids_scisummnet_1024.yaml")
    assert (config.max_source_length, config.drop_abstract, config.train_examples) == (1024, True, None)
    assert config.max_steps >= 1500 and config.variants == ALL_VARIANTS
    assert not load_config(HibridsExperimentConfig, CONFIGS / "hibrids_scisummnet.yaml").drop_abstract


def test_every_hibrids_variant_is_built_on_lvlsectok(shared_data: Path, tmp_path: Path) -> None:
    """Issue 51 item 2: the paper (section 5) builds every HIBRIDS variant on LVLSECTOK, and the public code
    puts a depth token before each section of every HIBRIDS input. Each HIBRIDS variant starts from the
    LVLSECTOK weights (markers included) with zero tables, and its inputs carry the depth markers."""
    from tiny_models import save_tiny_bart

    from synopsis.checkpoint import load_tensors
    from synopsis.experiments.hibrids_scisummnet import VARIANTS, _variant_model
    from synopsis.models.inputs import Seq2SeqInputs
    from synopsis.models.seq2seq import load_seq2seq

    base = save_tiny_bart(tmp_path / "base", shared_data / "tokenizers")
    config = HibridsExperimentConfig()
    models = tmp_path / "models"
    lvlsectok = load_tensors(_variant_model(config, base, "lvlsectok", models) / "model.safetensors")
    document = Document(Section(paragraphs=[["Loose text."]], children=[Section("One", [["In one."]])]))
    hibrids = [name for name in VARIANTS if name.startswith("hibrids")]
    assert hibrids == ["hibrids-enc", "hibrids-dec"]
    for variant in hibrids:
        directory = _variant_model(config, base, variant, models)
        model, tokenizer = load_seq2seq(directory)
        assert model.config.model_type == "hibrids_bart" and model.config.section_markers == "lvlsectok"
        weights = load_tensors(directory / "model.safetensors")
        for name, weight in weights.items():
            if "hibrids" in name:
                assert not weight.any(), name
            else:
                assert torch.equal(weight, lvlsectok[name]), name
        text = Seq2SeqInputs(model.config, tokenizer).source_text(document)
        assert "[SEC-L1] One In one." in text, (variant, text)


def test_drop_abstract_removes_only_a_top_level_abstract_section() -> None:
    abstract = Section(heading="Abstract", paragraphs=[["We copy this."]])
    nested = Section(heading="Abstract", paragraphs=[["A subsection named Abstract stays."]])
    body = Section(heading="Introduction", paragraphs=[["Body text."]], children=[nested])
    joined = Section(heading="Abstract 1 Method", paragraphs=[["OCR joined two sections."]])
    document = Document(Section(children=[abstract, body, joined]))
    assert drop_abstract(document)
    assert [s.heading for s in document.root.children] == ["Introduction", "Abstract 1 Method"]
    assert [s.text for s in document.sentences] == [
        "Body text.", "A subsection named Abstract stays.", "OCR joined two sections."
    ]  # fmt: skip
    assert document.sentences[0].section.index == 1  # reindexed: the tree lost a node
    assert not drop_abstract(document)  # nothing left to drop
    starred = Document(Section(children=[Section(heading=" abstract* ", paragraphs=[["x"]]), body]))
    assert drop_abstract(starred) and [s.heading for s in starred.root.children] == ["Introduction"]


def test_drop_abstract_on_a_real_paper(shared_data: Path) -> None:
    from synopsis.training.seq2seq import load_examples

    paper = shared_data / "scisummnet" / "A00-1031"
    if not paper.is_dir():
        missing_shared_data(f"SciSummNet paper A00-1031 not found under {shared_data}")
    document = load_examples("scisummnet", paper, None, None)[0].document
    first = document.root.children[0]
    assert first.heading == "Abstract" and first.paragraphs
    abstract = {s.text for s in document.sentences if s.section is first}
    total = len(document.sentences)
    assert drop_abstract(document)
    assert document.root.children[0].heading == "Introduction"
    assert len(document.sentences) == total - len(abstract)
    assert not abstract & {s.text for s in document.sentences}


def test_split_is_deterministic_by_paper_id(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    for paper in ("C02", "A01", "B07", "A03"):
        (corpus / paper / "Reference_XML").mkdir(parents=True)
    train, dev, info = split_papers(corpus, tmp_path / "split", 0.25)
    assert sorted(p.name for p in train.iterdir()) == ["A01", "A03", "B07"]
    assert [p.name for p in dev.iterdir()] == ["C02"] and info["first_dev_id"] == "C02"
    again = split_papers(corpus, tmp_path / "split", 0.25)[2]  # re-running keeps the links
    assert again == info


@pytest.mark.slow
def test_tiny_run_writes_table_json_and_pngs(shared_data: Path, tmp_path: Path) -> None:
    if not (shared_data / "scisummnet").is_dir():
        missing_shared_data(f"SciSummNet not found under {shared_data}")
    out = tmp_path / "hibrids"
    code = main(
        [
            "experiment", "hibrids", "--data", str(shared_data), "-o", str(out), "--max-steps", "2",
            "--threads", "1", "--set", "eval_every=2", "--set", "train_examples=3", "--set", "dev_examples=2",
            "--set", "tokenizer_examples=3", "--set", "d_model=16", "--set", "ffn_dim=32",
            "--set", "vocab_size=400", "--set", "max_source_length=128", "--set", "eval_max_length=8",
        ]
    )  # fmt: skip
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert [r["variant"] for r in results["rows"]] == ALL_VARIANTS
    assert all(r["dev_loss"] > 0 for r in results["rows"])
    assert set(results["biases"]) == {"hibrids-enc", "hibrids-dec"}
    enc = results["biases"]["hibrids-enc"]
    assert list(enc["tables"]) == ["encoder layer 0", "encoder layer 1"]
    grid = enc["tables"]["encoder layer 1"]["grid"]
    assert len(grid) == len(enc["level_differences"]) and len(grid[0]) == len(enc["path_lengths"])
    assert list(results["biases"]["hibrids-dec"]["tables"]) == ["decoder layer 1"]
    table = (out / "table.md").read_text()
    starts = ("| base |", "| sectok |", "| lvlsectok |", "| hibrids-enc |", "| hibrids-dec |")
    assert sum(line.startswith(starts) for line in table.splitlines()) == 5
    assert "do NOT reproduce" in table and "dev loss" in table
    assert (out / "scores.png").stat().st_size > 1000 and (out / "bias_heatmap.png").stat().st_size > 1000
    assert results["run"]["wall_seconds"] > 0 and len(results["run"]["loadavg_before"]) == 3


@pytest.mark.slow
def test_tiny_run_without_abstract_reads_the_written_split(shared_data: Path, tmp_path: Path) -> None:
    """Three real papers (two with an <ABSTRACT>, one without): the runs read JSONL without abstracts."""
    from synopsis.data.example import read_examples

    papers = ("A00-1031", "A00-1043", "C00-1007")  # C00-1007 has no <ABSTRACT> element
    if not all((shared_data / "scisummnet" / p).is_dir() for p in papers):
        missing_shared_data(f"SciSummNet papers {papers} not found under {shared_data}")
    data = tmp_path / "data"
    for paper in papers:
        (data / "scisummnet").mkdir(parents=True, exist_ok=True)
        (data / "scisummnet" / paper).symlink_to(shared_data / "scisummnet" / paper)
    out = tmp_path / "hibrids"
    code = main(
        [
            "experiment", "hibrids", "--data", str(data), "-o", str(out), "--max-steps", "1",
            "--threads", "1", "--set", "eval_every=1", "--set", "dev_fraction=0.3",
            "--set", "d_model=16", "--set", "ffn_dim=32",
            "--set", "vocab_size=300", "--set", "max_source_length=64", "--set", "eval_max_length=4",
            "--set", "variants=[base]", "--set", "drop_abstract=true",
        ]
    )  # fmt: skip
    assert code == 0
    split = json.loads((out / "results.json").read_text())["split"]
    assert (split["train_abstracts_dropped"], split["train_without_abstract_section"]) == (2, 0)
    assert (split["dev_abstracts_dropped"], split["dev_without_abstract_section"]) == (0, 1)
    examples = {name: list(read_examples(out / "split" / f"{name}.jsonl")) for name in ("train", "dev")}
    assert [e.id for e in examples["train"]] == ["A00-1031", "A00-1043"]
    for example in examples["train"]:
        assert example.document.root.children[0].heading != "Abstract"
    assert "without the abstract (dropped from 2 train and 0 dev papers" in (out / "table.md").read_text()


def test_tree_probe_documents_scores_and_a_tiny_run(tmp_path) -> None:
    """Issue 27 item 11a: the target is the heading path of the section holding the marked sentence."""
    import json
    import random

    from synopsis.experiments.hibrids_probe import MARK, ProbeConfig, path_scores, probe_document, run_probe

    for seed in range(20):
        document, path = probe_document(random.Random(seed), 12)
        marked = [s for s in document.sentences if s.text.startswith(MARK)]
        assert len(marked) == 1
        section = marked[0].section
        expected = [s.heading for s in document.sections if s.is_ancestor_of(section) and s.heading]
        assert path == " > ".join([*expected, section.heading])
        assert 1 <= len(path.split(" > ")) <= 3
    scores = path_scores(["a > b", "a > c", "x"], ["a > b", "a > b", "a > b"])
    assert scores == {"exact_match": 100 / 3, "level_accuracy": 100 * 3 / 6}
    cfg = ProbeConfig(
        seeds=[0], variants=["base", "hibrids-enc+dec"], train_documents=8, test_documents=4, steps=1,
        batch_size=2, vocab_size=300,
    )  # fmt: skip
    table = run_probe(cfg, tmp_path, tmp_path)
    assert "| hibrids-enc+dec |" in table
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [r["variant"] for r in rows] == ["base", "hibrids-enc+dec"]


def test_probe_command_builds_its_config_from_flags_and_sets(monkeypatch, tmp_path) -> None:
    import synopsis.experiments.hibrids_probe as probe

    seen = []
    monkeypatch.setattr(probe, "run_probe", lambda cfg, output, data: seen.append(cfg) or "table")
    sets = ["--set", "train_documents=7"]
    args = ["experiment", "hibrids-probe", "-o", str(tmp_path), "--seeds", "3, 4", *sets]
    assert main(args) == 0
    assert main([*args, "--steps", "5"]) == 0
    assert [(c.seeds, c.steps, c.train_documents) for c in seen] == [([3, 4], 600, 7), ([3, 4], 5, 7)]
