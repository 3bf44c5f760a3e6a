"""The web page in Chromium (issue 60): source highlights exact after characters beyond U+FFFF (the API's
offsets count code points, JavaScript strings UTF-16 units), the preface's heading, the model menu, the
note worded for the page, the layout's use of both columns, and who wrote each summary."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

# Skips the module without Chromium or Playwright; the fixtures (browser, page, ...) are conftest.py's.
from helpers.browser import default_page, sync_api

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


# A README without a title: its preface has no heading (the page said "(untitled)").
README = "Widgetry draws dashboards from YAML files. It needs no server.\n\n" + "\n\n".join(
    f"## Part {n}\n\nPart {n} explains one thing about widgets. It says it plainly. It is short."
    for n in range(1, 31)
)


def test_the_preface_is_headed_opening_and_the_menu_names_each_model_once(page: Any) -> None:
    expect = sync_api.expect
    expect(page.get_by_test_id("model").locator("option")).to_have_text(["lead-3", "echo (fake)"])
    page.get_by_test_id("document").fill(README)
    page.get_by_test_id("model").select_option("lead-3")
    page.get_by_test_id("by-section").check()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("section-summary")).to_have_count(31)
    headings = page.locator("#section-summaries .section-heading")
    expect(headings.first).to_have_text("Opening")
    expect(page.locator("#section-summaries")).not_to_contain_text("untitled")


def test_a_sentence_clicked_far_down_shows_its_source_beside_it(page: Any) -> None:
    """The document view sits in the left column and follows the scroll: a sentence clicked anywhere in a
    long list of section summaries and its highlighted source are both in sight, the page not moved."""
    expect = sync_api.expect
    page.set_viewport_size({"width": 1280, "height": 720})
    page.get_by_test_id("document").fill(README)
    page.get_by_test_id("model").select_option("lead-3")
    page.get_by_test_id("by-section").check()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("section-summary")).to_have_count(31)
    sentence = page.locator("#section-summaries .summary-sentence").filter(has_text="Part 17 explains").first
    sentence.scroll_into_view_if_needed()
    scrolled = page.evaluate("window.scrollY")
    assert scrolled > 1500  # far below the form
    sentence.click()
    highlight = page.get_by_test_id("source-highlight")
    expect(highlight).to_have_text("Part 17 explains one thing about widgets.")
    assert page.evaluate("window.scrollY") == scrolled  # the page did not jump to the document view
    expect(sentence).to_be_in_viewport()
    expect(highlight).to_be_in_viewport()
    view = page.get_by_test_id("document-view").bounding_box()
    assert view is not None and view["x"] + view["width"] < 1280 / 2 + 10  # in the left column


def test_the_default_is_named_once_and_its_note_has_no_flag(browser: Any, default_server_url: str) -> None:
    expect = sync_api.expect
    with default_page(browser, default_server_url) as page:
        expect(page.get_by_test_id("model")).to_have_value("default")
        options = page.get_by_test_id("model").locator("option")
        expect(options).to_have_text(["default"])  # was "default (default)"
        page.get_by_test_id("document").fill(README)
        page.get_by_test_id("submit").click()
        note = page.get_by_test_id("summary-note")
        expect(note).to_contain_text("facebook/bart-large-cnn")
        assert "--" not in note.inner_text()  # no command-line flag told to a web user


def test_the_method_that_wrote_a_summary_is_shown_when_the_api_names_it(page: Any) -> None:
    """Issue 57's ``method`` field (the API's, per document summary): shown beside its summary when sent."""
    expect = sync_api.expect
    events = [
        {"event": "parsed", "sections": {"heading": None, "number": None, "depth": 0, "sentences": 1,
                                         "total_sentences": 1, "children": []},
         "document": {"format": "text", "sections": 0, "sentences": 1, "words": 3}},
        {"event": "summary", "index": 0, "instruction": None, "summary": "Widgets draw charts.", "ms": 1.0,
         "by": "document", "method": "salient",
         "structured": {"title": None, "note": None, "summary": [], "sections": []}},
        {"event": "done", "response": {"model": "lead-3", "timing_ms": {"total": 2.0}, "warnings": [],
                                       "sections": None, "document": None, "outline": None,
                                       "summaries": [{"method": "salient"}]}},
    ]  # fmt: skip
    body = "".join(json.dumps(e) + "\n" for e in events)
    page.route("**/v1/summarize", lambda route: route.fulfill(status=200, body=body,
                                                              content_type="application/x-ndjson"))
    page.get_by_test_id("document").fill("Widgets draw charts.")
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("summary")).to_have_text("Widgets draw charts.")
    expect(page.get_by_test_id("written-by")).to_have_text("written by: salient")
