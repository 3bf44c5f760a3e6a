"""The web page in Chromium (issue 60): source highlights exact after characters beyond U+FFFF (the API's
offsets count code points, JavaScript strings UTF-16 units), the preface's heading, the model menu, the
note worded for the page, the layout's use of both columns, and who wrote each summary."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

# Skips the module without Chromium or Playwright; the fixtures (browser, page, ...) are conftest.py's.
from helpers.browser import sync_api

# Emoji (some with a variation selector, U+FE0F) and a mathematical bold A (U+1D400) before, inside and after
# sentences, in headings and in the preface: each takes two UTF-16 units and one code point.
ASTRAL = """# Astral 𝐀 report 🚀

🎉 Heavy rain fell for a week 🌧️. The river rose 𝐀 fast.

## 🔥 Damage

Three bridges 🌉 were closed on Monday. Two roads were washed
away 🚗.

## Outlook 𝐀

𝐀𝐁 Officials expect the bridges to reopen next week. 😀 The mayor 👩‍💼 agreed.
"""


def _by_section(server_url: str, document: str) -> dict[str, Any]:
    body = json.dumps({"document": document, "model": "lead-3", "by": "section"}).encode()
    request = urllib.request.Request(
        server_url + "/v1/summarize", body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request) as response:
        (item,) = json.load(response)["summaries"]
    return item["structured"]


def test_every_clicked_sentence_highlights_exactly_its_source_after_astral_characters(
    page: Any, server_url: str
) -> None:
    expect = sync_api.expect
    structured = _by_section(server_url, ASTRAL)
    expected = {}  # sentence -> the document's text at its sources' code-point offsets (Python's)
    for section in [structured["preface"], *structured["sections"]]:
        for sentence in section["summary"]:
            spans = [ASTRAL[s["start"] : s["end"]] for s in sentence["sources"]]
            assert [span.split() for span in spans] == [s["text"].split() for s in sentence["sources"]]
            expected[sentence["text"]] = spans
    assert len(expected) == 6
    page.get_by_test_id("document").fill(ASTRAL)
    page.get_by_test_id("model").select_option("lead-3")
    page.get_by_test_id("by-section").check()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("section-summary")).to_have_count(3)  # the preface and two sections
    highlight = page.get_by_test_id("source-highlight")
    for text, spans in expected.items():
        page.locator("#section-summaries .summary-sentence").filter(has_text=text).first.click()
        expect(highlight).to_have_count(len(spans))
        assert highlight.all_text_contents() == spans, text
