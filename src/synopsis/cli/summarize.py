"""``synopsis summarize``: one document to stdout, or a whole corpus to a predictions file, as it goes.

A corpus run writes each batch's predictions as soon as the batch is done (whole lines, flushed; see
:mod:`synopsis.cli.output`), shows a progress bar with rate and ETA (plain lines when stderr is not a
terminal), and ``--resume`` continues an interrupted run where it stopped.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from synopsis.cli.models import resolve_model_option, revision_option
from synopsis.cli.options import (
    backend_option,
    compute_type_option,
    count_option,
    decoding_option,
    device_option,
    inference_dtype_option,
    ranged,
    set_torch_threads,
    switch,
    threads_option,
)
from synopsis.cli.provenance import check_resume, run_record
from synopsis.cli.runtime import refuse_to_overwrite_inputs
from synopsis.cli.summarize_corpus import Job, in_batches, run_sharded
from synopsis.config import POSITIVE, DecodingOptions
from synopsis.errors import InputError
from synopsis.io import missing_path
from synopsis.progress import ProgressReporter, track
from synopsis.sharding import Shard, part_files, remove_parts
from synopsis.summarizers.base import Summarizer

log = logging.getLogger("synopsis.cli")

NEURAL_BATCH_SIZE = 16


def summarize(
    inputs: list[Path] = typer.Argument(
        ..., help="Document file(s) ('-': standard input, its format sniffed), or one corpus with --corpus."
    ),
    method: str | None = typer.Option(
        None,
        "--method",
        help="Without it (the default): the bundled pointer-generator for a paper abstract, for anything "
        "else salient sentences, with a note saying so. pointer-generator: the bundled model (or --model) "
        "on any text. seq2seq: a BART, T5, LED or HIBRIDS checkpoint (--model). salient: the most central "
        "informative sentences per section, and a document summary led by what the document is. "
        "centrality: the most central sentences. lead-K: the first K sentences (any K >= 1). oracle: the "
        "greedy ROUGE oracle (needs references). With --model and no --method, its config.json decides.",
    ),
    model: Path | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Model directory (a pointer-generator or a Hugging Face checkpoint), or a Hugging Face hub id "
        "(org/name, e.g. facebook/bart-large-cnn: from the hub cache, downloaded when online).",
    ),
    revision: str | None = revision_option(),
    instruction: list[str] | None = typer.Option(
        None,
        "--instruction",
        "-i",
        help="Instruction or query: salient and the default rank sentences by relevance to it with "
        "centrality; also centrality, T5/InstructSum. Repeat it for one summary per instruction.",
    ),
    no_cache: bool = switch(
        "--no-cache", "InstructSum: encode every prompt in full (same block mask; for checks)."
    ),
    corpus: str | None = typer.Option(
        None,
        "--corpus",
        help="Read INPUT as a corpus (synopsis, scitldr, qmsum, cnn, jsonl, ...); summarize every example.",
    ),
    split: str | None = typer.Option(None, "--split", help="Corpus split, where the corpus has them."),
    input_format: str = typer.Option(
        "auto", "--format", help="Document format (auto, text, markdown, json, ...)."
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        help="Write predictions here as they are made: x.jsonl ({id, prediction} lines) or any other name "
        "for one prediction per line (sentences joined by a space).",
    ),
    resume: bool = switch(
        "--resume",
        "Continue an interrupted run: keep what --output holds and skip those examples "
        "(by id for .jsonl, by count for one-per-line files).",
    ),
    k: int = count_option(
        3, "--k", help="Sentences to extract per section (salient and the default's, centrality)."
    ),
    num_beams: int | None = decoding_option("num_beams"),
    min_length: int | None = decoding_option("min_length"),
    max_length: int | None = decoding_option("max_length"),
    length_penalty: float | None = decoding_option("length_penalty"),
    no_repeat_ngram_size: int | None = decoding_option("no_repeat_ngram_size"),
    max_source_length: int | None = count_option(
        None,
        "--max-source-length",
        help="Truncate model inputs (pointer-generator: words; Hugging Face models: tokens).",
    ),
    batch_size: int | None = count_option(
        None,
        "--batch-size",
        help=f"Documents per batch (default: {NEURAL_BATCH_SIZE} for neural models, 1 for extractive "
        "methods, so that each summary is written as soon as it is made).",
    ),
    max_input_mb: float = ranged(
        20.0, "--max-input-mb", allowed=POSITIVE, help="Refuse document files larger than this."
    ),
    skip_bad_lines: bool = switch("--skip-bad-lines", "Skip malformed JSONL lines (counted)."),
    outline: bool = switch(
        "--outline",
        "Show each summary, a question-summary hierarchy ([L↓]/[L-]/[L↑]), as an indented outline.",
    ),
    by: str = typer.Option(
        "auto",
        "--by",
        help="document: one summary of what the model reads; section: a summary of every section (each cut "
        "into windows the model reads whole), with a document summary of at most --max-words and the "
        "sources of every sentence; auto: by section when a document is longer than the model's input "
        "(corpus runs: by document).",
    ),
    max_words: int = count_option(150, "--max-words", help="By section: longest document summary, in words."),
    output_format: str = typer.Option(
        "text",
        "--output-format",
        help="stdout: text or markdown (by section: the outline of section summaries, then the document "
        "summary), or json (one object per document: id, prediction, summary and sections with sources).",
    ),
    threads: int | None = threads_option(),
    device: str = device_option(),
    dtype: str | None = inference_dtype_option(),
    backend: str = backend_option(),
    compute_type: str | None = compute_type_option(),
    text_column: str | None = typer.Option(None, "--text-column", help="--corpus jsonl/csv/hf: the text."),
    summary_column: str | None = typer.Option(
        None, "--summary-column", help="--corpus jsonl/csv/hf: the reference (for the oracle)."
    ),
    id_column: str | None = typer.Option(None, "--id-column", help="--corpus jsonl/csv/hf: example ids."),
) -> None:
    """Summarize documents. Without --output, summaries go to stdout, one block per document.

    Under torchrun or accelerate launch, the processes share the documents and the main one writes
    --output, the same file as one process would (see docs/distributed.md)."""
    from synopsis.cli.launch import errors_from_main_only, launched

    with launched() as shard:
        with errors_from_main_only(shard):
            _check_by(by, output_format, method, outline, corpus, shard)
            decoding = DecodingOptions.from_mapping(
                dict(num_beams=num_beams, min_length=min_length, max_length=max_length,
                     length_penalty=length_penalty, no_repeat_ngram_size=no_repeat_ngram_size)
            )  # fmt: skip
            model = resolve_model_option(model, revision, json_output=output_format == "json")
            spec = ModelSpec(
                method, model, k, max_source_length, not no_cache, dtype, threads, decoding,
                process_device(device, shard), backend, compute_type,
            )  # fmt: skip
            run = RunSpec(
                inputs, corpus, split, input_format, list(instruction or []), max_input_mb, skip_bad_lines,
                _columns(text_column, summary_column, id_column), output, resume, batch_size,
            )  # fmt: skip
            job = _prepare(shard, run, spec)
            if output is not None:  # --resume continues only an output of the same options and input
                record = run_record(spec, by, max_words, run.instructions)
                check_resume(output, resume, record, job.ids, write=shard.is_main)
        if output is None and corpus is None:  # document files to stdout: the library's runner, file by file
            _print_files(job, by, max_words, output_format, outline)
            return
        if _by_section(by, job, corpus):
            _run_by_section(job, output, resume, max_words, output_format)
            return
        if output is None and output_format == "json":
            _print_corpus_json(job)
            return
        if output is not None and (shard.distributed or (resume and part_files(output))):
            run_sharded(job, output, resume, shard)
        else:
            _run(job, output, resume, outline)


@dataclass(frozen=True)
class ModelSpec:
    """Which summarizer to load, and how (``synopsis summarize``'s model options)."""

    method: str | None
    model: Path | None
    k: int
    max_source_length: int | None
    instruction_cache: bool
    dtype: str | None
    threads: int | None
    decoding: DecodingOptions
    device: Any = "auto"  #: a ``torch.device`` (:func:`process_device`), or ``auto``
    backend: str = "torch"  #: ``--backend``: torch (generate()) or ctranslate2
    compute_type: str | None = None  #: ``--compute-type`` of the ctranslate2 backend

    def load(self) -> Summarizer:
        from synopsis.summarizers import load_summarizer

        set_torch_threads(self.threads)
        return load_summarizer(
            self.method, self.model, k=self.k, max_source_length=self.max_source_length,
            instruction_cache=self.instruction_cache, dtype=self.dtype, decoding=self.decoding,
            device=self.device, backend=self.backend, compute_type=self.compute_type,
        )  # fmt: skip


def process_device(device: str, shard: Shard) -> Any:
    """The ``torch.device`` this process's model computes on, checked before any input is read (a one-line
    :class:`InputError`, exit 2). Under a launch of N processes each takes its own GPU (``auto`` and
    ``cuda`` mean the launcher's GPU of this process); ``cuda:N`` would put every process on one GPU and
    is refused there."""
    from synopsis.sharding import resolve_device

    if shard.distributed and shard.device is not None and device.strip().lower() in ("auto", "cuda"):
        return shard.device
    chosen = resolve_device(device)
    if shard.distributed and chosen.type == "cuda" and ":" in device:
        raise InputError(
            f"--device {device}: {shard.world} processes were launched, one GPU each; use --device auto or "
            "cuda (each process its own GPU), or cpu"
        )
    return chosen


@dataclass(frozen=True)
class RunSpec:
    """What to read and where to write (``synopsis summarize``'s input and output options)."""

    inputs: list[Path]
    corpus: str | None
    split: str | None
    input_format: str
    instructions: list[str]
    max_input_mb: float
    skip_bad_lines: bool
    columns: dict[str, str]
    output: Path | None
    resume: bool
    batch_size: int | None


def _columns(text: str | None, summary: str | None, example_id: str | None) -> dict[str, str]:
    given = {"text_column": text, "summary_column": summary, "id_column": example_id}
    return {key: value for key, value in given.items() if value is not None}


OUTPUT_FORMATS = ("text", "markdown", "json")


def _check_by(
    by: str, output_format: str, method: str | None, outline: bool, corpus: str | None, shard: Shard
) -> None:
    """Options that make no sense together (by section) are one-line errors, before any model loads."""
    from synopsis.summarizers.runner import BY

    if by not in BY:
        raise InputError(f"--by must be one of {', '.join(BY)}, got '{by}'")
    if output_format not in OUTPUT_FORMATS:
        raise InputError(f"--output-format must be one of {', '.join(OUTPUT_FORMATS)}, got '{output_format}'")
    if by == "section" and method == "oracle":
        raise InputError("--method oracle needs a reference per document, not per section: use --by document")
    if by == "section" and outline:
        raise InputError("--outline shows a generated question-summary hierarchy: use --by document with it")
    if by == "section" and shard.distributed:
        raise InputError(f"--by section runs in one process ({shard.world} were launched)")


def _by_section(by: str, job: Job, corpus: str | None) -> bool:
    """Whether a run that writes --output (or a corpus) goes by section: ``auto`` when one of the files is
    longer than the model's input (corpus runs: by document)."""
    from synopsis.summarizers.runner import decide_by_section

    if by != "auto" or corpus is not None:
        return by == "section"
    seen: set[int] = set()
    for document in job.documents:  # one per (file, instruction): each file once
        if id(document) not in seen and decide_by_section(by, job.summarizer, document):
            return True
        seen.add(id(document))
    return False


def _print_files(job: Job, by: str, max_words: int, output_format: str, outline: bool) -> None:
    """Each document file through :class:`~synopsis.summarizers.runner.SummarizeRunner` (read once, ``by``
    decided once per file, one summary per --instruction), printed as it is made: text or markdown (by
    section: each section as soon as it is done, then the document summary), or one JSON object per
    summary in the one schema."""
    from synopsis.summarizers.runner import SummarizeRunner

    runner = SummarizeRunner(
        job.summarizer, by=by, max_words=max_words, batch_size=job.batch_size,
        summarize_documents=lambda documents, instructions: job.check_not_blank(
            job.summarizer.summarize(documents, instructions)
        ),
    )  # fmt: skip
    instructions = [i for i in dict.fromkeys(job.instructions) if i is not None]
    printer = _FilePrinter(len(job.parsed) > 1 or len(instructions) > 1, len(instructions) > 1, output_format)
    for path, parsed in job.parsed.items():
        printer.path = path
        # A long document's windows (an extractive method's: its sections) as n/N with the rate and ETA.
        unit = getattr(job.summarizer, "progress_unit", "windows")
        with ProgressReporter("summarizing by section", None, unit) as progress:

            def advance(done: int, total: int, progress: ProgressReporter = progress) -> None:
                if total != progress.total or done < progress.completed:  # a new run (the next instruction)
                    progress.update(total=total, completed=0)
                progress.advance(done - progress.completed)

            runner.run(parsed, instructions, printer.hooks(advance, outline))


class _FilePrinter:
    """The runner's hooks for one file after another on stdout, ``== label`` before each summary when
    there are several (files or instructions)."""

    def __init__(self, labelled: bool, per_instruction: bool, output_format: str) -> None:
        self.labelled, self.per_instruction, self.output_format = labelled, per_instruction, output_format
        self.path = Path()
        self.printed = 0
        self.sectioned = False

    def label(self, instruction: str | None) -> str:
        return f"{self.path} | {instruction}" if self.per_instruction else str(self.path)

    def header(self, instruction: str | None) -> None:
        if self.labelled and self.output_format != "json":
            typer.echo(f"{'' if self.printed == 0 else chr(10)}== {self.label(instruction)}")
        self.printed += 1

    def hooks(self, progress: Any, outline: bool) -> Any:
        from synopsis.summarizers.runner import RunHooks

        text = self.output_format != "json"
        started: set[int] = set()

        def parsed(_: Any, by_section: bool) -> None:
            self.sectioned = by_section

        def section(index: int, instruction: str | None, node: Any) -> None:
            if index not in started:  # by section, the label comes before the first section
                started.add(index)
                self.header(instruction)
            if text:
                _print_section(node, self.output_format)

        def summary(done: Any) -> None:
            if not text:
                record = {**done.to_dict(), "id": self.label(done.instruction)}
                typer.echo(json.dumps(record, ensure_ascii=False))
            elif self.sectioned:
                if done.index not in started:
                    self.header(done.instruction)
                _print_document_summary(done.result, self.output_format)
            else:
                self.header(done.instruction)
                prediction = done.prediction
                typer.echo(_as_outline(prediction, self.label(done.instruction)) if outline else prediction)

        return RunHooks(parsed=parsed, section=section, summary=summary, progress=progress)


def _run_by_section(job: Job, output: Path | None, resume: bool, max_words: int, output_format: str) -> None:
    """Summaries by section of a corpus to stdout (JSON lines, or text), or of files or a corpus to
    --output (JSONL: one object per line in the schema of ``--output-format json``), batch by batch."""
    from synopsis.cli.output import PredictionWriter
    offsets = [job.offsets.get(id(d)) for d in job.documents]
    writer = PredictionWriter(output, resume=resume) if output is not None else None

    def summarize_rows(rows: list[int], _: int) -> None:
        results = job.summarizer.summarize_by_section(
            [job.documents[i] for i in rows], [job.instructions[i] for i in rows],
            max_words=max_words, batch_size=job.batch_size, offsets=[offsets[i] for i in rows],
        )  # fmt: skip
        if writer is not None:
            writer.write([job.ids[i] for i in rows], [r.to_dict() for r in results])
            return
        for i, result in zip(rows, results, strict=True):
            if output_format == "json":
                typer.echo(json.dumps({**result.to_dict(), "id": job.ids[i]}, ensure_ascii=False))
            else:
                typer.echo(f"{'' if i == 0 else chr(10)}== {job.ids[i]}")
                for section in result.walk():
                    if not section.skipped and (section.summary or section.path):
                        _print_section(section, output_format)
                _print_document_summary(result, output_format)

    in_batches(job.ids, writer, job.batch_size, "summarizing by section", summarize_rows)
    if writer is not None:
        log.info("wrote %d summaries by section to %s", writer.written, output)


def _print_section(section: Any, output_format: str) -> None:
    """A section's heading (``#`` by depth) and summary, as soon as it is done; nothing for a section
    without a summary or subsections to head (a heading over no text, or over code only)."""
    if not section.summary and not any(not child.skipped for child in section.sections):
        return
    if section.path or section.heading is not None:
        heading = section.heading if section.heading is not None else "(untitled)"
        typer.echo(f"{'#' * max(1, len(section.path))} {heading}")
    bullet = "- " if output_format == "markdown" else ""
    for sentence in section.summary:
        typer.echo(f"{bullet}{sentence.text}")
    typer.echo("")


def _print_document_summary(result: Any, output_format: str) -> None:
    words = sum(s.words for s in result.summary)
    typer.echo(
        f"**Summary** ({words} words)" if output_format == "markdown" else f"== summary ({words} words)"
    )
    for sentence in result.summary:
        typer.echo(sentence.text)


def _print_corpus_json(job: Job) -> None:
    """A corpus by document to stdout, one object per example in the one JSON schema (no offsets: a corpus
    reader rebuilds the text)."""
    from synopsis.summarizers.runner import ParsedDocument, cited_summary

    for start in range(0, len(job.ids), job.batch_size):
        rows = list(range(start, min(len(job.ids), start + job.batch_size)))
        for i, prediction in zip(rows, job.summarize(rows), strict=True):
            document = job.documents[i]
            (note,) = job.summarizer.notes([document])
            result = cited_summary(ParsedDocument(document, "corpus", None), prediction, note)
            record = {**result.to_dict(), "id": job.ids[i], "prediction": prediction}
            typer.echo(json.dumps(record, ensure_ascii=False))


def _prepare(shard: Shard, run: RunSpec, spec: ModelSpec) -> Job:
    """Check the options, read the document files, load the summarizer and read a corpus (every process
    alike)."""
    from synopsis.data.readers import detect_corpus, read_corpus

    inputs, corpus, output, instructions_given = run.inputs, run.corpus, run.output, run.instructions
    parsed: dict[Path, Any] = {}
    if shard.distributed and output is None:
        raise InputError(
            f"{shard.world} processes write one file: give --output (-o); to print summaries, run one process"
        )
    if run.resume and output is None:
        raise InputError("--resume continues a run that writes --output; give the same --output")
    if corpus is not None and len(inputs) != 1:
        raise InputError("--corpus takes exactly one input path")
    if corpus is not None and len(instructions_given) > 1:
        raise InputError("--corpus takes at most one --instruction (it applies to every example)")
    for path in inputs:
        if not path.exists() and str(path) != STDIN:
            raise missing_path(path)
    refuse_to_overwrite_inputs(output, [*inputs, spec.model], "--output")
    _check_model_path(spec.model)
    if corpus is None:  # read and checked before any model loads: a bad input fails at once
        parsed = {path: _read_input(path, run.input_format, run.max_input_mb) for path in inputs}

    summarizer = spec.load()  # on spec.device: with one line saying where the model runs
    info = summarizer.describe()
    if instructions_given and not info.instructions:
        log.warning("--instruction is ignored: %s does not take instructions", type(summarizer).__name__)

    if corpus is not None:
        stats: dict[str, int] = {}
        name = detect_corpus(inputs[0]) if corpus == "auto" else corpus
        # Generic JSONL/CSV need no reference column to be summarized (only the oracle reads references).
        options = {"summary_column": None} if name in ("jsonl", "csv", "hf") and not info.references else {}
        options.update(run.columns)
        reader = read_corpus(
            name, inputs[0], split=run.split, skip_bad_lines=run.skip_bad_lines, stats=stats, **options
        )
        examples = list(track(reader, f"reading {inputs[0]}", None, "examples"))
        if stats.get("skipped"):
            log.info("skipped %d malformed line(s) in %s", stats["skipped"], inputs[0])
        if not examples:
            raise InputError(f"{inputs[0]}: no examples found for corpus '{corpus}'")
        ids = [e.id for e in examples]
        documents = [e.document for e in examples]
        instructions = [(instructions_given or [None])[0] or e.instruction for e in examples]
        references: list[Any] | None = [e.references for e in examples]
    else:
        documents = [parsed[path].document for path in inputs]
        ids = [str(p) for p in inputs]
        references = None
        if len(instructions_given) > 1:  # one summary per (document, instruction), in order, labelled
            ids = [f"{doc_id} | {text}" for doc_id in ids for text in instructions_given]
            documents = [doc for doc in documents for _ in instructions_given]
            instructions = instructions_given * len(inputs)
        else:
            instructions = [(instructions_given or [None])[0]] * len(documents)

    size = run.batch_size or (1 if info.extractive else NEURAL_BATCH_SIZE)
    label = None if info.extractive else str(spec.model) if spec.model is not None else "the bundled model"
    if output is not None and not run.resume and shard.is_main:
        for stale in remove_parts(output):  # a fresh run: parts of an earlier run must not be resumed
            log.info("removed %s, left by an earlier interrupted run", stale)
    return Job(summarizer, ids, documents, instructions, references, size, label, parsed)


#: The input name that reads standard input.
STDIN = "-"


def _read_input(path: Path, input_format: str, max_mb: float) -> Any:
    """One document file, or standard input for ``-`` (its format sniffed from the content, as pasted text
    is); ``--format json`` on a file that is not JSON says where JSON output is asked for."""
    import sys

    from synopsis.summarizers.runner import read_source

    try:
        if str(path) == STDIN:
            return read_source(sys.stdin.read(), input_format)
        return read_source(path, input_format, max_mb)
    except InputError as err:
        if input_format == "json" and "JSON" in str(err):
            hint = "--format is the input's format; for JSON output: --output-format json"
            raise InputError(f"{err} ({hint})") from None
        raise


def _run(job: Job, output: Path | None, resume: bool, outline: bool) -> None:
    """Summarize batch by batch; each batch goes to --output (or stdout) as soon as it is done."""
    from synopsis.cli.output import PredictionWriter

    writer = PredictionWriter(output, resume=resume) if output is not None else None
    empty = 0

    def summarize_rows(rows: list[int], done: int) -> None:
        nonlocal empty
        predictions = job.summarize(rows)
        empty += sum(not p.strip() for p in predictions)
        batch_ids = [job.ids[i] for i in rows]
        if writer is not None:
            writer.write(batch_ids, predictions)
        else:
            _print(batch_ids, predictions, first=done == 0, many=len(job.ids) > 1, outline=outline)

    done = in_batches(job.ids, writer, job.batch_size, "summarizing", summarize_rows)
    if done is None:
        return
    if empty:
        log.warning("%d of %d summaries are empty", empty, done)
    if writer is not None:
        log.info("wrote %d summaries to %s", writer.written, output)


def _print(ids: list[str], predictions: list[str], first: bool, many: bool, outline: bool) -> None:
    for i, (doc_id, prediction) in enumerate(zip(ids, predictions, strict=True)):
        if outline:
            prediction = _as_outline(prediction, doc_id)
        if many:
            typer.echo(f"{'' if first and i == 0 else chr(10)}== {doc_id}")
        typer.echo(prediction)


def _check_model_path(model: Path | None) -> None:
    """``-m lead-3`` from the days when ``-m`` meant --method: say what ``-m`` is now."""
    if model is None or model.exists():
        return
    if re.fullmatch(r"lead-\d+|oracle|centrality|pointer-generator|seq2seq", str(model)):
        raise InputError(
            f"{model}: no such model directory (-m is --model in every command; for a method, "
            f"use --method {model})"
        )
    raise InputError(f"{model}: no such model directory")


def _as_outline(prediction: str, doc_id: str) -> str:
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
