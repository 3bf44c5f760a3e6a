"""The page passes axe-core (bundled offline by axe-playwright-python) in Chromium, and has a favicon."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

# The browser fixtures (a real uvicorn server and Debian's Chromium); the module skips where they are absent.
# (conftest.py's browser, page, server_url and default_server_url fixtures)
from helpers.browser import default_page, sync_api
from helpers.documents import LONG_README

axe_package = pytest.importorskip("axe_playwright_python", reason="pip install axe-playwright-python")
AXE_SCRIPT = (Path(axe_package.__file__).parent / "axe.min.js").read_text(encoding="utf-8")

# A document long enough that the document view scrolls (the case axe's scrollable-region-focusable checks).
LONG_DOCUMENT = "# Flood report\n\n" + "\n\n".join(
    f"## Day {day}\n\nHeavy rain fell on day {day}. The river rose fast. Two roads were washed away."
    for day in range(1, 16)
)


def serious_violations(page: Any) -> list[str]:
    page.evaluate(AXE_SCRIPT)
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']]}"
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_the_page_after_a_summary_by_section_has_no_serious_axe_violation(page: Any) -> None:
    expect = sync_api.expect
    assert serious_violations(page) == []
    page.get_by_test_id("document").fill(LONG_DOCUMENT)
    page.get_by_test_id("model").select_option("lead-3")
    page.get_by_test_id("by-section").check()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("section-summary")).to_have_count(15)
    view = page.get_by_test_id("document-view")
    expect(view).to_be_visible()
    assert view.evaluate("v => v.scrollHeight > v.clientHeight")  # it does scroll
    assert serious_violations(page) == []
    view.focus()  # reachable by keyboard, so its text can be scrolled without a mouse
    assert page.evaluate("document.activeElement.id") == "document-view"


def test_the_page_has_a_favicon_and_favicon_ico_is_served(page: Any, server_url: str) -> None:
    icon = page.locator("link[rel=icon]")
    href = icon.get_attribute("href")
    assert href
    for url in (server_url + href, server_url + "/favicon.ico"):
        with urllib.request.urlopen(url) as response:
            assert response.status == 200
            assert response.headers["content-type"].startswith("image/svg+xml")
            assert b"<svg" in response.read()


def test_the_page_with_the_default_models_note_and_the_device_has_no_serious_axe_violation(
    browser: Any, default_server_url: str
) -> None:
    expect = sync_api.expect
    with default_page(browser, default_server_url) as page:
        expect(page.get_by_test_id("device")).to_have_text("Models compute on cpu")
        page.get_by_test_id("document").fill(LONG_README)
        page.get_by_test_id("submit").click()
        expect(page.get_by_test_id("summary-note")).to_have_count(1)
        assert serious_violations(page) == []
