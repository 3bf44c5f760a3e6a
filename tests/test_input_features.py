"""Methods own their inputs (issue 49 item 4): what a method adds to the encoder's input comes from its
:class:`~synopsis.models.features.InputFeatures`, found through ``registry.INPUT_FEATURES``; the input
builder knows no method. That every method's inputs are the ones they were is checked by the tests of each
method's inputs (tests/test_inputs.py, test_hibrids_path.py, test_instructsum_path.py, test_hie_bart.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers.tiny_models import bart_tokenizer
from transformers import BartConfig

from synopsis.document import Document, Section
from synopsis.errors import ConfigError
from synopsis.models import features, registry
from synopsis.models.inputs import Seq2SeqInputs

INPUTS = Path(features.__file__).with_name("inputs.py")


def test_the_input_builder_imports_no_method_and_tests_no_name() -> None:
    """models/inputs.py imports only the feature interface, the registry and floors below; no string in its
    code is a model type, a family or a method name, and it probes no attribute with getattr/hasattr."""
    tree = ast.parse(INPUTS.read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    synopsis_models = {name for name in imported if name.startswith("synopsis.models")}
    assert synopsis_models == {"synopsis.models.features", "synopsis.models.registry"}
    names = set(registry.MODEL_TYPES) | {t.family for t in registry.MODEL_TYPES.values()}
    names |= set(registry.PAPER_NAMES) | set(registry.INPUT_FEATURES)
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    docstrings = {
        ast.get_docstring(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)
    }
    assert not (strings - docstrings) & names
    probes = [
        n.args[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr")
    ]
    assert all(isinstance(arg, ast.Name) and arg.id == "s" for arg in probes)  # SourceEncoding's own fields


def test_every_registered_feature_is_an_input_feature_and_every_type_names_known_ones() -> None:
    for name in registry.INPUT_FEATURES:
        assert issubclass(features._feature_class(name), features.InputFeatures), name
    for entry in registry.MODEL_TYPES.values():
        assert set(entry.features) <= set(registry.INPUT_FEATURES), entry.name
        assert set(entry.methods) <= set(entry.features), entry.name  # each method contributes its feature


@pytest.fixture()
def toy_bart(monkeypatch: pytest.MonkeyPatch) -> BartConfig:
    """BART with the toy feature registered for its family, as a method registers its own."""
    monkeypatch.setitem(registry.INPUT_FEATURES, "toy", "helpers.features:ToyInputs")
    monkeypatch.setitem(registry.FAMILY_FEATURES, "bart", ("toy",))
    return BartConfig()


def test_a_feature_in_the_table_reaches_every_hook_of_the_builder(toy_bart, shared_data: Path) -> None:
    root = Section(paragraphs=[["An opening line."]])
    root.add(Section("Method", [["We do it.", "Then we stop."]]))
    document = Document(root)
    inputs = Seq2SeqInputs(toy_bart, bart_tokenizer(shared_data / "tokenizers"))
    assert inputs.source_text(document) == "[S] An opening line. [D1] Method [S] We do it. [S] Then we stop."
    (encoding,) = inputs.encode_sources([document])
    assert set(encoding.section_ids) == {-1, 100, 101}  # the feature's ids, not the document's 0 and 1
    batch = inputs.collate([encoding])
    assert batch["toy_lengths"].tolist() == [len(encoding)]
    with pytest.raises(ConfigError, match="reads no section relations"):
        inputs.section_relations(encoding)


def test_a_model_without_the_feature_reads_none_of_it(shared_data: Path) -> None:
    root = Section(paragraphs=[["An opening line."]])
    inputs = Seq2SeqInputs(BartConfig(), bart_tokenizer(shared_data / "tokenizers"))
    assert inputs.features == [] and inputs.source_text(Document(root)) == "An opening line."
