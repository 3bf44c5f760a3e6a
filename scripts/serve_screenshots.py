"""Screenshots of the ``synopsis serve`` web page for docs/serve.md (headless Debian Chromium via Playwright).

Serves the built-in registry (bundled pointer-generator, lead-3, centrality) on a free loopback port, then
saves ``docs/images/serve_empty.png`` (the page as it opens), ``docs/images/serve_result.png`` (a
Markdown report pasted, two instructions asked one after another with centrality, and a plain summary from
the default model), ``docs/images/serve_by_section_top.png`` and ``serve_by_section.png`` (a README with
emoji summarized by section: the top of the page, then scrolled to its last section, a sentence clicked
and its source highlighted).

    python scripts/serve_screenshots.py [--output-dir docs/images]
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from playwright.sync_api import expect, sync_playwright

from synopsis.serve import ServeSettings, build_registry, create_app

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
REPORT = """# Get To The Point: Summarization with Pointer-Generator Networks

## Problem

Neural sequence-to-sequence models have provided a viable new approach for abstractive text summarization.
However, these models have two shortcomings: they are liable to reproduce factual details inaccurately,
and they tend to repeat themselves.

## Method

### Pointing

We use a hybrid pointer-generator network that can copy words from the source text via pointing, which
aids accurate reproduction of information, while retaining the ability to produce novel words through the
generator.

### Coverage

We use coverage to keep track of what has been summarized, which discourages repetition.

## Results

We apply our model to a news summarization task, where it outperforms the current abstractive state of the
art by at least two ROUGE points.
"""


# A README as many are written (an emoji before most headings, text before the first one), for the page's
# summary by section: the preface's heading, the highlights after characters beyond U+FFFF, the layout.
README = """Widgetry 🧰 builds dashboards from plain YAML files, without a server of its own.

## ✨ Features

Widgetry reads a YAML file and draws every chart it names. Charts refresh when the file changes 🔄.
A chart can be a line, a bar or a table, and every chart can be exported as SVG.

## 🚀 Installation

Widgetry needs Python 3.10 or newer. Install it with pip, then run widgetry init in an empty folder.
The init command writes an example dashboard that you can edit.

## 📖 Usage

Run widgetry serve to open the dashboard in a browser. Each save of the YAML file redraws the charts 📈.
Widgetry never sends your data anywhere: the charts are drawn in the browser.

## 🤝 Contributing

Contributions are welcome 🙌. Open an issue before a large change, so that we can agree on the design.
Every pull request needs a test and a line in the changelog.

## 📄 License

This project is licensed under the terms of the MIT license.
"""


def by_section_screenshots(page: Any, output_dir: Path) -> None:
    """The README summarized by section with the default: ``serve_by_section_top.png``, the top of the page
    (the model menu, the note, the preface's heading); ``serve_by_section.png``, scrolled to its last
    section, the license sentence clicked: its source highlighted in the document view."""
    page.get_by_test_id("model").select_option("default")
    page.get_by_test_id("document").fill(README)
    page.get_by_test_id("by-section").check()
    page.get_by_test_id("submit").click()
    expect(page.locator("#status")).to_contain_text("Done")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(output_dir / "serve_by_section_top.png"))
    sentence = page.get_by_test_id("summary-sentence").filter(has_text="MIT license").first
    sentence.scroll_into_view_if_needed()
    sentence.click()
    page.wait_for_timeout(300)
    page.screenshot(path=str(output_dir / "serve_by_section.png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.output_dir.mkdir(parents=True, exist_ok=True)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    server = uvicorn.Server(uvicorn.Config(create_app(build_registry(), ServeSettings()), log_config=None))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1360, "height": 900})
            page.set_default_timeout(60_000)
            page.goto(url)
            expect(page.get_by_test_id("model").locator("option").first).to_be_attached()  # the models came
            page.screenshot(path=str(args.output_dir / "serve_empty.png"), full_page=True)

            page.get_by_test_id("document").fill(REPORT)
            page.get_by_test_id("submit").click()  # the default model, no instruction
            expect(page.get_by_test_id("summary")).to_have_count(1)
            page.get_by_test_id("model").select_option("centrality")
            page.locator("#options summary").click()
            page.get_by_label("Sentences (k)").fill("1")
            questions = ("How does it avoid repetition?", "How well does it do on news?")
            for count, question in enumerate(questions, start=2):
                page.get_by_test_id("instruction").fill(question)
                page.get_by_test_id("submit").click()
                expect(page.get_by_test_id("summary")).to_have_count(count)
            page.screenshot(path=str(args.output_dir / "serve_result.png"), full_page=True)
            page.locator("#clear").click()
            by_section_screenshots(page, args.output_dir)
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)
    print(f"wrote the screenshots (serve_*.png) in {args.output_dir}")


if __name__ == "__main__":
    main()
