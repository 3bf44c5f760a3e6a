"""Issue 40 (hardening) on the service: clean log lines, no 500s for bodies the schema accepts, strict
types, limits on a document's size before it is queued, one Authorization header, HEAD. Each test failed
before its fix."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from synopsis.serve import ModelRegistry, ServeSettings, create_app, describe
from synopsis.summarizers import load_summarizer

TEXT = "Rivers flooded the valley. Bridges were closed.\n\nOfficials expect them to reopen. A bakery won."


def _app(settings: ServeSettings | None = None) -> Any:
    registry = ModelRegistry()
    registry.add(describe("lead-3", load_summarizer("lead-3")))
    return create_app(registry, settings or ServeSettings())


@pytest.fixture()
def client() -> Iterator[TestClient]:
    with TestClient(_app(), raise_server_exceptions=False) as test_client:
        yield test_client


def _raw(client: TestClient, path: str, body: str) -> Any:
    return client.post(path, content=body.encode(), headers={"content-type": "application/json"})


def _error(response: Any, status: int, field: str | None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["field"] == field, error
    assert "\n" not in error["message"]
    return error


# ----------------------------------------------------------------------------- 3: log injection
def test_what_the_client_sends_cannot_forge_a_log_line(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    forged = '1.2.3.4:5 "GET /metrics" 200 1.0ms in=0B out=10B'
    with caplog.at_level(logging.INFO, logger="synopsis.serve.access"):
        client.get("/metrics%0a" + forged.replace(" ", "%20").replace('"', "%22") + "%00")
        client.post("/v1/summarize", json={"document": TEXT, "model": "lead-3\n" + forged})
    lines = [record.getMessage() for record in caplog.records if record.name == "synopsis.serve.access"]
    assert len(lines) == 2
    for line in lines:
        assert "\n" not in line and "\x00" not in line, line
        assert line.count('"') - line.count('\\"') == 2, line  # only the quotes around the request line
    assert "/metrics\\n1.2.3.4" in lines[0] and "\\x00" in lines[0]


# ----------------------------------------------------------------------------- 5: no 500s, strict types
def test_document_json_with_a_number_that_is_not_a_string_is_a_422(client: TestClient) -> None:
    document = {"paragraphs": [["A b."]], "sections": [{"number": 5, "paragraphs": [["C d."]]}]}
    error = _error(client.post("/v1/outline", json={"document": json.dumps(document)}), 422, "document")
    assert "number" in error["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"document": "# Heading \\ud800\\n\\nA b c.", "model": "lead-3"}', "document"),
        ('{"document": "A b c.", "model": "lead-3", "instructions": ["why \\ud800"]}', "instructions[0]"),
        ('{"document": "A b c.", "model": "nope \\udfff"}', "model"),
    ],
)
def test_a_lone_surrogate_is_a_422_naming_the_field(client: TestClient, body: str, field: str) -> None:
    _error(_raw(client, "/v1/summarize", body), 422, field)


def test_evaluate_with_a_negative_seed_is_a_422(client: TestClient) -> None:
    body = {"predictions": ["a b"], "references": ["a b"], "metrics": ["rouge"], "seed": -1}
    _error(client.post("/v1/evaluate", json=body), 422, "seed")


def test_the_schema_excludes_an_empty_document_and_no_sources(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["SummarizeRequest"]["properties"]["document"]["minLength"] == 1
    assert schemas["OutlineRequest"]["properties"]["document"]["minLength"] == 1
    sources = schemas["EvaluateRequest"]["properties"]["sources"]["anyOf"]
    assert any(option.get("minItems") == 1 for option in sources)
    _error(client.post("/v1/summarize", json={"document": "", "model": "lead-3"}), 422, "document")
    body = {"predictions": ["a b"], "references": ["a b"], "sources": []}
    _error(client.post("/v1/evaluate", json=body), 422, "sources")


@pytest.mark.parametrize("value", [True, "4", 4.0])
def test_options_are_strictly_typed(client: TestClient, value: Any) -> None:
    body = {"document": TEXT, "model": "lead-3", "options": {"num_beams": value}}
    error = _error(client.post("/v1/summarize", json=body), 422, "options.num_beams")
    assert error["code"] == "validation_error"  # the schema refuses it, not lead-3 (which takes no beams)


def test_a_float_option_still_takes_a_json_integer(client: TestClient) -> None:
    body = {"document": TEXT, "model": "lead-3", "options": {"length_penalty": 1}}
    response = client.post("/v1/summarize", json=body)
    assert response.status_code != 422 or response.json()["error"]["code"] == "invalid_option", response.text


def test_a_100k_deep_body_gets_the_documented_422(client: TestClient) -> None:
    body = '{"document": ' + "[" * 100_000 + "]" * 100_000 + "}"
    _error(_raw(client, "/v1/summarize", body), 422, None)


# ----------------------------------------------------------------------------- 8: smaller
def test_two_authorization_headers_are_refused() -> None:
    with TestClient(_app(ServeSettings(auth_token="secret"))) as client:
        headers = [("Authorization", "Bearer wrong"), ("Authorization", "Bearer secret")]
        _error(client.get("/v1/models", headers=headers), 400, "Authorization")
        assert client.get("/v1/models", headers={"Authorization": "Bearer secret"}).status_code == 200


def test_head_health_answers_without_a_body(client: TestClient) -> None:
    response = client.head("/health")
    assert response.status_code == 200 and response.content == b""


def test_evaluate_with_empty_strings_names_its_own_field(client: TestClient) -> None:
    _error(client.post("/v1/evaluate", json={"predictions": [""], "references": [""]}), 422, "references[0]")
    body = {"predictions": ["a", "b"], "references": ["a", ["b", " "]]}
    _error(client.post("/v1/evaluate", json=body), 422, "references[1][1]")


@pytest.mark.parametrize("instruction", ["\u200b", " \ufeff\u200d "])
def test_an_instruction_of_invisible_characters_is_empty(client: TestClient, instruction: str) -> None:
    body = {"document": TEXT, "model": "lead-3", "instructions": [instruction]}
    error = _error(client.post("/v1/summarize", json=body), 422, "instructions[0]")
    assert "empty" in error["message"]


# ----------------------------------------------------------------------------- issue 50
def test_a_document_over_a_limit_is_refused_while_it_is_parsed() -> None:
    """Before, 1.2 million one-word headings were parsed whole (minutes, gigabytes) and then refused."""
    documents = [("#\nw.\n" * 100_000, "--max-sections"), ("w.\n\n" * 100_000, "--max-sentences")]
    with TestClient(_app(ServeSettings(max_sections=50, max_sentences=60))) as c:
        for document, flag in documents:
            for path, extra in (("/v1/outline", {}), ("/v1/summarize", {"model": "lead-3"})):
                error = _error(c.post(path, json={"document": document, **extra}), 422, "document")
                assert "stopped at the limit" in error["message"] and flag in error["message"], error


_SURROGATES = [
    ('{"title": "T \\ud800", "paragraphs": [["A b c."]]}', "document.title"),
    ('{"id": "x\\udfff", "paragraphs": [["A b c."]]}', "document.id"),
    ('{"paragraphs": [], "sections": [{"heading": "H \\ud800", "paragraphs": [["A."]]}]}', "heading"),
    ('{"paragraphs": [["A b c.", "D \\udc00 e."]]}', "document.paragraphs[0][1]"),
]


@pytest.mark.parametrize(("document", "where"), _SURROGATES)
@pytest.mark.parametrize("stream", [False, True])
def test_a_lone_surrogate_in_document_json_is_a_422_naming_the_field(
    client: TestClient, document: str, where: str, stream: bool
) -> None:
    """Before: a plain-text 500 (a dropped connection when streaming)."""
    body = {"document": document, "model": "lead-3", "stream": stream}
    for path in ("/v1/summarize", "/v1/outline"):
        sent = body if path == "/v1/summarize" else {"document": document}
        error = _error(client.post(path, json=sent), 422, "document")
        assert where in error["message"] and "lone surrogate" in error["message"], error


def test_string_fields_have_length_limits_and_are_not_echoed_whole(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, a 9 MB model name made a 9 MB log line and was echoed whole in the 404."""
    name = "m" * 100_000
    with caplog.at_level(logging.INFO, logger="synopsis.serve.access"):
        response = client.post("/v1/summarize", json={"document": TEXT, "model": name})
        client.get("/v1/" + "p" * 10_000)
    _error(response, 422, "model")
    assert name[:100] not in response.text
    body = {"predictions": ["a" * 200_000], "references": ["a"], "metrics": ["length"]}
    _error(client.post("/v1/evaluate", json=body), 422, "predictions[0]")
    body = {"document": TEXT, "model": "lead-3", "instructions": ["i" * 20_000]}
    _error(client.post("/v1/summarize", json=body), 422, "instructions[0]")
    lines = [record.getMessage() for record in caplog.records if record.name == "synopsis.serve.access"]
    assert len(lines) == 2 and all(len(line) < 500 for line in lines), [len(line) for line in lines]
    assert "(+9804 chars)" in lines[1]


def test_a_forwarded_client_address_is_escaped_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """What a trusted proxy's X-Forwarded-For says the client is reaches the log escaped (before: raw)."""
    forged = '1.2.3.4" 200 0.1ms\x85\x1b[2J'
    with TestClient(_app(), client=(forged, 5)) as c, caplog.at_level(logging.INFO, "synopsis.serve.access"):
        c.get("/health")
    line = next(r.getMessage() for r in caplog.records if r.name == "synopsis.serve.access")
    assert "\x85" not in line and "\x1b" not in line and '\\"' in line, line


@pytest.mark.parametrize(
    ("host", "answered"),
    [
        ("localhost:8000", True),
        ("127.0.0.1:8000", True),
        ("[::1]:8000", True),
        ("10.1.2.3", True),  # an address: no DNS to rebind
        ("my.box", True),  # --allowed-hosts
        ("evil.example:8000", False),
        ("localhost.evil.example", False),
        ("", False),
    ],
)
def test_without_a_token_only_the_servers_own_hosts_are_answered(host: str, answered: bool) -> None:
    """Before, any Host was answered, so a page on another origin could reach the server through DNS
    rebinding."""
    settings = ServeSettings(allowed_hosts=("localhost", "my.box"))
    with TestClient(_app(settings)) as c:
        response = c.get("/v1/models", headers={"Host": host})
        assert (response.status_code == 200) is answered, response.text
        if not answered:
            _error(response, 400, "Host")
