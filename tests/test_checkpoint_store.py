"""The checkpoint store and the one reader of stored JSON: every model directory synopsis writes itself (a
trainer's checkpoint, the pointer-generator's export, the domain LM's) goes through synopsis.checkpoint,
says what it is, is written atomically, and every load checks that its weights are finite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from synopsis.checkpoint import (
    CHECKPOINT_TYPE,
    CheckpointManager,
    load_checkpoint,
    read_config,
    save_checkpoint,
)
from synopsis.config import read_config_file
from synopsis.errors import CheckpointError, ConfigError, InputError
from synopsis.io import read_json
from synopsis.models.domain_lm import DomainLM, DomainLMConfig
from synopsis.models.pointer_generator import PointerGenerator, config_for_vocab
from synopsis.vocab import Vocab

WORDS = "the model copies rare words from the article into the summary".split()


def pointer_generator() -> tuple[PointerGenerator, Vocab]:
    vocab = Vocab.build([WORDS], max_size=50)
    torch.manual_seed(0)
    return PointerGenerator(config_for_vocab(vocab, embedding_dim=4, hidden_dim=4)), vocab


def test_read_json_names_the_file_and_line_of_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    with pytest.raises(CheckpointError, match=r"missing a\.json; not a synopsis checkpoint$"):
        read_json(path, "a synopsis checkpoint", CheckpointError)
    path.write_text('{\n  "a": 1,\n  "b": \n}\n', encoding="utf-8")
    with pytest.raises(CheckpointError) as caught:
        read_json(path, error=CheckpointError)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: corrupt JSON (") and "\n" not in message
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError, match=r"a\.json: line 1: not valid UTF-8"):
        read_json(path)
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"a\.json: expected a JSON object, got list"):
        read_json(path, error=ConfigError, expect=dict)
    assert read_json(path) == [1, 2]


def test_stored_json_files_share_the_one_error(tmp_path: Path) -> None:
    """The vocabulary, a JSON config and a checkpoint's config.json: file and line of the bad JSON."""
    bad = '{"itos": ["a",\n ]}'
    (tmp_path / "vocab.json").write_text(bad, encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab\.json:2: corrupt JSON"):
        Vocab.load(tmp_path / "vocab.json")
    (tmp_path / "config.json").write_text(bad, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config\.json:2: not valid JSON"):
        read_config_file(tmp_path / "config.json")
    model, vocab = pointer_generator()
    model.save_pretrained(tmp_path / "m", vocab)
    (tmp_path / "m" / "config.json").write_text(bad, encoding="utf-8")
    with pytest.raises(CheckpointError, match=r"m/config\.json:2: corrupt JSON"):
        PointerGenerator.from_pretrained(tmp_path / "m")


def test_exported_models_say_what_they_are_and_other_types_are_refused(tmp_path: Path) -> None:
    model, vocab = pointer_generator()
    model.save_pretrained(tmp_path / "pg", vocab)
    assert json.loads((tmp_path / "pg" / "config.json").read_text())[CHECKPOINT_TYPE] == "pointer-generator"
    lm = DomainLM(DomainLMConfig(vocab_size=7, embedding_dim=4, hidden_dim=4))
    lm.save_pretrained(tmp_path / "lm", extra={"lowercase": False})
    assert read_config(tmp_path / "lm") == lm_config(lm)  # the type is the store's, not the model's
    with pytest.raises(CheckpointError, match="a domain-lm model, not a pointer-generator model"):
        PointerGenerator.from_pretrained(tmp_path / "lm")
    with pytest.raises(CheckpointError, match="a pointer-generator checkpoint, not a domain-lm checkpoint"):
        DomainLM.from_pretrained(tmp_path / "pg")
    assert load_checkpoint(tmp_path / "lm").state == {"lowercase": False}


def lm_config(model: DomainLM) -> dict:
    from dataclasses import asdict

    return asdict(model.config)


def test_directories_without_a_type_still_load(tmp_path: Path) -> None:
    """Exports written before ``checkpoint_type`` existed."""
    model, vocab = pointer_generator()
    model.save_pretrained(tmp_path / "m", vocab)
    config_path = tmp_path / "m" / "config.json"
    config = json.loads(config_path.read_text())
    del config[CHECKPOINT_TYPE]
    config_path.write_text(json.dumps(config))
    loaded, _ = PointerGenerator.from_pretrained(tmp_path / "m")
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)


def test_an_export_that_fails_half_way_leaves_the_old_directory_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the weights were replaced first and a failure writing config.json left new weights with the
    old config; the store writes the whole directory aside and renames it into place."""
    model, vocab = pointer_generator()
    model.save_pretrained(tmp_path / "m", vocab)
    before = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    with torch.no_grad():
        model.out_vocab.bias.add_(1.0)
    import synopsis.checkpoint

    def fail(path, data):  # noqa: ANN001, ANN202
        raise OSError("disk full")

    monkeypatch.setattr(synopsis.checkpoint, "write_json", fail)
    with pytest.raises(OSError, match="disk full"):
        model.save_pretrained(tmp_path / "m", vocab)
    assert {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()} == before


def test_nan_weights_are_refused_on_every_load(tmp_path: Path) -> None:
    model, vocab = pointer_generator()
    with torch.no_grad():
        model.out_vocab.bias[0] = float("nan")
    model.save_pretrained(tmp_path / "m", vocab)
    with pytest.raises(CheckpointError, match="'out_vocab.bias' holds NaN or infinite values"):
        PointerGenerator.from_pretrained(tmp_path / "m")
    lm = DomainLM(DomainLMConfig(vocab_size=7, embedding_dim=4, hidden_dim=4))
    with torch.no_grad():
        lm.embedding.weight[1, 0] = float("inf")
    lm.save_pretrained(tmp_path / "lm")
    with pytest.raises(CheckpointError, match="holds NaN or infinite values"):
        DomainLM.from_pretrained(tmp_path / "lm")


def test_the_hibrids_experiment_reads_its_biases_through_the_store(tmp_path: Path) -> None:
    """Before, ``learned_biases`` read model.safetensors directly: NaN tables were plotted."""
    from synopsis.experiments.hibrids_scisummnet import learned_biases

    manager = CheckpointManager(tmp_path)
    table = torch.zeros(40, 2)
    table[0, 0] = float("nan")
    manager.save(3, model_state={"encoder.layers.0.hibrids.weight": table}, config={})
    with pytest.raises(CheckpointError, match="holds NaN or infinite values"):
        learned_biases(tmp_path)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        learned_biases(tmp_path / "other")


def test_trainer_checkpoints_keep_their_type(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "c", {"w": torch.ones(2)}, {"a": 1}, state={"step": 4}, checkpoint_type="x")
    loaded = load_checkpoint(tmp_path / "c", checkpoint_type="x")
    assert loaded.config == {"a": 1} and loaded.state["step"] == 4
    with pytest.raises(CheckpointError, match="an? x checkpoint, not a y checkpoint"):
        load_checkpoint(tmp_path / "c", checkpoint_type="y")


def test_a_corrupt_saved_run_config_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    """Before, resuming a pointer-generator run whose train_config.json was cut short raised a
    JSONDecodeError traceback."""
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig, Trainer

    CheckpointManager(tmp_path).save(1, model_state={"w": torch.ones(1)}, config={})
    (tmp_path / "train_config.json").write_text('{"seed": 1,\n "data": {', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"train_config\.json:2: corrupt JSON"):
        Trainer(PointerGeneratorTrainConfig(), tmp_path, resume=True, progress=False)
