"""Domain-LM training: the learning-rate halving rule, resume, the experiment on tiny data, CLI errors."""

from __future__ import annotations

import json
import math

import pytest
from helpers.domain_lm import setup_training, tiny_documents, write_jsonl

from synopsis.cli import main
from synopsis.data.lm_corpus import AttributedDocument
from synopsis.experiments.domain_lm import ExperimentConfig, ModelSizes, run_experiment
from synopsis.generation.sampling import sample
from synopsis.models.domain_lm import MODEL_VERSION
from synopsis.training.language_model import (
    LMTrainConfig,
    ScheduleState,
    perplexity,
    train_language_model,
    update_schedule,
)

# -------------------------------------------------------------------------------------- halving rule


def test_halving_rule_follows_the_dev_log_likelihood_ratio() -> None:
    state = ScheduleState(learning_rate=0.1)
    state = update_schedule(state, 5.0, 1.003)  # first epoch: nothing to compare with
    assert (state.learning_rate, state.halving, state.stopped) == (0.1, False, False)
    state = update_schedule(state, 4.0, 1.003)  # ratio 1.25: keep going at full rate
    assert (state.learning_rate, state.halving) == (0.1, False)
    state = update_schedule(state, 3.995, 1.003)  # ratio 1.00125 < 1.003: start halving
    assert (state.learning_rate, state.halving, state.stopped) == (0.05, True, False)
    state = update_schedule(state, 3.5, 1.003)  # a good epoch: halving, once started, continues
    assert (state.learning_rate, state.stopped) == (0.025, False)
    state = update_schedule(state, 3.6, 1.003)  # worse again while halving: stop
    assert state.stopped and state.best_dev_nll == 3.5


# -------------------------------------------------------------------------------------------- training


def test_training_lowers_dev_perplexity_and_attributes_help() -> None:
    model, train, dev, _ = setup_training()
    before = perplexity(model, dev)
    result = train_language_model(
        model, train, dev, LMTrainConfig(batch_size=4, bptt=8, max_epochs=6, learning_rate=1.0)
    )
    after = perplexity(model, dev)
    assert after < 0.75 * before and math.isclose(after, result.best_dev_perplexity, rel_tol=1e-5)
    # The words of a domain depend on its attributes, so giving them must beat giving none.
    assert perplexity(model, dev) < perplexity(model, dev.with_attributes({}))


def test_resume_reproduces_the_next_batch_loss(tmp_path) -> None:
    config = LMTrainConfig(batch_size=4, bptt=8, max_epochs=2, learning_rate=0.5)
    straight: dict[tuple[int, int], float] = {}
    model, train, dev, _ = setup_training()
    train_language_model(
        model, train, dev, config, on_batch=lambda e, b, loss: straight.__setitem__((e, b), loss)
    )

    model, train, dev, _ = setup_training()
    first = LMTrainConfig(**{**config.__dict__, "max_epochs": 1})
    train_language_model(model, train, dev, first, run_dir=tmp_path)
    resumed: dict[tuple[int, int], float] = {}
    model, train, dev, _ = setup_training(
        seed=123
    )  # different init: everything must come from the checkpoint
    train_language_model(
        model,
        train,
        dev,
        config,
        run_dir=tmp_path,
        resume=True,
        on_batch=lambda e, b, loss: resumed.__setitem__((e, b), loss),
    )
    assert min(resumed) == (2, 0)
    for key, loss in resumed.items():
        assert loss == pytest.approx(straight[key], rel=1e-6), key


def test_sampling_is_seeded_and_avoids_unk() -> None:
    model, _, _, vocab = setup_training()
    attrs = {"style": "spoken", "topic": "public"}
    a = sample(model, vocab, attrs, prompt=["uh"], length=20, seed=3)
    assert a == sample(model, vocab, attrs, prompt=["uh"], length=20, seed=3)
    assert len(a) == 20 and "<unk>" not in a


# --------------------------------------------------------------------------------------- experiment


@pytest.mark.slow
def test_experiment_on_tiny_data_writes_the_three_tables(tmp_path) -> None:
    corpus = tmp_path / "tiny.jsonl"
    write_jsonl(tiny_documents(lines_per_doc=8), corpus)
    config = ExperimentConfig(
        corpus=str(corpus),
        domains=[],  # inferred from the documents' attributes
        max_tokens_per_domain=None,
        min_count=2,
        model=ModelSizes(embedding_dim=8, hidden_dim=8),
        training=LMTrainConfig(batch_size=2, bptt=8, max_epochs=1, learning_rate=0.5),
        held_out=["style=spoken, topic=public", "style=written, topic=everyday"],
    )
    results = run_experiment(config, tmp_path / "out")
    tables = results["tables"]
    targets = config.held_out
    assert list(tables["table4"]) == [
        "baseline",
        "in[style+topic]",
        "out[style+topic]",
        "in_out[style+topic]",
    ]
    assert len(tables["table5"]) == 4 and all(list(row) == targets for row in tables["table5"].values())
    assert list(tables["table6"]) == ["baseline", "in[style]", "in[topic]", "in[style+topic]"]
    # Table 5's correct-attribute cell is Table 4's (in) number for the same model.
    for target in targets:
        assert tables["table5"][target][target] == pytest.approx(tables["table4"]["in[style+topic]"][target])
    for name in ("results.json", "tables.md", "table5_heatmap.png"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert "## Table 5" in (tmp_path / "out" / "tables.md").read_text()
    # A rerun reuses the finished models instead of training them again.
    again = run_experiment(config, tmp_path / "out")
    assert again["tables"] == tables
    # A model recorded by an older version of DomainLM is retrained, not reused.
    settings_file = sorted((tmp_path / "out").rglob("settings.json"))[0]
    settings = json.loads(settings_file.read_text())
    assert settings["model_version"] == MODEL_VERSION
    settings_file.write_text(json.dumps({**settings, "model_version": MODEL_VERSION - 1}))
    (settings_file.parent / "result.json").write_text(json.dumps({"stale": True}))
    run_experiment(config, tmp_path / "out")
    assert json.loads(settings_file.read_text())["model_version"] == MODEL_VERSION
    assert "stale" not in json.loads((settings_file.parent / "result.json").read_text())
    # ... but retrains a model whose settings changed, instead of mixing results.
    config.training.max_epochs, config.variants, config.single_attribute_models = 2, ["in"], False
    config.held_out = targets[:1]
    changed = run_experiment(config, tmp_path / "out")
    assert changed["held_out"][targets[0]]["models"]["in[style+topic]"]["epochs"] == 2


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_bad_input_gives_one_line_errors(tmp_path, capsys) -> None:
    fake = tmp_path / "corpus.zip"
    fake.write_text("nope")
    assert main(["experiment", "domain-lm", "--corpus", str(fake), "-o", str(tmp_path / "o")]) == 2
    assert "cannot read as a zip" in capsys.readouterr().err
    assert main(["lm", "sample", "--model", str(tmp_path / "none")]) == 2
    assert "no such checkpoint" in capsys.readouterr().err
    config = tmp_path / "grid.yaml"
    config.write_text(
        "corpus: x.jsonl\ndomains:\n"
        "  - attributes: {style: a, topic: x}\n  - attributes: {style: a, topic: y}\n"
        "  - attributes: {style: b, topic: x}\n"
    )
    assert main(["experiment", "domain-lm", "--config", str(config), "-o", str(tmp_path / "o")]) == 2
    assert "missing domain style=b, topic=y" in capsys.readouterr().err


def test_cli_train_perplexity_sample(tmp_path, capsys) -> None:
    corpus = tmp_path / "tiny.jsonl"
    docs = tiny_documents(lines_per_doc=6)
    write_jsonl(docs, corpus)
    run = tmp_path / "run"
    args = [
        "lm",
        "train",
        "--corpus",
        str(corpus),
        "-o",
        str(run),
        "--held-out",
        "style=written, topic=public",
    ]
    assert main([*args, "--max-epochs", "1"]) == 0
    assert (run / "model" / "vocab.json").exists() and (run / "curves.png").exists()
    assert main([*args, "--max-epochs", "1"]) == 2  # refuses to overwrite a run without --resume
    assert "already holds a run" in capsys.readouterr().err
    assert main([*args, "--max-epochs", "2", "--resume"]) == 0
    assert json.loads((run / "train_result.json").read_text())["epochs"] == 2
    capsys.readouterr()
    unseen = tmp_path / "unseen.jsonl"
    write_jsonl([AttributedDocument("u", {"style": "sung", "topic": "public"}, docs[0].lines)], unseen)
    assert main(["lm", "perplexity", "--model", str(run / "model"), "--corpus", str(unseen)]) == 0
    captured = capsys.readouterr()
    assert "style=sung" in captured.out and "all" in captured.out
    # The fallback is announced as one line on stderr, not a Python warning listing.
    assert captured.err.count("warning: attribute 'style=sung' was not seen in training") == 1
    assert "UserWarning" not in captured.err
    assert main(["lm", "sample", "--model", str(run / "model"), "-a", "style=spoken", "--length", "5"]) == 0
    assert len(capsys.readouterr().out.split()) >= 1
    assert main(["lm", "sample", "--model", str(run / "model"), "-a", "spoken"]) == 2
    assert "expected name=value" in capsys.readouterr().err
