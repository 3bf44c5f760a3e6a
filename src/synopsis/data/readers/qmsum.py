"""QMSum (Zhong et al., 2021): query-based meeting summarization.

Each meeting file has ``meeting_transcripts`` (speaker turns), ``topic_list`` (topics with inclusive turn
spans), ``general_query_list`` and ``specific_query_list`` (query, answer and, for specific queries, the
``relevant_text_span``). A meeting becomes one Document: each turn "Speaker: text" is a paragraph, and each
topic a top-level section over its turns. Every query becomes an Example with the query as instruction.

Topic spans in the real data are not a clean partition: 24 meetings list them out of order, 28 pairs
overlap and 142 gaps are covered by no topic. A turn belongs to the covering span that started last (the
shorter one on a tie), so a topic nested in another interrupts it; runs of turns with the same topic form
one section. Turns before the first topic stay at the root; uncovered turns after it form an untitled
section, because root text after a child section would change the document order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from synopsis.data.example import Example
from synopsis.data.readers.base import guarded, read_input, require, resolve_split
from synopsis.document import Document, Section
from synopsis.errors import InputError
from synopsis.io import parse_json
from synopsis.text import split_sentences

QUERY_KINDS = ("general", "specific", "all")
# Transcription markers such as {disfmarker}, {vocalsound}, {gap}: noise for summarization.
_MARKER = re.compile(r"\{[a-z_]+\}")


def _domain(meeting: str) -> str:
    """QMSum's three domains, recognisable from the meeting names of its source corpora."""
    if meeting[:2] in ("ES", "IS", "TS"):
        return "product"  # AMI
    if meeting[:1] == "B" and meeting[:3] in ("Bdb", "Bed", "Bmr", "Bns", "Bro", "Bsr", "Buw"):
        return "academic"  # ICSI
    return "committee"  # Welsh Parliament, Parliament of Canada


def turn_spans(value: Any, where: str) -> list[tuple[int, int]]:
    """A ``relevant_text_span`` field: its ``[start, end]`` turn pairs (inclusive), or a typed error."""
    try:
        spans = [(int(start), int(end)) for start, end in value]
    except (TypeError, ValueError):
        raise InputError(
            f"{where}: field 'relevant_text_span' must be a list of [start, end] turn pairs"
        ) from None
    return spans


def meeting_document(
    record: Any, where: str, meeting: str, turns: Sequence[int] | None = None, strip_markers: bool = True
) -> Document:
    """The meeting as a Document with topic sections, optionally restricted to the turn indices ``turns``."""
    transcript = require(record, "meeting_transcripts", list, where)
    topics = require(record, "topic_list", list, where) if "topic_list" in record else []
    intervals = []  # (start, -end, topic): sorting picks the latest start, then the shortest span
    for t, topic in enumerate(topics):
        name = require(topic, "topic", str, f"{where}: topic_list[{t}]")
        for start, end in turn_spans(topic.get("relevant_text_span", []), f"{where}: topic_list[{t}]"):
            intervals.append((start, -end, name))
    root = Section()
    current: Section = root
    current_topic: str | None = None
    seen_topic = False
    for index in turns if turns is not None else range(len(transcript)):
        if not 0 <= index < len(transcript):
            raise InputError(f"{where}: turn {index} is outside the transcript ({len(transcript)} turns)")
        turn = transcript[index]
        speaker = require(turn, "speaker", str, f"{where}: meeting_transcripts[{index}]")
        content = require(turn, "content", str, f"{where}: meeting_transcripts[{index}]")
        if strip_markers:
            content = _MARKER.sub(" ", content)
        content = " ".join(content.split())
        if not content:
            continue
        covering = [iv for iv in intervals if iv[0] <= index <= -iv[1]]
        topic = max(covering)[2] if covering else None
        if topic != current_topic and (topic is not None or seen_topic):
            current = root.add(Section(heading=topic))
            seen_topic = True
        current_topic = topic
        sentences = split_sentences(content)
        sentences[0] = f"{speaker}: {sentences[0]}"
        current.paragraphs.append(sentences)
    return Document(root, id=meeting, metadata={"domain": _domain(meeting)})


def _queries(record: Any, where: str, kind: str) -> list[tuple[str, int, dict[str, Any]]]:
    """``(kind, index, query)`` for the requested query lists, each checked for its fields."""
    out = []
    for name in ("general", "specific") if kind == "all" else (kind,):
        queries = require(record, f"{name}_query_list", list, where)
        for i, query in enumerate(queries):
            place = f"{where}: {name}_query_list[{i}]"
            require(query, "query", str, place)
            require(query, "answer", str, place)
            out.append((name, i, query))
    return out


def meeting_files(path: Path, split: str | None) -> list[Path]:
    """The meeting files (``*.json``) of a QMSum split folder, or the one meeting file given."""
    source = resolve_split(path, split, ("",)) if path.is_dir() and split is not None else path
    if not source.exists():
        raise InputError(f"{source}: no such file or directory")
    files = sorted(source.glob("*.json")) if source.is_dir() else [source]
    if not files:
        hint = " (choose a split with --split)" if any(p.is_dir() for p in source.iterdir()) else ""
        raise InputError(f"{source}: no QMSum meeting files (*.json){hint}")
    return files


def read_meetings(
    path: Path,
    split: str | None,
    examples: Callable[[Any, str, str], list[Example]],
    skip_bad_lines: bool,
    stats: dict[str, int],
) -> Iterator[Example]:
    """``examples(record, where, meeting)`` of each meeting file of ``path`` (:func:`meeting_files`), its
    JSON parsed; a bad file is an error or, with ``skip_bad_lines``, skipped and counted in ``stats``."""

    def parse(file: Path) -> list[Example]:
        return examples(parse_json(read_input(file), file), str(file), file.stem)

    yield from guarded(meeting_files(path, split), parse, skip_bad_lines, stats)


def read_qmsum(
    path: Path,
    *,
    split: str | None = None,
    skip_bad_lines: bool = False,
    stats: dict[str, int],
    queries: str = "all",
    relevant_span_only: bool = False,
    strip_markers: bool = True,
) -> Iterator[Example]:
    """Examples ``<meeting>#general-0``, ``<meeting>#specific-3``, ... from a split folder or one meeting.

    ``queries`` picks the general, specific or all query lists. With ``relevant_span_only`` the document of
    a specific query holds only the turns of its ``relevant_text_span`` (general queries keep the whole
    meeting). ``strip_markers`` removes transcription markers such as ``{disfmarker}``.
    """
    if queries not in QUERY_KINDS:
        raise InputError(f"qmsum: queries must be one of {', '.join(QUERY_KINDS)}, got '{queries}'")

    def meeting_examples(record: Any, where: str, meeting: str) -> list[Example]:
        selected = _queries(record, where, queries)
        document = meeting_document(record, where, meeting, strip_markers=strip_markers)
        examples = []
        for kind, i, query in selected:
            doc = document
            if relevant_span_only and kind == "specific":
                spans = turn_spans(query.get("relevant_text_span", []), f"{where}: specific_query_list[{i}]")
                turns = sorted({t for start, end in spans for t in range(start, end + 1)})
                doc = meeting_document(record, where, meeting, turns, strip_markers=strip_markers)
                doc.id = f"{meeting}#{kind}-{i}"  # a different document from the whole meeting
            examples.append(
                Example(
                    id=f"{meeting}#{kind}-{i}",
                    document=doc,
                    references=[query["answer"].strip()],
                    instruction=query["query"].strip(),
                    metadata={"query_type": kind, "meeting": meeting},
                )
            )
        return examples

    yield from read_meetings(path, split, meeting_examples, skip_bad_lines, stats)
