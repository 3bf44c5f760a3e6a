"""Shared test fixtures: offline hub settings, one torch thread, the shared real data, and the browser
tests' server, Chromium and page (tests/helpers/browser.py, imported only by a test that asks for them)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.data import missing_shared_data

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED_DATA = Path(
    os.environ.get("SYNOPSIS_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
).resolve()


@pytest.fixture(scope="session", autouse=True)
def _torch_threads() -> None:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _log_levels_restored() -> Iterator[None]:
    """``synopsis -q`` (or ``-v``) sets the log levels of the process; a test that runs the CLI must not
    change what the tests after it capture (caplog found nothing after a ``-q`` run)."""
    loggers = [logging.getLogger(), logging.getLogger("synopsis")]
    levels = [logger.level for logger in loggers]
    yield
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need it skip with a reason where it is absent (fail under
    ``SYNOPSIS_REQUIRE_SHARED_DATA=1``)."""
    if not SHARED_DATA.is_dir():
        missing_shared_data(f"shared data not found at {SHARED_DATA} (set SYNOPSIS_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """A real server with lead-3 and an instruction-echoing fake (skips without Chromium/Playwright)."""
    from helpers.browser import echo_server

    with echo_server() as url:
        yield url


@pytest.fixture(scope="module")
def default_server_url() -> Iterator[str]:
    """A real server with the library's default summarizer (skips without Chromium/Playwright)."""
    from helpers.browser import default_server

    with default_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless Chromium (skips where it or Playwright is absent)."""
    from helpers.browser import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture()
def page(browser: Any, server_url: str) -> Iterator[Any]:
    """A fresh page on the echo server, its model list loaded."""
    from helpers.browser import echo_page

    with echo_page(browser, server_url) as opened:
        yield opened
