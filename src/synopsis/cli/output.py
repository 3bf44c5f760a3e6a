"""What ``synopsis summarize`` writes, in one of four forms, on the screen or in a file alike.

The form follows ``--output-format``, or else the ``--output`` file's extension (:func:`output_form`):
``.json`` one JSON value (a summary's object, or an array of them when the run makes several), ``.jsonl``
one line per summary with the same fields, ``.md`` Markdown, anything else text. Where the output goes never
changes what it holds: the screen (:class:`Screen`) and a file (:class:`PredictionWriter`) are two sinks of
the same writers (:func:`record_writer`). Every record is :meth:`~synopsis.pipeline.Summary.record`
(``id``, ``prediction``, ``summary``, ``preface``, ``sections``, ``note``). Text and Markdown show document
files as blocks (``== id`` before each when there are several; by section each section's heading and summary
as soon as it is done, then the document summary); a corpus run's text is one prediction per line, its
sentences joined by a space (what ``synopsis evaluate`` reads, splitting them again for ROUGE-Lsum, as
Hugging Face's ``run_summarization.py`` does).

Other forms (JSON, Markdown, a document's text) are written whole: into a temporary file beside ``--output``
that is renamed over it when the run ends, so an interrupted or failed run leaves the old file as it was,
never an empty or cut one (issue 58). Forms written line by line (JSONL; a corpus run's text) are
resumable. A batch is written with one ``write`` while Ctrl-C and SIGTERM are held back, so an interrupted
run leaves only whole lines. ``resume=True`` keeps
what the file holds and reports which examples to skip: by id for JSONL, by count for plain lines. A last
line cut short by ``kill -9`` (or a full disk) is dropped with a warning first, so an interrupted run and its
resumed run write the same file as one uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from synopsis.cli.runtime import deferred_signals
from synopsis.errors import InputError, OutputError
from synopsis.io import output_error, whole_lines_to_resume

log = logging.getLogger("synopsis.cli")


def as_line(prediction: str) -> str:
    """A prediction on one line: its sentences (one per line in extractive summaries) joined by a space."""
    return " ".join(prediction.replace("\r", "\n").split("\n"))


#: What ``--output-format`` takes; without it, an ``--output`` file's extension decides (else ``text``).
FORMS = ("text", "markdown", "json", "jsonl")
_BY_SUFFIX = {".json": "json", ".jsonl": "jsonl", ".md": "markdown", ".markdown": "markdown"}


def output_form(output_format: str | None, output: Path | None) -> str:
    """The form of a run's output: ``--output-format`` when given (a flag the user sets wins), else the
    ``--output`` file's extension, else text."""
    if output_format is not None:
        if output_format not in FORMS:
            raise InputError(f"--output-format must be one of {', '.join(FORMS)}, got '{output_format}'")
        return output_format
    return _BY_SUFFIX.get(output.suffix.lower(), "text") if output is not None else "text"


def line_by_line(form: str, corpus: bool) -> bool:
    """Whether ``form`` writes one line per summary (so that ``--resume`` and a launch's parts work): JSONL,
    and a corpus run's text."""
    return form == "jsonl" or (form == "text" and corpus)


@dataclass(frozen=True)
class OutputTarget:
    """Where ``synopsis summarize`` writes and in what form, decided once from its flags
    (:meth:`from_flags`) and passed to what writes: ``path`` (``-o``; ``None``: the screen), ``form``
    (:data:`FORMS`), whether the run ``resume`` s what ``path`` holds, and whether it is a ``corpus`` run
    (whose text is one prediction per line)."""

    path: Path | None
    form: str = "text"
    resume: bool = False
    corpus: bool = False

    @classmethod
    def from_flags(
        cls, output: Path | None, output_format: str | None, resume: bool, corpus: bool
    ) -> OutputTarget:
        """``-o``, ``--output-format`` (it wins over the extension: :func:`output_form`), ``--resume``, and
        whether ``--corpus`` was given."""
        return cls(output, output_form(output_format, output), resume, corpus)

    @property
    def jsonl(self) -> bool:
        """One JSON object per line (resumed by id)."""
        return self.form == "jsonl"

    @property
    def json(self) -> bool:
        """A JSON form (JSON or JSONL): nothing but the records goes where it is written."""
        return self.form in ("json", "jsonl")

    @property
    def line_by_line(self) -> bool:
        """Written one line per summary (:func:`line_by_line`): resumable, and what a launch's parts hold."""
        return line_by_line(self.form, self.corpus)

    def check(self, processes: int = 1) -> None:
        """What the target allows a run of ``processes`` processes, before any model loads (one-line
        :class:`InputError` s): a launch writes one file line by line, and ``--resume`` continues one."""
        if processes > 1 and self.path is None:
            raise InputError(
                f"{processes} processes write one file: give --output (-o); to print summaries, run one "
                "process"
            )
        if processes > 1 and not self.line_by_line:
            raise InputError(
                f"{processes} processes write their parts line by line: --output of JSONL (or a corpus's "
                f"text), not {self.form}"
            )
        if self.resume and self.path is None:
            raise InputError("--resume continues a run that writes --output; give the same --output")
        if self.resume and not self.line_by_line:
            raise InputError(
                "--resume continues output written line by line (JSONL, or a corpus run's text); "
                f"{self.path} holds {self.form}, written whole: run again without --resume"
            )

    def sink(self) -> PredictionWriter | Screen:
        """The screen, or the file (kept and added to on ``--resume``; a form written whole goes to a
        temporary file renamed over ``path`` at the end)."""
        if self.path is None:
            return Screen()
        return PredictionWriter(self.path, resume=self.resume, jsonl=self.jsonl, whole=not self.line_by_line)

    def writer(self, labelled: bool, outline: bool = False) -> RecordWriter:
        """The writer of this target's form to its sink (:func:`record_writer`)."""
        return record_writer(self.form, self.sink(), labelled, self.corpus, outline)


def render_lines(ids: Sequence[str], predictions: Sequence[str | dict], jsonl: bool) -> list[str]:
    """The lines of a predictions file: records (:meth:`~synopsis.pipeline.Summary.record`, or a
    bare prediction) as JSON objects under their ids, or one prediction per line."""
    records = [p if isinstance(p, dict) else {"prediction": p} for p in predictions]
    if jsonl:
        return [
            json.dumps({"id": i, **{k: v for k, v in r.items() if k != "id"}}, ensure_ascii=False) + "\n"
            for i, r in zip(ids, records, strict=True)
        ]
    return [as_line(r["prediction"]) + "\n" for r in records]


def is_jsonl(path: Path) -> bool:
    """Whether a predictions file at ``path`` holds JSONL (by its name)."""
    return path.suffix.lower() == ".jsonl"


class PredictionWriter:
    """See the module docstring. ``written`` counts the predictions the file holds (kept and new); ``whole``:
    a form written whole, into a temporary file that :meth:`close` renames over ``path`` (and
    :meth:`abandon` removes, leaving ``path`` as it was)."""

    def __init__(
        self, path: Path, resume: bool = False, jsonl: bool | None = None, whole: bool = False
    ) -> None:
        self.path = path
        self.jsonl = is_jsonl(path) if jsonl is None else jsonl
        self.whole = whole
        self.done_ids: Counter[str] = Counter()
        self.done_lines = 0
        self._temporary: Path | None = None
        if resume and path.exists():
            self._recover()
        elif resume:
            log.info("%s does not exist yet: nothing to resume, starting from the first example", path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if whole and _renameable(path):
                self._fd: int | None = self._open_temporary()
            else:  # line by line, or a pipe or device (/dev/stdout), which cannot be replaced
                flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if resume else os.O_TRUNC)
                self._fd = os.open(path, flags, 0o666)
        except OSError as err:
            raise output_error(path, err) from None
        self.written = self.done_lines

    def _open_temporary(self) -> int:
        fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".partial")
        self._temporary = Path(name)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # the mode a new file gets, not mkstemp's 0600
        return fd

    def _recover(self) -> None:
        lines = whole_lines_to_resume(self.path)
        self.done_lines = len(lines)
        if not self.jsonl:
            return
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
                self.done_ids[str(record["id"])] += 1
            except (json.JSONDecodeError, KeyError, TypeError):
                raise OutputError(
                    f"{self.path}:{number}: not a line of predictions ({{'id', 'prediction'}}); "
                    "--resume continues a predictions file written by synopsis summarize"
                ) from None

    def skipped(self, ids: Sequence[str]) -> list[bool]:
        """Which of ``ids`` (the run's examples, in order) the file already holds."""
        if not self.jsonl:
            return [i < self.done_lines for i in range(len(ids))]
        remaining = Counter(self.done_ids)
        out = []
        for example_id in ids:
            out.append(remaining[example_id] > 0)
            remaining[example_id] -= 1
        return out

    def write(self, ids: Sequence[str], predictions: Sequence[str | dict]) -> None:
        """Append one batch as whole lines, in one write that a signal cannot cut."""
        self.append(render_lines(ids, predictions, self.jsonl))

    def append(self, lines: Sequence[str]) -> None:
        """Append ``lines`` (each ending in a newline) in one write that a signal cannot cut."""
        data = memoryview("".join(lines).encode("utf-8"))
        assert self._fd is not None, "write after close"
        with deferred_signals():
            try:
                start: int | None = os.lseek(self._fd, 0, os.SEEK_END)
            except OSError:  # a pipe
                start = None
            try:
                while data:
                    data = data[os.write(self._fd, data) :]
            except OSError as err:
                if start is not None:  # no half line left behind (a full disk, say)
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, start)
                raise output_error(self.path, err) from None
        self.written += len(lines)

    def close(self) -> None:
        """The file finished: synced, and a whole form's temporary file renamed over ``path``."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            except OSError:
                pass  # some special files (pipes, /dev/stdout) cannot be synced
            finally:
                os.close(fd)
        if self._temporary is not None:
            temporary, self._temporary = self._temporary, None
            try:
                os.replace(temporary, self.path)
            except OSError as err:
                temporary.unlink(missing_ok=True)
                raise output_error(self.path, err) from None

    def abandon(self) -> None:
        """The run stopped early: whole lines stay (line by line); a whole form's temporary file is removed
        and ``path`` keeps what it held."""
        if self._temporary is None:
            self.close()
            return
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        self._temporary.unlink(missing_ok=True)
        self._temporary = None


def _renameable(path: Path) -> bool:
    """Whether ``path`` is a regular file or absent (not a pipe, a device or a folder)."""
    try:
        return path.is_file() and not path.is_symlink() or not path.exists()
    except OSError:
        return False


#: Unicode's bidirectional controls (embeddings, overrides, isolates, marks): printed raw, U+202E turns
#: "\u202efdp.exe" into what reads as "exe.pdf" on a terminal (issue 58).
BIDI_CONTROLS = dict.fromkeys(
    [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)], None
)
_BIDI_ESCAPES = {code: f"\\u{code:04x}" for code in BIDI_CONTROLS}


def terminal_safe(text: str) -> str:
    """``text`` with every bidirectional control shown as its escape (``\\u202e``)."""
    return text.translate(_BIDI_ESCAPES)


def on_terminal() -> bool:
    """Whether standard output is a terminal (where a bidi control would reorder what is shown)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class Screen:
    """Standard output as a sink of the writers: what a file would hold, printed (nothing to resume); on a
    terminal, bidirectional controls are shown escaped (:func:`terminal_safe`)."""

    path: Path | None = None

    def __init__(self) -> None:
        self.written = 0
        self.terminal = on_terminal()

    def skipped(self, ids: Sequence[str]) -> list[bool]:
        return [False] * len(ids)

    def append(self, lines: Sequence[str]) -> None:
        text = "".join(lines)
        typer.echo(terminal_safe(text) if self.terminal else text, nl=False)
        self.written += len(lines)

    def close(self) -> None:
        pass

    def abandon(self) -> None:
        pass


class PartWriter(PredictionWriter):
    """One process's part file of a sharded run (:mod:`synopsis.sharding`): appended to, whole lines only,
    each record with the example's position in the input."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, resume=path.exists())  # the main process has already cut any half line

    def write_records(
        self, indices: Sequence[int], ids: Sequence[str], predictions: Sequence[str | dict]
    ) -> None:
        from synopsis.sharding import part_record

        self.append([part_record(i, d, p) for i, d, p in zip(indices, ids, predictions, strict=True)])


# ---------------------------------------------------------------------- the writers of records
class RecordWriter:
    """Writes the runner's summaries to a sink (:class:`Screen` or :class:`PredictionWriter`) in one form;
    :meth:`section` and :meth:`summary` are the runner's hooks (``RunHooks``). This base writes one line per
    summary (JSONL, or a corpus run's text)."""

    def __init__(self, sink: Any, labelled: bool, jsonl: bool = False) -> None:
        self.sink = sink
        self.labelled = labelled  #: several summaries in the run: each is named
        self.jsonl = jsonl
        self.summaries = 0
        self.empty = 0

    def section(self, index: int, instruction: str | None, node: Any) -> None:
        """A section's summary, as soon as it is done (by section)."""

    def summary(self, done: Any) -> None:
        self.summaries += 1
        self.empty += not done.prediction.strip()
        self._write(done)

    def _write(self, done: Any) -> None:
        record = done.record()
        self.sink.append(render_lines([record["id"]], [record], self.jsonl))

    def close(self) -> None:
        self.sink.close()

    def abandon(self) -> None:
        """The run stopped early (Ctrl-C, SIGTERM, an error): what the sink keeps is :meth:`PredictionWriter.
        abandon`'s."""
        self.sink.abandon()


class JsonWriter(RecordWriter):
    """One JSON value: the summary's object, or an array of them when the run makes several."""

    def __init__(self, sink: Any, labelled: bool) -> None:
        super().__init__(sink, labelled)
        self.records: list[dict[str, Any]] = []

    def _write(self, done: Any) -> None:
        self.records.append(done.record())

    def close(self) -> None:
        if self.records:
            value = self.records if self.labelled or len(self.records) > 1 else self.records[0]
            self.sink.append([json.dumps(value, ensure_ascii=False) + "\n"])
        super().close()

    def abandon(self) -> None:
        if self.sink.path is None:  # on the screen, the summaries made so far, as before
            self.close()
        else:
            super().abandon()


class BlockWriter(RecordWriter):
    """Text or Markdown blocks: ``== id`` before each summary when there are several; by section each
    section's heading and summary as soon as it is done, then the document summary with its word count;
    ``outline``: a generated question-summary hierarchy as an indented outline."""

    def __init__(self, sink: Any, labelled: bool, markdown: bool, outline: bool = False) -> None:
        super().__init__(sink, labelled)
        self.markdown, self.outline = markdown, outline
        self.started: set[int] = set()
        self.headers = 0
        self.labels: Sequence[str | None] = ()  #: the ids of the batch being summarized, by position
        #: per summary being written, the headings without a summary of their own still waiting for one
        #: below them, as ``(depth, lines)``: a heading is printed only over something (a parent section
        #: comes before its subsections, whose summaries may all turn out empty)
        self.pending: dict[int, list[tuple[int, list[str]]]] = {}

    def _header(self, label: str | None, index: int) -> None:
        if index in self.started:
            return
        self.started.add(index)
        if self.labelled:
            self.sink.append([f"{'' if self.headers == 0 else chr(10)}== {label}\n"])
        self.headers += 1

    def section(self, index: int, instruction: str | None, node: Any) -> None:
        depth = len(node.path)
        waiting = [(d, lines) for d, lines in self.pending.get(index, []) if d < depth]
        if not node.summary:
            self.pending[index] = [*waiting, (depth, section_lines(node, self.markdown, heading_only=True))]
            return
        self.pending[index] = []
        self._header(self.labels[index] if index < len(self.labels) else None, index)
        headings = [line for _, lines in waiting for line in lines]
        self.sink.append(headings + section_lines(node, self.markdown))

    def _write(self, done: Any) -> None:
        label = done.record()["id"]
        self._header(label, done.index)
        self.started.discard(done.index)  # the next item may take this index again
        self.pending.pop(done.index, None)
        if done.by == "section":
            self.sink.append(document_summary_lines(done.result, self.markdown))
            return
        prediction = as_outline(done.prediction, label) if self.outline else done.prediction
        self.sink.append([*title_lines(done.result, self.markdown), prediction + "\n"])


def record_writer(form: str, sink: Any, labelled: bool, corpus: bool, outline: bool = False) -> RecordWriter:
    """The writer of ``form`` (:data:`FORMS`) to ``sink``."""
    if form == "json":
        return JsonWriter(sink, labelled)
    if line_by_line(form, corpus):
        return RecordWriter(sink, labelled, form == "jsonl")
    return BlockWriter(sink, labelled, form == "markdown", outline)


def section_lines(section: Any, markdown: bool, heading_only: bool = False) -> list[str]:
    """A section's heading (``#`` by depth; none for the preface without a title) and summary, or only its
    heading (``heading_only``: a section whose text is all in its subsections)."""
    lines = []
    if section.path or section.heading is not None:
        heading = section.heading if section.heading is not None else "(untitled)"
        lines.append(f"{'#' * max(1, len(section.path))} {heading}\n")
    if heading_only:
        return [*lines, "\n"]
    bullet = "- " if markdown else ""
    lines += [f"{bullet}{sentence.text}\n" for sentence in section.summary]
    return [*lines, "\n"]


def document_summary_lines(result: Any, markdown: bool) -> list[str]:
    """A summary by section's document summary headed by what the document is called (its ``title``, not
    one of its sentences) and its word count (its note goes once to stderr, as the library logs it, and into
    the JSON)."""
    words = sum(s.words for s in result.summary)
    return _summary_heading(result, markdown, f" ({words} words)") + [f"{s.text}\n" for s in result.summary]


def title_lines(result: Any, markdown: bool) -> list[str]:
    """By document: the summary's heading when the document has a ``title`` (as by section, without the
    word count), else nothing: an untitled document's summary is printed alone, as it always was."""
    return _summary_heading(result, markdown, "") if getattr(result, "title", None) else []


def _summary_heading(result: Any, markdown: bool, count: str) -> list[str]:
    title = getattr(result, "title", None)
    named = f' of "{title}"' if title else ""
    return [f"**Summary{named}**{count}\n" if markdown else f"== summary{named}{count}\n"]


def as_outline(prediction: str, doc_id: str) -> str:
    """A generated hierarchy as an outline; what could not be parsed is said in one warning line."""
    from synopsis.qs import parse_lenient, render_outline

    parsed = parse_lenient(prediction)
    if parsed.problems:
        log.warning(
            "%s: malformed generated hierarchy (%d problem(s), %d pair(s) dropped); showing what parsed",
            doc_id,
            len(parsed.problems),
            parsed.dropped,
        )
    return render_outline(parsed.tree)
