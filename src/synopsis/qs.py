"""Question-summary (QS) hierarchies: the tree, its linearisation, a strict and a lenient parser, outlines.

Hierarchical question-summary generation (HIBRIDS, Cao & Wang, ACL 2022, section 4) summarises a document
into a tree of (question, summary) pairs in which every child question asks about its parent's summary.

The tree
--------
A :class:`QSTree` has exactly one root :class:`QSNode`, as in the paper, where a hierarchy starts from one
root question Q1 answered by A1 and every further pair descends from it. The root's question may be
``None``: in QSGen-Hier the root question is part of the model *input*, so the generated text (and the
reference it is scored against) begins with the root summary. Every other pair has a non-empty question
and every pair a non-empty summary.

The linearised form (one line of text)
--------------------------------------
Depth-first, pre-order, with a level marker before every pair after the root, as in the paper's example
``A1 [L↓] Q1.1 A1.1 [L-] Q1.2 A1.2 [L↓] Q1.2.1 A1.2.1``:

* ``[L↓]`` the pair is one level deeper than the previous pair (its first child);
* ``[L-]`` the pair is on the previous pair's level (its next sibling);
* ``[L↑]`` climb one level: ``k`` markers for ``k`` levels, so after ``Q1.1.1 A1.1.1`` the pair ``Q1.2``
  is preceded by ``[L↑]`` once and the pair ``Q2`` of a root child would need two. The depth is tracked
  with a real stack; the HIBRIDS public code never updates its current depth, so it never emits ``[L↑]``
  and writes ``[L↓]`` once per level of absolute depth before every pair instead.
* Within a pair, the question and the summary are separated by ``[ANS]``: ``Q1.1 [ANS] A1.1``. Question
  marks cannot serve (the public code splits at the first ``?``): many real questions have none
  ("Summarize the discussion about X") and summaries contain ``?``.

So the figure's hierarchy is ``Q1 [ANS] A1 [L↓] Q1.1 [ANS] A1.1 [L-] Q1.2 [ANS] A1.2 [L↓] Q1.2.1 [ANS]
A1.2.1``, and without its root question (the QSGen-Hier target) ``A1 [L↓] Q1.1 [ANS] A1.1 ...``: the first
segment is the root pair when it holds ``[ANS]``, else the root summary alone. Markers are separated from
the text by single spaces; every run of whitespace inside a text becomes one space, so a hierarchy is one
line. Texts may not contain the four reserved markers (:func:`linearize` refuses them).

Parsing
-------
:func:`parse` accepts exactly this grammar and raises :class:`QSParseError` (an
:class:`~synopsis.errors.InputError`) with the 0-based character ``position`` and the offending ``token``
for anything else: a text starting with a marker, ``[L↓]`` twice in a row (a pair can only be one level
deeper than the one before it), ``[L-]`` or ``[L↑]`` that would put a pair beside or above the root,
mixed runs such as ``[L↑] [L-]``, a trailing marker, a pair with no question (no ``[ANS]``) or an empty
question or summary, and a second ``[ANS]`` in one pair. ``parse(linearize(tree)) == tree`` for every
valid tree whose texts are whitespace-normalised.

:func:`parse_lenient` is for model outputs: it never raises, repairs what it can (a run of markers counts
by its net level change, clamped to the levels that exist; extra ``[ANS]`` are dropped from the summary),
drops pairs it cannot recover (no question, empty question or summary; their children move up to the
nearest kept ancestor) and reports how many pairs it dropped and what it repaired, with positions.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from synopsis.errors import InputError

DOWN = "[L↓]"
UP = "[L↑]"
SAME = "[L-]"
ANSWER = "[ANS]"
LEVEL_MARKERS = (DOWN, UP, SAME)
RESERVED = (DOWN, UP, SAME, ANSWER)
_TOKENS = re.compile("|".join(re.escape(token) for token in RESERVED))


def _clean(text: str) -> str:
    return " ".join(text.split())


@dataclass
class QSNode:
    """One (question, summary) pair and the pairs that ask about its summary."""

    question: str | None
    summary: str
    children: list[QSNode] = field(default_factory=list)

    def add(self, child: QSNode) -> QSNode:
        self.children.append(child)
        return child


@dataclass
class QSTree:
    """A QS hierarchy: one root pair (whose question may be ``None``) and its descendants."""

    root: QSNode

    def walk(self) -> Iterator[tuple[int, QSNode]]:
        """``(depth, node)`` in pre-order (the linearisation order); the root has depth 0."""
        stack = [(0, self.root)]
        while stack:
            depth, node = stack.pop()
            yield depth, node
            stack.extend((depth + 1, child) for child in reversed(node.children))

    def nodes(self) -> list[QSNode]:
        return [node for _, node in self.walk()]

    def parents(self) -> list[int]:
        """Pre-order index of each node's parent (-1 for the root)."""
        parents: list[int] = []
        path: list[int] = []  # pre-order indices of the current node's ancestors, root first
        for index, (depth, _) in enumerate(self.walk()):
            del path[depth:]
            parents.append(path[-1] if path else -1)
            path.append(index)
        return parents

    def relations(self) -> list[tuple[int, int]]:
        """Every ``(parent, child)`` pair of pre-order indices."""
        return [(parent, child) for child, parent in enumerate(self.parents()) if parent >= 0]

    @property
    def depth(self) -> int:
        """Depth of the deepest pair (0 for a root without children)."""
        return max(depth for depth, _ in self.walk())

    def __len__(self) -> int:
        return sum(1 for _ in self.walk())

    def questions(self) -> list[str]:
        """The questions present, in pre-order (the root's only when it has one)."""
        return [node.question for node in self.nodes() if node.question]

    def summaries(self) -> list[str]:
        return [node.summary for node in self.nodes()]

    def to_dict(self) -> dict[str, Any]:
        def convert(node: QSNode) -> dict[str, Any]:
            return {
                "question": node.question,
                "summary": node.summary,
                "children": [convert(c) for c in node.children],
            }

        return convert(self.root)

    @classmethod
    def from_dict(cls, data: Any, where: str = "hierarchy") -> QSTree:
        def convert(value: Any, place: str) -> QSNode:
            if not isinstance(value, dict):
                raise InputError(f"{place}: expected an object, got {type(value).__name__}")
            question, summary = value.get("question"), value.get("summary")
            if question is not None and not isinstance(question, str):
                raise InputError(f"{place}: field 'question' must be a string or null")
            if not isinstance(summary, str):
                raise InputError(f"{place}: field 'summary' must be a string")
            children = value.get("children", [])
            if not isinstance(children, list):
                raise InputError(f"{place}: field 'children' must be a list")
            return QSNode(
                question, summary, [convert(c, f"{place}.children[{i}]") for i, c in enumerate(children)]
            )

        return cls(convert(data, where))


# --------------------------------------------------------------------------------------- linearisation
def outline_labels(tree: QSTree) -> list[str]:
    """Outline numbers of the pairs in pre-order: "1", "1.1", "1.2", "1.2.1", ..."""
    labels: list[str] = []
    counters: list[int] = []
    for depth, _ in tree.walk():
        del counters[depth + 1 :]
        if len(counters) == depth + 1:
            counters[depth] += 1
        else:
            counters.append(1)
        labels.append(".".join(map(str, counters)))
    return labels


def linearize(tree: QSTree, *, root_question: bool = True) -> str:
    """The one-line form (see the module docstring); ``root_question=False`` leaves the root question out.

    Raises :class:`InputError` naming the pair (by outline number) when a summary is empty, a non-root
    question is missing, or a text contains a reserved marker.
    """
    parts: list[str] = []
    previous = 0
    for label, (depth, node) in zip(outline_labels(tree), tree.walk(), strict=True):
        question = _clean(node.question) if node.question is not None else None
        summary = _clean(node.summary)
        for name, text in (("question", question), ("summary", summary)):
            if text and (found := _TOKENS.search(text)):
                raise InputError(f"QS pair {label}: the {name} contains the reserved marker {found.group()}")
        if not summary:
            raise InputError(f"QS pair {label}: the summary is empty")
        if depth == 0:
            if root_question and question:
                parts += [question, ANSWER]
            parts.append(summary)
            continue
        if not question:
            raise InputError(f"QS pair {label}: only the root pair may lack a question")
        if depth > previous:
            parts.append(DOWN)
        elif depth == previous:
            parts.append(SAME)
        else:
            parts.extend([UP] * (previous - depth))
        parts += [question, ANSWER, summary]
        previous = depth
    return " ".join(parts)


def join_questions(questions: list[str]) -> str:
    """Child questions as one QSGen-ChildQ target: ``Q1.1 [L-] Q1.2`` (siblings, hence ``[L-]``)."""
    cleaned = [_clean(q) for q in questions]
    for q in cleaned:
        if not q or _TOKENS.search(q):
            raise InputError(f"question {q!r}: empty or contains a reserved marker")
    return f" {SAME} ".join(cleaned)


def split_questions(text: str) -> list[str]:
    """Inverse of :func:`join_questions`; any marker separates, blank pieces are dropped."""
    return [q for q in (_clean(piece) for piece in _TOKENS.split(text)) if q]


# --------------------------------------------------------------------------------------- parsing
class QSParseError(InputError):
    """Malformed linearised hierarchy: ``position`` is the 0-based character offset of ``token``."""

    def __init__(self, problem: str, position: int, token: str) -> None:
        self.problem = problem
        self.position = position
        self.token = token
        super().__init__(f"character {position + 1}: {problem} (at {token!r})")


@dataclass(frozen=True)
class ParseProblem:
    """One thing :func:`parse_lenient` repaired or dropped."""

    position: int
    token: str
    problem: str
    action: str  # "repaired", "dropped" (a QS pair) or "ignored" (a trailing marker)


@dataclass
class LenientParse:
    """What :func:`parse_lenient` recovered: the tree, how many pairs it dropped, and why."""

    tree: QSTree
    dropped: int = 0
    repaired: int = 0
    problems: list[ParseProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the text was well-formed (strict :func:`parse` would give the same tree)."""
        return not self.problems


@dataclass
class _Token:
    kind: str  # "text", or one of RESERVED
    start: int
    text: str


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    for match in _TOKENS.finditer(text):
        if text[position : match.start()].strip():
            tokens.append(_Token("text", position, text[position : match.start()]))
        tokens.append(_Token(match.group(), match.start(), match.group()))
        position = match.end()
    if text[position:].strip():
        tokens.append(_Token("text", position, text[position:]))
    for token in tokens:  # point at the first visible character of a text
        if token.kind == "text":
            token.start += len(token.text) - len(token.text.lstrip())
    return tokens


def _snippet(text: str) -> str:
    text = _clean(text)
    return text if len(text) <= 30 else text[:27] + "..."


@dataclass
class _Segment:
    markers: list[_Token]  # the level markers before this pair (none for the root)
    content: list[_Token]  # its text and [ANS] tokens
    start: int  # where its content starts (or would start)


def _segments(tokens: list[_Token], length: int) -> list[_Segment]:
    """The root's content, then one segment per run of level markers and the pair that follows it."""
    segments = [_Segment([], [], 0)]
    for token in tokens:
        if token.kind in LEVEL_MARKERS:
            if len(segments) == 1 or segments[-1].content:  # a run starts after the root or a pair
                segments.append(_Segment([], [], token.start))
            segments[-1].markers.append(token)
        else:
            if not segments[-1].content:
                segments[-1].start = token.start
            segments[-1].content.append(token)
    if len(segments) > 1 and not segments[-1].content:
        segments[-1].start = length
    return segments


def _split_pair(segment: _Segment) -> tuple[str, str, list[_Token]]:
    """(question, summary, [ANS] tokens) of a segment; question is "" when there is no [ANS]."""
    answers = [t for t in segment.content if t.kind == ANSWER]
    if not answers:
        return "", _clean(" ".join(t.text for t in segment.content)), answers
    first = segment.content.index(answers[0])
    question = _clean(" ".join(t.text for t in segment.content[:first] if t.kind == "text"))
    summary = _clean(" ".join(t.text for t in segment.content[first + 1 :] if t.kind == "text"))
    return question, summary, answers


def parse(text: str) -> QSTree:
    """Parse one linearised hierarchy strictly; malformed input raises :class:`QSParseError`."""
    tokens = _lex(text)
    if not tokens:
        raise QSParseError("empty hierarchy", 0, text[:30])
    segments = _segments(tokens, len(text))
    root_segment = segments[0]
    if not root_segment.content:
        first = segments[1].markers[0]
        raise QSParseError(
            "the hierarchy starts with a marker; the root summary comes first", first.start, first.text
        )
    question, summary, answers = _split_pair(root_segment)
    _check_pair(question, summary, answers, root_segment, is_root=True)
    root = QSNode(question or None, summary)
    path = [root]  # path[d] is the node at depth d on the current branch
    for segment in segments[1:]:
        if not segment.content:
            last = segment.markers[-1]
            raise QSParseError(f"{last.text} at the end: no QS pair follows it", last.start, last.text)
        depth = _strict_depth(segment.markers, len(path) - 1)
        question, summary, answers = _split_pair(segment)
        _check_pair(question, summary, answers, segment, is_root=False)
        del path[depth:]
        path.append(path[-1].add(QSNode(question, summary)))
    return QSTree(root)


def _strict_depth(markers: list[_Token], current: int) -> int:
    first = markers[0]
    for previous, token in zip(markers, markers[1:], strict=False):
        if token.kind == previous.kind == DOWN:
            raise QSParseError(
                "[L↓] twice in a row: a QS pair can only be one level deeper than the pair before it",
                token.start,
                token.text,
            )
        if token.kind == previous.kind == SAME:
            raise QSParseError("[L-] twice in a row", token.start, token.text)
        if token.kind != previous.kind:
            raise QSParseError(
                f"{token.text} right after {previous.text}: between two pairs use one [L↓], one [L-] "
                "or one [L↑] per level climbed",
                token.start,
                token.text,
            )
    if first.kind == DOWN:
        return current + 1
    if first.kind == SAME:
        if current == 0:
            raise QSParseError(
                "[L-] after the root: the root has no siblings (its first child takes [L↓])",
                first.start,
                first.text,
            )
        return current
    if len(markers) >= current:
        bad = markers[max(current - 1, 0)]
        raise QSParseError(
            f"[L↑] climbs above the root's children (the previous pair is at depth {current}, "
            f"{len(markers)} [L↑] given)",
            bad.start,
            bad.text,
        )
    return current - len(markers)


def _check_pair(question: str, summary: str, answers: list[_Token], segment: _Segment, is_root: bool) -> None:
    content = segment.content
    if len(answers) > 1:
        raise QSParseError("a second [ANS] in one QS pair", answers[1].start, answers[1].text)
    if not answers:
        if is_root:
            return
        raise QSParseError(
            "QS pair with no question (no [ANS] between question and summary)",
            segment.start,
            _snippet(" ".join(t.text for t in content)),
        )
    if not question:
        raise QSParseError("QS pair with an empty question", answers[0].start, answers[0].text)
    if not summary:
        raise QSParseError("QS pair with an empty summary", answers[0].start, answers[0].text)


def parse_lenient(text: str) -> LenientParse:
    """Parse a possibly malformed (generated) hierarchy; never raises. See the module docstring."""
    tokens = _lex(text)
    problems: list[ParseProblem] = []
    dropped = 0
    if not tokens:
        problems.append(ParseProblem(0, text[:30], "empty hierarchy", "repaired"))
        return LenientParse(QSTree(QSNode(None, "")), 0, 1, problems)
    segments = _segments(tokens, len(text))
    root_segment = segments[0]
    question, summary, answers = _split_pair(root_segment)
    if not root_segment.content:
        first = segments[1].markers[0]
        problems.append(ParseProblem(first.start, first.text, "no root summary", "repaired"))
    elif answers:
        if len(answers) > 1:
            problems.append(ParseProblem(answers[1].start, answers[1].text, "a second [ANS]", "repaired"))
        if not question:
            problems.append(
                ParseProblem(answers[0].start, answers[0].text, "empty root question", "repaired")
            )
        if not summary:
            problems.append(ParseProblem(answers[0].start, answers[0].text, "empty root summary", "repaired"))
    root = QSNode(question or None, summary)
    # path[d]: the node at claimed depth d on the current branch, or None where that pair was dropped.
    path: list[QSNode | None] = [root]
    for segment in segments[1:]:
        if not segment.content:
            last = segment.markers[-1]
            problems.append(ParseProblem(last.start, last.text, "marker with no QS pair after it", "ignored"))
            continue
        depth, problem = _lenient_depth(segment.markers, len(path) - 1)
        if problem:
            first = segment.markers[0]
            problems.append(ParseProblem(first.start, first.text, problem, "repaired"))
        question, summary, answers = _split_pair(segment)
        reason = None
        if not answers:
            reason = "QS pair with no question (no [ANS])"
        elif not question:
            reason = "QS pair with an empty question"
        elif not summary:
            reason = "QS pair with an empty summary"
        del path[depth:]
        if reason:
            where = answers[0] if answers else segment.content[0]
            problems.append(ParseProblem(where.start, _snippet(where.text), reason, "dropped"))
            dropped += 1
            path.append(None)
            continue
        if len(answers) > 1:
            problems.append(ParseProblem(answers[1].start, answers[1].text, "a second [ANS]", "repaired"))
        parent = next(node for node in reversed(path) if node is not None)
        path.append(parent.add(QSNode(question, summary)))
    repaired = sum(p.action == "repaired" for p in problems)
    return LenientParse(QSTree(root), dropped, repaired, problems)


def _lenient_depth(markers: list[_Token], current: int) -> tuple[int, str | None]:
    """Depth of the next pair from the net level change of a marker run, clamped to 1..current+1."""
    downs = sum(t.kind == DOWN for t in markers)
    ups = sum(t.kind == UP for t in markers)
    kinds = {t.kind for t in markers}
    net = 1 if downs > ups else (0 if downs == ups else downs - ups)
    depth = min(max(current + net, 1), current + 1)
    well_formed = (kinds == {DOWN} and downs == 1) or (kinds == {SAME} and len(markers) == 1 and current > 0)
    well_formed = well_formed or (kinds == {UP} and ups < current)
    if well_formed:
        return depth, None
    run = " ".join(t.text for t in markers)
    return depth, f"marker run '{run}' after a pair at depth {current}: read as depth {depth}"


# --------------------------------------------------------------------------------------- outline
def render_outline(tree: QSTree, *, width: int | None = 100, indent: int = 4) -> str:
    """An indented, numbered outline for the terminal, one block per pair::

        [1] Q: What did the meeting decide?
            A: The team chose ...
            [1.1] Q: Why?
                  A: Because ...

    ``width`` wraps long texts (``None``: no wrapping); ``indent`` spaces per level.
    """
    lines: list[str] = []
    for label, (depth, node) in zip(outline_labels(tree), tree.walk(), strict=True):
        head = " " * (indent * depth) + f"[{label}] "
        hang = " " * len(head)
        rows = []
        if node.question:
            rows.append(("Q: ", _clean(node.question)))
        rows.append(("A: ", _clean(node.summary)))
        for k, (tag, text) in enumerate(rows):
            first = (head if k == 0 else hang) + tag
            rest = hang + " " * len(tag)
            if width is None:
                lines.append(first + text)
            else:
                lines.extend(
                    textwrap.wrap(
                        text or " ",
                        width=max(width, len(first) + 20),
                        initial_indent=first,
                        subsequent_indent=rest,
                        break_on_hyphens=False,
                    )
                    or [first.rstrip()]
                )
    return "\n".join(line.rstrip() for line in lines)
