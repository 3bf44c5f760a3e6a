"""What the browser tests share (tests/test_serve_browser.py, test_page_accessibility.py,
test_serve_by_section.py): Debian's headless Chromium driven by Playwright against a real uvicorn server
with lead-3 and an instruction-echoing fake. conftest.py's fixtures ``browser``, ``page``, ``server_url``
and ``default_server_url`` are made of these. Importing this module skips the importing test module (or,
from a fixture, the test) where Chromium or Playwright is absent."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers.fakes import FakeSummarizer
from helpers.server import running_server
from synopsis.document import Document
from synopsis.serve import ModelEntry, ModelRegistry, ServeSettings, create_app, describe
from synopsis.summarizers import load_summarizer

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps trying hosts it cannot reach (ENVIRONMENT.md).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is absent (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)


class EchoSummarizer(FakeSummarizer):
    """Instruction-aware fake: "<instruction>: <first sentence>"."""

    takes_instructions = True
    options = ("k",)
    description = "echoes instructions"

    def summarize(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None, **options: Any
    ) -> list[str]:
        instructions = instructions or [None] * len(documents)
        return [
            f"{i or 'plain'}: {d.sentences[0].text}" for d, i in zip(documents, instructions, strict=True)
        ]


def echo_registry() -> ModelRegistry:
    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    registry.add(ModelEntry("echo", EchoSummarizer()))
    return registry


@contextmanager
def echo_server() -> Iterator[str]:
    """A real uvicorn server with lead-3 and the echoing fake; yields its URL."""
    with running_server(create_app(echo_registry(), ServeSettings())) as url:
        yield url


@contextmanager
def default_server() -> Iterator[str]:
    """A server with the library's default (the bundled model in its domain, else salient sentences)."""
    registry = ModelRegistry()
    registry.add(describe("default", load_summarizer(device="cpu")))
    with running_server(create_app(registry, ServeSettings())) as url:
        yield url


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's headless Chromium under Playwright."""
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def default_page(browser: Any, server_url: str) -> Iterator[Any]:
    """A fresh page on the default server's page (its model is the bundled one: slower, so 30 s a wait)."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(server_url + "/")
    try:
        yield page
    finally:
        context.close()


@contextmanager
def echo_page(browser: Any, server_url: str) -> Iterator[Any]:
    """A fresh page on the echo server's page, once its model list has arrived from /v1/models."""
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(server_url + "/")
    sync_api.expect(page.get_by_test_id("model").locator("option")).to_have_count(2)
    try:
        yield page
    finally:
        context.close()
