"""One decoding-options type: the CLI's flags and the service's request fields agree with its one definition,
it is checked once, and every summarizer says what it is and takes (``describe``, ``with_options``) so that
the CLI and the service never check classes."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import typer

from synopsis.config import DECODING_OPTIONS, DecodingOptions
from synopsis.document import Document
from synopsis.errors import ConfigError
from synopsis.generation.config import GenerationConfig
from synopsis.models.pointer_generator import PointerGenerator, config_for_vocab
from synopsis.serve.registry import describe
from synopsis.serve.schemas import SummarizeOptions
from synopsis.summarizers import load_summarizer
from synopsis.summarizers.extractive import CentralitySummarizer, OracleSummarizer
from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer
from synopsis.vocab import Vocab

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "synopsis"
TEXT = "The council met on Tuesday. It approved the budget. The mayor spoke. Residents asked questions."


def _summarize_params() -> dict[str, typer.core.click.Option]:
    from synopsis.cli import load_command

    command = load_command("summarize")
    return {opt: param for param in command.params for opt in getattr(param, "opts", [])}


@pytest.mark.parametrize("name", list(DECODING_OPTIONS))
def test_cli_flag_agrees_with_the_definition(name: str) -> None:
    option = DECODING_OPTIONS[name]
    param = _summarize_params()[option.flag]
    assert param.name == name and param.default is None
    assert param.help.startswith(option.help) and str(option.allowed) in param.help
    assert param.callback is None  # checked once, where the command builds its DecodingOptions


@pytest.mark.parametrize("name", list(DECODING_OPTIONS))
def test_service_field_agrees_with_the_definition(name: str) -> None:
    option = DECODING_OPTIONS[name]
    field = SummarizeOptions.model_json_schema()["properties"][name]
    kind = next(kind for kind in field["anyOf"] if kind["type"] != "null")
    assert field["description"] == option.help
    assert kind["type"] == ("number" if option.type is float else "integer")
    assert (field["minimum"], field["maximum"]) == (option.request_range.low, option.request_range.high)
    # a request may ask only for what the CLI allows
    assert field["minimum"] in option.allowed and field["maximum"] in option.allowed


def test_the_cli_and_the_service_offer_the_same_decoding_options() -> None:
    flags = {param.name for opt, param in _summarize_params().items() if param.name in DECODING_OPTIONS}
    # k: centrality's; backend and compute_type: what decodes, as --backend and --compute-type
    fields = set(SummarizeOptions.model_fields) - {"k", "backend", "compute_type"}
    assert flags == fields == set(DECODING_OPTIONS)
    assert {"backend", "compute_type"} <= {param.name for param in _summarize_params().values()}
    assert all(GenerationConfig.RANGES[name] is option.allowed for name, option in DECODING_OPTIONS.items())


@pytest.mark.parametrize(
    "options,message",
    [
        ({"temperature": 0.5}, "unknown generation option"),
        ({"num_beams": 0}, "--num-beams must be >= 1, got 0"),
        ({"no_repeat_ngram_size": -1}, "--no-repeat-ngram-size must be >= 0"),
        ({"length_penalty": math.inf}, "--length-penalty"),
        ({"num_beams": True}, "--num-beams: expected int, got a boolean"),
        ({"min_length": 9, "max_length": 4}, "--min-length 9 is larger than --max-length 4"),
    ],
)
def test_decoding_options_are_checked_once(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DecodingOptions.from_mapping(options)


def test_decoding_options_map_to_generate_kwargs_and_update() -> None:
    options = DecodingOptions.from_mapping({"num_beams": 2, "max_length": None})
    assert options.given() == {"num_beams": 2}
    assert options.update(max_length=7, num_beams=None).given() == {"num_beams": 2, "max_length": 7}
    with pytest.raises(ConfigError, match="larger than"):
        options.update(max_length=3).update(min_length=5)


def _tiny_pointer_generator() -> PointerGeneratorSummarizer:
    torch.manual_seed(0)
    vocab = Vocab.build([TEXT.lower().replace(".", " .").split()], max_size=50)
    model = PointerGenerator(config_for_vocab(vocab, embedding_dim=8, hidden_dim=12))
    return PointerGeneratorSummarizer(model, vocab, GenerationConfig(min_length=2, max_length=6))


def test_pointer_generator_decodes_each_call_with_its_options_and_keeps_its_own() -> None:
    """Issue 59 item 1: decoding options travel with each call, as generate()'s do; the summarizer holds
    none of them and is never changed by them."""
    summarizer = _tiny_pointer_generator()
    document = Document.from_text(TEXT)
    assert (
        len(summarizer.summarize([document], decoding=DecodingOptions(num_beams=1, max_length=4))[0].split())
        <= 4
    )
    assert (summarizer.generation.num_beams, summarizer.generation.max_length) == (4, 6)
    assert summarizer.summarize([document]) == summarizer.summarize([document], decoding=DecodingOptions())
    assert summarizer.with_options() is summarizer and summarizer.with_options(k=None) is summarizer
    with pytest.raises(ConfigError, match="min_length"):  # against the defaults kept (min_length 2)
        summarizer.summarize([document], decoding=DecodingOptions(max_length=1))
    with pytest.raises(ConfigError, match="does not take option 'k'"):
        summarizer.with_options(k=2)
    with pytest.raises(ConfigError, match="'num_beams' is a decoding option: give it per call"):
        summarizer.with_options(num_beams=1)
    info = summarizer.describe()
    assert (info.method, info.options, info.takes_instructions, info.extractive) == (
        "pointer-generator",
        tuple(DECODING_OPTIONS),
        False,
        False,
    )


def test_extractive_summarizers_describe_themselves() -> None:
    lead = load_summarizer("lead-2").describe()
    assert (lead.method, lead.description, lead.options, lead.extractive, lead.by_section) == (
        "lead-2",
        "the first 2 sentences",
        (),
        True,
        True,
    )
    with pytest.raises(ConfigError, match="does not take option 'num_beams'"):
        load_summarizer("lead-2").summarize([TEXT], decoding=DecodingOptions(num_beams=2))
    oracle = OracleSummarizer().describe()
    assert oracle.needs_references and not oracle.by_section and oracle.extractive


def test_centrality_with_options_shares_its_encoder() -> None:
    class Encoder:
        def encode(self, texts: list[str]):  # noqa: ANN202
            return torch.eye(len(texts), 8).numpy()

    encoder = Encoder()
    summarizer = CentralitySummarizer(k=3, encoder=encoder)  # type: ignore[arg-type]
    one = summarizer.with_options(k=1)
    assert one.k == 1 and one.encoder is encoder and summarizer.k == 3
    assert len(one.summarize([Document.from_text(TEXT)])[0].split("\n")) == 1
    info = one.describe()
    assert info.options == ("k",) and info.takes_instructions and "1 most central" in info.description


def test_the_service_describes_a_model_by_asking_it() -> None:
    entry = describe("pg", _tiny_pointer_generator())
    assert (entry.method, entry.instructions) == ("pointer-generator", False)
    assert entry.options == tuple(DECODING_OPTIONS)
    options = entry.request_options({"num_beams": 1})
    # the weights are shared and the decoding value goes with each call (the batch key holds it)
    assert entry.summarizer_for(options) is entry.summarizer and options.decoding.num_beams == 1
    with pytest.raises(ConfigError, match="min_length"):  # checked against the model once, at the edge
        entry.summarizer_for(entry.request_options({"max_length": 1}))
    with pytest.raises(ConfigError, match="cannot serve oracle"):
        describe("oracle", OracleSummarizer())


@pytest.mark.parametrize("package", ["cli", "serve"])
def test_the_cli_and_the_service_never_check_a_summarizers_class(package: str) -> None:
    """They ask the summarizer (``describe``): no ``__module__`` strings, no ``isinstance`` on summarizers."""
    summarizer_classes = {"LeadSummarizer", "OracleSummarizer", "CentralitySummarizer",
                          "PointerGeneratorSummarizer", "Seq2SeqSummarizer"}  # fmt: skip
    for path in sorted((PACKAGE / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            assert not (isinstance(node, ast.Attribute) and node.attr == "__module__"), path
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                assert not names & summarizer_classes, f"{path}:{node.lineno}"


BAD_DECODING = [
    ({"num_beams": 0}, "--num-beams must be >= 1, got 0"),
    ({"no_repeat_ngram_size": -1}, "--no-repeat-ngram-size must be >= 0, got -1"),
    ({"length_penalty": math.inf}, "--length-penalty: must be a finite number, got inf"),
    ({"min_length": 9, "max_length": 4}, "--min-length 9 is larger than --max-length 4"),
]


@pytest.mark.parametrize("options,message", BAD_DECODING)
def test_a_bad_decoding_option_is_one_message_from_the_cli_the_api_and_the_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: dict, message: str
) -> None:
    """Checked once, where the value enters (building DecodingOptions); before, the CLI's parser callback,
    the request schema's bounds and DecodingOptions each said it their own way."""
    from fastapi.testclient import TestClient
    from helpers.cli import run_cli

    from synopsis.serve import ServeSettings, create_app
    from synopsis.serve.registry import ModelRegistry

    path = tmp_path / "doc.txt"
    path.write_text(TEXT)
    flags = [str(item) for name, value in options.items() for item in (DECODING_OPTIONS[name].flag, value)]
    code, _, err = run_cli(capsys, "summarize", path, "--method", "pointer-generator", *flags)
    assert code == 2 and err.strip().splitlines() == [f"error: {message}"]

    registry = ModelRegistry()
    registry.add(describe("pg", _tiny_pointer_generator()))
    with TestClient(create_app(registry, ServeSettings(batch_window_ms=0))) as client:
        body = json.dumps({"document": TEXT, "model": "pg", "options": options})  # inf as JSON's Infinity
        response = client.post("/v1/summarize", content=body, headers={"content-type": "application/json"})
    error = response.json()["error"]
    assert response.status_code == 422 and error["message"] == message
    assert error["field"] == f"options.{next(iter(options))}"

    with pytest.raises(ConfigError) as library:
        _tiny_pointer_generator().summarize([TEXT], decoding=DecodingOptions.from_mapping(options))
    assert str(library.value) == message


def test_a_request_may_ask_for_less_than_the_cli_allows() -> None:
    assert DecodingOptions.from_mapping({"num_beams": 17}).num_beams == 17
    with pytest.raises(ConfigError, match=r"--num-beams must be in \[1, 16\] in one request, got 17"):
        DecodingOptions.from_mapping({"num_beams": 17}, request=True)


def test_a_decoding_value_is_validated_once_on_its_way_to_the_decoder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built and checked at the edge (a flag, a request field, a library call), the value travels as it
    is: summarizers map it and the service's registry hands it on (before: 4 checks from the CLI, 6-7 from
    the API)."""
    from fastapi.testclient import TestClient
    from helpers.cli import run_cli

    from synopsis.serve import ServeSettings, create_app
    from synopsis.serve.registry import ModelRegistry

    checked: list[dict] = []
    validate = DecodingOptions._validate

    def counting(self: DecodingOptions) -> None:
        checked.append(self.given())
        validate(self)

    monkeypatch.setattr(DecodingOptions, "_validate", counting)
    path = tmp_path / "doc.txt"
    # a paper abstract: the default gives it to the bundled model (other text to the extractive method)
    path.write_text((Path(__file__).resolve().parents[1] / "examples" / "paper_abstract.txt").read_text())
    flags = ["--min-length", "3", "--max-length", "9", "--num-beams", "2"]
    for method in ("pointer-generator", "default"):
        checked.clear()
        code, out, err = run_cli(
            capsys, "summarize", path, "--method", method, *flags, "-o", tmp_path / "o.jsonl"
        )
        assert code == 0, err
        assert checked == [{"num_beams": 2, "min_length": 3, "max_length": 9}], method
        prediction = json.loads((tmp_path / "o.jsonl").read_text())["prediction"]
        assert 0 < len(prediction.split()) <= 9

    checked.clear()
    decoding = DecodingOptions(num_beams=1, max_length=5)  # the library's edge
    (summary,) = _tiny_pointer_generator().summarize([TEXT], decoding=decoding)
    assert checked == [{"num_beams": 1, "max_length": 5}] and len(summary.split()) <= 5

    registry = ModelRegistry()
    registry.add(describe("pg", _tiny_pointer_generator()))
    with TestClient(create_app(registry, ServeSettings(batch_window_ms=0))) as client:
        checked.clear()
        body = {"document": TEXT, "model": "pg", "options": {"max_length": 5, "num_beams": 2}}
        response = client.post("/v1/summarize", json=body)
        assert response.status_code == 200, response.text
    assert checked == [{"num_beams": 2, "max_length": 5}]


def test_the_service_batches_on_the_value_it_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batched, as the service runs by default: each request's options are checked once at the edge, and the
    batcher keys its calls on that frozen value (with the backend), compared as it is: two requests with the
    same options share a key, another value gets its own; nothing below validates them again."""
    from fastapi.testclient import TestClient

    from synopsis.serve import ServeSettings, create_app
    from synopsis.serve.batching import Batcher
    from synopsis.serve.registry import ModelRegistry, RequestOptions

    checked: list[dict] = []
    keys: list[Any] = []
    validate, submit = DecodingOptions._validate, Batcher.submit

    def counting(self: DecodingOptions) -> None:
        checked.append(self.given())
        validate(self)

    def recording(self: Batcher, *args: Any, **kw: Any) -> Any:
        keys.append(args[3])  # documents, instructions, summarizer, key
        return submit(self, *args, **kw)

    monkeypatch.setattr(DecodingOptions, "_validate", counting)
    monkeypatch.setattr(Batcher, "submit", recording)
    registry = ModelRegistry()
    registry.add(describe("pg", _tiny_pointer_generator()))
    asked = [{"max_length": 5, "num_beams": 2}, {"num_beams": 2, "max_length": 5}, {"max_length": 6}]
    with TestClient(create_app(registry, ServeSettings(batch_window_ms=1))) as client:
        for options in asked:
            body = {"document": TEXT, "model": "pg", "options": options}
            response = client.post("/v1/summarize", json=body)
            assert response.status_code == 200, response.text
    assert checked == [{"num_beams": 2, "max_length": 5}] * 2 + [{"max_length": 6}]  # once per request
    assert all(isinstance(key, RequestOptions) for key in keys) and len(keys) == 3
    assert keys[0] == keys[1] != keys[2] and hash(keys[0]) == hash(keys[1])
    assert keys[0].decoding == DecodingOptions(num_beams=2, max_length=5) and keys[0].backend == "torch"
