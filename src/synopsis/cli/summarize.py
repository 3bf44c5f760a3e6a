"""``synopsis summarize``: one document to stdout, or a whole corpus to a predictions file, as it goes.

A corpus run writes each batch's predictions as soon as the batch is done (whole lines, flushed; see
:mod:`synopsis.cli.output`), shows a progress bar with rate and ETA (plain lines when stderr is not a
terminal), and ``--resume`` continues an interrupted run where it stopped.
"""

from __future__ import annotations

import logging
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
from synopsis.cli.output import OutputTarget
from synopsis.cli.provenance import check_resume, run_record
from synopsis.cli.runtime import refuse_to_overwrite_inputs
from synopsis.cli.summarize_corpus import Job, run_in_batches, run_sharded
from synopsis.config import POSITIVE, DecodingOptions
from synopsis.errors import InputError
from synopsis.io import missing_path
from synopsis.pipeline import (
    ParsedDocument,
    RequestItem,
    SummarizeRequest,
    document_items,
    read_source,
)
from synopsis.progress import track
from synopsis.sharding import Shard, part_files, remove_parts
from synopsis.summarizers import METHOD_TABLE, methods_help
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
        help=f"{methods_help()}. With --model and no --method, its config.json decides.",
    ),
    model: Path | None = typer.Option(
        None,
        "--model",
        "-m",
        help="Model directory (a pointer-generator or a Hugging Face checkpoint), or a Hugging Face hub id "
        "(org/name or name: facebook/bart-large-cnn, t5-small; from the hub cache, downloaded when online).",
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
        help="Write the summaries here, as they are made, in the form its extension names (unless "
        "--output-format says): .json one JSON value, .jsonl one line per summary, .md Markdown, any other "
        "name text (a corpus: one prediction per line, sentences joined by a space).",
    ),
    resume: bool = switch(
        "--resume",
        "Continue an interrupted run: keep what --output holds and skip those summaries (forms written line "
        "by line: .jsonl by id, a corpus's text by count).",
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
        "sources of every sentence; auto: by section when a document is longer than the model's input, "
        "decided per document (corpus runs: by document, as the papers' evaluations truncate).",
    ),
    max_words: int = count_option(150, "--max-words", help="By section: longest document summary, in words."),
    output_format: str | None = typer.Option(
        None,
        "--output-format",
        help="text or markdown (by section: the outline of section summaries, then the document summary; a "
        "corpus's text: one prediction per line), json (one value: the summary's object, an array of them "
        "when there are several: id, prediction, summary and sections with sources) or jsonl (one such "
        "object per line). Default: --output's extension, else text; the screen and a file hold the same.",
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
            target = OutputTarget.from_flags(output, output_format, resume, corpus is not None)
            _check_by(by, method, outline)
            decoding = DecodingOptions.from_mapping(
                {
                    "num_beams": num_beams,
                    "min_length": min_length,
                    "max_length": max_length,
                    "length_penalty": length_penalty,
                    "no_repeat_ngram_size": no_repeat_ngram_size,
                }
            )
            model = resolve_model_option(model, revision, json_output=target.json)
            spec = ModelSpec(
                method=method, model=model, k=k, max_source_length=max_source_length,
                instruction_cache=not no_cache, dtype=dtype, threads=threads, decoding=decoding,
                device=process_device(device, shard), backend=backend, compute_type=compute_type,
            )
            run = RunSpec(
                inputs=inputs, corpus=corpus, split=split, input_format=input_format,
                instructions=list(instruction or []), max_input_mb=max_input_mb,
                skip_bad_lines=skip_bad_lines, columns=_columns(text_column, summary_column, id_column),
                target=target, batch_size=batch_size,
            )
            job = _prepare(shard, run, spec, Wanted(by, max_words))
            if target.path is not None:  # --resume continues only an output of the same options and input
                method = job.runner.summarizer.describe().method
                # what decodes the model with these options (--backend auto chooses per set of options)
                record = run_record(spec, by, max_words, run.instructions, method, job.runner.backend)
                check_resume(target, record, job.ids, write=shard.is_main)
        _write(job, target, shard, outline)


@dataclass(frozen=True)
class Wanted:
    """What a run makes of its documents: ``--by`` and ``--max-words``."""

    by: str
    max_words: int


def _write(job: Job, target: OutputTarget, shard: Shard, outline: bool) -> None:
    """The request through the runner to its writer: a launch's part files merged in input order (or a
    one-process ``--resume`` of one), else batch by batch to the screen or ``--output``, in one form."""
    if target.path is not None and target.line_by_line:
        if shard.distributed or (target.resume and part_files(target.path)):
            run_sharded(job, target, shard)
            return
    run_in_batches(job, target.writer(len(job.items) > 1, outline))


#: The fields of a :class:`ModelSpec` that are ``load_summarizer``'s keywords of the same names.
LOAD_SETTINGS = ("k", "max_source_length", "instruction_cache", "dtype", "device", "backend", "compute_type")


@dataclass(frozen=True)
class ModelSpec:
    """Which summarizer to load, and how (``synopsis summarize``'s model options), and the decoding options
    its calls take (checked once, when built from the flags; the runner passes them with every call)."""

    method: str | None
    model: Path | None
    k: int
    max_source_length: int | None
    instruction_cache: bool
    dtype: str | None
    threads: int | None
    decoding: DecodingOptions
    device: Any = "auto"  #: a ``torch.device`` (:func:`process_device`), or ``auto``
    backend: str = "auto"  #: ``--backend``: auto, torch (generate()) or ctranslate2
    compute_type: str | None = None  #: ``--compute-type`` of the ctranslate2 backend

    def load(self) -> Summarizer:
        from synopsis.summarizers import load_summarizer

        set_torch_threads(self.threads)
        settings = {name: getattr(self, name) for name in LOAD_SETTINGS}
        return load_summarizer(self.method, self.model, **settings)


def process_device(device: str, shard: Shard) -> Any:
    """The ``torch.device`` this process's model computes on, checked before any input is read (a one-line
    :class:`InputError`, exit 2). Under a launch of N processes each takes its own GPU (``auto`` and
    ``cuda`` mean the launcher's GPU of this process); ``cuda:N`` would put every process on one GPU and
    is refused there."""
    from synopsis.devices import check_device

    if shard.distributed and shard.device is not None and device.strip().lower() in ("auto", "cuda"):
        return shard.device
    chosen = check_device(device)  # auto and cpu stay as they are: torch is loaded only by a model
    if shard.distributed and getattr(chosen, "type", None) == "cuda" and ":" in device:
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
    target: OutputTarget  #: ``-o``, ``--output-format``, ``--resume``
    batch_size: int | None


def _columns(text: str | None, summary: str | None, example_id: str | None) -> dict[str, str]:
    given = {"text_column": text, "summary_column": summary, "id_column": example_id}
    return {key: value for key, value in given.items() if value is not None}


def _check_by(by: str, method: str | None, outline: bool) -> None:
    """Options that make no sense together (by section) are one-line errors, before any model loads."""
    from synopsis.pipeline import BY

    if by not in BY:
        raise InputError(f"--by must be one of {', '.join(BY)}, got '{by}'")
    if by == "section" and method == "oracle":
        raise InputError("--method oracle needs a reference per document, not per section: use --by document")
    if by == "section" and outline:
        raise InputError("--outline shows a generated question-summary hierarchy: use --by document with it")


def _prepare(shard: Shard, run: RunSpec, spec: ModelSpec, wanted: Wanted) -> Job:
    """Check the options, load the summarizer and read the documents (every process alike) into one
    :class:`~synopsis.pipeline.SummarizeRequest`."""
    target, corpus = run.target, run.corpus is not None
    _check_run(shard, run)
    refuse_to_overwrite_inputs(target.path, [*run.inputs, spec.model], "--output")
    _check_model_path(spec.model)
    files = None if corpus else _file_items(run)  # read and checked before any model loads

    summarizer = spec.load()  # on spec.device: with one line saying where the model runs
    info = summarizer.describe()
    if run.instructions and not info.takes_instructions:
        log.warning("--instruction is ignored: %s does not take instructions", type(summarizer).__name__)
    items = files if files is not None else _corpus_items(run, info)
    # A corpus by document unless asked: the papers' evaluations read what the model reads of each.
    by = "document" if corpus and wanted.by == "auto" else wanted.by
    request = SummarizeRequest(items, by, wanted.max_words, spec.decoding, target.form)
    size = run.batch_size or (1 if info.extractive else NEURAL_BATCH_SIZE)
    label = None if info.extractive else str(spec.model) if spec.model is not None else "the bundled model"
    if target.path is not None and not target.resume and shard.is_main:
        for stale in remove_parts(target.path):  # a fresh run: parts of an earlier run must not be resumed
            log.info("removed %s, left by an earlier interrupted run", stale)
    return Job(summarizer, request, size, label, corpus)


def _check_run(shard: Shard, run: RunSpec) -> None:
    """What a run's inputs and output allow, before any model loads (one-line errors)."""
    corpus = run.corpus is not None
    run.target.check(shard.world)
    if corpus and len(run.inputs) != 1:
        raise InputError("--corpus takes exactly one input path")
    if corpus and len(run.instructions) > 1:
        raise InputError("--corpus takes at most one --instruction (it applies to every example)")
    for path in run.inputs:
        if not path.exists() and str(path) != STDIN:
            raise missing_path(path)


def _corpus_items(run: RunSpec, info: Any) -> list[RequestItem]:
    """A corpus's examples, one item each (no offsets: a corpus reader rebuilds the text)."""
    from synopsis.data.readers import detect_corpus, read_corpus

    stats: dict[str, int] = {}
    path = run.inputs[0]
    name = detect_corpus(path) if run.corpus == "auto" else str(run.corpus)
    # Generic JSONL/CSV need no reference column to be summarized (only the oracle reads references).
    options = {"summary_column": None} if name in ("jsonl", "csv", "hf") and not info.needs_references else {}
    options.update(run.columns)
    reader = read_corpus(
        name, path, split=run.split, skip_bad_lines=run.skip_bad_lines, stats=stats, **options
    )
    examples = list(track(reader, f"reading {path}", None, "examples"))
    if stats.get("skipped"):
        log.info("skipped %d malformed line(s) in %s", stats["skipped"], path)
    if not examples:
        raise InputError(f"{path}: no examples found for corpus '{run.corpus}'")
    given = (run.instructions or [None])[0]
    return [
        RequestItem(e.id, ParsedDocument(e.document, "corpus", None), given or e.instruction, e.references)
        for e in examples
    ]


def _file_items(run: RunSpec) -> list[RequestItem]:
    """Each document file read once, one item per instruction (``file | instruction`` when several)."""
    items = []
    for path in run.inputs:
        parsed = _read_input(path, run.input_format, run.max_input_mb)
        items.extend(document_items(parsed, run.instructions, str(path)))
    return items


#: The input name that reads standard input.
STDIN = "-"


def _read_input(path: Path, input_format: str, max_mb: float) -> Any:
    """One document file, or standard input for ``-`` (its format sniffed from the content, as pasted text
    is); ``--format json`` on a file that is not JSON says where JSON output is asked for."""
    import sys

    try:
        if str(path) == STDIN:
            return read_source(sys.stdin.read(), input_format)
        return read_source(path, input_format, max_mb)
    except InputError as err:
        if input_format == "json" and "JSON" in str(err):
            hint = "--format is the input's format; for JSON output: --output-format json"
            raise InputError(f"{err} ({hint})") from None
        raise


def _check_model_path(model: Path | None) -> None:
    """``-m lead-3`` from the days when ``-m`` meant --method: say what ``-m`` is now."""
    if model is None or model.exists():
        return
    if any(method.matches(str(model)) for method in METHOD_TABLE):
        raise InputError(
            f"{model}: no such model directory (-m is --model in every command; for a method, "
            f"use --method {model})"
        )
    raise InputError(f"{model}: no such model directory")
