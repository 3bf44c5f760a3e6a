"""Issue 59, items 1 and 2: decoding options travel with each call and are checked once, where they are built;
each backend maps them in one place, once per distinct value; a backend is a decoder, a part of the seq2seq
summarizer, so a new one is one module (tests/helpers/decoders.py) and one row of ``DECODERS``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import run_cli
from helpers.decoders import StepwiseGreedyDecoder
from helpers.tiny_models import save_tiny_bart

from synopsis.config import DecodingOptions
from synopsis.document import Document
from synopsis.errors import ConfigError
from synopsis.pipeline import SummarizeRunner, document_items, read_source
from synopsis.summarizers import load_summarizer
from synopsis.summarizers.decoders import DECODERS, Backend
from synopsis.summarizers.decoders.generate import GenerateDecoder

DOCUMENTS = [
    Document.from_text("The cat sat on the mat. It purred all day."),
    Document.from_text("Rain fell on the town. The river rose."),
]


@pytest.fixture(scope="module")
def bart_dir(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    return save_tiny_bart(tmp_path_factory.mktemp("bart") / "m", shared_data / "tokenizers", init_std=0.3)


@pytest.fixture
def stepwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table row of the tests' backend: all it takes besides its module."""
    row = Backend("stepwise", "helpers.decoders:StepwiseGreedyDecoder", "dtype", ("fp32",))
    monkeypatch.setitem(DECODERS, "stepwise", row)
    StepwiseGreedyDecoder.maps.clear()


def test_a_new_backend_is_one_module_and_one_row(
    bart_dir: Path, stepwise: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    greedy = DecodingOptions(num_beams=1, max_length=7)
    ours = load_summarizer(model=bart_dir, backend="stepwise")
    assert ours.describe().backend == "stepwise" and ours.backend_for(greedy) == "stepwise"
    reference = load_summarizer(model=bart_dir, backend="torch")
    # BART forces EOS at the length limit: the hand-written greedy loop does not, so compare 6 + EOS with 7
    made = ours.summarize(DOCUMENTS, decoding=DecodingOptions(num_beams=1, max_length=6))
    assert made == reference.summarize(DOCUMENTS, decoding=greedy) and all(made)
    # the library's runner, the CLI and its run record take it as any backend
    (summary,) = SummarizeRunner(ours, greedy).run_items(document_items(read_source(DOCUMENTS[0].text)))
    assert summary.prediction
    document = tmp_path / "doc.txt"
    document.write_text(DOCUMENTS[0].text)
    out = tmp_path / "out.jsonl"
    code, _, err = run_cli(
        capsys,
        "summarize",
        document,
        "--model",
        bart_dir,
        "--backend",
        "stepwise",
        "--num-beams",
        "1",
        "-o",
        out,
    )
    assert code == 0, err
    assert json.loads((tmp_path / "out.jsonl.run.json").read_text())["backend"] == "stepwise"
    # what it cannot honour is its own one line, before any work
    with pytest.raises(ConfigError, match="decodes greedily"):
        ours.summarize(DOCUMENTS, decoding=DecodingOptions(num_beams=2))


def test_each_distinct_value_is_mapped_once_and_travels_with_each_call(
    bart_dir: Path, stepwise: None
) -> None:
    ours = load_summarizer(model=bart_dir, backend="stepwise")
    short, longer = DecodingOptions(num_beams=1, max_length=4), DecodingOptions(num_beams=1, max_length=9)
    for _ in range(3):
        ours.summarize(DOCUMENTS, decoding=short)
        ours.summarize(DOCUMENTS, decoding=DecodingOptions(num_beams=1, max_length=4))  # an equal value
    ours.summarize(DOCUMENTS, decoding=longer)
    assert StepwiseGreedyDecoder.maps == [short, longer]  # mapped once per distinct value
    # the summarizer holds no decoding settings: the same object gives each call's own lengths
    encodings = ours.inputs.encode_sources(DOCUMENTS)
    lengths = [[len(ids) for ids in ours.decoder.decode(ours.inputs, encodings, d)] for d in (short, longer)]
    assert lengths == [[1 + 4] * 2, [1 + 9] * 2]  # the start token and each call's own length


def test_the_torch_backend_maps_once_per_value(bart_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mapped: list[DecodingOptions] = []
    original = GenerateDecoder.map

    def counting(self: GenerateDecoder, decoding: DecodingOptions) -> dict:
        mapped.append(decoding)
        return original(self, decoding)

    monkeypatch.setattr(GenerateDecoder, "map", counting)
    summarizer = load_summarizer(model=bart_dir, backend="torch")
    decoding = DecodingOptions(num_beams=2, max_length=6)
    runner = SummarizeRunner(summarizer, decoding, by="section")
    runner.run_items(document_items(read_source("# A\n\nOne sentence here.\n\n# B\n\nAnother one there.\n")))
    summarizer.summarize(DOCUMENTS, decoding=decoding)
    assert mapped == [decoding]


def test_decoding_options_are_not_settings_of_a_summarizer(bart_dir: Path) -> None:
    with pytest.raises(ConfigError, match="'num_beams' is a decoding option: give it per call"):
        load_summarizer(model=bart_dir, num_beams=2)
    summarizer = load_summarizer(model=bart_dir, backend="torch")
    with pytest.raises(ConfigError, match="'max_length' is a decoding option: give it per call"):
        summarizer.with_options(max_length=5)
    with pytest.raises(ConfigError, match="does not take option 'num_beams'"):
        load_summarizer("lead-3").summarize(DOCUMENTS, decoding=DecodingOptions(num_beams=2))
