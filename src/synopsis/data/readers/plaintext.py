"""Plain text into a :class:`~synopsis.document.Document`: the structure a plain-text guide, README or licence
shows without markup.

* **Headings** build the section tree: a line underlined (or framed above and below) by a rule of ``=``,
  ``-``, ``~``, ``*``, ``#``, ``^`` or ``+`` (reStructuredText's adornments, also Markdown's setext
  headings), a numbered line ("1. Definitions", "2.1 Scope", "1.1. How do you pronounce ...?") and a short
  line in capitals that starts with a letter ("TERMS AND CONDITIONS"; never an option line, "-B URL"). As in
  reStructuredText, a heading's level is the order in which its style first appears (numbered headings nest
  by their numbers; a numbered heading underlined is of both styles); a heading that opens the document
  before any text, in capitals or in a style no other heading has, is its title. Other rules are separators.
* **Man pages** as ``man`` renders them: the header line ("WGET(1)   GNU Wget   WGET(1)") gives the title,
  header and footer are not text, and a short line left of the text's usual indentation over deeper lines
  ("   Option Syntax") is a subsection.
* **Boxes**: a block framed by lines of ``*`` (MPL's sections 6 and 7) is read as the blocks inside it.
* **Code and console output** are code blocks, kept whole and never summarized: lines indented four columns
  or more beyond the text's usual indentation, a prompt (``$ ``, ``% ``, ``>>> ``) and what follows it in its
  block, compiler lines (``const.cc: In function ...``, ``expand.c:489: ...``), and any block of which half
  the lines are such; a block of C-like lines or build commands at any indentation (``int main(void){``,
  ``make const``, ``make: *** [const] Error 1``).
* Quoted lines (``> ...`` in an e-mail, ``# ...`` quoting a standard) are a quote, their markers dropped.
* A block opening with "Contents" or "Table of Contents" is navigation. Other blocks are prose or lists
  (:func:`synopsis.text.lines_blocks`), every sentence with its span in the text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import regex

from synopsis.document import Document, Paragraph, ParseBudget, Section, current_budget
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
# (the patterns below are linear as they are: each scans its line once)
_PAGE_NAME = re.compile(r"[\w.+-]+\(\d\w{0,4}\)")
_BOX_RULE = re.compile(r"^\s*\*{10,}\s*$")
_BOX_LINE = re.compile(r"^\s*\*[^*\n]*\*\s*$")
#: An e-mail's quoted line ("> C++ news"), and a quote of a standard in a guide ("# A conversion can ...").
_QUOTED = re.compile(r"^\s*>+ ?")
_HASH_QUOTED = re.compile(r"^\s*#(?: +|$)")  # not "#include": a block of them is code (_is_source_code)
_PREPROCESSOR = re.compile(
    r"^\s*(?:#\s*(?:include|define|if|ifdef|ifndef|endif|else)\b|(?:public|protected|private)\s*:\s*$)"
)  # a preprocessor line, or a C++ class's access label
#: A build tool's or compiler's command or message: "make const", "g++  const.cc  -o const", "make: *** ..."
_COMMAND = re.compile(
    r"^\s*(?:make|g\+\+|gcc|cc|c\+\+|cpp|ld|clang\+*)(?::\s+\*\*\*|(?:\s+[^\s.!?]\S*){0,6}\s*$)"
)
_SENTENCE_INSIDE = re.compile(r"[.!?] [A-Z]")
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
    #: a second style the heading shows, at the same level: "1. Definitions" underlined by "-" is numbered,
    #: and a later "Exhibit A" underlined by "-" is a heading of its level
    also: tuple[str, ...] | None = None


def parse_plain_text(text: str, document_id: str | None = None) -> Document:
    """Plain text as a Document with sections from its headings and code blocks from its code (see the
    module docstring); without headings it is one section of paragraphs, as before."""
    base = _usual_indent(text)
    budget = current_budget()  # counted as they are made, so a document over a limit stops here
    items: list[_Heading | Paragraph] = []
    page_title = None
    for block in line_blocks(text):
        if len(block) == 1 and _is_page_line(block[0][0]):  # a man page's header or footer line
            page_title = page_title or _page_title(block[0][0])
            continue
        for lines in _unboxed(block):
            items.extend(_counted(_read_block(lines, base), budget))
    if page_title is not None:
        items = [_man_heading(i, text, base) if isinstance(i, _Heading) else i for i in items]
    numbered = sum(isinstance(i, _Heading) and i.number is not None for i in items)
    if numbered == 1:  # one numbered line is a list item, not a numbering of the document's parts
        items = [_as_paragraph(i, text) if isinstance(i, _Heading) and i.number else i for i in items]
    title = None
    first = items[0] if items else None
    if page_title is not None:
        title = page_title  # a man page's: its NAME, SYNOPSIS, ... are its sections
    elif isinstance(first, _Heading) and (first.style == ("capitals",) or not _style_reused(first, items)):
        title = items.pop(0).text  # a heading before any text, in capitals or a style of its own: the title
    root = Section()
    levels: dict[tuple[str, ...], int] = {}
    stack: list[tuple[int, Section]] = [(0, root)]
    for item in items:
        if isinstance(item, Paragraph):
            stack[-1][1].paragraphs.append(item)
            continue
        level = levels.setdefault(item.style, levels.get(item.also or (), len(levels) + 1))
        if item.also is not None:
            levels.setdefault(item.also, level)
        while stack[-1][0] >= level:
            stack.pop()
        section = Section(heading=item.text, number=item.number, heading_span=item.span)
        stack.append((level, stack[-1][1].add(section)))
    return Document(root, title=title, id=document_id)


def _counted(items: list[_Heading | Paragraph], budget: ParseBudget) -> list[_Heading | Paragraph]:
    """``items``, each counted against the budget as it is made (a section, or a block and its words)."""
    for item in items:
        if isinstance(item, _Heading):
            budget.section()
        else:
            budget.block()
            budget.paragraph(item)
    return items


def _man_heading(heading: _Heading, text: str, base: int) -> _Heading | Paragraph:
    """A man page's heading, in capitals or left of the text, by its indentation alone: at the margin a
    section (NAME, OPTIONS, "URL"), further in a subsection ("   Option Syntax", "       HTTP(S)" under
    PROTOCOLS); a line in capitals as deep as the text is a list's label ("GSS-API" over its description)."""
    if heading.style[0] not in ("capitals", "outdented"):
        return heading
    indent = heading.span[0] - (text.rfind("\n", 0, heading.span[0]) + 1)
    if indent >= base:
        return _as_paragraph(heading, text)
    heading.style = ("man", str(indent))
    return heading


def _page_parts(line: str) -> list[str]:
    return [part.strip() for part in line.strip().split("   ") if part.strip()]


def _is_page_line(line: str) -> bool:
    """A man page's header or footer as ``man`` renders it: three parts apart by runs of spaces, the last a
    page name with its section ("WGET(1)   GNU Wget   WGET(1)", "GNU Wget 1.21.3   2025-03-03   WGET(1)")."""
    parts = _page_parts(line)
    return len(parts) == 3 and _PAGE_NAME.fullmatch(parts[2]) is not None


def _page_title(line: str) -> str | None:
    """The middle of a man page's header ("GNU Wget"), when the line is one: its name at both ends."""
    parts = _page_parts(line)
    return parts[1] if parts[0] == parts[2] else None


def _unboxed(lines: list[Line]) -> list[list[Line]]:
    """A block framed by a box of ``*`` (MPL's sections 6 and 7: a rule of stars above and below, each line
    between them "*  text  *") as the blocks inside it, each line's text with its own place in the input;
    any other block as it is."""
    inner = lines[1:-1]
    boxed = (
        len(lines) >= 3
        and _BOX_RULE.match(lines[0][0]) is not None
        and _BOX_RULE.match(lines[-1][0]) is not None
        and all(_BOX_LINE.match(line) for line, _ in inner)
    )
    if not boxed:
        return [lines]
    blocks: list[list[Line]] = [[]]
    for line, start in inner:
        at = line.index("*") + 1
        body = line[at : line.rstrip().rindex("*")]
        if body.strip():
            blocks[-1].append((body, start + at))
        elif blocks[-1]:
            blocks.append([])
    return [block for block in blocks if block]


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
    for marker in (_QUOTED, _HASH_QUOTED):  # an e-mail's quoted lines, a standard quoted: markers dropped
        if all(marker.match(line) for line, _ in lines):
            unquoted = [(line[m.end() :], at + m.end()) for line, at in lines if (m := marker.match(line))]
            unquoted = [line for line in unquoted if line[0].strip()]
            if unquoted and (marker is _QUOTED or not _is_source_code(unquoted)):
                return _paragraphs(unquoted, "quote")
    code_lines = sum(_is_code_line(line, base) for line, _ in lines)
    first_code = _is_code_line(lines[0][0], base) and _line_heading(lines, 0, base) is None
    if first_code and code_lines * 2 >= len(lines) and not _reads_as_prose(lines):
        return [_code(lines)]
    if _is_source_code(lines):
        return [_code(lines)]
    out: list[_Heading | Paragraph] = []
    pending: list[Line] = []
    overline: str | None = None
    i = 0
    while i < len(lines):
        line, start = lines[i]
        rule = _RULE.match(line)
        if rule:
            heading = _underlined(pending, rule.group(1), overline, len(line.strip()))
            if heading is not None:
                out.append(heading)
                pending, overline = [], None
            else:
                out.extend(_prose(pending, base))
                pending = []
                overline = rule.group(1) if i + 1 < len(lines) else None
            i += 1
            continue
        if not pending and (heading := _line_heading(lines, i, base)) is not None:
            out.append(heading[0])
            i = heading[1]
            underline = _RULE.match(lines[i][0]) if i < len(lines) and heading[2] is None else None
            if underline is not None:  # "1. Definitions" underlined: one heading, of both styles
                heading[0].also = ("underlined", underline.group(1))
                i += 1
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


def _underlined(pending: list[Line], char: str, overline: str | None, width: int = 0) -> _Heading | None:
    """The lines above a rule as a heading, when they are one or two short lines that do not end like a
    sentence (a rule under a sentence is a separator); up to :data:`LONG_HEADING_WORDS` words when the rule
    (``width`` characters) is as long as the heading's longest line, as an underline is drawn."""
    if not pending or len(pending) > 2:
        return None
    text = " ".join(line.strip() for line, _ in pending)
    drawn = abs(width - max(len(line.strip()) for line, _ in pending)) <= 2
    longest = LONG_HEADING_WORDS if drawn else HEADING_WORDS
    if len(text.split()) > longest or text.endswith((".", ",", ";", ":")) and not _NUMBERED.match(text):
        return None
    style = ("framed", char) if overline == char else ("underlined", char)
    number, heading = _split_number(text)
    span = (
        pending[0][1] + len(pending[0][0]) - len(pending[0][0].lstrip()),
        pending[-1][1] + len(pending[-1][0].rstrip()),
    )
    return _Heading(heading, style, span, number)


def _line_heading(lines: list[Line], i: int, base: int = 0) -> tuple[_Heading, int, Line | None] | None:
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
        alone = len(lines) - i == 2 and not _RULE.match(lines[i + 1][0])  # "10.4. Distributing ... Secondary
        # Licenses" alone in its block: a heading over two lines, whatever case the second starts with
        while end < len(lines) and not text.endswith(("?", ".", ":")) and (
            lines[end][0].strip()[:1].islower() or alone
        ):
            text += " " + lines[end][0].strip()
            end += 1
        words = len(text.split())
        if words > LONG_HEADING_WORDS or (words > HEADING_WORDS and end < len(lines)):
            return None  # a long numbered heading is a block of its own (a numbered clause goes on after it)
        if end > i + 1 and _SENTENCE_INSIDE.search(text) and not text.endswith("?"):
            return None  # two sentences over lines: a numbered clause, not a heading (a FAQ asks a question)
        span = (start + len(line) - len(line.lstrip()), lines[end - 1][1] + len(lines[end - 1][0].rstrip()))
        return _Heading(text.rstrip(":"), ("numbered", str(depth)), span, numbered.group(1)), end, None
    stripped = line.strip()
    letters = [c for c in stripped if c.isalpha()]
    if (
        stripped[:1].isalpha()  # never an option line ("-B URL") or a value
        and len(letters) >= 4
        and all(c.isupper() for c in letters)
        and len(stripped.split()) <= 8
        and not stripped.endswith((".", ",", ";"))
        and (i + 1 == len(lines) or not lines[i + 1][0].strip().isupper())
    ):
        span = (start + len(line) - len(line.lstrip()), start + len(line.rstrip()))
        return _Heading(stripped, ("capitals",), span), i + 1, None
    indent = len(line) - len(line.lstrip())
    if _is_outdented_heading(lines, i, base):
        span = (start + indent, start + len(line.rstrip()))
        return _Heading(stripped, ("outdented", str(indent)), span), i + 1, None
    return None


def _is_outdented_heading(lines: list[Line], i: int, base: int) -> bool:
    """A man page's subsection heading ("   Option Syntax" over text indented seven columns or more): a short
    line that starts with a capital, does not end like a sentence, stands left of the text's usual
    indentation and over lines indented deeper, or alone in its block."""
    line = lines[i][0]
    stripped, indent = line.strip(), len(line) - len(line.lstrip())
    if indent >= base or base < 4 or not stripped[:1].isupper() or stripped[-1:] in ".,;:!?":
        return False
    words = stripped.split()
    if len(words) > 6 or not all(word[:1].isalnum() or word[:1] in "(/&" for word in words):
        return False
    after = lines[i + 1][0] if i + 1 < len(lines) else None
    return after is None or len(after) - len(after.lstrip()) > indent


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


def _is_source_code(lines: list[Line]) -> bool:
    """Whether a block is a program or a build's output not indented (the GCC guide's C++ samples and
    "make const / g++ const.cc -o const / const.cc:7: ..."): most of its lines end in ``{``, ``}`` or ``;``,
    are preprocessor lines, a compiler's or make's messages, or a short command, and its lines do not read as
    prose."""
    coded = sum(
        _is_program_line(line) or _is_console(line) or bool(_COMMAND.match(line)) for line, _ in lines
    )
    return coded * 2 > len(lines) and not (_reads_as_prose(lines) and coded * 4 < len(lines) * 3)


def _is_program_line(line: str) -> bool:
    """A line of C-like code: it ends in "{" or "}", or in ";" after a bracket or an operator (a list item
    "the system type;" does not), a ``//`` comment after it aside; or it is a preprocessor line or an
    access label ("public:")."""
    code = line.split("//", 1)[0].rstrip()
    if code.endswith(("{", "}")) or _PREPROCESSOR.match(line):
        return True
    return code.endswith(";") and any(char in code for char in "(){}[]=<>")


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
