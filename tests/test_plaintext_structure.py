"""Plain-text structure a reader sees (issue 60, item 3): a man page's sections and indented subsections (an
option line never a heading), sections inside ``****`` boxes, headings over two lines, quoted e-mail lines
as quotes, and programs and build output as code, never cited."""

from __future__ import annotations

from pathlib import Path

from synopsis.data.readers import read_document
from synopsis.document import Document

DATA = Path(__file__).parent / "data" / "plaintext"


def tree(document: Document) -> list[tuple[int, str | None]]:
    return [(s.depth, s.heading) for s in document.root.walk()][1:]


def spans_exact(path: Path, document: Document) -> None:
    """Every block's span holds its text (whitespace, quote markers and a box's borders aside)."""
    text = path.read_text()
    for block in document.blocks:
        paragraph = block.section.paragraphs[block.paragraph]
        for sentence, (start, end) in zip(paragraph, paragraph.spans, strict=True):
            lines = text[start:end].splitlines()
            cited = "".join(line.strip().removeprefix("> ").strip("*") for line in lines)
            assert "".join(sentence.split()) == "".join(cited.split()), (sentence, text[start:end])


def test_a_man_page_has_its_sections_and_indented_subsections() -> None:
    path = DATA / "fetch.1.txt"
    document = read_document(path)
    assert document.title == "Fetch Manual"
    assert tree(document) == [
        (1, "NAME"), (1, "SYNOPSIS"), (1, "DESCRIPTION"), (1, "URL"), (1, "OPTIONS"),
        (2, "Option Syntax"), (2, "Basic Startup Options"), (2, "HTTP Options"), (1, "EXIT STATUS"),
    ]  # fmt: skip
    texts = [s.text for s in document.sentences]
    assert any(t.startswith("-B URL --base=URL Resolves relative links") for t in texts)
    assert not any("FETCH(1)" in t for t in texts)  # the page's header and footer are not text
    assert "GSS-API is supported." in texts  # under a label in capitals as deep as the text, not a heading
    spans_exact(path, document)


def test_boxed_sections_keep_their_headings_and_text() -> None:
    path = DATA / "boxed-licence.txt"
    document = read_document(path)
    assert document.title == "Example Public License Version 1.0"
    assert tree(document) == [
        (1, "Definitions"), (1, "Termination"), (1, "Disclaimer of Warranty"), (1, "Limitation of Liability"),
        (1, "Miscellaneous"),
        (2, "Distributing Source Code Form that is Incompatible With Secondary Licenses"),
        (1, "Exhibit A - Source Code Form License Notice"),
    ]  # fmt: skip
    disclaimer = document.root.children[2]
    assert [s for p in disclaimer.paragraphs for s in p] == [
        'The Software is provided under this License on an "as is" basis, without warranty of any kind.',
        "The entire risk as to the quality of the Software is with You.",
    ]
    assert not any("*" in s.text for s in document.sentences)
    spans_exact(path, document)


def test_a_bug_guide_has_its_two_line_heading_quotes_and_code() -> None:
    path = DATA / "bug-guide.txt"
    document = read_document(path)
    assert tree(document) == [
        (1, "How to report a bug"),
        (1, "g++: passing a non const pointer to a function with a const argument gives an error "
            "(not a bug)"),
        (1, "Other bugs"),
    ]  # fmt: skip
    section = document.root.children[1]
    kinds = [p.kind for p in section.paragraphs]
    assert kinds == ["prose", "code", "code", "code", "prose", "quote", "prose"]
    quote = next(p for p in section.paragraphs if p.kind == "quote")
    assert quote[1] == "I haven't really kept up with the latest in C++ news."
    summarizable = [s.text for s in document.sentences]
    code = ("#include", "make", "g++ ", "const.cc", "class", "}", "public")
    assert not any(t.startswith(code) or "{" in t or ";" in t for t in summarizable)
    assert "I haven't really kept up with the latest in C++ news." not in summarizable  # a quote, not prose
    fora = (
        "If you question this, please discuss it in one of the public C++ fora first, "
        "eg. comp.lang.c++.moderated."
    )
    assert fora in summarizable
    assert 'If you don\'t know where to ask, check the "In a hurry?" section of the FAQ.' in summarizable
    spans_exact(path, document)
