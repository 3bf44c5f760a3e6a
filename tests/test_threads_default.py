"""Issue 38 item 5: without --threads, a command computes on the cores other processes leave free."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from synopsis import config
from synopsis.cli.options import set_torch_threads


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(config, "usable_cores", lambda: 2)
    return monkeypatch


@pytest.mark.parametrize(("load", "threads"), [(0.0, 2), (0.4, 2), (0.6, 1), (1.0, 1), (3.0, 1), (8.0, 1)])
def test_the_default_leaves_busy_cores_alone(
    two_cores: pytest.MonkeyPatch, load: float, threads: int
) -> None:
    two_cores.setattr(config.os, "getloadavg", lambda: (load, load, load))
    assert config.default_threads() == threads


def test_omp_num_threads_still_decides(two_cores: pytest.MonkeyPatch) -> None:
    two_cores.setenv("OMP_NUM_THREADS", "3")
    two_cores.setattr(config.os, "getloadavg", lambda: (8.0, 8.0, 8.0))
    assert config.default_threads() == 3


def test_commands_without_threads_use_the_default_not_one_per_core(two_cores: pytest.MonkeyPatch) -> None:
    """torch's own default is one thread per core whatever the load (5-10x slower on a busy machine)."""
    two_cores.setattr(config.os, "getloadavg", lambda: (6.0, 6.0, 6.0))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        set_torch_threads(None)
        assert torch.get_num_threads() == 1
        set_torch_threads(2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------ issue 52: the library's own default
@pytest.fixture
def busy_library(two_cores: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """A 2-core machine at load 6 where torch starts at its own default (one thread per core) and the
    library has not set a count yet; torch's count is restored afterwards."""
    two_cores.setattr(config.os, "getloadavg", lambda: (6.0, 6.0, 6.0))
    two_cores.setattr(config, "_torch_default_threads", lambda: 2)
    two_cores.setattr(config, "_threads_set", [])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield two_cores
    torch.set_num_threads(before)


def test_load_summarizer_uses_the_cli_default(busy_library: pytest.MonkeyPatch) -> None:
    from synopsis.summarizers import load_summarizer

    load_summarizer("centrality")
    assert torch.get_num_threads() == 1


def test_load_summarizer_threads_argument_wins(busy_library: pytest.MonkeyPatch) -> None:
    from synopsis.summarizers import load_summarizer

    load_summarizer("centrality", threads=2)
    assert torch.get_num_threads() == 2
    load_summarizer("centrality")  # a count already decided is kept, not recomputed from the load
    assert torch.get_num_threads() == 2


def test_the_library_keeps_threads_the_caller_set(busy_library: pytest.MonkeyPatch) -> None:
    from synopsis.summarizers import load_summarizer

    torch.set_num_threads(3)
    load_summarizer("centrality")
    assert torch.get_num_threads() == 3


def test_the_command_line_sets_threads_whatever_torch_held(busy_library: pytest.MonkeyPatch) -> None:
    torch.set_num_threads(3)
    set_torch_threads(None)
    assert torch.get_num_threads() == 1


def test_a_thread_count_below_one_is_refused() -> None:
    from synopsis.errors import ConfigError

    with pytest.raises(ConfigError, match="threads must be >= 1"):
        config.use_threads(0)


class _Called(Exception):
    pass


@pytest.mark.parametrize(
    ("module", "entry", "args"),
    [
        ("synopsis.training.seq2seq", "train_seq2seq", (None,)),
        ("synopsis.training.pointer_generator.trainer", "train", (None, "unused")),
        ("synopsis.training.language_model", "train_language_model", (None, None, None, None)),
    ],
)
def test_every_trainer_sets_threads_first(
    monkeypatch: pytest.MonkeyPatch, module: str, entry: str, args: tuple
) -> None:
    """Each training entry point takes ``threads=`` and hands it to the one rule before any work."""
    import importlib

    trainer = importlib.import_module(module)
    seen: list[int | None] = []

    def record(threads: int | None = None) -> int:
        seen.append(threads)
        raise _Called

    monkeypatch.setattr(trainer, "use_threads", record)
    with pytest.raises(_Called):
        getattr(trainer, entry)(*args, threads=3)
    assert seen == [3]
