"""The paper-scale configs in ``configs/`` load through the trainers' own config loader (as ``synopsis train``
reads them, with what the launch command in their header gives on the command line), keep the papers'
settings, and state the hardware, batch, time and launch command they expect."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from synopsis.config import load_config, merge

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
SEQ2SEQ = ["hie_bart_cnndm.yaml", "hibrids_led_large_arxiv.yaml", "instructsum_flan_t5_large.yaml"]
PAPER_SCALE = ["pointer_generator_cnndm.yaml", *SEQ2SEQ]


def _header(name: str) -> str:
    lines = (CONFIGS / name).read_text(encoding="utf-8").splitlines()
    end = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return "\n".join(line[1:] for line in lines[:end])


def _launches(name: str) -> list[list[str]]:
    """The header's commands that launch training with this config (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", _header(name))
    commands = [shlex.split(x) for x in joined.splitlines() if "torchrun" in x or "accelerate launch" in x]
    return [c for c in commands if "train" in c and f"configs/{name}" in c]


def _cli_options(command: list[str]) -> dict[str, str]:
    """What ``synopsis train seq2seq``'s --model / -o / --train put into the config (cli/seq2seq.py)."""
    keys = {"--model": "model", "-m": "model", "-o": "output_dir", "--output": "output_dir"}
    keys["--train"] = "train_path"
    return {keys[flag]: value for flag, value in zip(command, command[1:], strict=False) if flag in keys}


@pytest.mark.parametrize("name", PAPER_SCALE)
def test_header_states_hardware_batch_time_and_launch(name: str) -> None:
    header = _header(name)
    for field in ("Hardware:", "Batch:", "Time (estimate", "Launch:", "synopsis summarize"):
        assert field in header, f"{name}: no {field!r} in its header"
    launches = _launches(name)
    assert any(c[0] == "torchrun" and "--no-python" in c for c in launches), name
    words = " ".join(header.split())
    assert "nothing is downloaded" in words or "local paths only" in words  # weights and data: local dirs


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_seq2seq_configs_load_as_the_launch_commands_give_them(name: str) -> None:
    from synopsis.models.seq2seq import converter_options
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    for command in _launches(name):
        config = load_config(Seq2SeqTrainConfig, CONFIGS / name, merge(_cli_options(command), {}))
        assert config.model.startswith("/models/") and config.output_dir.startswith("runs/")
        assert config.batch_size % 8 == 0, "the global batch splits over 8 GPUs"
        method = config.convert["method"]
        options = set(config.convert) - {"method"}
        assert options <= converter_options(method), (name, options)
        assert f"global {config.batch_size * config.grad_accum_steps} per optimizer step" in _header(name)


def test_papers_settings() -> None:
    from synopsis.training.pointer_generator import PointerGeneratorTrainConfig
    from synopsis.training.seq2seq import Seq2SeqTrainConfig

    pg = load_config(PointerGeneratorTrainConfig, CONFIGS / "pointer_generator_cnndm.yaml")
    assert (pg.model.hidden_dim, pg.model.embedding_dim, pg.vocab.max_size, pg.optim.batch_size) == (
        256, 128, 50_000, 16
    )  # fmt: skip
    optim = (pg.optim.learning_rate, pg.optim.initial_accumulator, pg.schedule.coverage_steps)
    assert optim == (0.15, 0.1, 3000)
    assert (pg.data.max_source_tokens, pg.data.max_target_tokens) == (400, 100)

    given = {"model": "/models/x", "output_dir": "runs/x"}
    hie = load_config(Seq2SeqTrainConfig, CONFIGS / "hie_bart_cnndm.yaml", given)
    assert hie.convert == {"method": "hie-bart", "word_heads": 14}  # 14:2 of BART-large's 16 heads
    led = load_config(Seq2SeqTrainConfig, CONFIGS / "hibrids_led_large_arxiv.yaml", given)
    assert (led.convert["method"], led.max_source_length) == ("hibrids", 16384)
    flan = load_config(Seq2SeqTrainConfig, CONFIGS / "instructsum_flan_t5_large.yaml", given)
    assert flan.convert == {"method": "instructsum"}


@pytest.mark.parametrize("name", SEQ2SEQ)
def test_seq2seq_configs_fit_their_hardware_by_their_own_plan(
    name: str, shared_data: Path, tmp_path: Path, monkeypatch
) -> None:
    """``--dry-run`` on the published architecture of the config's starting checkpoint (config.json only):
    it fits the devices the config names, and the header states the plan's figures."""
    from helpers.paper_models import save_architecture

    from synopsis.training.seq2seq import Seq2SeqTrainConfig, memory_plan

    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)  # a torchrun launch: the config decides
    command = _launches(name)[0]
    architecture = Path(_cli_options(command)["model"]).name
    model = save_architecture(architecture, tmp_path / architecture, shared_data / "tokenizers")
    config = load_config(Seq2SeqTrainConfig, CONFIGS / name, {"model": str(model), "output_dir": "runs/x"})
    plan = memory_plan(config)
    _check_stated_plan(name, plan, config)


def _check_stated_plan(name: str, plan, config) -> None:  # noqa: ANN001
    """The plan fits the devices the config names, and the header states its figures (at its precision)."""
    assert config.device_memory_gb is not None and plan.fits, plan.report()
    header = " ".join(_header(name).split())
    stated = re.search(r"Memory plan .*?([\d,]+) parameters; per device ([\d.]+) GiB of (\d+)", header)
    assert stated, f"{name}: no memory plan in its header"
    assert int(stated[1].replace(",", "")) == plan.parameters
    decimals = len(stated[2].partition(".")[2])
    assert float(stated[2]) == round(plan.memory_per_device_bytes / 2**30, decimals)
    assert float(stated[3]) == config.device_memory_gb and f"{config.devices}x" in header


RECURRENT = ["pointer_generator_cnndm.yaml", "pointer_generator_scitldr.yaml", "domain_lm.yaml"]


@pytest.mark.parametrize("name", RECURRENT)
def test_recurrent_configs_fit_their_hardware_by_their_own_plan(name: str, request, monkeypatch) -> None:
    """``train pointer-generator --dry-run`` (config alone) and ``experiment domain-lm --dry-run`` (the
    corpus for its vocabulary): each fits the hardware its config names, and the header says the figures."""
    monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
    if name.startswith("pointer_generator"):
        from synopsis.training.pointer_generator import PointerGeneratorTrainConfig, memory_plan

        config = load_config(PointerGeneratorTrainConfig, CONFIGS / name)
        plan = memory_plan(config)
        assert plan.optimizer_bytes == 4 * plan.parameters  # Adagrad's accumulator
    else:
        from synopsis.experiments.domain_lm import ExperimentConfig, memory_plan

        corpus = str(request.getfixturevalue("shared_data") / "masc" / "masc_tagged.zip")
        config = load_config(ExperimentConfig, CONFIGS / name, {"corpus": corpus})
        plan = memory_plan(config)
        assert plan.optimizer_bytes == 0  # plain SGD
    _check_stated_plan(name, plan, config)


def test_a_misspelt_conversion_option_is_named_with_the_ones_it_takes() -> None:
    from synopsis.errors import ConfigError
    from synopsis.models.seq2seq import convert_seq2seq

    with pytest.raises(ConfigError, match=r"unknown option\(s\) encoders; it takes: decoder, "):
        convert_seq2seq("hibrids", None, None, encoders=False)  # checked before the model is touched
