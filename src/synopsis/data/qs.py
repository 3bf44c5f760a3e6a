"""Question-summary hierarchies built from QMSum, and the QSGen-Hier and QSGen-ChildQ examples.

HIBRIDS (Cao & Wang, ACL 2022) annotated GovReport-QS, which is not available here. QMSum (Zhong et al.,
2021) has the ingredients of a two-level hierarchy per meeting: one general query and answer about the
whole meeting, a topic list with turn spans, and specific queries whose answers cover a ``relevant_text_span``
of turns. :func:`qmsum_hierarchy` builds a :class:`~synopsis.qs.QSTree` per meeting:

* **Root** (depth 0): the meeting's general query ("Summarize the whole meeting.") and its answer. Every
  meeting of the release has exactly one; a further general query would become a child of the root.
* **Assignment**: each specific query goes to the topic holding the largest share of its turns, when that
  share is at least ``min_overlap`` (default 0.5; ties go to the shorter, more specific topic). Topic spans
  and query spans in QMSum are drawn by hand and often overshoot each other by a few turns, so an exact
  "span inside the topic" test would orphan many queries.
* **Topic pair** (depth 1): among a topic's queries, the one whose turns best cover the topic's turns
  (Jaccard >= ``min_topic_jaccard``, default 0.5), typically "Summarize the discussion about <topic>". The
  topic's name is not a question and has no summary of its own, so a topic is a node only through such a
  query; the topic's other queries ("What did B think about <topic>?") become its children (depth 2).
* A topic without such a query contributes no node: its queries become children of the root, as do the
  queries that fit no topic. Children are ordered by their first turn (document order).

The builders never invent text: every question and summary is a QMSum query and answer (whitespace
normalised).

Examples (synopsis :class:`~synopsis.data.example.Example`):

* **QSGen-Hier** (``qmsum-qs``): the input is the aligned sections and the root question, the target the rest
  of the hierarchy. One example per meeting (``<meeting>#qs-hier``: the whole meeting, its topics as sections,
  instruction = the general query) and one per topic pair with children (``<meeting>#qs-hier-1.2``: the
  document holds only the turns of the topic and of its queries, instruction = the topic query). The
  reference is the hierarchy linearised *without* its root question (``A1 [L↓] Q1.1 [ANS] A1.1 ...``).
* **QSGen-ChildQ** (``qmsum-qs-childq``): for every pair with children, the input is that pair and the aligned
  sections, the target its child questions in order, ``Q1.1 [L-] Q1.2`` (:func:`synopsis.qs.join_questions`).
  The instruction holds the pair as ``question [ANS] summary``.

Both carry the full hierarchy (with the root question) in ``metadata["hierarchy"]``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from synopsis.data.example import Example
from synopsis.document import Document
from synopsis.errors import InputError
from synopsis.qs import ANSWER, QSNode, QSTree, join_questions, linearize, outline_labels

logger = logging.getLogger(__name__)

LEVELS = ("all", "meeting", "topic")


def _clean(text: str) -> str:
    return " ".join(text.split())


def _turns(value: Any, where: str) -> set[int]:
    """The turns a ``relevant_text_span`` field covers."""
    from synopsis.data.readers.qmsum import turn_spans

    return {turn for start, end in turn_spans(value, where) for turn in range(start, end + 1)}


@dataclass
class _Query:
    kind: str  # "general" or "specific"
    index: int  # position in its query list
    question: str
    answer: str
    turns: set[int]

    @property
    def first(self) -> int:
        return min(self.turns, default=-1)


@dataclass
class MeetingHierarchy:
    """A meeting's QS hierarchy and, per pair (pre-order), the transcript turns it covers.

    ``turns[i]`` is ``None`` for the root (the whole meeting). ``stats`` counts how the hierarchy was built.
    """

    meeting: str
    tree: QSTree
    turns: list[set[int] | None]
    levels: list[str]  # "meeting", "topic" or "query", per pair in pre-order
    stats: dict[str, int] = field(default_factory=dict)


def _queries(record: dict[str, Any], where: str) -> tuple[list[_Query], int]:
    """The queries with a question and an answer, and how many lacked either."""
    from synopsis.data.readers.base import require

    queries, empty = [], 0
    for kind in ("general", "specific"):
        for i, query in enumerate(require(record, f"{kind}_query_list", list, where)):
            place = f"{where}: {kind}_query_list[{i}]"
            question = _clean(require(query, "query", str, place))
            answer = _clean(require(query, "answer", str, place))
            turns = _turns(query.get("relevant_text_span", []), place) if kind == "specific" else set()
            if question and answer:
                queries.append(_Query(kind, i, question, answer, turns))
            else:
                empty += 1
    return queries, empty


class _Branch(NamedTuple):
    """A child of the root: its sort key (first turn, query index), subtree, and per-pair turns and levels."""

    first: int
    index: int
    node: QSNode
    turns: list[set[int] | None]
    levels: list[str]


def qmsum_hierarchy(
    record: Any,
    where: str,
    meeting: str,
    *,
    min_overlap: float = 0.5,
    min_topic_jaccard: float = 0.5,
) -> MeetingHierarchy:
    """The QS hierarchy of one QMSum meeting record (see the module docstring for the construction)."""
    from synopsis.data.readers.base import require

    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    queries, empty = _queries(record, where)
    general = [q for q in queries if q.kind == "general"]
    if not general:
        raise InputError(f"{where}: no general query with an answer to be the root of the hierarchy")
    specific = [q for q in queries if q.kind == "specific"]
    topics = []  # (name, turns), in document order
    for t, topic in enumerate(record.get("topic_list", [])):
        place = f"{where}: topic_list[{t}]"
        name = require(topic, "topic", str, place)
        turns = _turns(topic.get("relevant_text_span", []), place)
        if turns:
            topics.append((name, turns))
    topics.sort(key=lambda item: min(item[1]))

    assigned: list[list[_Query]] = [[] for _ in topics]
    loose = list(general[1:])  # children of the root
    for query in specific:
        # the topic with the largest share of the query's turns; on a tie the shorter topic
        shares = [
            (len(query.turns & turns) / len(query.turns) if query.turns else 0.0, -len(turns), -k)
            for k, (_, turns) in enumerate(topics)
        ]
        best = max(shares, default=(0.0, 0, 0))
        if best[0] > 0 and best[0] >= min_overlap:
            assigned[-best[2]].append(query)
        else:
            loose.append(query)

    stats = {"meetings": 1, "topics": len(topics), "topics_with_pair": 0, "queries_under_topics": 0}
    branches: list[_Branch] = []
    for k, (_, turns) in enumerate(topics):
        members = assigned[k]
        jaccard = [len(q.turns & turns) / len(q.turns | turns) for q in members]
        if not members or max(jaccard) < min_topic_jaccard:
            loose.extend(members)
            continue
        head = members[jaccard.index(max(jaccard))]  # the first of equals
        children = sorted((q for q in members if q is not head), key=lambda q: (q.first, q.index))
        node = QSNode(head.question, head.answer, [QSNode(q.question, q.answer) for q in children])
        covered = set(turns) | head.turns
        for q in children:
            covered |= q.turns
        subtree_turns: list[set[int] | None] = [covered, *(q.turns for q in children)]
        branches.append(
            _Branch(min(turns), head.index, node, subtree_turns, ["topic"] + ["query"] * len(children))
        )
        stats["topics_with_pair"] += 1
        stats["queries_under_topics"] += len(children)
    for q in loose:
        branches.append(_Branch(q.first, q.index, QSNode(q.question, q.answer), [q.turns or None], ["query"]))
    branches.sort(key=lambda branch: (branch.first, branch.index))

    root = QSNode(general[0].question, general[0].answer, [branch.node for branch in branches])
    all_turns: list[set[int] | None] = [None]
    levels = ["meeting"]
    for branch in branches:
        all_turns += branch.turns
        levels += branch.levels
    stats["queries_at_root"] = len(loose)
    stats["qs_pairs"] = len(all_turns)
    stats["queries_without_text"] = empty
    return MeetingHierarchy(meeting, QSTree(root), all_turns, levels, stats)


def _subtree(tree: QSTree, index: int) -> QSTree:
    return QSTree(tree.nodes()[index])


def hier_examples(hierarchy: MeetingHierarchy, record: Any, where: str, levels: str = "all") -> list[Example]:
    """QSGen-Hier examples of one meeting: the meeting-level hierarchy and/or each topic pair's subtree."""
    if levels not in LEVELS:
        raise InputError(f"qmsum-qs: levels must be one of {', '.join(LEVELS)}, got '{levels}'")
    tree, meeting = hierarchy.tree, hierarchy.meeting
    examples = []
    nodes = tree.nodes()
    for index, (label, node) in enumerate(zip(outline_labels(tree), nodes, strict=True)):
        level = hierarchy.levels[index]
        if not node.children or level == "query":
            continue
        if levels != "all" and level != levels:
            continue
        subtree = _subtree(tree, index)
        turns = hierarchy.turns[index]
        document = _aligned_document(record, where, meeting, turns)
        suffix = "" if level == "meeting" else f"-{label}"
        examples.append(
            Example(
                id=f"{meeting}#qs-hier{suffix}",
                document=document,
                references=[linearize(subtree, root_question=False)],
                instruction=node.question,
                metadata={
                    "task": "qsgen-hier",
                    "meeting": meeting,
                    "level": level,
                    "hierarchy": linearize(subtree),
                    "pairs": len(subtree),
                    "depth": subtree.depth,
                },
            )
        )
    return examples


def childq_examples(hierarchy: MeetingHierarchy, record: Any, where: str) -> list[Example]:
    """QSGen-ChildQ examples of one meeting: every pair with children -> its child questions."""
    tree, meeting = hierarchy.tree, hierarchy.meeting
    examples = []
    for index, (label, node) in enumerate(zip(outline_labels(tree), tree.nodes(), strict=True)):
        if not node.children:
            continue
        document = _aligned_document(record, where, meeting, hierarchy.turns[index])
        examples.append(
            Example(
                id=f"{meeting}#qs-childq-{label}",
                document=document,
                references=[join_questions([child.question or "" for child in node.children])],
                instruction=f"{node.question} {ANSWER} {node.summary}",
                metadata={
                    "task": "qsgen-childq",
                    "meeting": meeting,
                    "level": hierarchy.levels[index],
                    "question": node.question,
                    "summary": node.summary,
                    "hierarchy": linearize(_subtree(tree, index)),
                },
            )
        )
    return examples


def _aligned_document(record: Any, where: str, meeting: str, turns: set[int] | None) -> Document:
    """The whole meeting (topics as sections), or only ``turns`` of it for a topic-level pair."""
    from synopsis.data.readers.qmsum import meeting_document

    if turns is None:
        return meeting_document(record, where, meeting)
    document = meeting_document(record, where, meeting, sorted(turns))
    document.id = f"{meeting}#turns-{min(turns)}-{max(turns)}"
    return document


def _read(
    task: str,
    path: Path,
    split: str | None,
    skip_bad_lines: bool,
    stats: dict[str, int],
    levels: str,
    min_overlap: float,
    min_topic_jaccard: float,
) -> Iterator[Example]:
    from synopsis.data.readers.qmsum import read_meetings

    if levels not in LEVELS:
        raise InputError(f"qmsum-qs: levels must be one of {', '.join(LEVELS)}, got '{levels}'")

    def meeting_examples(record: Any, where: str, meeting: str) -> list[Example]:
        hierarchy = qmsum_hierarchy(
            record, where, meeting, min_overlap=min_overlap, min_topic_jaccard=min_topic_jaccard
        )
        if task == "hier":
            examples = hier_examples(hierarchy, record, where, levels)
        else:
            examples = childq_examples(hierarchy, record, where)
        for key, value in hierarchy.stats.items():
            stats[key] = stats.get(key, 0) + value
        if not examples:
            logger.info("%s: the hierarchy has no pair with children; no example", where)
        return examples

    yield from read_meetings(path, split, meeting_examples, skip_bad_lines, stats)


def read_qmsum_qs(
    path: Path,
    *,
    split: str | None = None,
    skip_bad_lines: bool = False,
    stats: dict[str, int],
    levels: str = "all",
    min_overlap: float = 0.5,
    min_topic_jaccard: float = 0.5,
) -> Iterator[Example]:
    """QSGen-Hier examples from a QMSum split folder or one meeting file (corpus ``qmsum-qs``).

    ``levels``: ``meeting`` (one example per meeting), ``topic`` (one per topic pair with children) or
    ``all``. ``stats`` receives counts of meetings, topics, topic pairs, QS pairs and where queries went.
    """
    yield from _read("hier", path, split, skip_bad_lines, stats, levels, min_overlap, min_topic_jaccard)


def read_qmsum_qs_childq(
    path: Path,
    *,
    split: str | None = None,
    skip_bad_lines: bool = False,
    stats: dict[str, int],
    min_overlap: float = 0.5,
    min_topic_jaccard: float = 0.5,
) -> Iterator[Example]:
    """QSGen-ChildQ examples from a QMSum split folder or one meeting file (corpus ``qmsum-qs-childq``)."""
    yield from _read("childq", path, split, skip_bad_lines, stats, "all", min_overlap, min_topic_jaccard)
