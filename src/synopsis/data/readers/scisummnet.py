"""SciSummNet (Yasunaga et al., 2019): ACL papers as XML with a human summary per paper.

Layout: ``<ID>/Reference_XML/<ID>.xml`` and ``<ID>/summary/<ID>.scisummnet_human.txt``. The XML holds
``<S>`` sentences (already split; we keep them), the title as the first ``<S>`` under ``<PAPER>``, an
optional ``<ABSTRACT>`` and flat ``<SECTION title=... number=...>`` elements. The ``number`` attribute is
only a running count; the real numbering is in the title ("2.1 Data"), so that is what nests subsections.

Quirks of the real files handled here: text is HTML-escaped twice (``&amp;quot;``); some titles are just
"2." or empty; OCR-damaged papers have no sections at all (all sentences under ``<PAPER>``); one paper has
sections inside its ``<ABSTRACT>``; a few ``<SUBSECTION>`` elements hold stray table text (kept as
sentences). Sentences that follow a nested section inside the same container go to an untitled section,
because the tree cannot put a parent's text after its children without reordering the document.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from synopsis.data.example import Example
from synopsis.data.readers.base import NumberedTree, guarded, read_input, split_numbered_title
from synopsis.document import Document, Section
from synopsis.errors import InputError

_SENTENCE_TAGS = ("S", "SUBSECTION")


def parse_scisummnet(text: str, path: Path) -> Document:
    """One SciSummNet ``Reference_XML`` file as a Document (id = file stem, title from the XML)."""
    try:
        paper = ET.fromstring(text)
    except ET.ParseError as err:
        line, column = err.position
        raise InputError(f"{path}:{line}: malformed XML (column {column})") from None
    if paper.tag != "PAPER":
        raise InputError(f"{path}: not a SciSummNet paper (root element <{paper.tag}>, expected <PAPER>)")
    title = None
    children = list(paper)
    if children and children[0].tag == "S":  # the title line
        title = _clean(children[0]) or None
        children = children[1:]
    root = Section()
    _fill(root, children)
    return Document(root, title=title, id=path.stem)


def _fill(node: Section, elements: list[ET.Element]) -> None:
    """Put the sentences and sections of ``elements`` (in document order) under ``node``."""
    tree = NumberedTree(node)
    target: Section | None = node  # where sentences go; None once a child section has been added
    loose: list[str] = []
    for element in elements:
        if element.tag in _SENTENCE_TAGS:
            sentence = _clean(element)
            if sentence:
                loose.append(sentence)
            continue
        _flush(tree, target, loose)
        if element.tag == "SECTION":
            number, heading = split_numbered_title(_clean_title(element.get("title", "")))
            section = tree.add(Section(heading=heading, number=number))
        else:  # <ABSTRACT>, or unknown markup whose text we keep in place rather than drop
            section = tree.add(Section(heading="Abstract" if element.tag == "ABSTRACT" else None))
        _fill(section, list(element))
        target = None
    _flush(tree, target, loose)


def _flush(tree: NumberedTree, target: Section | None, loose: list[str]) -> None:
    """Sentences become one paragraph (the XML has no paragraphs); text after a child section goes to a
    new untitled section, since a parent's own text must precede its children in document order."""
    if loose:
        (target or tree.add(Section())).paragraphs.append(list(loose))
        loose.clear()


def _clean(element: ET.Element) -> str:
    """Sentence text: the XML entities are escaped twice in the corpus, so unescape once more."""
    return " ".join(html.unescape("".join(element.itertext())).split())


def _clean_title(title: str) -> str:
    title = " ".join(html.unescape(title).split())
    return re.sub(r"\s*[.:]$", "", title) if not re.fullmatch(r"[\d.]+", title) else title


def read_scisummnet(
    path: Path, *, split: str | None = None, skip_bad_lines: bool = False, stats: dict[str, int]
) -> Iterator[Example]:
    """Every paper folder under ``path`` (or one paper folder); the reference is the human summary.

    The summary file starts with the paper's title line, which is not part of the summary; its other
    lines are joined with newlines (one sentence or passage per line, as ROUGE-Lsum expects). Papers whose
    summary is empty (2 of 978) are left out and counted in ``stats["no_reference"]``.
    """
    if split is not None:
        raise InputError(f"{path}: SciSummNet has no splits; leave out --split")
    if not path.is_dir():
        raise InputError(f"{path}: expected the SciSummNet folder (with <ID>/Reference_XML/<ID>.xml)")
    papers = [path] if (path / "Reference_XML").is_dir() else sorted(p for p in path.iterdir() if p.is_dir())
    papers = [p for p in papers if (p / "Reference_XML").is_dir()]
    if not papers:
        raise InputError(f"{path}: no SciSummNet papers found (expected <ID>/Reference_XML/<ID>.xml)")
    stats.setdefault("no_reference", 0)

    def parse(folder: Path) -> list[Example]:
        xml_path = folder / "Reference_XML" / f"{folder.name}.xml"
        summary_path = folder / "summary" / f"{folder.name}.scisummnet_human.txt"
        document = parse_scisummnet(read_input(xml_path), xml_path)
        lines = [line.strip() for line in read_input(summary_path).splitlines() if line.strip()]
        if document.title is None and lines:
            document.title = lines[0]  # OCR-damaged papers have no title line in the XML
        if len(lines) < 2:
            stats["no_reference"] += 1
            return []
        return [Example(id=folder.name, document=document, references=["\n".join(lines[1:])])]

    yield from guarded(papers, parse, skip_bad_lines, stats)
