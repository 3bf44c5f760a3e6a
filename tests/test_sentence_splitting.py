"""Sentences are cut where a reader cuts them (issue 60, item 4): "eg." and "etc." inside a sentence, a "?"
inside quotes, PTB-tokenized news (```` `` ... . '' ````, "U.S. ."), with every span exact; a section that
repeats a sentence never prints it twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synopsis.document import Document, Section
from synopsis.summarizers.salient import SalientSummarizer, TfidfVectors
from synopsis.text import sentence_spans, split_sentences

NEWS = Path(__file__).resolve().parents[2] / "shared" / "data" / "news" / "realsumm_cnndm.jsonl"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # the GCC bug guide
            "Please discuss it in one of the public C++ fora first, eg. comp.lang.c++.moderated, or "
            "comp.std.c++. Then report it.",
            [
                "Please discuss it in one of the public C++ fora first, eg. comp.lang.c++.moderated, or "
                "comp.std.c++.",
                "Then report it.",
            ],
        ),
        (
            'If you don\'t know, check the "In a hurry?" section. It helps.',
            ['If you don\'t know, check the "In a hurry?" section.', "It helps."],
        ),
        ('He said "Stop!" and left. Then?', ['He said "Stop!" and left.', "Then?"]),
        ("Plots, tables, etc. are kept. Use ie. this.", ["Plots, tables, etc. are kept.", "Use ie. this."]),
        ("I like fruit etc. But not now.", ["I like fruit etc.", "But not now."]),
        ("Ask Dr. Smith first. Then go.", ["Ask Dr. Smith first.", "Then go."]),
    ],
)
def test_abbreviations_and_quoted_marks_do_not_end_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # a closing quote stays with its sentence, an opening one starts the next
            "The ban is `` unacceptable . '' `` We will fight , '' he said . Next one .",
            ["The ban is `` unacceptable . ''", "`` We will fight , '' he said .", "Next one ."],
        ),
        ("He lives in the U.S. . Next sentence here .", ["He lives in the U.S. .", "Next sentence here ."]),
        ("`` Stop ! '' he shouted . Then he left .", ["`` Stop ! '' he shouted .", "Then he left ."]),
        (  # realsumm-72: a cut before ", ' kamal said"
            "' Why should i apologise ? , ' kamal said . ' Next .",
            ["' Why should i apologise ? , ' kamal said . '", "Next ."],
        ),
        (
            "Obama -LRB- D -RRB- said no . Sgt . Day came .",
            ["Obama -LRB- D -RRB- said no .", "Sgt . Day came ."],
        ),
    ],
)
def test_ptb_tokenized_news_splits_as_a_reader_would(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_joined_sentences_keep_exact_spans() -> None:
    text = '  First, check the "In a hurry?" section,\n eg. this one. Then stop !  '
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == [
        'First, check the "In a hurry?" section,\n eg. this one.', "Then stop !",
    ]  # fmt: skip


@pytest.mark.skipif(not NEWS.exists(), reason="needs the shared news data")
def test_realsumm_news_has_no_cut_a_reader_would_not_make() -> None:
    cuts = 0
    for line in NEWS.read_text().splitlines():
        text = json.loads(line)["text"]
        spans = sentence_spans(text)
        pieces = [text[a:b] for a, b in spans]
        assert all(a < b for a, b in spans) and spans == sorted(spans)
        for previous, piece in zip(pieces, pieces[1:], strict=False):
            closed = piece.startswith((",", ";", ":", ")", "-RRB-", "’", "”")) or piece[:2] in (".", ". ")
            quoted = piece[:1].islower() and previous.endswith(("? '", "! '", "? ''", "! ''", '?"', '!"'))
            cuts += closed or quoted or previous.endswith(("``", "-LRB-"))
    assert cuts == 0


def test_a_section_that_repeats_a_sentence_prints_it_once() -> None:
    # tqdm's "Extra CLI Options": two options end with the same sentence, and the section has nothing else a
    # summary may take, so the method took both twins.
    twin = "Note that this is slow since every input must be decoded as a number."
    options = Section(
        heading="Extra CLI Options",
        paragraphs=[["update : bool, optional"], [twin], ["update_to : bool, optional"], [twin]],
    )
    intro = Section(heading="Usage", paragraphs=[["The tool wraps any iterable and shows a progress meter."]])
    document = Document(Section(children=[intro, options]))
    (result,) = SalientSummarizer(k=3, vectors=TfidfVectors()).summarize_by_section([document])
    assert [s.text for s in result.sections[1].summary] == [twin]
