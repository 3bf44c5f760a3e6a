"""The loops of ``synopsis summarize``: batch by batch, resumable, and split across the processes of a launch.

A :class:`Job` is what a run works on: the request's items (one per document and instruction, in output
order) and the library's runner (:class:`~synopsis.pipeline.SummarizeRunner`), which summarizes a
batch of them and reports each summary, and by section each section, to a writer
(:mod:`synopsis.cli.output`). :func:`run_in_batches` is the one loop of a one-process run (what is left to do,
progress, Ctrl-C account, the writer closed); :func:`run_sharded` cuts the same batches among the processes
of ``torchrun``/``accelerate launch`` into part files and merges them in input order
(:mod:`synopsis.sharding`), so that the output is the same byte for byte.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import typer

from synopsis.cli.output import OutputTarget
from synopsis.cli.runtime import reporting_interrupts, resume_command
from synopsis.document import Document
from synopsis.errors import CheckpointError, SynopsisError
from synopsis.pipeline import (
    ParsedDocument,
    RequestItem,
    RunHooks,
    SummarizeRequest,
    SummarizeRunner,
    Summary,
)
from synopsis.progress import ProgressReporter, progress_enabled
from synopsis.sharding import Shard, part_files

log = logging.getLogger("synopsis.cli")


@dataclass
class Job:
    """One run's work: the request and the runner of its summarizer, ``batch_size`` items per batch."""

    summarizer: Any
    request: SummarizeRequest
    batch_size: int
    #: a neural model's name (its path): an all-empty first batch from it means broken weights; None for
    #: an extractive method
    model: str | None = None
    corpus: bool = False
    runner: SummarizeRunner = field(init=False)
    _checked: bool = False

    def __post_init__(self) -> None:
        self.runner = SummarizeRunner.for_request(
            self.summarizer, self.request, batch_size=self.batch_size, summarize_documents=self._summarize
        )

    @property
    def items(self) -> Sequence[RequestItem]:
        return self.request.items

    @property
    def ids(self) -> list[str]:
        return [str(item.id) for item in self.request.items]

    def run(self, rows: list[int], hooks: RunHooks) -> list[Summary]:
        """The summaries of the items at ``rows`` (one batch), reported to ``hooks`` as they are made."""
        return self.runner.run_items([self.request.items[i] for i in rows], hooks)

    def _summarize(self, documents: list[Any], instructions: Any, references: Any = None) -> list[str]:
        # the runner's summarizer (an extractive summary's --max-words applied) and decoding options
        runner = self.runner
        made = runner.summarizer.summarize(documents, instructions, references, decoding=runner.decoding)
        return self.check_not_blank(made)

    def check_not_blank(self, predictions: list[str]) -> list[str]:
        """An all-empty first batch from a model means untrained or corrupt weights: stop the run before it
        writes a file of blanks."""
        first, self._checked = not self._checked, True
        if first and self.model is not None and predictions and not any(p.strip() for p in predictions):
            raise CheckpointError(
                f"{self.model}: produced empty summaries for all {len(predictions)} document(s) of the first "
                "batch; its weights look untrained or corrupt"
            )
        return predictions


def run_in_batches(job: Job, writer: Any) -> None:
    """A one-process run: every item ``writer`` (:func:`synopsis.cli.output.record_writer`) does not hold
    yet, a batch at a time, through the runner, to the writer."""
    hooks = RunHooks(section=writer.section, summary=writer.summary)
    # A long document's windows (an extractive method's: its sections) as n/N with the rate and ETA.
    unit = getattr(job.summarizer, "progress_unit", "windows")
    sectioned: list[Document] = []  # this batch's documents that go by section
    with ProgressReporter("summarizing by section", None, unit, enabled=False if job.corpus else None) as bar:

        def advance(done: int, total: int) -> None:
            if total != bar.total or done < bar.completed:  # a new run (the next document or instruction)
                bar.description, bar.unit = counted(sectioned, total, unit)
                bar.update(total=total, completed=0)
            bar.advance(done - bar.completed)

        def parsed(item: ParsedDocument, by_section: bool) -> None:
            if by_section:
                sectioned.append(item.document)

        def summarize_rows(rows: list[int], _: int) -> None:
            writer.labels = [job.items[i].id for i in rows]
            sectioned.clear()
            job.run(rows, RunHooks(parsed, hooks.section, hooks.summary, advance))

        done = in_batches(job.ids, writer, job.batch_size, "summarizing", summarize_rows)
    if done is None:
        return
    if writer.empty:
        log.warning("%d of %d summaries are empty", writer.empty, done)
    if writer.sink.path is not None:
        log.info("wrote %d summaries to %s", writer.summaries, writer.sink.path)


def counted(documents: Sequence[Document], total: int, unit: str) -> tuple[str, str]:
    """The bar's description and unit for a by-section run of ``total`` steps. An extractive method's steps
    are one document's sections with text, the opening (its text before the first heading) one of them: the
    bar says so, so that its count agrees with the note's ("12 sections": the headed ones)."""
    plain = ("summarizing by section", unit)
    if unit != "sections" or len(documents) != 1:
        return plain
    document = documents[0]
    headed = sum(1 for s in document.sections if s.heading)
    if total == headed + 1 and document.root.paragraphs and document.root.heading is None:
        return f"summarizing the opening and {headed:,} sections", "parts"
    return plain


def in_batches(
    ids: list[str],
    writer: Any,
    batch_size: int,
    label: str,
    summarize_rows: Callable[[list[int], int], None],
) -> int | None:
    """The one loop of a one-process run: the documents ``writer`` (a record writer of
    :mod:`synopsis.cli.output`) does not hold yet, ``batch_size`` at a time, to ``summarize_rows(rows,
    done_so_far)``, under one progress bar, with Ctrl-C saying what was saved; ``writer`` is closed at the
    end. Returns how many documents were summarized, or None when the output already held them all."""
    sink = writer.sink
    todo = [i for i, skip in enumerate(sink.skipped(ids)) if not skip]
    if len(todo) < len(ids):
        log.info("resuming: %s holds %d of %d predictions", sink.path, len(ids) - len(todo), len(ids))
    if not todo:
        writer.close()
        log.info("nothing left to do: %s already holds all %d predictions", sink.path, len(ids))
        return None
    done = 0

    def account() -> str:
        if sink.path is None:
            return f"stopped after {done} of {len(todo)} documents"
        if getattr(sink, "whole", False):  # written whole at the end: nothing of this run is in the file
            return (
                f"stopped after {done} of {len(todo)} documents; {sink.path} is unchanged (this form is "
                "written whole when the run ends): run the command again"
            )
        return (
            f"{sink.written} of {len(ids)} predictions are in {sink.path} (whole lines); "
            f"resume with: {resume_command()}"
        )

    shown = progress_enabled() and len(todo) > 1
    try:
        with (
            reporting_interrupts(account),
            ProgressReporter(
                label, len(ids), "documents", completed=len(ids) - len(todo), enabled=shown
            ) as bar,
        ):
            for start in range(0, len(todo), batch_size):
                rows = todo[start : start + batch_size]
                summarize_rows(rows, done)
                done += len(rows)
                bar.advance(len(rows))
    except BaseException:
        writer.abandon()  # whole lines stay; a whole form's file keeps what it held
        raise
    writer.close()
    return done


def run_sharded(job: Job, target: OutputTarget, shard: Shard) -> None:
    """A corpus run split across the processes of a launch (or a one-process ``--resume`` of one), into
    ``target``'s file (written line by line).

    The main process works out what is left (:func:`_plan`); the work is cut into the batches a
    one-process run would make (``--batch-size`` examples by position in the input), and each process
    summarizes one contiguous block of them into its part file (:mod:`synopsis.sharding`). Every
    document is so decoded in the same batch as in a one-process run, and the merged file is the same byte
    for byte. When all are done, the main process writes ``output`` in input order (atomically) and
    deletes the parts; an interrupted run keeps them, and ``--resume`` with any number of processes
    continues from the output and the parts together.
    """
    from synopsis.cli.output import PartWriter
    from synopsis.sharding import count_lines, part_path

    ids, output = job.ids, target.path
    assert output is not None  # a launch, or a --resume, writes a file (OutputTarget.check)
    plan: Any = None
    if shard.is_main:
        try:
            plan = _plan(ids, target, shard)
        except SynopsisError as err:
            plan = err
    plan = shard.broadcast(plan)
    if isinstance(plan, SynopsisError):
        if shard.is_main:
            raise plan
        raise typer.Exit(2)
    todo, kept = plan
    batches: list[list[int]] = []
    for i in todo:  # the batches of a one-process run: by position in the input
        if batches and batches[-1][0] // job.batch_size == i // job.batch_size:
            batches[-1].append(i)
        else:
            batches.append([i])
    block = shard.block(len(batches))
    my_batches = batches[block.start : block.stop]
    mine = [i for batch in my_batches for i in batch]
    part = part_path(output, shard.rank, shard.world)
    writer = PartWriter(part) if mine else None
    done, empty = 0, 0

    def account() -> str:
        if not shard.is_main:
            return f"{shard.describe()}: {done} of its {len(mine)} predictions are in {part}"
        parts = part_files(output)
        saved = count_lines([output]) + count_lines(parts)
        where = f" and {len(parts)} part file(s) {output}.part-*" if parts else ""
        return (
            f"{saved} of {len(ids)} predictions are saved in {output}{where} (kept for --resume); resume "
            f"with the same launch, or any other number of processes: {resume_command()}"
        )

    shown = progress_enabled() and shard.is_main and len(mine) > 1
    description = f"summarizing ({shard.describe()})" if shard.distributed else "summarizing"
    try:
        with (
            reporting_interrupts(account, every_process=True),
            ProgressReporter(description, len(mine), "documents", enabled=shown) as progress,
        ):
            for rows in my_batches:
                summaries = job.run(rows, RunHooks())
                empty += sum(not s.prediction.strip() for s in summaries)
                assert writer is not None
                writer.write_records(rows, [ids[i] for i in rows], [s.record() for s in summaries])
                done += len(rows)
                progress.advance(len(rows))
    finally:
        if writer is not None:
            writer.close()
    with reporting_interrupts(account):
        counts = shard.gather([(done, empty)])
        if not shard.is_main or not _merge(ids, target, kept, todo):
            return
    made, blanks = sum(c[0] for c in counts), sum(c[1] for c in counts)
    if blanks:
        log.warning("%d of %d summaries are empty", blanks, made)
    processes = f" ({shard.world} processes)" if shard.distributed else ""
    log.info("wrote %d summaries to %s%s", len(ids), output, processes)


def _plan(ids: list[str], target: OutputTarget, shard: Shard) -> tuple[list[int], list[bool]]:
    """(positions left to summarize, positions the output holds already): from the output so far (kept as it
    is, as a one-process ``--resume`` does) and the part files of earlier runs, whatever their size."""
    from synopsis.sharding import read_part

    output = target.path
    assert output is not None
    writer = target.sink()  # a fresh run empties the output; --resume keeps it
    try:
        kept = writer.skipped(ids)
    finally:
        writer.close()
    in_parts: set[int] = set()
    for path in part_files(output):  # none in a fresh run: the command removed them
        in_parts.update(read_part(path, ids))
    todo = [i for i in range(len(ids)) if not kept[i] and i not in in_parts]
    if len(todo) < len(ids):
        log.info(
            "resuming: %s holds %d of %d predictions, its part files %d more; %d left for %d process(es)",
            output,
            sum(kept),
            len(ids),
            len(ids) - len(todo) - sum(kept),
            len(todo),
            shard.world,
        )
    return todo, kept


def _merge(ids: list[str], target: OutputTarget, kept: list[bool], todo: list[int]) -> bool:
    """Main process: the output := what it held, then every other prediction (from the part files) in input
    order, written atomically; then the parts are deleted. False if there was nothing to add."""
    from synopsis.cli.output import render_lines
    from synopsis.errors import OutputError
    from synopsis.sharding import read_part, remove_parts, write_in_order

    output = target.path
    assert output is not None

    predictions: dict[int, dict[str, Any]] = {}
    for path in part_files(output):
        predictions.update(read_part(path, ids))
    missing = [i for i in range(len(ids)) if not kept[i] and i not in predictions]
    if missing:
        raise OutputError(
            f"{output}: the part files lack {len(missing)} prediction(s) (the first: '{ids[missing[0]]}'): "
            "on several machines, --output must be on a filesystem they share; --resume makes what is missing"
        )
    if not todo and not predictions:
        log.info("nothing left to do: %s already holds all %d predictions", output, len(ids))
        return False
    rest = [i for i in range(len(ids)) if not kept[i]]
    head = output.read_bytes()
    lines = render_lines([ids[i] for i in rest], [predictions[i] for i in rest], target.jsonl)
    write_in_order(output, head, lines)
    remove_parts(output)
    return True
