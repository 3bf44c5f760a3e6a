"""Plain text into a :class:`~synopsis.document.Document`: the structure a plain-text guide, README or licence
shows without markup.

* **Headings** build the section tree: a line underlined (or framed above and below) by a rule of ``=``,
  ``-``, ``~``, ``*``, ``#``, ``^`` or ``+`` (reStructuredText's adornments, also Markdown's setext
  headings), a numbered line ("1. Definitions", "2.1 Scope", "1.1. How do you pronounce ...?") and a short
  line in capitals ("TERMS AND CONDITIONS"). As in reStructuredText, a heading's level is the order in which
  its style first appears (numbered headings nest by their numbers); a heading that opens the document
  before any text, in capitals or in a style no other heading has, is its title. Other rules are separators.
* **Code and console output** are code blocks, kept whole and never summarized: lines indented four columns
  or more beyond the text's usual indentation, a prompt (``$ ``, ``% ``, ``>>> ``) and what follows it in its
  block, compiler lines (``const.cc: In function ...``, ``expand.c:489: ...``), and any block of which half
  the lines are such.
* A block opening with "Contents" or "Table of Contents" is navigation. Other blocks are prose or lists
  (:func:`synopsis.text.lines_blocks`), every sentence with its span in the text.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import regex

from synopsis.document import Document, Paragraph, Section, current_budget
from synopsis.text import line_blocks, lines_blocks

Line = tuple[str, int]  # a line with its start in the text

# Every pattern runs in time linear in its line (the `regex` module's possessive quantifiers: a run it took
# is never given back to try again): a lazy ``.*?`` before ``\s*$`` took minutes on a line of 100,000
# spaces, holding the GIL all along (issue 58). tests/test_hardening_round3.py checks each against the
# patterns they replaced.
_RULE = regex.compile(r"^\s*+([=\-~*#^+_])\1{2,}+\s*+$")
# the heading's text: from its first non-space to the last on the line (what a lazy ".*?" found)
_NUMBERED = regex.compile(r"^\s{0,4}+(\d{1,2}+(?:\.\d{1,2}+){0,3}+)\.?+\s++(\S(?:[^\S\n]*+\S)*+)\s*+$")
_ITEM = regex.compile(r"^\s*+(?:[-*+•‣◦▪]|\d{1,3}+(?:\.\d{1,3}+)*+[.)])\s++\S")
_PROMPT = regex.compile(r"^\s*+(?:\$|%|>>>|[A-Z]:\\>)\s++\S")
_COMPILER = regex.compile(r"^\s*+[\w./+-]+\.\w{1,4}:(?:\d++:)*+\s")
_INDENT = regex.compile(r"^([ \t]*+)\S", regex.MULTILINE)
_CONTENTS = regex.compile(r"^\s*+(?:table of )?contents:?\s*+$", regex.IGNORECASE)
#: Longest heading, in words; up to :data:`LONG_HEADING_WORDS` when it is a block of its own (a numbered
#: question of a FAQ may run over two lines).
HEADING_WORDS = 16
LONG_HEADING_WORDS = 28
# A title of up to eight capitalised words and a period, then the clause: "Grant of Copyright License. ".
_TITLED = regex.compile(
    r"^((?:[A-Z][\w'-]*+[ ,]++(?:(?:of|and|or|the|to|for|in|a|an|on|with|by)\s++)*+){0,7}[A-Z][\w'-]*+)\.\s+"
)


@dataclass
class _Heading:
    text: str
    style: tuple[str, ...]
    span: tuple[int, int]
    number: str | None = None


def parse_plain_text(text: str, document_id: str | None = None) -> Document:
    """Plain text as a Document with sections from its headings and code blocks from its code (see the
    module docstring); without headings it is one section of paragraphs, as before."""
    base = _usual_indent(text)
    budget = current_budget()  # counted as they are made, so a document over a limit stops here
    items: list[_Heading | Paragraph] = []
    for lines in line_blocks(text):
        for item in _read_block(lines, base):
            if isinstance(item, _Heading):
                budget.section()
            else:
                budget.block()
                budget.paragraph(item)
            items.append(item)
    numbered = sum(isinstance(i, _Heading) and i.number is not None for i in items)
    if numbered == 1:  # one numbered line is a list item, not a numbering of the document's parts
        items = [_as_paragraph(i, text) if isinstance(i, _Heading) and i.number else i for i in items]
    title = None
    first = items[0] if items else None
    if isinstance(first, _Heading) and (first.style == ("capitals",) or not _style_reused(first, items)):
        title = items.pop(0).text  # a heading before any text, in capitals or a style of its own: the title
    root = Section()
    levels: dict[tuple[str, ...], int] = {}
    stack: list[tuple[int, Section]] = [(0, root)]
    for item in items:
        if isinstance(item, Paragraph):
            stack[-1][1].paragraphs.append(item)
            continue
        level = levels.setdefault(item.style, len(levels) + 1)
        while stack[-1][0] >= level:
            stack.pop()
        section = Section(heading=item.text, number=item.number, heading_span=item.span)
        stack.append((level, stack[-1][1].add(section)))
    return Document(root, title=title, id=document_id)


def _style_reused(heading: _Heading, items: list[_Heading | Paragraph]) -> bool:
    return any(isinstance(i, _Heading) and i.style == heading.style for i in items if i is not heading)


def _usual_indent(text: str) -> int:
    """The indentation most lines have (a licence indents its paragraphs' first lines by two, no more)."""
    counts = Counter(len(match.group(1)) for match in _INDENT.finditer(text))
    return counts.most_common(1)[0][0] if counts else 0


def _read_block(lines: list[Line], base: int) -> list[_Heading | Paragraph]:
    """A block's headings and paragraphs in order: underlined and framed headings, a numbered or capital
    heading line at its start, code runs, and the prose between them."""
    if _CONTENTS.match(lines[0][0]):
        return _paragraphs(lines, "navigation")
    code_lines = sum(_is_code_line(line, base) for line, _ in lines)
    first_code = _is_code_line(lines[0][0], base) and _line_heading(lines, 0) is None
    if first_code and code_lines * 2 >= len(lines) and not _reads_as_prose(lines):
        return [_code(lines)]
    out: list[_Heading | Paragraph] = []
    pending: list[Line] = []
    overline: str | None = None
    i = 0
    while i < len(lines):
        line, start = lines[i]
        rule = _RULE.match(line)
        if rule:
            heading = _underlined(pending, rule.group(1), overline)
            if heading is not None:
                out.append(heading)
                pending, overline = [], None
            else:
                out.extend(_prose(pending, base))
                pending = []
                overline = rule.group(1) if i + 1 < len(lines) else None
            i += 1
            continue
        if not pending and (heading := _line_heading(lines, i)) is not None:
            out.append(heading[0])
            i = heading[1]
            if heading[2] is not None:  # "2. Grant of Copyright License. Subject to ...": the clause
                pending.append(heading[2])
            continue
        if _PROMPT.match(line):  # a console session: the prompt and its output to the end of the block
            out.extend(_prose(pending, base))
            out.append(_code(lines[i:]))
            return out
        pending.append((line, start))
        i += 1
    out.extend(_prose(pending, base))
    return out


def _underlined(pending: list[Line], char: str, overline: str | None) -> _Heading | None:
    """The lines above a rule as a heading, when they are one or two short lines that do not end like a
    sentence (a rule under a sentence is a separator)."""
    if not pending or len(pending) > 2:
        return None
    text = " ".join(line.strip() for line, _ in pending)
    if len(text.split()) > HEADING_WORDS or text.endswith((".", ",", ";", ":")) and not _NUMBERED.match(text):
        return None
    style = ("framed", char) if overline == char else ("underlined", char)
    number, heading = _split_number(text)
    span = (pending[0][1] + len(pending[0][0]) - len(pending[0][0].lstrip()), pending[-1][1] + len(
        pending[-1][0].rstrip()))  # fmt: skip
    return _Heading(heading, style, span, number)


def _line_heading(lines: list[Line], i: int) -> tuple[_Heading, int, Line | None] | None:
    """A heading on line ``i`` (the first of its block or after a rule), the line after it and the rest of
    its line when a clause follows the heading on it: a numbered line that starts with a capital, continued
    over the next lines while it reads as one sentence that goes on ("2.1. When building Valgrind, 'make'
    dies partway with an assertion / failure, something like this:"), at most :data:`HEADING_WORDS` words,
    or a title in capitals ending in a period followed by its clause ("2. Grant of Copyright License.
    Subject to ..."); or a short line in capitals. Never a list's items."""
    line, start = lines[i]
    numbered = _NUMBERED.match(line)
    if numbered and numbered.group(2)[:1].isupper():
        if i + 1 < len(lines) and _ITEM.match(lines[i + 1][0]):
            return None  # a list
        depth = numbered.group(1).count(".") + 1
        titled = _TITLED.match(numbered.group(2))
        if titled and titled.end() < len(numbered.group(2)):
            at = numbered.start(2) + titled.end()
            rest = (line[at:], start + at)
            span = (start + len(line) - len(line.lstrip()), start + numbered.start(2) + len(titled.group(1)))
            return _Heading(titled.group(1), ("numbered", str(depth)), span, numbered.group(1)), i + 1, rest
        end = i + 1
        text = numbered.group(2)
        while end < len(lines) and not text.endswith(("?", ".", ":")) and lines[end][0].strip()[:1].islower():
            text += " " + lines[end][0].strip()
            end += 1
        words = len(text.split())
        if words > LONG_HEADING_WORDS or (words > HEADING_WORDS and end < len(lines)):
            return None  # a long numbered heading is a block of its own (a numbered clause goes on after it)
        span = (start + len(line) - len(line.lstrip()), lines[end - 1][1] + len(lines[end - 1][0].rstrip()))
        return _Heading(text.rstrip(":"), ("numbered", str(depth)), span, numbered.group(1)), end, None
    stripped = line.strip()
    letters = [c for c in stripped if c.isalpha()]
    if (
        len(letters) >= 4
        and all(c.isupper() for c in letters)
        and len(stripped.split()) <= 8
        and not stripped.endswith((".", ",", ";"))
        and (i + 1 == len(lines) or not lines[i + 1][0].strip().isupper())
    ):
        span = (start + len(line) - len(line.lstrip()), start + len(line.rstrip()))
        return _Heading(stripped, ("capitals",), span), i + 1, None
    return None


def _split_number(text: str) -> tuple[str | None, str]:
    numbered = _NUMBERED.match(text)
    return (numbered.group(1), numbered.group(2)) if numbered else (None, text)


def _is_code_line(line: str, base: int) -> bool:
    indent = len(line) - len(line.lstrip())
    return indent >= base + 4 or bool(_PROMPT.match(line) or _COMPILER.match(line))


def _prose(lines: list[Line], base: int) -> list[Paragraph]:
    """Lines between headings: runs of code lines as code blocks (an indented run only when it does not read
    as prose: a licence indents its clauses), the rest as prose or list items."""
    runs: list[tuple[bool, list[Line]]] = []
    for line in lines:
        previous = runs[-1] if runs else None
        is_code = _is_code_line(line[0], base) and not (
            previous is not None and not previous[0] and _continues(previous[1], line)
        )
        if previous is not None and previous[0] == is_code:
            previous[1].append(line)
        else:
            runs.append((is_code, [line]))
    out: list[Paragraph] = []
    text: list[Line] = []  # prose lines, an indented run that reads as prose included, kept together
    for is_code, run in runs:
        if is_code and (not _reads_as_prose(run) or any(_is_console(line) for line, _ in run)):
            out.extend(_paragraphs(text) if text else [])
            out.append(_code(run))
            text = []
        else:
            text += run
    out.extend(_paragraphs(text) if text else [])
    return out


def _is_console(line: str) -> bool:
    return bool(_PROMPT.match(line) or _COMPILER.match(line))


_WORD = regex.compile(r"^[\"'(“]*+(?:[A-Za-z][A-Za-z'’-]*+|\d++)[\"')”]*+[,.;:!?]?+[\"')”]*+$")


def _reads_as_prose(lines: list[Line]) -> bool:
    """Whether lines are mostly plain words (at least 80% of their tokens), as an indented clause of a
    licence is and code or console output is not."""
    tokens = [token for line, _ in lines for token in line.split()]
    return bool(tokens) and sum(bool(_WORD.match(t)) for t in tokens) >= 0.8 * len(tokens)


def _continues(run: list[Line], line: Line) -> bool:
    """Whether an indented line continues a list item of ``run`` (its text, not code)."""
    return any(kind == "list" for kind, _ in lines_blocks(run)) and not _PROMPT.match(line[0])


def _paragraphs(lines: list[Line], kind: str | None = None) -> list[Paragraph]:
    built = (Paragraph.from_map(mapped, kind or found) for found, mapped in lines_blocks(lines))
    return [p for p in built if p is not None]


def _code(lines: list[Line]) -> Paragraph:
    """Lines kept whole as one code "sentence", with the span from the first character to the last."""
    first, last = lines[0], lines[-1]
    start = first[1] + len(first[0]) - len(first[0].lstrip())
    end = last[1] + len(last[0].rstrip())
    code = "\n".join(line.rstrip("\r\n") for line, _ in lines).strip("\n")
    return Paragraph([code], "code", [(start, end)])


def _as_paragraph(heading: _Heading, text: str) -> Paragraph:
    """A numbered line that is the only one: a list item, its number dropped as a list's are."""
    start, end = heading.span
    numbered = _NUMBERED.match(text[start:end])
    at = start + numbered.start(2) if numbered else start
    return Paragraph([" ".join(text[at:end].split())], "list", [(at, end)])
