"""The web service's JSON API through FastAPI's TestClient: every endpoint, every limit and status code.

Fakes registered in the registry make the limits deterministic: a gated summarizer holds an inference
thread until the test opens the gate (503 when the queue is full, 504 on timeout), a broken one raises.
The real models (bundled pointer-generator, centrality, a user checkpoint) are exercised at the end.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient
from helpers.fakes import FakeSummarizer, fake_gpus
from helpers.server import wait_for

from synopsis.data.readers import sniff_format
from synopsis.document import Document
from synopsis.errors import ConfigError, InputError
from synopsis.serve import ModelEntry, ModelRegistry, ServeSettings, create_app, describe, parse_model_spec
from synopsis.serve.app import static_dir
from synopsis.serve.documents import read_pasted_document
from synopsis.serve.settings import default_batch_workers
from synopsis.summarizers import load_summarizer

MARKDOWN = """# Flood report

Heavy rain fell for a week. The river rose fast.

## Damage

Three bridges were closed on Monday. Two roads were washed away.

### Costs

Repairs will cost two million euros.

## Outlook

Officials expect the bridges to reopen next week.
"""
TEXT = "Rivers flooded the valley. Bridges were closed.\n\nOfficials expect them to reopen. A bakery won."


class EchoSummarizer(FakeSummarizer):
    """Instruction-aware fake: "<instruction or plain>: <first k sentences>"; records every call."""

    takes_instructions = True
    options = ("k",)
    description = "echoes the instruction"

    def __init__(self, k: int = 1, calls: list | None = None) -> None:
        self.k = k
        self.calls: list[tuple[int, list[str | None] | None]] = calls if calls is not None else []

    def summarize(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None, **options: Any
    ) -> list[str]:
        self.calls.append((len(documents), None if instructions is None else list(instructions)))
        instructions = instructions or [None] * len(documents)
        return [
            f"{instruction or 'plain'}: " + " ".join(s.text for s in doc.sentences[: self.k])
            for doc, instruction in zip(documents, instructions, strict=True)
        ]

    def _with_options(self, options: dict[str, Any]) -> EchoSummarizer:
        if options.get("k", 1) > 50:
            raise ConfigError("k must be <= 50 for this fake")
        return EchoSummarizer(options.get("k", self.k), self.calls)


class GatedSummarizer(FakeSummarizer):
    """Holds its thread until ``gate`` opens (at most 10 s, so a failing test cannot hang the run)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = 0
        self.lock = threading.Lock()

    def summarize(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None, **options: Any
    ) -> list[str]:
        with self.lock:
            self.started += 1
        if not self.gate.wait(10):
            raise RuntimeError("the test never opened the gate")
        return ["released"] * len(documents)


class HierarchySummarizer(FakeSummarizer):
    """Writes a linearised question-summary hierarchy, as a model trained on QS targets does."""

    def summarize(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None, **options: Any
    ) -> list[str]:
        hierarchy = "The plan passed. [L↓] Who objected? [ANS] Two members. [L-] Why? [ANS] The cost."
        return [hierarchy] * len(documents)


class BrokenSummarizer(FakeSummarizer):
    def summarize(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None, **options: Any
    ) -> list[str]:
        raise RuntimeError("model exploded")


def _registry(gated: GatedSummarizer | None = None) -> ModelRegistry:
    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    registry.add(ModelEntry("echo", EchoSummarizer()))
    registry.add(ModelEntry("broken", BrokenSummarizer()))
    registry.add(ModelEntry("gated", gated or GatedSummarizer()))
    return registry


def _plain(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items without ``by`` and ``structured`` (the sources; see test_cli_and_api_agree)."""
    return [{key: item[key] for key in ("instruction", "summary")} for item in summaries]


@pytest.fixture()
def client() -> Iterator[TestClient]:
    with TestClient(create_app(_registry(), ServeSettings())) as test_client:
        yield test_client


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    return response.json()["error"]


# ----------------------------------------------------------------------------- endpoints
def test_health_reports_models_and_pool(client: TestClient) -> None:
    body = client.get("/health").json()
    assert body["status"] == "ok"
    assert body["models"] == 4
    assert body["device"] == "cpu"  # the fakes have no weights: they compute on the CPU
    assert body["pool"] == {"threads": 2, "queue_size": 64, "running": 0, "waiting": 0}
    batches = default_batch_workers()  # batching is on by default
    assert body["compute"] == {"torch_threads": torch.get_num_threads(), "batch_workers": batches}


def test_what_startup_made_is_frozen_while_the_app_serves() -> None:
    """Startup's objects are left out of the collector's full passes while the app serves (each one walked
    them all with the GIL held), and handed back when it stops."""
    import gc

    before = gc.get_freeze_count()  # 0 unless a test left a server running
    with TestClient(create_app(_registry(), ServeSettings())) as test_client:
        assert gc.get_freeze_count() > before + 1000
        assert test_client.get("/health").status_code == 200
    assert gc.get_freeze_count() == 0


def test_models_lists_names_options_and_instruction_support(client: TestClient) -> None:
    body = client.get("/v1/models").json()
    assert body["default"] is None  # this registry has no model called "default"
    by_name = {m["name"]: m for m in body["models"]}
    assert list(by_name) == ["lead-3", "echo", "broken", "gated"]
    assert by_name["lead-3"] == {
        "name": "lead-3",
        "method": "lead-3",
        "description": "the first 3 sentences",
        "instructions": False,
        "options": [],
        "source": "builtin",
        "device": None,  # no weights: nothing to place
        "dtype": None,
        "backend": None,
    }
    assert by_name["echo"]["instructions"] is True and by_name["echo"]["options"] == ["k"]


def test_summarize_markdown_with_outline_and_timing(client: TestClient) -> None:
    response = client.post("/v1/summarize", json={"document": MARKDOWN, "model": "lead-3"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "lead-3"
    assert _plain(body["summaries"]) == [
        {
            "instruction": None,
            "summary": "Heavy rain fell for a week.\nThe river rose fast.\n"
            "Three bridges were closed on Monday.",
        }
    ]
    assert body["document"] == {
        "format": "markdown",
        "title": "Flood report",
        "sections": 3,  # Damage, Costs, Outlook: the title is not a section
        "sentences": 6,
        "words": 35,
    }
    root = body["sections"]
    assert (root["heading"], root["depth"], root["sentences"], root["total_sentences"]) == (
        "Flood report",
        0,
        2,
        6,
    )
    damage, outlook = root["children"]
    assert (damage["heading"], damage["depth"], damage["sentences"], damage["total_sentences"]) == (
        "Damage",
        1,
        2,
        3,
    )
    assert [(c["heading"], c["depth"], c["sentences"]) for c in damage["children"]] == [("Costs", 2, 1)]
    assert (outlook["heading"], outlook["children"]) == ("Outlook", [])
    assert body["outline"] is None  # a plain summary is no question-summary hierarchy
    timing = body["timing_ms"]
    assert set(timing) == {"queue", "parse", "summaries", "total"}
    assert len(timing["summaries"]) == 1
    assert timing["total"] >= timing["parse"] + timing["summaries"][0]
    assert body["warnings"] == []


def test_each_instruction_is_its_own_call_with_its_own_time(client: TestClient) -> None:
    echo: EchoSummarizer = client.app.state.registry.get("echo").summarizer
    response = client.post(
        "/v1/summarize",
        json={"document": TEXT, "model": "echo", "instructions": ["What flooded?", " Who won? "]},
    )
    body = response.json()
    assert response.status_code == 200, body
    assert _plain(body["summaries"]) == [
        {"instruction": "What flooded?", "summary": "What flooded?: Rivers flooded the valley."},
        {"instruction": "Who won?", "summary": "Who won?: Rivers flooded the valley."},
    ]
    assert echo.calls == [(1, ["What flooded?"]), (1, ["Who won?"])]
    assert len(body["timing_ms"]["summaries"]) == 2
    echo.calls.clear()
    plain = client.post("/v1/summarize", json={"document": TEXT, "model": "echo", "instructions": []}).json()
    expected = [{"instruction": None, "summary": "plain: Rivers flooded the valley."}]
    assert _plain(plain["summaries"]) == expected
    assert echo.calls == [(1, None)]  # no instructions: instructions=None, as the CLI passes


def test_a_model_that_ignores_instructions_says_so(client: TestClient) -> None:
    body = client.post(
        "/v1/summarize", json={"document": TEXT, "model": "lead-3", "instructions": ["Why?"]}
    ).json()
    assert body["summaries"][0]["instruction"] == "Why?"
    assert body["warnings"] == ["model 'lead-3' ignores instructions: each summary is the plain summary"]


def test_options_reach_a_per_request_copy(client: TestClient) -> None:
    registry = client.app.state.registry
    body = client.post("/v1/summarize", json={"document": TEXT, "model": "echo", "options": {"k": 2}}).json()
    assert body["summaries"][0]["summary"] == "plain: Rivers flooded the valley. Bridges were closed."
    assert registry.get("echo").summarizer.k == 1  # the shared summarizer is untouched


@pytest.mark.parametrize(
    "document,fmt,expected_format,sections",
    [
        (TEXT, "auto", "text", 0),
        (MARKDOWN, "auto", "markdown", 3),
        (MARKDOWN, "text", "text", 0),
        # underlined headings alone are plain text, whose reader reads them as well (issue 48)
        ("Title\n=====\n\nSome text here. More text.", "auto", "text", 0),
        # pasted plain text: an underlined heading is a section, a run of "#" comment lines is not Markdown
        ("Intro text here.\n\nUsage\n-----\n\nRun it now.\n\n# a comment\n# one more\n", "auto", "text", 1),
        (json.dumps(Document.from_text(TEXT, title="T").to_dict()), "auto", "json", 0),
        # reStructuredText is named (pasted text has no extension to tell it by): docutils' sections
        ("Intro with ``code``.\n\nUsage\n=====\n\nRun it.\n\nMore\n====\n\nText.\n", "rst", "rst", 2),
    ],
)
def test_formats(client: TestClient, document: str, fmt: str, expected_format: str, sections: int) -> None:
    response = client.post("/v1/outline", json={"document": document, "format": fmt})
    assert response.status_code == 200, response.text
    assert response.json()["document"]["format"] == expected_format
    assert response.json()["document"]["sections"] == sections


def test_outline_endpoint_matches_summarize(client: TestClient) -> None:
    outline = client.post("/v1/outline", json={"document": MARKDOWN}).json()
    summary = client.post("/v1/summarize", json={"document": MARKDOWN, "model": "lead-3"}).json()
    assert outline["sections"] == summary["sections"]
    assert outline["document"] == summary["document"]


def test_document_json_deeper_than_the_limit_is_refused() -> None:
    node: dict[str, Any] = {"heading": "leaf", "paragraphs": [["Deep text."]], "sections": []}
    for depth in range(150):
        node = {"heading": f"h{depth}", "paragraphs": [], "sections": [node]}
    with pytest.raises(InputError, match="at most 100"):
        read_pasted_document(json.dumps({"id": "x", "title": None, **node}), "json")


def test_one_sniffer_for_pasted_text_and_files(tmp_path: Path) -> None:
    assert sniff_format('  {"paragraphs": []}') == "json"
    assert sniff_format("intro\n\n## Part\ntext") == "markdown"
    assert sniff_format("#hashtag is not a heading") == "text"
    assert sniff_format("Plain text. Nothing else.") == "text"
    # Before: a .txt file was text whatever it held, while the same text pasted was Markdown.
    assert sniff_format("intro\n\n## Part\ntext", tmp_path / "notes.txt") == "markdown"
    assert sniff_format("intro\n\n## Part\ntext", tmp_path / "notes.md") == "markdown"


# ----------------------------------------------------------------------------- validation: 422 and 404
@pytest.mark.parametrize(
    "body,field,fragment",
    [
        ({"model": "lead-3"}, "document", "Field required"),
        (
            {"document": TEXT, "model": "echo", "options": {"num_beams": 0}},
            "options.num_beams",
            "--num-beams must be >= 1, got 0",  # the message the CLI and the library give
        ),
        (
            {"document": TEXT, "model": "echo", "options": {"max_length": 0}},
            "options.max_length",
            "--max-length must be >= 1, got 0",
        ),
        (
            {"document": TEXT, "model": "echo", "options": {"length_penalty": "x"}},
            "options.length_penalty",
            "",
        ),
        ({"document": TEXT, "model": "echo", "options": {"beams": 2}}, "options.beams", "Extra inputs"),
        ({"document": TEXT, "model": "echo", "temperature": 1}, "temperature", "Extra inputs"),
        ({"document": TEXT, "format": "pdf"}, "format", "'auto', 'text', 'markdown', 'rst' or 'json'"),
        ({"document": TEXT, "model": "echo", "instructions": "one"}, "instructions", "valid list"),
        ({"document": TEXT, "model": "echo", "instructions": ["a", "  "]}, "instructions[1]", "empty"),
        ({"document": TEXT, "model": "echo", "instructions": ["a", "b", "c"]}, "instructions", "at most 2"),
        ({"document": TEXT, "model": "echo", "instructions": ["x" * 101]}, "instructions[0]", "at most 100"),
        ({"document": "   \n", "model": "lead-3"}, "document", "empty"),
        ({"document": "{not json", "model": "lead-3"}, "document", "malformed JSON"),
        ({"document": "# Only a heading", "model": "lead-3"}, "document", "no text found"),
        ({"document": TEXT, "model": "lead-3", "options": {"k": 2}}, "options.k", "does not take option 'k'"),
        ({"document": TEXT, "model": "echo", "options": {"k": 60}}, "options.k", "k must be <= 50"),
    ],
)
def test_validation_errors_name_the_field(body: dict[str, Any], field: str, fragment: str) -> None:
    settings = ServeSettings(max_instructions=2, max_instruction_chars=100)
    with TestClient(create_app(_registry(), settings)) as test_client:
        error = _error(test_client.post("/v1/summarize", json=body), 422)
    assert error["field"] == field
    assert fragment in error["message"]
    assert error["message"].startswith(field) or error["code"] != "validation_error"


def test_malformed_json_body_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/summarize", content=b'{"document": ', headers={"Content-Type": "application/json"}
    )
    assert _error(response, 422)["code"] == "validation_error"


def test_unknown_model_is_404_naming_the_available_ones(client: TestClient) -> None:
    error = _error(client.post("/v1/summarize", json={"document": TEXT, "model": "gpt-9"}), 404)
    assert error == {
        "code": "unknown_model",
        "message": "unknown model 'gpt-9'; available: lead-3, echo, broken, gated",
        "field": "model",
    }
    # Without "model", the request asks for "default", which this registry does not have.
    assert _error(client.post("/v1/summarize", json={"document": TEXT}), 404)["field"] == "model"


def test_unknown_route_and_method_answer_json(client: TestClient) -> None:
    assert _error(client.get("/v2/summarize"), 404)["code"] == "not_found"
    assert _error(client.get("/v1/summarize"), 405)["code"] == "method_not_allowed"


# ----------------------------------------------------------------------------- body size: 413
def test_body_over_the_limit_is_413_declared_or_chunked() -> None:
    with TestClient(create_app(_registry(), ServeSettings(max_body_bytes=2000))) as test_client:
        small = test_client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3"})
        assert small.status_code == 200
        big = json.dumps({"document": "Word. " * 500, "model": "lead-3"}).encode()
        error = _error(
            test_client.post("/v1/summarize", content=big, headers={"Content-Type": "application/json"}), 413
        )
        assert error["code"] == "body_too_large" and "2000 bytes" in error["message"]

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies while reading
            for start in range(0, len(big), 500):
                yield big[start : start + 500]

        chunked = test_client.post(
            "/v1/summarize", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert _error(chunked, 413)["code"] == "body_too_large"
        assert (
            test_client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3"}).status_code == 200
        )


def test_default_body_limit_is_10_mb() -> None:
    assert ServeSettings().max_body_bytes == 10 * 1024 * 1024


# ----------------------------------------------------------------------------- queue (503) and timeout (504)
def test_full_queue_is_503_and_the_queued_requests_still_succeed() -> None:
    gated = GatedSummarizer()
    settings = ServeSettings(inference_threads=1, queue_size=1, request_timeout_s=20, batch_window_ms=0)
    results: dict[str, int] = {}
    with TestClient(create_app(_registry(gated), settings)) as test_client:

        def post(key: str) -> None:
            results[key] = test_client.post(
                "/v1/summarize", json={"document": TEXT, "model": "gated"}
            ).status_code

        first = threading.Thread(target=post, args=("first",))
        second = threading.Thread(target=post, args=("second",))
        try:
            first.start()
            wait_for(lambda: gated.started == 1)
            second.start()
            wait_for(lambda: test_client.get("/health").json()["pool"]["waiting"] == 1)
            response = test_client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3"})
            error = _error(response, 503)
            assert error["code"] == "busy"
            assert response.headers["retry-after"] == "1"
        finally:
            gated.gate.set()
            first.join(15)
            second.join(15)
        assert results == {"first": 200, "second": 200}
        assert test_client.get("/health").json()["pool"] == {
            "threads": 1,
            "queue_size": 1,
            "running": 0,
            "waiting": 0,
        }


def test_timeout_is_504_and_the_queued_job_is_cancelled() -> None:
    gated = GatedSummarizer()
    settings = ServeSettings(inference_threads=1, queue_size=4, request_timeout_s=0.5, batch_window_ms=0)
    with TestClient(create_app(_registry(gated), settings)) as test_client:
        try:
            started = time.perf_counter()
            error = _error(test_client.post("/v1/summarize", json={"document": TEXT, "model": "gated"}), 504)
            assert error["code"] == "timeout" and "0.5 s" in error["message"]
            assert time.perf_counter() - started < 5
            # The first job still holds the only thread (threads cannot be killed), so this one waits in the
            # queue, times out, and is cancelled before it ever runs.
            _error(test_client.post("/v1/summarize", json={"document": TEXT, "model": "gated"}), 504)
            assert gated.started == 1
            assert test_client.get("/health").json()["pool"]["running"] == 1
        finally:
            gated.gate.set()
        wait_for(lambda: test_client.get("/health").json()["pool"]["running"] == 0)
        assert gated.started == 1
        ok = test_client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3"})
        assert ok.status_code == 200


def test_a_failing_model_answers_500_and_others_carry_on(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="synopsis.serve"):
        error = _error(client.post("/v1/summarize", json={"document": TEXT, "model": "broken"}), 500)
    assert error == {
        "code": "internal_error",
        "message": "internal error while processing the request",
        "field": None,
    }
    assert any("model exploded" in (r.exc_text or "") for r in caplog.records)
    assert client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3"}).status_code == 200
    assert client.get("/health").json()["pool"]["running"] == 0


def test_one_log_line_per_request(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="synopsis.serve.access"):
        client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3"})
        client.post("/v1/summarize", json={"document": TEXT, "model": "nope"})
        client.get("/health")
    lines = [r.getMessage() for r in caplog.records if r.name == "synopsis.serve.access"]
    assert len(lines) == 3
    pattern = r'^testclient:\d+ "{} {}" {} [\d.]+ms in=\d+B out=\d+B{}$'
    assert re.match(pattern.format("POST", "/v1/summarize", 200, " model=lead-3"), lines[0]), lines[0]
    assert re.match(pattern.format("POST", "/v1/summarize", 404, " model=nope"), lines[1]), lines[1]
    assert re.match(pattern.format("GET", "/health", 200, ""), lines[2]), lines[2]
    assert all("\n" not in line for line in lines)


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="inference_threads"):
        ServeSettings(inference_threads=0)
    with pytest.raises(ConfigError, match="queue_size"):
        ServeSettings(queue_size=-1)
    with pytest.raises(ConfigError, match="batch_workers"):
        ServeSettings(batch_workers=0)


def test_batch_workers_default_to_the_cores_over_torch_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from synopsis.serve import settings as settings_module

    monkeypatch.setattr(settings_module, "usable_cores", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert ServeSettings().batches_at_once == 2  # one torch thread: a batch per core
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert ServeSettings().batches_at_once == 1  # two: one batch fills both cores
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    assert ServeSettings().batches_at_once == 1
    assert ServeSettings(batch_workers=3).batches_at_once == 3


# ----------------------------------------------------------------------------- evaluate
PREDICTIONS = ["the bridges reopen next week", "a bakery won an award in town"]
REFERENCES = [
    ["bridges will reopen next week", "the bridges open again soon"],
    ["the town bakery won a prize"],
]


def test_evaluate_returns_what_the_cli_writes(tmp_path: Path, client: TestClient) -> None:
    from synopsis.cli import main

    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": str(i), "prediction": p}) + "\n" for i, p in enumerate(PREDICTIONS))
    )
    refs = tmp_path / "refs.jsonl"
    refs.write_text(
        "".join(json.dumps({"id": str(i), "references": r}) + "\n" for i, r in enumerate(REFERENCES))
    )
    out = tmp_path / "scores.json"
    assert main(["evaluate", "-p", str(preds), "-r", str(refs), "--json", str(out)]) == 0
    cli_report = json.loads(out.read_text())
    del cli_report["inputs"]  # names the CLI's files; the API has none

    response = client.post("/v1/evaluate", json={"predictions": PREDICTIONS, "references": REFERENCES})
    assert response.status_code == 200, response.text
    assert response.json() == cli_report
    assert set(cli_report) >= {"rouge", "bleu", "meteor", "repeated_ngrams", "length", "settings"}


def test_evaluate_options_and_single_references(client: TestClient) -> None:
    body = {
        "predictions": PREDICTIONS,
        "references": ["bridges will reopen next week", "the town bakery won a prize"],
        "sources": [
            "Officials expect the bridges to reopen next week.",
            "A bakery in the town won an award.",
        ],
        "metrics": ["rouge", "novel"],
        "bootstrap": 0,
    }
    report = client.post("/v1/evaluate", json=body).json()
    assert set(report) == {"num_examples", "settings", "rouge", "novel_ngrams"}
    assert report["num_examples"] == 2
    assert "fmeasure_ci95" not in report["rouge"]["rouge1"]


@pytest.mark.parametrize(
    "body,field",
    [
        ({"predictions": ["a"], "references": [["b"], ["c"]]}, "references"),
        ({"predictions": ["a"], "references": [[]]}, "references[0]"),
        ({"predictions": ["a"], "references": ["b"], "sources": []}, "sources"),
        ({"predictions": [], "references": []}, "predictions"),
        ({"predictions": ["a"], "references": ["b"], "metrics": ["bertscore"]}, "metrics[0]"),
        ({"predictions": ["a"], "references": ["b"], "bootstrap": -1}, "bootstrap"),
        ({"predictions": ["a"], "references": ["b"], "mode": "fast"}, "mode"),
    ],
)
def test_evaluate_validation(client: TestClient, body: dict[str, Any], field: str) -> None:
    assert _error(client.post("/v1/evaluate", json=body), 422)["field"] == field


# ----------------------------------------------------------------------------- page, docs, schema
def test_page_and_assets_are_served_by_the_package(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for testid in ("document", "model", "instruction", "submit", "error"):
        assert f'data-testid="{testid}"' in page.text
    assert (
        'data-testid", "summary"' in client.get("/static/app.js").text
    )  # one per summary, set by the script
    for asset in ("app.js", "style.css", "docs.js", "docs.css", "docs.html"):
        assert client.get(f"/static/{asset}").status_code == 200
    # Nothing is fetched from elsewhere: every URL in the assets is relative to this server.
    for path in static_dir().iterdir():
        assert not re.search(r"(?:src|href)=\"(?:https?:)?//", path.read_text()), path.name
        assert not re.search(r"fetch\(\s*\"https?:", path.read_text()), path.name


def test_openapi_schema_and_docs_page(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert {"/health", "/v1/models", "/v1/summarize", "/v1/evaluate", "/v1/outline"} <= set(schema["paths"])
    summarize = schema["paths"]["/v1/summarize"]["post"]
    assert {"200", "404", "413", "422", "503", "504"} <= set(summarize["responses"])
    request = schema["components"]["schemas"]["SummarizeRequest"]
    assert set(request["properties"]) == {
        "document", "format", "model", "instructions", "options", "stream", "by", "max_words",
    }  # fmt: skip
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/static/docs.js" in docs.text


# ----------------------------------------------------------------------------- CLI and registry
def test_model_spec_parsing(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert parse_model_spec(f"mine={tmp_path}") == ("mine", tmp_path)
    for spec, message in [
        ("mine", "expected NAME=DIR"),
        (f"bad name={tmp_path}", "the name may hold"),
        (f"mine={tmp_path / 'nope'}", "is not a directory"),
        (f"mine={tmp_path.parent}", "no config.json"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_model_spec(spec)


def test_registry_refuses_duplicate_and_bad_names() -> None:
    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    with pytest.raises(ConfigError, match="used twice"):
        registry.add(describe("lead-3", load_summarizer("lead-3")))
    with pytest.raises(ConfigError, match="model name"):
        registry.add(describe("../etc", load_summarizer("lead-3")))
    with pytest.raises(ConfigError, match="cannot serve"):
        describe("x", object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs reference summaries"):
        describe("oracle", load_summarizer("oracle"))


@pytest.mark.parametrize(
    "args,message",
    [
        (["serve", "--model", "nameonly"], "expected NAME=DIR"),
        (["serve", "--model", "x=/definitely/not/here"], "is not a directory"),
        (["serve", "--workers", "0"], "'--workers': must be >= 1, got 0"),
        (["serve", "--threads", "0"], "'--threads': must be >= 1, got 0"),
        (["serve", "--no-builtin"], "--no-builtin needs at least one --model"),
        (["serve", "--log-level", "loud"], "--log-level"),
    ],
)
def test_serve_command_refuses_bad_arguments_in_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from synopsis.cli import main

    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("error:")


def test_the_service_does_not_import_the_cli() -> None:
    import subprocess
    import sys

    code = "import sys, synopsis.serve.app, synopsis.serve.registry; print('synopsis.cli' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# ----------------------------------------------------------------------------- the real models
@pytest.mark.slow
def test_every_model_of_the_registry_computes_on_the_device_health_and_models_say_it() -> None:
    import torch

    from synopsis.serve import build_registry
    from synopsis.summarizers.pointer_generator import bundled_model_dir

    meta = torch.device("meta")  # shapes only: where every model was placed, without a GPU
    registry = build_registry({"mine": bundled_model_dir()}, warm_up=False, device=meta)
    neural = {entry.name: entry.summarizer.device for entry in registry if not entry.extractive}
    assert neural == {"default": meta, "pointer-generator": meta, "mine": meta}
    with TestClient(create_app(registry, ServeSettings())) as test_client:
        assert test_client.get("/health").json()["device"] == "meta"
        listed = test_client.get("/v1/models").json()["models"]
    models = {m["name"]: (m["device"], m["dtype"]) for m in listed}
    assert models["mine"] == ("meta", "float32") and models["lead-3"] == (None, None)
    schema = create_app(registry, ServeSettings()).openapi()["components"]["schemas"]
    assert "device" in schema["HealthResponse"]["required"]


def test_serve_refuses_an_unusable_device_or_dtype_in_one_line_before_loading(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import synopsis.serve.registry
    from synopsis.cli import main

    fake_gpus(monkeypatch, 0)
    loaded: list[object] = []
    monkeypatch.setattr(synopsis.serve.registry, "load_summarizer", lambda *a, **k: loaded.append(k))
    assert main(["serve", "--device", "cuda:7"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --device cuda:7: torch sees no CUDA GPU on this machine; use --device cpu or auto\n"
    assert main(["serve", "--dtype", "fp64"]) == 2
    assert "fp32, bf16, fp16" in capsys.readouterr().err
    assert loaded == []


def test_each_worker_places_its_models_on_the_device_and_dtype_serve_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``serve --workers N``: the configuration travels in the environment to every worker's registry."""
    import synopsis.serve.registry
    from synopsis.serve.app import CONFIG_ENV, create_app_from_env

    built: list[dict[str, Any]] = []

    def recording(models: Any, **kwargs: Any) -> ModelRegistry:
        built.append(kwargs)
        registry = ModelRegistry()
        registry.add(describe("lead-3", load_summarizer("lead-3")))
        return registry

    monkeypatch.setattr(synopsis.serve.registry, "build_registry", recording)
    config = {"models": {}, "builtin": True, "device": "cuda:1", "dtype": "bf16", "settings": {}}
    monkeypatch.setenv(CONFIG_ENV, json.dumps(config))
    create_app_from_env()
    assert (built[0]["device"], built[0]["dtype"]) == ("cuda:1", "bf16")


def test_serve_auto_places_the_models_on_the_gpu_torch_sees_with_the_dtype(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch

    import synopsis.serve.registry
    from synopsis.serve import build_registry

    fake_gpus(monkeypatch, 1)
    asked: list[tuple[Any, Any, Any]] = []

    def recording(method: Any = None, model: Any = None, **kwargs: Any) -> Any:
        asked.append((method or model, kwargs.get("device"), kwargs.get("dtype")))
        return load_summarizer("lead-3")

    monkeypatch.setattr(synopsis.serve.registry, "load_summarizer", recording)
    build_registry({"mine": tmp_path}, warm_up=False, dtype="bf16")
    gpu = torch.device("cuda", 0)
    assert asked[:2] == [(None, gpu, None), ("pointer-generator", gpu, None)]
    assert asked[-1] == (tmp_path, gpu, "bf16")  # --dtype: the --model (Hugging Face) ones


@pytest.fixture(scope="module")
def real_client() -> Iterator[TestClient]:
    from synopsis.serve import build_registry
    from synopsis.summarizers.pointer_generator import bundled_model_dir

    registry = build_registry({"mine": bundled_model_dir()})
    with TestClient(create_app(registry, ServeSettings())) as test_client:
        yield test_client


PAPER = (Path(__file__).resolve().parents[1] / "examples" / "paper_abstract.txt").read_text()


@pytest.mark.slow
def test_builtin_registry_offers_the_default_the_extractive_methods_and_user_models(
    real_client: TestClient,
) -> None:
    from synopsis.summarizers.pointer_generator import bundled_model_dir

    response = real_client.get("/v1/models")
    body = response.json()
    assert body["default"] == "default"
    assert [(m["name"], m["method"], m["source"]) for m in body["models"]] == [
        ("default", "default", "builtin"),
        ("pointer-generator", "pointer-generator", "builtin"),
        ("salient", "salient", "builtin"),
        ("lead-3", "lead-3", "builtin"),
        ("centrality", "centrality", "builtin"),
        ("mine", "pointer-generator", "user"),
    ]
    assert str(bundled_model_dir()) not in response.text  # clients see names, never paths


@pytest.mark.slow
def test_default_model_summarizes_with_decoding_options(real_client: TestClient) -> None:
    plain = real_client.post("/v1/summarize", json={"document": PAPER})
    assert plain.status_code == 200, plain.text
    assert plain.json()["model"] == "default"
    greedy = real_client.post(
        "/v1/summarize",
        json={"document": PAPER, "model": "mine", "options": {"num_beams": 1, "max_length": 25}},
    )
    assert greedy.status_code == 200, greedy.text
    words = greedy.json()["summaries"][0]["summary"].split()
    assert 0 < len(words) <= 25
    # max_length below the model's own minimum length (20) is refused, naming the option.
    error = _error(
        real_client.post("/v1/summarize", json={"document": PAPER, "options": {"max_length": 5}}), 422
    )
    assert error["field"] == "options.max_length" and "min_length" in error["message"]


@pytest.mark.slow
def test_centrality_follows_each_instruction(real_client: TestClient) -> None:
    body = real_client.post(
        "/v1/summarize",
        json={
            "document": PAPER,
            "model": "centrality",
            "instructions": ["How is copying from the source done?", "Which task was it evaluated on?"],
            "options": {"k": 1},
        },
    ).json()
    first, second = (item["summary"] for item in body["summaries"])
    assert "copy words from the source" in first and "\n" not in first
    assert "news summarization task" in second
    assert len(body["timing_ms"]["summaries"]) == 2 and body["warnings"] == []


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    from helpers.tiny_models import save_tiny_bart

    return save_tiny_bart(tmp_path_factory.mktemp("bart"), shared_data / "tokenizers")


@pytest.mark.slow
def test_a_seq2seq_checkpoint_takes_generation_options(bart_dir: Path) -> None:
    registry = ModelRegistry()
    entry = registry.add(describe("bart", load_summarizer(None, bart_dir, backend="torch"), source="user"))
    assert (entry.method, entry.instructions, entry.source) == ("seq2seq", True, "user")
    plain = entry.summarizer.summarize([TEXT])
    with TestClient(create_app(registry)) as test_client:
        ok = test_client.post(
            "/v1/summarize",
            json={
                "document": TEXT,
                "model": "bart",
                "instructions": ["Why?"],
                "options": {"num_beams": 2, "max_length": 6},
            },
        )
        assert ok.status_code == 200, ok.text
        error = _error(
            test_client.post(
                "/v1/summarize",
                json={"document": TEXT, "model": "bart", "options": {"min_length": 9, "max_length": 6}},
            ),
            422,
        )
        assert error["field"] == "options.min_length"
    assert entry.summarizer.summarize([TEXT]) == plain  # requests never change the shared summarizer


def test_a_question_summary_hierarchy_comes_back_as_an_outline() -> None:
    registry = ModelRegistry()
    registry.add(ModelEntry("hierarchy", HierarchySummarizer()))
    with TestClient(create_app(registry, ServeSettings())) as client:
        body = client.post("/v1/summarize", json={"document": TEXT, "model": "hierarchy"}).json()
    outline = body["outline"]
    assert outline["problems"] == []
    assert "[1.1] Q: Who objected?" in outline["text"] and "[1.2] Q: Why?" in outline["text"]
    assert [child["question"] for child in outline["tree"]["children"]] == ["Who objected?", "Why?"]
