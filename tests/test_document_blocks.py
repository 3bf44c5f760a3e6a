"""Documents know their blocks: kinds from the Markdown reader, which ones a summary chooses, the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synopsis.data.readers.documents import parse_json_document, parse_markdown
from synopsis.document import Document, Paragraph, Section
from synopsis.errors import InputError
from synopsis.summarizers.windows import section_sources

MARKDOWN = """---
title: a guide
---
# Guide

<!DOCTYPE html>

The guide explains releases. It is short.

## Steps

- Install the tool.
- Run it.

> A quoted warning.

```sh
make -j4 test
```

| name | value |
|------|-------|
| a    | 1     |

Steps need care.

## Links

- [Home](#home)
- [About](#about)

<details>
<summary>More</summary>
</details>

See the notes.[^1]

[^1]: A footnote.
"""


def read() -> Document:
    return parse_markdown(MARKDOWN, Path("guide.md"))


def test_markdown_blocks_have_their_kinds() -> None:
    document = read()
    kinds = [(b.section.heading, b.kind) for b in document.blocks]
    assert kinds == [
        (None, "front_matter"), (None, "html"), (None, "prose"),
        ("Steps", "list"), ("Steps", "list"), ("Steps", "quote"), ("Steps", "code"), ("Steps", "table"),
        ("Steps", "prose"),
        ("Links", "navigation"), ("Links", "navigation"), ("Links", "html"), ("Links", "prose"),
        ("Links", "footnote"),
    ]  # fmt: skip
    for block in document.blocks:  # every block, summarized or not, keeps its place in the input
        assert block.start is not None and block.end is not None
    code = next(b for b in document.blocks if b.kind == "code")
    assert MARKDOWN[code.start : code.end] == "```sh\nmake -j4 test\n```"
    table = next(b for b in document.blocks if b.kind == "table")
    assert MARKDOWN[table.start : table.end].startswith("| name") and MARKDOWN[table.end - 1] == "|"
    steps = document.sections[1]
    assert MARKDOWN[slice(*steps.heading_span)] == "## Steps"


def test_summaries_choose_prose_and_lists_only_where_a_section_has_none() -> None:
    document = read()
    assert [(s.section.heading, s.kind, s.text) for s in document.sentences] == [
        (None, "prose", "The guide explains releases."),
        (None, "prose", "It is short."),
        ("Steps", "prose", "Steps need care."),  # the section's list, quote, code and table are not chosen
        ("Links", "prose", "See the notes."),
    ]
    only_lists = parse_markdown("# T\n\n## A\n\n- One item.\n- Two items.\n\n```\ncode.\n```\n", Path("l.md"))
    assert [(s.kind, s.text) for s in only_lists.sentences] == [("list", "One item."), ("list", "Two items.")]
    assert only_lists.paragraphs == [["One item."], ["Two items."]]
    contents = parse_markdown("# T\n\n## Contents\n\n* [Intro](#intro)\n  * [Use `x`](#use)\n", Path("c.md"))
    assert contents.sentences == [] and [b.kind for b in contents.blocks] == ["navigation"] * 2


def test_by_section_sources_are_the_chosen_sentences_with_their_offsets() -> None:
    document = read()
    offsets = [(s.start, s.end) for s in document.sentences]
    sources = section_sources(document, offsets)
    steps = sources[document.sections[1].index]
    assert [[s.text for s in p] for p in steps] == [["Steps need care."]]
    (source,) = steps[0]
    assert (source.sentence, MARKDOWN[source.start : source.end]) == (0, "Steps need care.")


def test_document_json_keeps_kinds_and_spans() -> None:
    document = read()
    data = document.to_dict()
    again = Document.from_dict(json.loads(json.dumps(data)))
    assert again.to_dict() == data
    blocks = [(b.kind, b.start, b.end) for b in document.blocks]
    assert [(b.kind, b.start, b.end) for b in again.blocks] == blocks
    assert [(s.text, s.start, s.end) for s in again.sentences] == [
        (s.text, s.start, s.end) for s in document.sentences
    ]


def test_document_json_without_kinds_reads_as_before(tmp_path: Path) -> None:
    old = {"id": "d", "title": "T", "heading": None, "paragraphs": [["A b.", "C d."]], "sections": []}
    document = parse_json_document(json.dumps(old), tmp_path / "d.json")
    read = [(s.text, s.kind, s.start) for s in document.sentences]
    assert read == [("A b.", "prose", None), ("C d.", "prose", None)]
    assert "kinds" not in document.to_dict() and "spans" not in document.to_dict()
    plain = Document(Section(paragraphs=[["One."], ["Two."]]))  # plain lists are prose paragraphs
    assert [b.kind for b in plain.blocks] == ["prose", "prose"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("kinds", ["poem"], "unknown block kind 'poem'"),
        ("kinds", [], "document.kinds: expected a list of one block kind per paragraph"),
        ("spans", [[[3, 1]]], "document.spans: expected one list of [start, end]"),
        ("spans", [[[0, 1], [1, 2]]], "a paragraph of 1 sentences has 2 spans"),
    ],
)
def test_bad_kinds_and_spans_are_one_line_errors(field: str, value: object, message: str) -> None:
    data = {"paragraphs": [["A b."]], field: value}
    with pytest.raises(InputError, match=message.replace("[", r"\[")):
        Document.from_dict(data)


def test_paragraph_is_a_list_of_sentences() -> None:
    paragraph = Paragraph(["A.", "B."], "quote", [(0, 2), None])
    assert paragraph == ["A.", "B."] and paragraph.kind == "quote" and paragraph.spans == [(0, 2), None]


def test_the_outline_counts_the_sentences_a_summary_may_choose() -> None:
    from synopsis.serve.documents import outline

    document = read()
    steps = outline(document)["children"][0]
    assert (steps["heading"], steps["sentences"]) == ("Steps", 1)  # not its list, quote, code or table
    assert outline(document)["total_sentences"] == len(document.sentences)


def test_text_lists_are_list_items_with_their_spans() -> None:
    from synopsis.data.readers.documents import parse_text

    source = (
        "Releases ship monthly. Each has notes.\n\n"
        "- Build the tool.\n- Run the tests and\n  read the log.\n\n"
        "1. First step.\n2) Second step.\n\n- not a list\nbecause this line is not indented.\n"
    )
    document = parse_text(source, Path("notes.txt"))
    blocks = [(b.kind, b.text, source[b.start : b.end]) for b in document.blocks]
    assert blocks == [
        ("prose", "Releases ship monthly. Each has notes.", "Releases ship monthly. Each has notes."),
        ("list", "Build the tool.", "Build the tool."),
        ("list", "Run the tests and read the log.", "Run the tests and\n  read the log."),
        ("list", "First step.", "First step."),
        ("list", "Second step.", "Second step."),
        ("prose", "- not a list because this line is not indented.",
         "- not a list\nbecause this line is not indented."),
    ]  # fmt: skip
    # The root has prose, so its lists are not chosen.
    assert [s.kind for s in document.sentences] == ["prose"] * 3
