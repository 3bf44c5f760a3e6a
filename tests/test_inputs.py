"""Structured encoder inputs: every token mapped to its sentence and section, checked through offsets."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from helpers.tiny_models import bart_tokenizer, t5_tokenizer
from transformers import AddedToken, BartConfig, LEDConfig, T5Config

from synopsis.data.readers import read_document
from synopsis.document import Document, Section
from synopsis.models.inputs import INSTRUCTION_SEGMENT, SOURCE_SEGMENT, Seq2SeqInputs

MARKDOWN = """# A study of things

Intro sentence before any section. It has two sentences.

## Method

We do the thing. Then we measure it.

### Details

The details are subtle. Very subtle indeed.

## Results

It works well. Numbers go up.
"""


@pytest.fixture(scope="module")
def tokenizers_dir(shared_data: Path) -> Path:
    return shared_data / "tokenizers"


def _inputs(kind: str, tokenizers_dir: Path, **options) -> Seq2SeqInputs:
    if kind == "t5":
        return Seq2SeqInputs(T5Config(), t5_tokenizer(tokenizers_dir), **options)
    config = LEDConfig(max_encoder_position_embeddings=4096) if kind == "led" else BartConfig()
    return Seq2SeqInputs(config, bart_tokenizer(tokenizers_dir), **options)


@pytest.fixture(scope="module")
def scisummnet_paper(shared_data: Path) -> Document:
    return read_document(shared_data / "scisummnet" / "A00-1031" / "Reference_XML" / "A00-1031.xml")


@pytest.fixture(scope="module")
def markdown_doc(tmp_path_factory) -> Document:
    path = tmp_path_factory.mktemp("md") / "doc.md"
    path.write_text(MARKDOWN, encoding="utf-8")
    return read_document(path)


def _check_maps(inputs: Seq2SeqInputs, document: Document, instruction: str | None = None) -> None:
    """Every token of a sentence lies inside that sentence's text, and the sentence's section is its own."""
    (encoding,) = inputs.encode_sources([document], [instruction])
    text = inputs.source_text(document, instruction)
    sentences = [s for s in document.sentences if s.text.strip()]
    offsets = inputs.tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    assert encoding.length_before_truncation == len(offsets)
    starts, cursor = [], 0  # where each sentence's text begins in the source text
    for sentence in sentences:
        cursor = text.index(sentence.text, cursor)
        starts.append(cursor)
        cursor += len(sentence.text)
    # truncation keeps a prefix of the content (and the final special token), so offsets still line up
    specials = set(inputs.tokenizer.all_special_ids)
    maps = (encoding.input_ids, encoding.sentence_ids, encoding.document_section_ids, encoding.segment_ids)
    for position, (token, sent, sec, seg) in enumerate(zip(*maps, strict=True)):
        if token in specials and token != getattr(inputs.config, "sentence_start_token_id", None):
            assert (sent, sec) == (-1, -1)
            continue
        start, end = offsets[position]
        if sent == -1 and sec != -1:  # a heading's tokens belong to its section
            heading = document.sections[sec].heading
            assert inputs.headings and heading and text[start:end].strip() in " ".join(heading.split())
            continue
        if sent == -1:
            assert sec == -1 and (start < starts[0] or seg == INSTRUCTION_SEGMENT)
            continue
        assert seg == SOURCE_SEGMENT
        sentence = sentences[sent]
        assert sec == sentence.section.index == encoding.sentence_sections[sent]
        piece = text[start:end].strip()
        begin = starts[sent]
        # the token's text is part of its sentence (or is the Hie-BART marker just before it)
        slack = len(inputs.sentence_marker or "") + 2
        assert begin - slack <= start and end <= begin + len(sentence.text), (piece, sentence.text)
        if piece and piece != inputs.sentence_marker:
            assert piece in sentence.text


@pytest.mark.parametrize("kind", ["bart", "t5", "led"])
def test_every_token_maps_to_the_section_that_contains_it(
    kind: str, tokenizers_dir: Path, scisummnet_paper: Document, markdown_doc: Document
) -> None:
    inputs = _inputs(kind, tokenizers_dir, max_source_length=4096 if kind == "led" else None)
    assert len(scisummnet_paper.sections) > 5  # a real tree: sections and subsections
    _check_maps(inputs, markdown_doc)
    _check_maps(inputs, markdown_doc, "What is measured?")
    _check_maps(inputs, scisummnet_paper)
    (encoding,) = _inputs(kind, tokenizers_dir, headings=False).encode_sources([markdown_doc])
    sections_seen = sorted(set(encoding.document_section_ids) - {-1})
    non_empty = sorted({s.section.index for s in markdown_doc.sentences})
    assert sections_seen == non_empty  # every section with text has tokens


@pytest.mark.parametrize("kind", ["bart", "t5", "led", "instructsum"])
def test_headings_are_read_before_their_sections_text_in_their_section(
    kind: str, tokenizers_dir: Path, markdown_doc: Document
) -> None:
    """Issue 27 item 2: section titles never reached the encoder. Each heading now comes before its
    section's first sentence, its tokens labelled with that section (and no sentence); ``headings=False``
    gives the old input."""
    if kind == "instructsum":
        config = T5Config()
        config.model_type = "instructsum_t5"
        make = lambda **o: Seq2SeqInputs(config, t5_tokenizer(tokenizers_dir), **o)  # noqa: E731
    else:
        make = lambda **o: _inputs(kind, tokenizers_dir, **o)  # noqa: E731
    inputs, plain = make(), make(headings=False)
    headed = [s for s in markdown_doc.sections if s.heading]
    assert [s.heading for s in headed] == ["Method", "Details", "Results"]
    text = inputs.source_text(markdown_doc)
    assert "Method" not in plain.source_text(markdown_doc)
    for section in headed:  # the heading right before the section's first sentence
        first = next(s for s in markdown_doc.sentences if s.section is section)
        assert f"{section.heading} {first.text}" in text
    (encoding,) = inputs.encode_sources([markdown_doc])
    ids = inputs.tokenizer(text, return_offsets_mapping=True)
    for section in headed:
        start = text.index(f"{section.heading} ")
        end = start + len(section.heading)
        labels = {
            (encoding.sentence_ids[i], encoding.document_section_ids[i])
            for i, (a, b) in enumerate(ids["offset_mapping"])
            if b > a and start <= a and b <= end and text[a:b].strip()
        }
        assert labels == {(-1, section.index)}, (section.heading, labels)
    _check_maps(inputs, markdown_doc)


def test_markdown_sections_in_document_order(tokenizers_dir: Path, markdown_doc: Document) -> None:
    inputs = _inputs("bart", tokenizers_dir)
    (encoding,) = inputs.encode_sources([markdown_doc])
    ids = [s for s in encoding.document_section_ids if s != -1]
    assert ids == sorted(ids)  # pre-order = document order
    headings = {node.index: node.heading for node in markdown_doc.sections}
    words = inputs.tokenizer.convert_ids_to_tokens(encoding.input_ids)
    sections = encoding.document_section_ids
    details = [w for w, s in zip(words, sections, strict=True) if headings.get(s) == "Details"]
    # the section's heading first (issue 27 item 2), then its text
    assert "".join(details).replace("Ġ", " ").strip() == "Details The details are subtle. Very subtle indeed."
    (plain,) = _inputs("bart", tokenizers_dir, headings=False).encode_sources([markdown_doc])
    words = inputs.tokenizer.convert_ids_to_tokens(plain.input_ids)
    sections = plain.document_section_ids
    details = [w for w, s in zip(words, sections, strict=True) if headings.get(s) == "Details"]
    assert "".join(details).replace("Ġ", " ").strip() == "The details are subtle. Very subtle indeed."


def test_hie_bart_markers_start_each_sentence_and_belong_to_it(tokenizers_dir: Path) -> None:
    tokenizer = copy.deepcopy(bart_tokenizer(tokenizers_dir))
    tokenizer.add_tokens(  # as add_sentence_start_token does for Hie-BART
        [AddedToken("<sent>", lstrip=True, rstrip=False, special=True, normalized=False)], special_tokens=True
    )
    inputs = Seq2SeqInputs(BartConfig(), tokenizer, sentence_marker="<sent>")
    document = Document.from_text("First one here. Second one here. Third.")
    (encoding,) = inputs.encode_sources([document])
    marker = inputs.tokenizer.convert_tokens_to_ids("<sent>")
    positions = [i for i, t in enumerate(encoding.input_ids) if t == marker]
    assert [encoding.sentence_ids[i] for i in positions] == [0, 1, 2]
    for a, b in zip(positions, positions[1:] + [len(encoding.input_ids) - 1], strict=True):
        assert set(encoding.sentence_ids[a:b]) == {encoding.sentence_ids[a]}


@pytest.mark.parametrize("kind", ["bart", "t5"])
def test_truncation_keeps_the_maps_aligned(kind: str, tokenizers_dir: Path, scisummnet_paper) -> None:
    inputs = _inputs(kind, tokenizers_dir, max_source_length=64)
    (cut,) = inputs.encode_sources([scisummnet_paper])
    full_inputs = _inputs(kind, tokenizers_dir, max_source_length=None)
    full_inputs.max_source_length = 10**6
    (full,) = full_inputs.encode_sources([scisummnet_paper])
    assert len(cut) == 64 and cut.tokens_cut == len(full) - 64
    assert cut.input_ids[-1] == inputs.tokenizer.eos_token_id
    # the kept content is the prefix of the full encoding, with the same labels
    content = len(cut) - 1  # the final special token
    for name in ("input_ids", "sentence_ids", "document_section_ids", "segment_ids"):
        assert getattr(cut, name)[:content] == getattr(full, name)[:content]
    reference = inputs.tokenizer(
        inputs.source_text(scisummnet_paper), truncation=True, max_length=64
    )["input_ids"]
    assert cut.input_ids == reference  # the tokenizer's own truncation


def test_a_batch_of_mixed_lengths_pads_every_field(tokenizers_dir: Path, markdown_doc: Document) -> None:
    inputs = _inputs("bart", tokenizers_dir)
    short = Document(Section(paragraphs=[["Just one."]]))
    encodings = inputs.encode_sources([markdown_doc, short], [None, "Why?"])
    batch = inputs.collate(encodings, inputs.encode_targets(["a summary", "b"]))
    width = len(encodings[0])
    assert batch["input_ids"].shape == (2, width)
    n = len(encodings[1])
    assert batch["attention_mask"][1].tolist() == [1] * n + [0] * (width - n)
    assert batch["input_ids"][1, n:].eq(inputs.tokenizer.pad_token_id).all()
    assert batch["sentence_ids"][1, n:].eq(-1).all() and batch["document_section_ids"][1, n:].eq(-1).all()
    assert batch["segment_ids"][1, :n].tolist() == encodings[1].segment_ids
    assert INSTRUCTION_SEGMENT in encodings[1].segment_ids
    assert set(inputs.model_inputs(batch)) == {"input_ids", "attention_mask", "labels"}
