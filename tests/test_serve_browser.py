"""The web page end to end: headless Chromium (Debian's) driven by Playwright against a real uvicorn server.

The server runs in a thread on a free loopback port with lead-3 and an instruction-echoing fake, so the
test exercises the page, the API and the server, not model quality.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Skips the module without Chromium or Playwright; the fixtures (browser, page, ...) are conftest.py's.
from helpers.browser import EchoSummarizer, default_page, echo_registry, sync_api
from helpers.documents import LONG_README
from helpers.server import running_server

from synopsis.document import Document
from synopsis.serve import ModelEntry, ModelRegistry, ServeSettings, create_app

ABSTRACT = (Path(__file__).resolve().parents[1] / "examples" / "paper_abstract.txt").read_text()
DOCUMENT = """# Flood report

Heavy rain fell for a week. The river rose fast.

## Damage

Three bridges were closed on Monday. Two roads were washed away.

## Outlook

Officials expect the bridges to reopen next week.
"""


def test_paste_submit_and_see_the_summary_and_outline(page: Any) -> None:
    expect = sync_api.expect
    page.get_by_test_id("document").fill(DOCUMENT)
    page.get_by_test_id("model").select_option("lead-3")
    page.get_by_test_id("submit").click()
    summary = page.get_by_test_id("summary")
    expect(summary).to_have_count(1)
    expect(summary).to_have_text(
        "Heavy rain fell for a week.\nThe river rose fast.\nThree bridges were closed on Monday."
    )
    expect(page.get_by_test_id("summary-title")).to_have_text('Summary of "Flood report"')  # as the CLI
    expect(page.get_by_test_id("error")).to_be_hidden()
    outline = page.locator("#outline")
    expect(outline).to_contain_text("Read as markdown: 2 sections, 5 sentences")
    expect(outline.locator(".heading")).to_have_text(["Flood report", "Damage", "Outlook"])
    expect(page.locator(".result .meta")).to_contain_text(" ms model")


def test_instructions_one_after_another_each_with_its_time(page: Any) -> None:
    expect = sync_api.expect
    page.get_by_test_id("document").fill(DOCUMENT)
    page.get_by_test_id("model").select_option("echo")
    expect(page.locator("#model-info")).to_contain_text("uses instructions")
    for question in ("What happened?", "What comes next?"):
        page.get_by_test_id("instruction").fill(question)
        page.get_by_test_id("instruction").press("Enter")  # Enter submits, like the button
        expect(page.get_by_test_id("instruction")).to_have_value("")  # cleared for the next one
    summaries = page.get_by_test_id("summary")
    expect(summaries).to_have_text(
        ["What happened?: Heavy rain fell for a week.", "What comes next?: Heavy rain fell for a week."]
    )
    expect(page.locator(".result .instruction")).to_have_text(["What happened?", "What comes next?"])
    expect(page.locator(".result .meta")).to_have_count(2)

    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download JSON").click()
    saved = json.loads(Path(download_info.value.path()).read_text())
    assert [r["instruction"] for r in saved["results"]] == ["What happened?", "What comes next?"]
    assert saved["sections"]["children"][0]["heading"] == "Damage"
    assert all(r["timing_ms"]["summary"] >= 0 for r in saved["results"])


def test_errors_are_shown_in_the_error_element(page: Any) -> None:
    expect = sync_api.expect
    page.get_by_test_id("document").fill("   ")
    page.get_by_test_id("submit").click()
    error = page.get_by_test_id("error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("the document is empty (422)")
    expect(page.get_by_test_id("summary")).to_have_count(0)
    # Fixing the input clears the error.
    page.get_by_test_id("document").fill(DOCUMENT)
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("summary")).to_have_count(1)
    expect(error).to_be_hidden()


def test_options_follow_the_model_and_bad_values_are_reported(page: Any) -> None:
    expect = sync_api.expect
    page.get_by_test_id("model").select_option("lead-3")
    expect(page.locator("#options")).to_be_hidden()  # lead-3 takes no options
    page.get_by_test_id("model").select_option("echo")
    page.locator("#options summary").click()
    expect(page.get_by_label("Sentences (k)")).to_be_visible()
    expect(page.get_by_label("Beams")).to_be_hidden()
    page.get_by_label("Sentences (k)").fill("0")
    page.get_by_test_id("document").fill(DOCUMENT)
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("error")).to_contain_text("options.k")


def test_upload_a_file(page: Any, tmp_path: Path) -> None:
    expect = sync_api.expect
    path = tmp_path / "report.md"
    path.write_text(DOCUMENT)
    page.get_by_label("Or upload a file").set_input_files(str(path))
    expect(page.get_by_test_id("document")).to_have_value(DOCUMENT)
    expect(page.locator("#format")).to_have_value("markdown")
    expect(page.locator("#outline .heading")).to_have_text(["Flood report", "Damage", "Outlook"])


def test_upload_a_restructuredtext_file(page: Any, tmp_path: Path) -> None:
    expect = sync_api.expect
    path = tmp_path / "readme.rst"
    path.write_text("Intro, ``code``.\n\nDamage\n======\n\nRoads shut.\n\nOutlook\n=======\n\nRain ends.\n")
    page.get_by_label("Or upload a file").set_input_files(str(path))
    expect(page.locator("#format")).to_have_value("rst")
    for heading in ("Damage", "Outlook"):  # the rst sections (the preface's own name is the page's)
        expect(page.locator("#outline .heading", has_text=heading)).to_have_count(1)


def test_the_page_says_where_the_models_compute(page: Any) -> None:
    expect = sync_api.expect
    expect(page.get_by_test_id("device")).to_have_text("Models compute on cpu")  # /health's device
    page.get_by_test_id("model").select_option("lead-3")
    expect(page.locator("#model-info")).not_to_contain_text("runs on")  # no weights, no device


def test_the_default_models_note_is_shown_above_its_summary(browser: Any, default_server_url: str) -> None:
    expect = sync_api.expect
    with default_page(browser, default_server_url) as page:
        expect(page.get_by_test_id("model")).to_have_value("default")
        expect(page.locator("#model-info")).to_contain_text("It runs on cpu (float32).")
        page.get_by_test_id("document").fill(LONG_README)  # a README: out of the bundled model's domain
        page.get_by_test_id("submit").click()
        note = page.get_by_test_id("summary-note")
        expect(note).to_have_count(1)
        expect(note).to_contain_text("Extractive summary (the document's own sentences")
        expect(note).to_contain_text("name the pretrained model facebook/bart-large-cnn")
        order = page.locator(".result > *").evaluate_all("nodes => nodes.map(n => n.dataset.testid || '')")
        assert order.index("summary-note") < order.index("summary")  # read before the summary
        page.get_by_test_id("document").fill(ABSTRACT)
        page.get_by_test_id("submit").click()
        expect(page.get_by_test_id("summary")).to_have_count(2)
        expect(note).to_have_count(1)  # a paper abstract has none: the bundled model summarized it


def test_api_reference_page_renders_offline(browser: Any, server_url: str) -> None:
    context = browser.new_context()
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(server_url + "/docs")
    sync_api.expect(page.locator(".endpoint h3")).to_contain_text(["/v1/summarize"])
    sync_api.expect(page.locator("#schema-SummarizeRequest")).to_contain_text("instructions")
    context.close()
    assert requested and all(url.startswith(server_url) for url in requested), requested


class GatedSummarizer(EchoSummarizer):
    def __init__(self) -> None:
        self.gate = threading.Event()

    def summarize(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None, **options: Any
    ) -> list[str]:
        self.gate.wait(15)
        return super().summarize(documents, instructions)


def test_the_page_shows_the_outline_before_the_summary_arrives(browser: Any) -> None:
    expect = sync_api.expect
    gated = GatedSummarizer()
    registry = ModelRegistry()
    registry.add(ModelEntry("gated", gated, "waits for the test"))
    with running_server(create_app(registry, ServeSettings())) as url:
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(15_000)
        try:
            page.goto(url + "/")
            expect(page.get_by_test_id("model").locator("option")).to_have_count(1)
            page.get_by_test_id("document").fill(DOCUMENT)
            page.get_by_test_id("submit").click()
            # the stream's first event (the parsed outline) is on the page while the model still works
            expect(page.locator("#outline .heading")).to_have_text(["Flood report", "Damage", "Outlook"])
            expect(page.get_by_test_id("summary")).to_have_count(0)
            gated.gate.set()
            expect(page.get_by_test_id("summary")).to_have_text(["plain: Heavy rain fell for a week."])
            expect(page.locator(".result .meta")).to_contain_text(" ms request")
        finally:
            gated.gate.set()
            context.close()


def test_the_page_asks_for_the_token_once_per_tab(browser: Any) -> None:
    expect = sync_api.expect
    token = "page-token"
    with running_server(create_app(echo_registry(), ServeSettings(auth_token=token))) as url:
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(15_000)
        asked: list[str] = []

        def answer(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.accept(token)

        page.on("dialog", answer)
        try:
            page.goto(url + "/")
            expect(page.get_by_test_id("model").locator("option")).to_have_count(2)  # after the prompt
            for _ in range(2):
                page.get_by_test_id("document").fill(DOCUMENT)
                page.get_by_test_id("model").select_option("lead-3")
                page.get_by_test_id("submit").click()
            expect(page.get_by_test_id("summary")).to_have_count(2)
            page.reload()  # same tab: the token is kept
            expect(page.get_by_test_id("model").locator("option")).to_have_count(2)
            assert len(asked) == 1 and "token" in asked[0]
            expect(page.get_by_test_id("error")).to_be_hidden()
        finally:
            context.close()
