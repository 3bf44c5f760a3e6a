"""reStructuredText is read by docutils: its section tree, lists, literal blocks and directives, every
sentence without markup and with its exact span in the input (issue 60, item 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.cli import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synopsis.data.readers import parse_document, read_document, sniff_format
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.pipeline import read_source

README = Path(__file__).parent / "data" / "README.rst"
#: What rst markup shows in text, for this test's README: ``literal``, `text <url>`__, `name`_, |name|,
#: [#]_, :role:`text`, \* escapes, *emphasis*.
SUBSTITUTIONS = {"project": "the meterly project"}


def shown(source: str, substitutions: dict[str, str] = SUBSTITUTIONS) -> str:
    """The text a stretch of the README shows, without whitespace."""
    text = re.sub(r"`([^`<]*?)\s*<[^>]*>`__?", r"\1", source)  # embedded-URI references
    text = re.sub(r":\w+:`([^`]*)`", r"\1", text)  # roles
    text = re.sub(r"`([^`]*)`_", r"\1", text)  # named references
    text = re.sub(r"\|([\w-]+)\|", lambda m: substitutions.get(m.group(1), m.group(1)), text)
    text = re.sub(r"\s*\[#\]_", "", text)
    text = re.sub(r"(?<![\w*\\])\*\*(\w[^*]*)\*\*", r"\1", text)  # strong
    text = re.sub(r"(?<![\w*\\])\*(\w[^*\\]*)\*", r"\1", text)  # emphasis, not an escaped star
    text = text.replace("``", "").replace("\\", "")
    return "".join(text.split())


def spans(document: Document) -> list[tuple[str, str, tuple[int, int]]]:
    out = []
    for block in document.blocks:
        paragraph = block.section.paragraphs[block.paragraph]
        for sentence, span in zip(paragraph, paragraph.spans, strict=True):
            assert span is not None, sentence
            out.append((block.kind, sentence, span))
    return out


def test_rst_is_read_by_extension_and_by_flag(tmp_path: Path) -> None:
    assert sniff_format(README.read_text(), README) == "rst"
    assert sniff_format("Title\n=====\n\nText.\n", Path("notes.rest")) == "rst"
    document, used = parse_document(README.read_text(), "rst")
    assert used == "rst" and document.title == "meterly"
    with pytest.raises(InputError, match="unknown document format"):
        parse_document("Text.", "restructuredtext")


def test_the_section_tree_follows_the_adornments() -> None:
    document = read_document(README)
    tree = [(s.depth, s.heading) for s in document.root.walk()][1:]
    assert tree == [
        (1, "Installation"), (2, "Latest release"), (2, "Development version"),
        (1, "Usage"), (2, "Parameters"), (2, "Command line"), (1, "FAQ"),
    ]  # fmt: skip
    text = README.read_text()
    for section in list(document.root.walk())[1:]:
        start, end = section.heading_span
        assert text[start:end] == section.heading


def test_every_sentence_cites_its_exact_span_and_shows_no_markup() -> None:
    text = README.read_text()
    document = read_document(README)
    found = spans(document)
    for kind, sentence, (start, end) in found:
        if kind in ("prose", "list", "quote", "footnote"):
            assert shown(text[start:end]) == "".join(sentence.split()), (sentence, text[start:end])
            assert not re.search(r"``|`_|\|\w|<https?:|:func:|\[#\]|\\|\x00", sentence), sentence
        else:
            assert "".join(sentence.split())[:8] in "".join(text[start:end].split()), (kind, sentence)
    for (_, _, (_, end)), (_, _, (start, _)) in zip(found, found[1:], strict=False):
        assert end <= start, "a span crosses the next sentence"
    kinds = {kind for kind, _, _ in found}
    assert kinds == {"prose", "list", "quote", "code", "table", "footnote"}
    sentences = [s for _, s, _ in found]
    # a sentence that starts with markup starts its span at the markup
    first = found[0][2]
    assert text[first[0] : first[1]].startswith("``meterly`` draws")
    opening = "meterly draws a progress meter around any loop, and the meterly project works in any terminal."
    assert opening in sentences
    assert "The package has no dependencies." in sentences
    assert "Use meterly.wrap to do the same from Python, and *never* wrap a generator twice." in sentences
    assert "pip install meterly" in sentences  # a literal block: code
    assert not any("automodule" in s or "comment" in s or "Table of contents" in s for s in sentences)


def test_badges_are_nothing_and_cited_offsets_reach_the_runner() -> None:
    parsed = read_source(README)
    assert parsed.format == "rst" and parsed.offsets is not None
    text = README.read_text()
    assert all(offset is not None for offset in parsed.offsets)
    cited = [text[a:b] for a, b in parsed.offsets]
    assert not any("Py-Versions" in c or "Logo" in c for c in cited)  # a row of badges is no text


def test_the_cli_reads_rst_by_extension_and_by_flag(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = README.read_text()
    pasted = tmp_path / "readme.txt"
    pasted.write_text(text)
    for path, flags in ((README, ()), (pasted, ("--format", "rst"))):
        options = ("--method", "lead-2", "--output-format", "json", *flags)
        code, out, err = run_cli(capsys, "summarize", path, *options)
        assert code == 0, err
        result = json.loads(out)
        assert result["title"] == "meterly"
        for sentence in result["summary"]:
            (source,) = sentence["sources"]
            assert shown(text[source["start"] : source["end"]]) == "".join(sentence["text"].split())
            assert "``" not in sentence["text"] and "|" not in sentence["text"]


def test_malformed_rst_is_read_without_errors_on_screen(capsys: pytest.CaptureFixture[str]) -> None:
    source = (
        "Title\n===\n\n* item\ncontinued badly\n\n.. unknown:: x\n\n"
        "`unclosed link <http://x\n\n:func:`f` runs.\n"
    )
    document, _ = parse_document(source, "rst")
    assert "f runs." in [s.text for s in document.sentences]
    assert capsys.readouterr().err == ""


WORDS = ("alpha", "beta", "gamma", "delta", "omega", "next")
PIECES = {
    "word": "{w}",
    "emphasis": "*{w}*",
    "strong": "**{w} {w}**",
    "literal": "``{w}()``",
    "link": "`{w} site <https://example.org/{w}.html>`__",
    "named": "`{w}`_",
    "substitution": "|{w}|",
    "escape": "\\*{w}",
    "note": "{w} [#]_",
    "role": ":func:`{w}.run`",
}
pieces = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(sorted(PIECES))), min_size=1, max_size=5)
sentence = pieces.map(lambda parts: "Start " + " ".join(PIECES[k].format(w=w) for w, k in parts) + ".")
paragraph = st.lists(sentence, min_size=1, max_size=3).map(lambda s: "\n".join(s))
block = st.one_of(
    paragraph,
    paragraph.map(lambda p: "Heading\n=======\n\n" + p),
    st.lists(paragraph, min_size=1, max_size=3).map(
        lambda items: "\n".join("* " + i.replace("\n", "\n  ") for i in items)
    ),
    paragraph.map(lambda p: "    " + p.replace("\n", "\n    ")),
    paragraph.map(lambda p: ".. note:: " + p.replace("\n", "\n   ")),
    st.just("::\n\n    alpha = beta. gamma."),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(block, min_size=1, max_size=5))
def test_every_rst_sentence_has_its_exact_span(blocks: list[str]) -> None:
    substitutions = {w: f"the {w}" for w in WORDS}
    source = "\n\n".join(["Start here.", *blocks]) + "\n\n" + "\n".join(
        [f".. _{w}: https://example.org/{w}" for w in WORDS]
        + [f".. |{w}| replace:: {text}" for w, text in substitutions.items()]
    ) + "\n"
    document, _ = parse_document(source, "rst")
    found = spans(document)
    for kind, text, (start, end) in found:
        if kind != "code":
            assert shown(source[start:end], substitutions) == "".join(text.split()), (text, source[start:end])
            assert text.startswith("Start") and source[start:end].startswith("Start")
    for (_, _, (_, end)), (_, _, (start, _)) in zip(found, found[1:], strict=False):
        assert end <= start
