"""Issue 38 item 5: without --threads, a command computes on the cores other processes leave free."""

from __future__ import annotations

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
