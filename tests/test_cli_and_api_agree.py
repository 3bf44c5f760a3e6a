"""``synopsis summarize --output-format json`` and ``POST /v1/summarize`` are one request path (the library's
runner): for the same input and options they give the same summary, sections and sources.

Over plain text, Markdown and a ``.txt`` file with ``#`` headings (Markdown in both: one sniffer), with and
without instructions, by section and by document, for an extractive method and an InstructSum checkpoint.
Before, a ``.txt`` with headings was plain text in the CLI and Markdown in the service, the two had other
``by`` defaults, and the CLI's by-document JSON cited no offsets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from helpers.documents import LONG_README
from helpers.tiny_models import save_tiny_t5

from synopsis.cli import main
from synopsis.serve import ServeSettings, build_registry, create_app

MARKDOWN = """# Flood report

Heavy rain fell for a week. The river rose fast.

## Damage

Three bridges were closed on Monday. Two roads were washed away. The mayor asked for help.

### Costs

Repairs will cost two million euros. The region will pay half of it.

## Empty

## Outlook

Officials expect the bridges to reopen next week. Schools stay closed until then.
"""
TEXT = (
    "Heavy rain fell for a week. The river rose fast.\n\n"
    "Three bridges were closed on Monday. Two roads were washed away.\n\n"
    "Officials expect the bridges to reopen next week. Schools stay closed until then.\n"
)
INPUTS = {"text.txt": TEXT, "paper.md": MARKDOWN, "headings.txt": MARKDOWN}
INSTRUCTIONS = ["What was damaged?", "When do the bridges reopen?"]


@pytest.fixture(scope="module")
def instructsum_dir(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    from synopsis.models.seq2seq import convert_checkpoint

    t5 = save_tiny_t5(tmp_path_factory.mktemp("t5"), shared_data / "tokenizers")
    return convert_checkpoint("instructsum", t5, tmp_path_factory.mktemp("is") / "model")


@pytest.fixture(scope="module")
def client(instructsum_dir: Path) -> Iterator[TestClient]:
    registry = build_registry({"instructsum": instructsum_dir}, warm_up=False)
    with TestClient(create_app(registry, ServeSettings())) as test_client:
        yield test_client


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    code = main(["-q", "summarize", *args, "--output-format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    value = json.loads(out)  # one JSON value: the summary's object, or an array of them
    return value if isinstance(value, list) else [value]


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    """What both must agree on: the summary text, its sentences with their sources, the sections (the
    ``id`` names the CLI's file or the pasted document)."""
    return {key: value for key, value in record.items() if key != "id"}


@pytest.mark.parametrize("name", list(INPUTS))
@pytest.mark.parametrize("by", ["document", "section"])
@pytest.mark.parametrize("instructions", [[], INSTRUCTIONS], ids=["plain", "instructions"])
@pytest.mark.parametrize("model", ["lead-3", "instructsum"])
def test_cli_and_api_agree(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    client: TestClient,
    instructsum_dir: Path,
    name: str,
    by: str,
    instructions: list[str],
    model: str,
) -> None:
    path = tmp_path / name
    path.write_text(INPUTS[name])
    chosen = ["--method", "lead-3"] if model == "lead-3" else ["--model", str(instructsum_dir)]
    decoding = [] if model == "lead-3" else ["--max-length", "8", "--num-beams", "1"]
    flags = [flag for text in instructions for flag in ("-i", text)]
    cli = _cli(capsys, str(path), *chosen, *decoding, *flags, "--by", by, "--max-words", "20")

    body: dict[str, Any] = {"document": INPUTS[name], "model": model, "by": by, "max_words": 20}
    if instructions:
        body["instructions"] = instructions
    if model != "lead-3":
        body["options"] = {"max_length": 8, "num_beams": 1}
    answer = client.post("/v1/summarize", json=body)
    assert answer.status_code == 200, answer.text
    api = answer.json()
    assert api["document"]["format"] == ("text" if name == "text.txt" else "markdown")
    assert len(cli) == len(api["summaries"]) == max(1, len(instructions))
    for record, item in zip(cli, api["summaries"], strict=True):
        assert item["by"] == by and item["summary"] == record["prediction"]
        assert _comparable(item["structured"]) == _comparable(record)
        if by == "section" and name != "text.txt":
            assert [s["heading"] for s in record["sections"]] == ["Damage", "Empty", "Outlook"]
        for sentence in record["summary"]:
            for source in sentence["sources"]:  # offsets into the file, which is the pasted text
                assert INPUTS[name][source["start"] : source["end"]].split() == source["text"].split()


@pytest.mark.parametrize("by", ["auto", "document"])
def test_the_default_models_note_is_the_same_through_cli_and_api_plain_and_streamed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], client: TestClient, by: str
) -> None:
    """Out of its domain (a long README) the default summarizes with salient sentences and one note, which
    the API's summary items carry in ``structured.note`` as the CLI's JSON does in ``note``."""
    path = tmp_path / "README.md"
    path.write_text(LONG_README)
    (record,) = _cli(capsys, str(path), "--by", by)
    assert record["note"] and record["note"].startswith("Extractive summary")

    body = {"document": LONG_README, "model": "default", "by": by}
    answer = client.post("/v1/summarize", json=body)
    assert answer.status_code == 200, answer.text
    (item,) = answer.json()["summaries"]
    assert _comparable(item["structured"]) == _comparable(record)  # the note included

    streamed = client.post("/v1/summarize", json={**body, "stream": True})
    events = [json.loads(line) for line in streamed.text.splitlines()]
    (summary,) = [event for event in events if event["event"] == "summary"]
    assert summary["structured"]["note"] == record["note"]
    (done,) = [event for event in events if event["event"] == "done"]
    assert done["response"]["summaries"][0]["structured"]["note"] == record["note"]
    documented = client.get("/openapi.json").json()["components"]["schemas"]["StructuredSummary"]
    assert "description" in documented["properties"]["note"]


def test_the_cli_and_the_api_build_the_same_typed_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], client: TestClient, instructsum_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 49: a request body becomes the request the CLI builds from its flags (``SummarizeRequest``:
    one item per instruction, ``by``, ``max_words``, one ``DecodingOptions``), run by the same runner."""
    from synopsis.pipeline import SummarizeRunner

    built: list[Any] = []
    for_request = SummarizeRunner.for_request.__func__  # type: ignore[attr-defined]

    def recording(cls: type, summarizer: Any, request: Any, **calls: Any) -> Any:
        built.append(request)
        return for_request(cls, summarizer, request, **calls)

    monkeypatch.setattr(SummarizeRunner, "for_request", classmethod(recording))
    path = tmp_path / "paper.md"
    path.write_text(MARKDOWN)
    flags = ["--max-length", "8", "--num-beams", "1", "--by", "document", "--max-words", "20"]
    asked = [flag for text in INSTRUCTIONS for flag in ("-i", text)]
    _cli(capsys, str(path), "--model", str(instructsum_dir), *flags, *asked)
    body = {"document": MARKDOWN, "model": "instructsum", "by": "document", "max_words": 20,
            "instructions": INSTRUCTIONS, "options": {"max_length": 8, "num_beams": 1}}  # fmt: skip
    assert client.post("/v1/summarize", json=body).status_code == 200
    cli, api = built

    def typed(request: Any) -> tuple[Any, ...]:
        items = [(item.instruction, item.parsed.format, _comparable(item.parsed.document.to_dict()),
                  item.parsed.offsets) for item in request.items]  # fmt: skip
        return items, request.by, request.max_words, request.decoding

    assert typed(cli) == typed(api) and len(cli.items) == 2
    assert (cli.output_format, api.output_format) == ("json", "json")
