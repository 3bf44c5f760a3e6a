"""Methods own their inputs (issue 49 item 4, issue 59 item 4): what a method adds to the encoder's input
comes from its input features (the roles of :mod:`synopsis.models.features`), found through
``registry.INPUT_FEATURES`` and composed as an ``InputFeatureList``; the input builder knows no method, and
a model computes and pads no field of a method it does not read. That every method's inputs are the ones
they were is checked by the tests of each
method's inputs (tests/test_inputs.py, test_hibrids_path.py, test_instructsum_path.py, test_hie_bart.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers.tiny_models import bart_tokenizer
from transformers import BartConfig, LEDConfig

from synopsis.document import Document, Section
from synopsis.errors import ConfigError
from synopsis.models import features, registry
from synopsis.models.inputs import Seq2SeqInputs

#: What the input builder pads into every model's batch: ids, mask, each token's sentence, document
#: section and segment.
GENERIC_FIELDS = {"input_ids", "attention_mask", "sentence_ids", "document_section_ids", "segment_ids"}

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
    roles = (features.TextMarkers, features.PromptLayout, features.InputFields, features.CachedSourcePrompt)
    for name in registry.INPUT_FEATURES:
        assert issubclass(features._feature_class(name), roles), name
    for entry in registry.MODEL_TYPES.values():
        assert set(entry.features) <= set(registry.INPUT_FEATURES), entry.name
        assert set(entry.methods) <= set(entry.features), entry.name  # each method contributes its feature


@pytest.fixture()
def toy_bart(monkeypatch: pytest.MonkeyPatch) -> BartConfig:
    """BART with the toy feature registered for its family, as a method registers its own."""
    monkeypatch.setitem(registry.INPUT_FEATURES, "toy", "helpers.features:ToyInputs")
    monkeypatch.setitem(registry.FAMILY_FEATURES, "bart", ("toy",))
    return BartConfig()


def _document() -> Document:
    root = Section(paragraphs=[["An opening line."]])
    root.add(Section("Method", [["We do it.", "Then we stop."]]))
    return Document(root)


def test_a_feature_in_the_table_reaches_every_role_of_the_builder(toy_bart, shared_data: Path) -> None:
    document = _document()
    inputs = Seq2SeqInputs(toy_bart, bart_tokenizer(shared_data / "tokenizers"))
    assert inputs.source_text(document) == "[S] An opening line. [D1] Method [S] We do it. [S] Then we stop."
    (encoding,) = inputs.encode_sources([document])
    assert set(encoding.document_section_ids) == {-1, 0, 1}  # the generic field keeps the document's
    assert set(encoding.toy_section_ids) == {-1, 100, 101}  # the feature's ids, a field of its own
    batch = inputs.collate([encoding])
    assert batch["toy_lengths"].tolist() == [len(encoding)]
    assert batch["toy_section_ids"][0].tolist() == encoding.toy_section_ids
    assert set(batch) == GENERIC_FIELDS | {"toy_section_ids", "toy_lengths"}
    assert not inputs.caches_source
    with pytest.raises(ConfigError, match="decodes from no cached source"):
        inputs.cached_prompts([encoding])


def test_features_compose_as_a_list_each_adding_its_fields(
    toy_bart, monkeypatch: pytest.MonkeyPatch, shared_data: Path
) -> None:
    """Two field features in one list: each adds its own fields to the encoding and to the batch, in the
    table's order (the second reads what the first added)."""
    monkeypatch.setitem(registry.INPUT_FEATURES, "counting", "helpers.features:CountingInputs")
    monkeypatch.setitem(registry.FAMILY_FEATURES, "bart", ("toy", "counting"))
    inputs = Seq2SeqInputs(toy_bart, bart_tokenizer(shared_data / "tokenizers"))
    assert isinstance(inputs.features, features.InputFeatureList)
    assert [type(f).__name__ for f in inputs.features] == ["ToyInputs", "CountingInputs"]
    assert [type(f).__name__ for f in inputs.features.of(features.TextMarkers)] == ["ToyInputs"]
    short = Document(Section(paragraphs=[["One line."]]))
    encodings = inputs.encode_sources([_document(), short])
    assert [e.fields.keys() for e in encodings] == [{"toy_section_ids", "toy_sections_seen"}] * 2
    assert [e.toy_sections_seen for e in encodings] == [2, 1]
    batch = inputs.collate(encodings)
    assert set(batch) == GENERIC_FIELDS | {"toy_section_ids", "toy_lengths", "toy_sections_seen"}
    assert batch["toy_sections_seen"].tolist() == [2, 1]
    assert batch["toy_section_ids"][1, len(encodings[1]) :].eq(-1).all()  # padded like the ids


@pytest.mark.parametrize("config", [BartConfig(), LEDConfig(max_encoder_position_embeddings=1024)])
def test_a_stock_model_computes_and_pads_no_section_tree(
    config, monkeypatch: pytest.MonkeyPatch, shared_data: Path
) -> None:
    """Issue 59 item 4: BART, LED and the other stock families read no HIBRIDS field, so their encodings
    compute no tree relations and their batches hold none (main computed and padded them for every model)."""

    def refuse(self: Document) -> None:
        raise AssertionError("a stock model computed the section tree's relations")

    monkeypatch.setattr(Document, "tree_relations", refuse)
    inputs = Seq2SeqInputs(config, bart_tokenizer(shared_data / "tokenizers"))
    encodings = inputs.encode_sources([_document()], ["Why?"])
    assert encodings[0].fields == {}
    with pytest.raises(AttributeError, match="no field 'section_relations'"):
        encodings[0].section_relations  # noqa: B018
    batch = inputs.collate(encodings)
    led = config.model_type == "led"
    assert set(batch) == GENERIC_FIELDS | ({"global_attention_mask"} if led else set())
    assert set(inputs.model_inputs(batch)) == {"input_ids", "attention_mask"} | (
        {"global_attention_mask"} if led else set()
    )
    assert not inputs.reads_section_tree and not inputs.caches_source


def test_a_model_without_the_feature_reads_none_of_it(shared_data: Path) -> None:
    root = Section(paragraphs=[["An opening line."]])
    inputs = Seq2SeqInputs(BartConfig(), bart_tokenizer(shared_data / "tokenizers"))
    assert inputs.features == [] and inputs.source_text(Document(root)) == "An opening line."
