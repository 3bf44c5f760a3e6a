"""Summaries by section in the service and on the page: the request's ``by``, the structured items with
sources and offsets, and in Chromium the by-section control, the section summaries and source highlights."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from synopsis.serve import ModelEntry, ModelRegistry, ServeSettings, create_app, describe
from synopsis.summarizers import load_summarizer

DOCUMENT = """# Flood report

Heavy rain fell for a week. The river rose fast.

## Damage

Three bridges were closed on Monday. Two roads were washed
away.

## Outlook

Officials expect the bridges to reopen next week.
"""


class PlainSummarizer:
    """A model without the Summarizer base class (no by-section support)."""

    def summarize(self, documents: Any, instructions: Any = None) -> list[str]:
        return ["plain"] * len(documents)


@pytest.fixture()
def client() -> Iterator[TestClient]:
    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    registry.add(ModelEntry("plain", PlainSummarizer(), "fake"))
    with TestClient(create_app(registry, ServeSettings())) as test_client:
        yield test_client


def test_by_section_items_carry_sections_sources_and_offsets(client: TestClient) -> None:
    response = client.post(
        "/v1/summarize", json={"document": DOCUMENT, "model": "lead-3", "by": "section", "max_words": 12}
    )
    assert response.status_code == 200, response.text
    (item,) = response.json()["summaries"]
    assert item["by"] == "section"
    structured = item["structured"]
    assert item["summary"] == structured["prediction"]
    assert [s["heading"] for s in structured["sections"]] == ["Flood report", "Damage", "Outlook"]
    assert sum(len(s["text"].split()) for s in structured["summary"]) <= 12
    for section in structured["sections"]:
        for sentence in section["summary"]:
            for source in sentence["sources"]:
                assert source["path"] == section["path"]
                assert DOCUMENT[source["start"] : source["end"]].split() == source["text"].split()
    plain = client.post("/v1/summarize", json={"document": DOCUMENT, "model": "lead-3"}).json()
    assert set(plain["summaries"][0]) == {"instruction", "summary"}  # by document: as before


def test_by_section_errors_name_the_field(client: TestClient) -> None:
    response = client.post("/v1/summarize", json={"document": DOCUMENT, "model": "plain", "by": "section"})
    assert response.status_code == 422 and "by:" in response.json()["error"]["message"]
    response = client.post("/v1/summarize", json={"document": DOCUMENT, "by": "chapter"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "by"


def test_page_by_section_outline_and_source_highlights(page: Any) -> None:
    from test_serve_browser import sync_api

    expect = sync_api.expect
    page.get_by_test_id("document").fill(DOCUMENT)
    page.get_by_test_id("model").select_option("lead-3")
    page.get_by_test_id("by-section").check()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("section-summary")).to_have_count(3)
    sentence = page.get_by_test_id("summary-sentence").filter(has_text="Two roads were washed away.").first
    sentence.click()
    highlight = page.get_by_test_id("source-highlight")
    expect(highlight).to_have_count(1)
    expect(highlight).to_have_text("Two roads were washed\naway.")
    page.get_by_test_id("summary-sentence").filter(has_text="Heavy rain fell for a week.").first.click()
    expect(highlight).to_have_text("Heavy rain fell for a week.")


# The browser fixtures (a real uvicorn server and Debian's Chromium); the module skips where they are absent.
try:
    from test_serve_browser import browser, page, server_url  # noqa: F401
except pytest.skip.Exception:  # pragma: no cover - no Chromium or Playwright here
    test_page_by_section_outline_and_source_highlights = pytest.mark.skip(reason="no Chromium/Playwright")(
        test_page_by_section_outline_and_source_highlights
    )
