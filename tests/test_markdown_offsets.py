"""Every sentence of a Markdown or text document carries its exact span in the reader's input."""

from __future__ import annotations

import html
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synopsis.data.readers.documents import parse_markdown, parse_text
from synopsis.document import Document
from synopsis.pipeline import read_source
from synopsis.text import split_paragraphs

WORDS = ("alpha", "beta", "gamma", "delta", "sigma", "omega", "TSC", "next", "here")


def demarked(span: str) -> str:
    """The text a reader keeps of a stretch of this test's Markdown, without whitespace or delimiters."""
    span = re.sub(r"\n[ \t]*>", "\n", span)  # block quote markers of continued lines
    span = re.sub(r"\]\([^)]*\)", "", span)  # inline link and image destinations and titles
    span = re.sub(r"\]\[[^\]]*\]", "", span)  # full and collapsed reference links
    span = re.sub(r"\[\^\w+\]", "", span)  # footnote references
    span = re.sub(r"</?(?:span|em|br|b)>", "", span)  # inline HTML markup
    span = re.sub(r"<(https?://[^>]*)>", r"\1", span)  # autolinks
    return bare(html.unescape(span))


def bare(text: str) -> str:
    return re.sub(r"[\s*_`\[\]!\\]", "", text)


def inline_piece(word: str, kind: str) -> str:
    return {
        "word": word,
        "emphasis": f"*{word}*",
        "strong": f"**{word} {word}**",
        "underscore": f"_{word}_",
        "inline link": f'[{word}](https://example.com/{word} "{word} title")',
        "reference link": f"[{word}][]",
        "full reference": f"[{word}][{word}]",
        "shortcut reference": f"[{word}]",
        "autolink": f"<https://example.com/{word}>",
        "image": f"![{word} {word}](img/{word}.png)",
        "code span": f"`{word} {word}`",
        "inline html": f"<span>{word}</span>",
        "placeholder": f"<{word}>",  # not an HTML element: text, as the GPL's <year>
        "entity": f"{word}&amp;{word} &copy;",
        "escape": rf"\*{word}\*",
        "footnote": f"{word}[^{word}]",
        "hard break": f"{word}  \n{word}",
        "backslash break": f"{word}\\\n{word}",
        "soft break": f"{word}\n{word}",
        "line break tag": f"{word}<br>{word}",
    }[kind]


KINDS = (
    "word", "emphasis", "strong", "underscore", "inline link", "reference link", "full reference",
    "shortcut reference", "autolink", "image", "code span", "inline html", "placeholder", "entity",
    "escape", "footnote", "hard break", "backslash break", "soft break", "line break tag",
)  # fmt: skip

# A sentence may end in an entity or an escape, so its span must end after the whole of the markup.
sentence_strategy = st.tuples(
    st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(KINDS)), min_size=1, max_size=6),
    st.sampled_from([".", "!", "&#46;", "\\!", "&excl;"]),
).map(lambda parts: "Start " + " ".join(inline_piece(w, k) for w, k in parts[0]) + parts[1])

paragraph_strategy = st.lists(sentence_strategy, min_size=1, max_size=4).map(" ".join)

block_strategy = st.one_of(
    paragraph_strategy,
    paragraph_strategy.map(lambda p: "## " + p.split("\n")[0].rstrip(".\\ ") + "\n"),
    st.lists(paragraph_strategy, min_size=1, max_size=3).map(
        lambda items: "\n".join("- " + i.replace("\n", "\n  ") for i in items)
    ),
    paragraph_strategy.map(lambda p: "> " + p.replace("\n", "\n> ")),
    st.just("```\nalpha = beta. gamma.\n```"),
    st.just("| alpha | beta |\n|---|---|\n| gamma. Delta | [omega][] |"),
)


def markdown_document(blocks: list[str]) -> str:
    body = "\n\n".join(blocks)
    used = set(re.findall(r"\[\^(\w+)\]", body))
    definitions = [f"[{w}]: https://example.org/{w}" for w in WORDS]
    notes = [f"[^{w}]: A note on {w}. See [{w}][]." for w in sorted(used)]
    return body + "\n\n" + "\n".join(definitions) + "\n\n" + "\n\n".join(notes) + "\n"


def assert_exact(source: str, document: Document) -> None:
    """Every sentence's span is the sentence (whitespace and markup aside), in order, without overlaps."""
    spans = []
    for block in document.blocks:
        paragraph = block.section.paragraphs[block.paragraph]
        for sentence, span in zip(paragraph, paragraph.spans, strict=True):
            assert span is not None, sentence
            start, end = span
            if block.kind in ("prose", "list", "quote", "footnote"):
                assert demarked(source[start:end]) == bare(sentence), (sentence, source[start:end])
                assert bare(sentence)[:1] == bare(source[start:end])[:1]
            else:
                assert bare(sentence) in bare(source[start:end])
            spans.append((start, end))
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end <= start, f"a span crosses the next sentence: {source!r}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(block_strategy, min_size=1, max_size=6))
def test_every_markdown_sentence_has_its_exact_span(blocks: list[str]) -> None:
    source = markdown_document(blocks)
    document = parse_markdown(source, Path("generated.md"))
    assert_exact(source, document)
    assert all(s.start is not None for s in document.sentences)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="ab. \t\n\r\x0c\u2028", max_size=30), max_size=5))
def test_text_reader_spans_and_sentences_match_splitting(parts: list[str]) -> None:
    # An indented line that does not read as prose is code in plain text (test_readers.py), never split
    # into sentences: this property is about text without structure, so no line starts indented.
    source = re.sub(r"(^|[\n\r\x0c\u2028])[ \t]+", r"\1", "".join(parts)) + " x"
    document = parse_text(source, Path("generated.txt"))
    expected = Document.from_paragraphs(split_paragraphs(source)).sentences
    assert [s.text for s in document.sentences] == [s.text for s in expected]
    for sentence in document.sentences:
        assert "".join(source[sentence.start : sentence.end].split()) == "".join(sentence.text.split())


def test_a_reference_link_keeps_every_later_offset_exact(tmp_path: Path) -> None:
    # The case: a sentence ending in "[TSC][]" ended at a later "TSC." and nulled every later offset.
    source = (
        "# Guide\n\nEscalate to the [TSC][]. Later the TSC. votes.\n\n"
        "Read <https://example.com/guide> first. Then *act* on it.\n\n[TSC]: https://example.com/tsc\n"
    )
    path = tmp_path / "guide.md"
    path.write_text(source)
    offsets = read_source(path).offsets
    assert [source[a:b] for a, b in offsets] == [
        "Escalate to the [TSC][].", "Later the TSC.", "votes.",
        "Read <https://example.com/guide> first.", "Then *act* on it.",
    ]  # fmt: skip


def test_gpl_placeholders_stay_in_prose_and_doctype_is_html() -> None:
    source = "<!DOCTYPE html>\n\nCopyright (C) <year>  <name of author>\n\n<year> is the year.\n"
    document = parse_markdown(source, Path("gpl.md"))
    texts = [s.text for s in document.sentences]
    assert texts == ["Copyright (C) <year> <name of author>", "<year> is the year."]
    assert [b.kind for b in document.blocks] == ["html", "prose", "prose"]
    assert not any("DOCTYPE" in t for t in texts)


def test_text_offsets_survive_crlf_line_ends() -> None:
    source = "First line\r\ngoes on. Second one.\r\n\r\nThird.\r\n"
    document = parse_text(source, Path("crlf.txt"))
    assert [source[s.start : s.end] for s in document.sentences] == [
        "First line\r\ngoes on.", "Second one.", "Third.",
    ]  # fmt: skip


def test_a_sentence_starting_with_markup_starts_its_span_at_the_markup(tmp_path: Path) -> None:
    # Issue 48: "**[FastAPI Cloud](...)** is built ..." was sliced from after the brackets' start.
    source = (
        "Intro here. **[Cloud](https://cloud.example)** is built by the team.\n\n"
        "[NVTX](https://nvtx.example) is needed to build it. `make` runs it. [The guide][g] helps. "
        "*Really* do. <https://example.com> is the site.\n\n[g]: https://g.example\n"
    )
    path = tmp_path / "readme.md"
    path.write_text(source)
    assert [source[a:b] for a, b in read_source(path).offsets] == [
        "Intro here.", "**[Cloud](https://cloud.example)** is built by the team.",
        "[NVTX](https://nvtx.example) is needed to build it.", "`make` runs it.", "[The guide][g] helps.",
        "*Really* do.", "<https://example.com> is the site.",
    ]  # fmt: skip
