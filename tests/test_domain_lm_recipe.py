"""The domain LM's paper recipe: its schedule by default (the fast one a separate config), model selection
over the paper's size grid on dev, and perplexity with and without <unk> targets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from helpers.domain_lm import setup_training, tiny_documents, write_jsonl
from torch.nn import functional as F

from synopsis.config import load_config
from synopsis.data.lm_corpus import TokenStream, batchify
from synopsis.experiments.domain_lm import GRIDS, ExperimentConfig, ModelSizes, run_experiment
from synopsis.training.language_model import LMTrainConfig, evaluate, perplexity, train_language_model

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_default_config_is_the_papers_schedule_and_the_fast_one_says_how_it_departs() -> None:
    paper = load_config(ExperimentConfig, CONFIGS / "domain_lm.yaml")
    t = paper.training
    assert (t.learning_rate, t.halving_threshold, t.max_epochs) == (0.1, 1.003, None)
    assert ExperimentConfig().training == LMTrainConfig()  # the code's default is the paper's too
    assert LMTrainConfig().learning_rate == 0.1 and LMTrainConfig().max_epochs is None
    fast = load_config(ExperimentConfig, CONFIGS / "domain_lm_fast.yaml")
    assert (fast.training.learning_rate, fast.training.max_epochs) == (0.5, 6)
    header = (CONFIGS / "domain_lm_fast.yaml").read_text().split("\ncorpus:")[0]
    assert "departs" in header and "0.5" in header and "6 epochs" in header
    assert "Departures" in (CONFIGS / "domain_lm.yaml").read_text().split("\ncorpus:")[0]


def test_without_an_epoch_cap_the_halving_rule_stops_training() -> None:
    model, train, dev, _ = setup_training()
    result = train_language_model(model, train, dev, LMTrainConfig(batch_size=4, bptt=8, learning_rate=0.5))
    rates = [epoch["learning_rate"] for epoch in result.history]
    assert result.epochs == len(rates) > 2
    assert rates[0] == 0.5 and rates[-1] < rates[0]  # halving started ...
    halved = rates.index(next(r for r in rates if r < 0.5))
    assert all(
        b == a / 2 for a, b in zip(rates[halved - 1 :], rates[halved:], strict=False)
    )  # ... and went on


def test_perplexity_without_unk_targets_leaves_them_out() -> None:
    model, _, _, vocab = setup_training()
    docs = tiny_documents(lines_per_doc=4, seed=1)
    for doc in docs[::3]:  # some words the vocabulary never saw
        doc.lines.append(["qwerty", "and", "zxcv", "a", "asdf"])
    dev = TokenStream.from_documents(docs, vocab)
    total, count = evaluate(model, dev)
    known_total, known_count = evaluate(model, dev, skip_target=vocab.unk_id)
    # by hand: the same windows, the <unk> targets' NLL and count removed
    ids, groups = batchify(dev, 1)
    targets = ids[:, 1:].flatten()
    unk = int((targets == vocab.unk_id).sum())
    assert unk > 0 and count - known_count == unk
    model.eval()
    with torch.no_grad():
        table = dev.mask_table(model.attribute_mask)
        logits, _ = model(ids[:, :-1], table[groups[:, :-1]], None)
        nll = F.cross_entropy(logits.flatten(0, 1), targets, reduction="none")
    assert total == pytest.approx(float(nll.sum()), rel=1e-4)
    assert known_total == pytest.approx(float(nll[targets != vocab.unk_id].sum()), rel=1e-4)
    assert perplexity(model, dev, skip_target=vocab.unk_id) == pytest.approx(
        math.exp(known_total / known_count)
    )


@pytest.mark.slow
def test_grid_chooses_each_models_sizes_on_dev_and_reports_them(tmp_path: Path) -> None:
    corpus = tmp_path / "tiny.jsonl"
    write_jsonl(tiny_documents(lines_per_doc=8), corpus)
    grid = {"embedding_dim": [4, 8], "hidden_dim": [6], "bptt": [4, 8]}
    config = ExperimentConfig(
        corpus=str(corpus),
        domains=[],
        max_tokens_per_domain=None,
        min_count=2,
        variants=["baseline", "in"],
        single_attribute_models=False,
        model=ModelSizes(embedding_dim=8, hidden_dim=8),
        training=LMTrainConfig(batch_size=2, bptt=8, max_epochs=1, learning_rate=0.5),
        held_out=["style=spoken, topic=public"],
        grid=grid,
    )
    results = run_experiment(config, tmp_path / "out")
    for name, result in results["held_out"][config.held_out[0]]["models"].items():
        tried = result["grid_dev_perplexity"]
        assert len(tried) == 4
        best = min(tried, key=lambda r: r["dev_perplexity"])
        assert result["chosen_setting"] == {k: best[k] for k in ("embedding_dim", "hidden_dim", "bptt")}
        assert result["best_dev_perplexity"] == best["dev_perplexity"]
        assert result["settings"]["model"]["embedding_dim"] == best["embedding_dim"]
        assert result["settings"]["training"]["bptt"] == best["bptt"]
        assert "test_perplexity_known_words" in result and result["test_perplexity_known_words"] > 0
        assert name in results["tables"]["table4_known_words"]
    tables = (tmp_path / "out" / "tables.md").read_text()
    assert "Sizes chosen on dev per model" in tables and "known words only" in tables


def test_grid_presets_and_the_cli_option() -> None:
    from synopsis.cli.lm import _load_config
    from synopsis.errors import ConfigError

    assert GRIDS["paper"] == {
        "embedding_dim": [100, 200, 300],
        "hidden_dim": [50, 100, 150],
        "bptt": [4, 8, 16],
    }
    assert _load_config(None, None, None, None, "paper").size_grid() == GRIDS["paper"]
    assert _load_config(None, None, None, None, "cpu").size_grid() == GRIDS["cpu"]
    assert _load_config(None, None, None, None, "none").size_grid() is None
    assert _load_config(None, None, None, None).size_grid() is None
    for bad in ("huge", {"embedding_dim": [100]}):
        with pytest.raises(ConfigError):
            load_config(ExperimentConfig, None, {"grid": bad})
    assert json.dumps(GRIDS)  # JSON-able, as results.json records the config
