"""HIBRIDS through the toolkit's one input path, summarizer, CLI and trainer (Cao & Wang, ACL 2022)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.tiny_models import save_tiny_bart, save_tiny_led, save_tiny_t5

from synopsis.cli import main
from synopsis.config import DecodingOptions
from synopsis.data.example import Example, write_examples
from synopsis.document import Document, Section
from synopsis.models.hibrids import END_NODE, OUTSIDE_NODES, START_NODE, relation_buckets
from synopsis.models.inputs import Seq2SeqInputs
from synopsis.models.seq2seq import convert_checkpoint, load_seq2seq
from synopsis.summarizers import load_summarizer

SENTENCES = [
    ["We study meetings.", "They are long."],
    ["We train a small model.", "It runs on a CPU."],
    ["Scores improve.", "Speed doubles."],
]
SECTIONED = Document(
    Section(
        paragraphs=[SENTENCES[0]],
        children=[
            Section("Method", [SENTENCES[1]], children=[Section("Details", [SENTENCES[2]])]),
        ],
    )
)
FLAT = Document(Section(paragraphs=[s for s in SENTENCES]))


@pytest.fixture(scope="module")
def tokenizers_dir(shared_data: Path) -> Path:
    return shared_data / "tokenizers"


@pytest.fixture(scope="module")
def bases(tmp_path_factory, tokenizers_dir: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bases")
    return {
        "bart": save_tiny_bart(root / "bart", tokenizers_dir, init_std=0.3),
        "t5": save_tiny_t5(root / "t5", tokenizers_dir, initializer_factor=10.0),
        "led": save_tiny_led(root / "led", tokenizers_dir, init_std=0.3),
    }


def _summaries(model_dir: Path, documents: list[Document]) -> list[str]:
    return load_summarizer(model=model_dir).summarize(
        documents, decoding=DecodingOptions(num_beams=2, max_length=10)
    )


@pytest.mark.parametrize("base", ["bart", "t5", "led"])
def test_converted_model_summarizes_as_its_base_until_trained(base: str, bases, tmp_path: Path) -> None:
    out = convert_checkpoint("hibrids", bases[base], tmp_path / "hibrids")
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == f"hibrids_{base}"
    assert config["hibrids_encoder"] and config["hibrids_decoder"]
    documents = [SECTIONED, FLAT]
    assert _summaries(out, documents) == _summaries(bases[base], documents)


def test_batch_record_carries_sections_and_bucketed_relations(bases, tmp_path: Path) -> None:
    out = convert_checkpoint("hibrids", bases["bart"], tmp_path / "h", selected=True)
    model, tokenizer = load_seq2seq(out)
    inputs = Seq2SeqInputs(model.config, tokenizer)
    batch = inputs.collate(inputs.encode_sources([SECTIONED, FLAT]))
    model_inputs = inputs.model_inputs(batch)
    assert {"section_ids", "section_relations"} <= set(model_inputs)
    path, level = SECTIONED.tree_relations()
    expected = relation_buckets(path, level, [s.depth for s in SECTIONED.sections], selected=True)
    # the outside nodes (question, start, end) come first, then the document's sections (issue 41 item 3)
    assert torch.equal(model_inputs["section_relations"][0, 3:6, 3:6], expected)
    assert model_inputs["section_relations"][1, 4:, :].eq(-1).all()  # the flat document has one section
    assert set(model_inputs["section_ids"][0].tolist()) == {START_NODE, END_NODE, 3, 4, 5}


def test_trained_tables_tell_a_sectioned_document_from_its_flat_copy(bases, tmp_path: Path) -> None:
    out = convert_checkpoint("hibrids", bases["bart"], tmp_path / "h")
    summarizer = load_summarizer(model=out)
    summarizer.inputs.headings = False  # the same text: only the tree tells the two apart
    greedy = DecodingOptions(num_beams=1, max_length=12)
    # zero tables: no structure
    assert summarizer.summarize([SECTIONED], decoding=greedy) == summarizer.summarize([FLAT], decoding=greedy)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in summarizer.model.named_parameters():
            if "hibrids" in name:
                parameter.normal_(0.0, 3.0)
    inputs = summarizer.inputs
    sectioned = inputs.model_inputs(inputs.collate(inputs.encode_sources([SECTIONED])))
    flat = inputs.model_inputs(inputs.collate(inputs.encode_sources([FLAT])))
    assert torch.equal(sectioned["input_ids"], flat["input_ids"])  # the same tokens...
    decoder_input = torch.tensor([[summarizer.model.config.decoder_start_token_id]])
    with torch.no_grad():
        a = summarizer.model(**sectioned, decoder_input_ids=decoder_input).logits
        b = summarizer.model(**flat, decoder_input_ids=decoder_input).logits
    assert (a - b).abs().max() > 1e-3  # ...read differently once the tree's biases are learnt


def test_section_token_baselines_mark_every_section(bases, tmp_path: Path) -> None:
    for kind, expected in (("sectok", ["[SEC]", "[SEC]"]), ("lvlsectok", ["[SEC-L1]", "[SEC-L2]"])):
        out = tmp_path / kind
        assert main(["convert", "section-tokens", str(bases["bart"]), str(out), "--kind", kind]) == 0
        model, tokenizer = load_seq2seq(out)
        inputs = Seq2SeqInputs(model.config, tokenizer)
        text = inputs.source_text(SECTIONED)
        assert [word for word in text.split() if word.startswith("[SEC")] == expected
        positions = [text.index(expected[0]), text.index("We train")]
        positions += [text.rindex(expected[1]), text.index("Scores")]
        assert positions == sorted(positions)
        (encoding,) = inputs.encode_sources([SECTIONED])
        marker_ids = {tokenizer.convert_tokens_to_ids(m) for m in expected}
        assert sum(t in marker_ids for t in encoding.input_ids) == 2
        assert (
            len(load_summarizer(model=out).summarize([SECTIONED], decoding=DecodingOptions(max_length=6)))
            == 1
        )


def test_cli_convert_options_and_errors(bases, tmp_path: Path, capsys) -> None:
    out = tmp_path / "enc"
    assert main(["convert", "hibrids", str(bases["t5"]), str(out), "--no-decoder", "--selected"]) == 0
    config = json.loads((out / "config.json").read_text())
    flags = (config["hibrids_encoder"], config["hibrids_decoder"], config["hibrids_selected"])
    assert flags == (True, False, True)
    code = main(["convert", "hibrids", str(bases["t5"]), str(tmp_path / "x"), "--no-encoder", "--no-decoder"])
    assert code == 2 and "needs the encoder bias, the decoder bias or both" in capsys.readouterr().err


@pytest.mark.slow
def test_train_seq2seq_trains_the_tables(bases, tmp_path: Path) -> None:
    from synopsis.training.seq2seq import Seq2SeqTrainConfig, train_seq2seq

    out = convert_checkpoint("hibrids", bases["bart"], tmp_path / "h")
    examples = [Example(f"e{i}", doc, ["a short summary"]) for i, doc in enumerate([SECTIONED, FLAT] * 2)]
    write_examples(examples, tmp_path / "train.jsonl")
    config = Seq2SeqTrainConfig(
        model=str(out),
        output_dir=str(tmp_path / "run"),
        train_path=str(tmp_path / "train.jsonl"),
        max_dev_examples=2,
        batch_size=2,
        learning_rate=1e-2,
        max_steps=2,
        eval_every=2,
        eval_max_length=6,
        patience=0,
    )
    train_seq2seq(config, show_progress=False)
    best = tmp_path / "run" / "best"
    assert json.loads((best / "config.json").read_text())["model_type"] == "hibrids_bart"
    from safetensors.torch import load_file

    tables = {k: v for k, v in load_file(str(best / "model.safetensors")).items() if "hibrids" in k}
    assert tables and any(v.abs().sum() > 0 for v in tables.values())  # gradients reached the tables


@pytest.mark.parametrize("base", ["bart", "t5", "led"])
def test_converted_checkpoints_keep_the_qs_markers_through_decode(base: str, bases, tmp_path: Path) -> None:
    """Issue 27 item 1: T5's vocabulary has no arrows (``[L↓]`` and ``[L↑]`` both became ``[L<unk>]``, so a
    hierarchy parsed as one pair). A converted checkpoint reads each marker as one added (not special)
    token, ``decode(..., skip_special_tokens=True)`` keeps it, and the hierarchy parses back unchanged."""
    from synopsis.qs import RESERVED, parse

    text = "A1 [L↓] Q1.1 [ANS] A1.1 [L↓] Q1.1.1? [ANS] A1.1.1 [L↑] Q1.2 [ANS] A1.2 [L-] Q1.3 [ANS] A1.3"
    stock_model, stock_tokenizer = load_seq2seq(bases[base])
    for kind, options in (("hibrids", {}), ("section-tokens", {"markers": "lvlsectok"})):
        out = convert_checkpoint(kind, bases[base], tmp_path / kind, **options)
        model, tokenizer = load_seq2seq(out)
        ids = tokenizer(text)["input_ids"]
        for marker in RESERVED:
            marker_id = tokenizer.convert_tokens_to_ids(marker)
            assert marker_id != tokenizer.unk_token_id and marker_id in ids, (kind, marker)
            assert marker_id not in tokenizer.all_special_ids
            # initialised from the marker's pieces in the stock vocabulary
            pieces = stock_tokenizer(marker, add_special_tokens=False)["input_ids"]
            expected = stock_model.get_input_embeddings().weight[pieces].mean(0)
            torch.testing.assert_close(model.get_input_embeddings().weight[marker_id], expected)
        decoded = tokenizer.decode(ids, skip_special_tokens=True)
        assert parse(decoded) == parse(text), (kind, decoded)
        assert len(parse(decoded)) == 5


def test_by_section_each_section_reads_its_own_subtree(bases, tmp_path: Path) -> None:
    """Item 5 of issue 26: by section a HIBRIDS model reads a section's subtree, with its relations."""
    out = convert_checkpoint("hibrids", bases["bart"], tmp_path / "h")
    summarizer = load_summarizer(model=out)
    root = Section(paragraphs=[["A preface sentence about meetings."]])
    method = root.add(Section("Method", [SENTENCES[1]]))
    details = method.add(Section("Details", [SENTENCES[2]]))
    details.add(Section("Deeper", [["The deepest section has words."]]))
    root.add(Section("Results", [["Scores improve a lot."]]))
    document = Document(root)
    received: list[dict] = []
    original = summarizer.model.generate

    def recording(**kwargs):  # noqa: ANN003, ANN202
        received.append(kwargs)
        return original(**kwargs)

    summarizer.model.generate = recording
    greedy = DecodingOptions(num_beams=1, max_length=12)
    (result,) = summarizer.summarize_by_section([document], batch_size=16, decoding=greedy)
    (batch,) = received  # every window in one batch
    section_ids, relations = batch["section_ids"], batch["section_relations"]
    sections_read = [sorted(set(row.tolist()) - {-1, START_NODE, END_NODE}) for row in section_ids]
    # the windows of: the root's own text, Method's subtree (3 sections), Details' (2), Deeper, Results
    assert [len(s) for s in sections_read] == [1, 3, 2, 1, 1]
    path, level = document.tree_relations()
    for row, first in ((1, method.index), (2, details.index)):
        members = list(range(first, document.sections[first].subtree_end))
        depths = [document.sections[i].depth - document.sections[first].depth for i in members]
        expected = relation_buckets(path[members][:, members], level[members][:, members], depths)
        n = len(members) + OUTSIDE_NODES
        assert torch.equal(relations[row, OUTSIDE_NODES:n, OUTSIDE_NODES:n], expected)
        assert relations[row, n:, :].eq(-1).all()
    summaries = {node.path: node for node in result.walk()}
    assert set(summaries) == {(), (0,), (0, 0), (0, 0, 0), (1,)}
    for node_path, node in summaries.items():
        assert node.summary
        for sentence in node.summary:  # sources cite only sentences inside the section's subtree
            assert sentence.sources
            assert all(s.path[: len(node_path)] == node_path for s in sentence.sources)


# ---------------------------------------------------------------------- issue 51 item 1: question layout

#: (heading, text, parent chunk) of a small tree, in document order; the root's own text is the virtual root
#: (parent None), as the project reads the document's root (docs/hibrids.md, "Tokens outside every section").
_QS_TREE = [
    (None, "Intro text here.", None),
    ("Method", "We do it.", 1),  # parent: chunk 1 = the virtual root
    ("Details", "More words follow.", 2),
    ("Results", "Scores go up.", 1),
]


def _public_chunks(tokenizer, question: str | None) -> tuple[list[int], list[int], list[int | None]]:
    """The authors' public chunking (hibrids_summ ``hf_translation.py``, re-implemented here): ids
    ``[<s>] + question + [<s>] + document + [</s>]`` (without a question ``[<s>] + document + [</s>]``),
    each token's chunk, and each chunk's parent chunk (None: child of the virtual root, chunk 1 = the
    virtual root itself). The leading ``<s>`` is in the question chunk; the second ``<s>`` is the start
    chunk; each section's heading and text tokenized on their own, as the public code does."""
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    chunks: list[list[int]] = []
    parents: list[int | None] = []
    if question is not None:
        chunks.append([bos] + tokenizer(question, add_special_tokens=False)["input_ids"])
        parents.append(0)  # placeholder parent 0 = the virtual root, fixed below
    first_section = len(chunks) + 1
    chunks.append([bos])  # the start chunk
    parents.append(0)
    for i, (heading, text, parent) in enumerate(_QS_TREE):
        words = text if heading is None else f"{heading} {text}"
        chunks.append(tokenizer(("" if i == 0 else " ") + words, add_special_tokens=False)["input_ids"])
        parents.append(None if parent is None else parent + first_section - 1)
    chunks.append([eos])
    parents.append(0)
    # chunk index of the virtual root: the root text's chunk; outside chunks and top sections hang off it
    root = first_section
    parents = [root if p == 0 else p for p in parents]
    ids = [t for chunk in chunks for t in chunk]
    token_chunk = [c for c, chunk in enumerate(chunks) for _ in chunk]
    return ids, token_chunk, parents


def _public_relation(parents: list[int | None], a: int, b: int) -> tuple[int, int]:
    """(PathLen, LvlDiff) from chunk a to chunk b as the public collate computes them (anytree ``Walker``:
    ``len(down) + len(up)``, ``len(down) - len(up)``; the reverse pair negated)."""
    if a == b:
        return 0, 0

    def ancestors(node: int) -> list[int]:
        out = [node]
        while parents[out[-1]] is not None:
            out.append(parents[out[-1]])
        return out

    first, second = (a, b) if a < b else (b, a)
    up_path, down_path = ancestors(first), ancestors(second)
    common = next(n for n in up_path if n in down_path)
    up, down = up_path.index(common), down_path.index(common)
    pair = (down + up, down - up)
    return pair if a < b else (-pair[0], -pair[1])


@pytest.mark.parametrize("question", [None, "What is done and why?"])
@pytest.mark.parametrize("base", ["bart", "led"])
def test_question_inputs_are_laid_out_as_the_public_code_chunks_them(
    question, base: str, bases, tmp_path
) -> None:
    """Issue 51 item 1: the public code builds ``[<s>] + question + [<s>] + document + [</s>]``, the leading
    ``<s>`` in the question chunk and the second ``<s>`` the start chunk. Token by token and relation by
    relation (every token pair's PathLen and LvlDiff, and its table row), the input builder agrees with a
    re-implementation of that chunking."""
    from synopsis.models.hibrids import FULL_INDEX, outside_node_relations

    root = Section(paragraphs=[[_QS_TREE[0][1]]])
    method = root.add(Section("Method", [[_QS_TREE[1][1]]]))
    method.add(Section("Details", [[_QS_TREE[2][1]]]))
    root.add(Section("Results", [[_QS_TREE[3][1]]]))
    document = Document(root)
    model, tokenizer = load_seq2seq(convert_checkpoint("hibrids", bases[base], tmp_path / "h"))
    inputs = Seq2SeqInputs(model.config, tokenizer)
    (encoding,) = inputs.encode_sources([document], [question])
    ids, token_chunk, parents = _public_chunks(tokenizer, question)
    assert tokenizer.convert_ids_to_tokens(encoding.input_ids) == tokenizer.convert_ids_to_tokens(ids)
    depths = np.array([s.depth for s in document.sections])
    path, level, _, _ = outside_node_relations(*document.tree_relations(), depths)
    buckets = encoding.section_relations
    nodes = encoding.section_ids
    for i, a in enumerate(token_chunk):
        for j, b in enumerate(token_chunk):
            expected = _public_relation(parents, a, b)
            got = (int(path[nodes[i], nodes[j]]), int(level[nodes[i], nodes[j]]))
            assert got == expected, (i, j, expected, got)
            assert int(buckets[nodes[i], nodes[j]]) == FULL_INDEX[expected]


def test_cli_convert_takes_the_public_codes_choices(bases, tmp_path: Path, capsys) -> None:
    """Issue 51 item 4: ``--shared-decoder-table`` (one decoder column for all heads) and ``--band-only``
    (LED: no bias on global tokens), the public code's choices; the defaults are the paper's."""
    out = tmp_path / "public"
    public = ["--shared-decoder-table", "--band-only"]
    assert main(["convert", "hibrids", str(bases["led"]), str(out), *public]) == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["hibrids_decoder_per_head"], config["hibrids_global_bias"]) == (False, False)
    model, _ = load_seq2seq(out)
    table = next(p for n, p in model.named_parameters() if "hibrids" in n and "decoder" in n)
    assert tuple(table.shape) == (420, 1)
    assert main(["convert", "hibrids", str(bases["led"]), str(tmp_path / "paper")]) == 0
    config = json.loads((tmp_path / "paper" / "config.json").read_text())
    assert (config["hibrids_decoder_per_head"], config["hibrids_global_bias"]) == (True, True)
    assert main(["convert", "hibrids", str(bases["bart"]), str(tmp_path / "x"), "--band-only"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("error: HIBRIDS: only LED has global tokens")
    assert "Traceback" not in err
