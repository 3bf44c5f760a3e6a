"""``synopsis evaluate``: score predictions against references (ROUGE, BLEU, METEOR, n-gram rates, lengths).

Predictions: plain text, one summary per line, or JSONL whose records hold a ``prediction`` (or ``summary``)
string. References: one file per reference set (plain lines, or JSONL records with a ``reference`` string),
or a single JSONL of Examples (``synopsis data convert`` output) or of records with a ``references`` (or
SciTLDR's ``target``) list. When both sides carry ``id`` fields, examples are matched by id.
With ``--metrics qs`` both sides are linearised question-summary hierarchies (:mod:`synopsis.qs`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from synopsis.cli.options import ranged, seed_option, switch, threads_option
from synopsis.cli.runtime import refuse_to_overwrite_inputs, stdout_console
from synopsis.config import NON_NEGATIVE, default_threads
from synopsis.errors import ConfigError, InputError
from synopsis.progress import track
from synopsis.sharding import Shard

log = logging.getLogger("synopsis.cli")

_FORMATS = ("auto", "lines", "jsonl")


@dataclass
class _Records:
    """What one input file provides, per example, with where each came from (for error messages)."""

    path: Path
    where: list[str] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    texts: list[Any] = field(default_factory=list)  # str, or list[str] for references
    sources: list[str | None] = field(default_factory=list)


def _is_jsonl(path: Path, input_format: str) -> bool:
    from synopsis.io import read_text

    if input_format != "auto":
        return input_format == "jsonl"
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return True
    return read_text(path).lstrip().startswith("{")


def _read_lines(path: Path) -> _Records:
    from synopsis.io import read_text

    records = _Records(path)
    text = read_text(path)
    # Only "\n" ends a line (str.splitlines would also split on U+2028, form feeds, ...).
    lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
    for number, line in enumerate(lines, start=1):
        records.where.append(f"{path}:{number}")
        records.ids.append(None)
        records.texts.append(line.strip())
        records.sources.append(None)
    return records


def _string_field(record: Any, where: str, keys: tuple[str, ...]) -> str:
    if not isinstance(record, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for key in keys:
        if key in record:
            if not isinstance(record[key], str):
                raise InputError(f"{where}: field '{key}' must be a string")
            return record[key]
    raise InputError(f"{where}: missing field {' or '.join(repr(k) for k in keys)}")


def _source_text(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return "\n".join(value)
    raise InputError(f"{where}: field 'source' must be a string or a list of strings")


def _read_predictions(path: Path, input_format: str) -> _Records:
    if not _is_jsonl(path, input_format):
        return _read_lines(path)
    from synopsis.io import iter_jsonl

    records = _Records(path)
    for where, record in iter_jsonl(path):
        records.where.append(where)
        records.texts.append(_string_field(record, where, ("prediction", "summary")))
        records.ids.append(str(record["id"]) if "id" in record else None)
        records.sources.append(None)
    return records


def _read_references(path: Path, input_format: str) -> _Records:
    if not _is_jsonl(path, input_format):
        lines = _read_lines(path)
        lines.texts = [[text] for text in lines.texts]
        return lines
    from synopsis.data.example import Example
    from synopsis.io import iter_jsonl

    records = _Records(path)
    for where, record in iter_jsonl(path):
        if isinstance(record, dict) and "document" in record and "id" in record:  # one of our Examples
            example = Example.from_dict(record, where)
            refs, source, example_id = example.references, example.document.text, example.id
        else:
            if isinstance(record, dict) and ("references" in record or "target" in record):
                refs = record.get("references", record.get("target"))
                refs = [refs] if isinstance(refs, str) else refs
                if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
                    raise InputError(f"{where}: field 'references' must be a list of strings")
            else:
                refs = [_string_field(record, where, ("reference", "summary"))]
            source = _source_text(record.get("source"), where)
            example_id = str(record["id"]) if "id" in record else None
        if not refs:
            raise InputError(f"{where}: example has no references")
        records.where.append(where)
        records.ids.append(example_id)
        records.texts.append(list(refs))
        records.sources.append(source)
    return records


def _read_corpus_references(path: Path, corpus: dict[str, Any]) -> _Records:
    """References (and sources) of any corpus reader: ``--corpus hf --split test --summary-column ...``."""
    from synopsis.data.readers import read_corpus

    options = dict(corpus)
    name, split = options.pop("name"), options.pop("split", None)
    records = _Records(path)
    for number, example in enumerate(read_corpus(name, path, split=split, **options)):
        if not example.references:
            raise InputError(f"{path}: example {example.id} (number {number}) has no references")
        records.where.append(f"{path}: example {example.id}")
        records.ids.append(example.id)
        records.texts.append(list(example.references))
        records.sources.append(example.document.text)
    return records


def _read_sources(path: Path, input_format: str) -> _Records:
    if not _is_jsonl(path, input_format):
        return _read_lines(path)
    from synopsis.data.example import Example
    from synopsis.io import iter_jsonl

    records = _Records(path)
    for where, record in iter_jsonl(path):
        if isinstance(record, dict) and "document" in record and "id" in record:
            example = Example.from_dict(record, where)
            source, example_id = example.document.text, example.id
        else:
            if not isinstance(record, dict) or ("source" not in record and "text" not in record):
                raise InputError(f"{where}: missing field 'source' or 'text'")
            source = _source_text(record.get("source", record.get("text")), where)
            example_id = str(record["id"]) if "id" in record else None
        records.where.append(where)
        records.ids.append(example_id)
        records.texts.append(source)
        records.sources.append(None)
    return records


def _align(predictions: _Records, other: _Records, what: str) -> list[int]:
    """Index into ``other`` for each prediction: by id when both sides have ids, else by position."""
    if len(other.texts) != len(predictions.texts) and not (all(predictions.ids) and all(other.ids)):
        raise InputError(
            f"{other.path}: {len(other.texts)} {what} but {predictions.path} has "
            f"{len(predictions.texts)} predictions"
        )
    if all(predictions.ids) and all(other.ids):
        position = {example_id: i for i, example_id in enumerate(other.ids)}
        order = []
        for where, example_id in zip(predictions.where, predictions.ids, strict=True):
            if example_id not in position:
                raise InputError(f"{where}: id '{example_id}' has no {what} in {other.path}")
            order.append(position[example_id])
        return order
    return list(range(len(predictions.texts)))


SENTENCES = ("auto", "newline", "punkt")
#: the metrics scored example by example, which a launch of several processes splits among them
PER_EXAMPLE = ("rouge", "meteor", "novel")
#: from this many examples on, each stage says when it starts (in logs; a terminal shows bars anyway)
ANNOUNCE_FROM = 5000


def evaluate(
    predictions: Path = typer.Option(
        ..., "--predictions", "-p", help="Predictions: one per line, or JSONL with 'prediction'/'summary'."
    ),
    references: list[Path] = typer.Option(
        ...,
        "--references",
        "-r",
        help="Reference file (repeat for several sets): lines, or JSONL (Examples, 'references' lists).",
    ),
    sources: Path | None = typer.Option(
        None, "--sources", help="Source documents, for novel n-grams (default: from Example references)."
    ),
    input_format: str = typer.Option("auto", "--format", help="auto, lines or jsonl (all input files)."),
    aggregate: str = typer.Option("max", "--aggregate", help="Several references: max or mean."),
    mode: str = typer.Option(
        "rouge-score", "--mode", help="ROUGE convention: rouge-score or perl (ROUGE-1.5.5)."
    ),
    no_stemmer: bool = switch("--no-stemmer", "ROUGE without Porter stemming."),
    sentences: str = typer.Option(
        "auto",
        "--sentences",
        help="Sentences for ROUGE-Lsum: newline (one per line inside each summary), punkt (split with "
        "Punkt, as Hugging Face's run_summarization.py does), or auto: newline when a prediction holds a "
        "newline, else punkt (one-line summaries, e.g. from a one-per-line file). The choice is printed.",
    ),
    tokenizer: str = typer.Option(
        "ascii",
        "--tokenizer",
        help="ascii: the --mode's own tokenizer (a-z/0-9 runs; text in other scripts is refused); unicode: "
        "words of any script, one token per character in Chinese, Japanese, Thai (ROUGE, BLEU, METEOR).",
    ),
    wordnet_exceptions: bool = switch(
        "--wordnet-exceptions", "perl mode: look up ROUGE-1.5.5's WordNet exceptions before stemming."
    ),
    metrics: str = typer.Option(
        "rouge,bleu,meteor,novel,repeat,length",
        "--metrics",
        help="Comma-separated metrics to compute; qs: hierarchy P/R/F1 and question BLEU-4 of QS hierarchies",
    ),
    qs_lenient: bool = switch(
        "--qs-lenient", "qs: parse malformed predicted hierarchies leniently and count what is dropped."
    ),
    bootstrap: int = ranged(
        1000, "--bootstrap", allowed=NON_NEGATIVE, help="Bootstrap resamples for 95% CIs (0: none)."
    ),
    seed: int = seed_option("Bootstrap seed."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the report as JSON here."),
    threads: int | None = threads_option(),
    corpus: str | None = typer.Option(
        None, "--corpus", help="Read --references as this corpus (e.g. hf, jsonl, csv, scitldr)."
    ),
    split: str | None = typer.Option(None, "--split", help="With --corpus: the split of --references."),
    text_column: str | None = typer.Option(None, "--text-column", help="--corpus jsonl/csv/hf: the source."),
    summary_column: list[str] | None = typer.Option(
        None, "--summary-column", help="--corpus jsonl/csv/hf: the reference column(s)."
    ),
    id_column: str | None = typer.Option(None, "--id-column", help="--corpus jsonl/csv/hf: example ids."),
) -> None:
    """Score predictions against references; print tables with the settings and optionally write JSON.

    Under torchrun or accelerate launch, the processes share the per-example scoring and the main one
    prints the same report as one process would (and writes --json)."""
    from synopsis.cli.launch import errors_from_main_only, launched

    # every warning here would be the same in each process: the others print errors only
    with launched(others=logging.ERROR) as shard, errors_from_main_only(shard):
        _evaluate(
            shard,
            predictions=predictions,
            references=references,
            sources=sources,
            input_format=input_format,
            aggregate=aggregate,
            mode=mode,
            no_stemmer=no_stemmer,
            sentences=sentences,
            tokenizer=tokenizer,
            wordnet_exceptions=wordnet_exceptions,
            metrics=metrics,
            qs_lenient=qs_lenient,
            bootstrap=bootstrap,
            seed=seed,
            json_out=json_out,
            threads=threads,
            reference_corpus=None
            if corpus is None
            else {
                "name": corpus,
                "split": split,
                "text_column": text_column,
                "summary_column": summary_column,
                "id_column": id_column,
            },
        )


def _evaluate(
    shard: Shard,
    predictions: Path,
    references: list[Path],
    sources: Path | None,
    input_format: str,
    aggregate: str,
    mode: str,
    no_stemmer: bool,
    sentences: str,
    tokenizer: str,
    wordnet_exceptions: bool,
    metrics: str,
    qs_lenient: bool,
    bootstrap: int,
    seed: int,
    json_out: Path | None,
    threads: int | None,
    reference_corpus: dict[str, Any] | None = None,
) -> None:
    from synopsis.evaluation import evaluate_corpus
    from synopsis.evaluation.corpus import lsum_sentences
    from synopsis.evaluation.report import render_report
    from synopsis.io import write_json

    wanted, qs = _check_options(input_format, aggregate, mode, sentences, tokenizer, metrics, json_out)
    refuse_to_overwrite_inputs(json_out, [predictions, *references, sources], "--json")
    preds = _read_predictions(predictions, input_format)
    if not preds.texts:
        raise InputError(f"{predictions}: no predictions")
    refs_per_example, refs_where, example_sources = _gather_references(
        preds, references, input_format, reference_corpus
    )
    if sources is not None:
        srcs = _read_sources(sources, input_format)
        example_sources = [srcs.texts[j] for j in _align(preds, srcs, "sources")]
    _check_texts(preds, refs_per_example, refs_where, tokenizer)

    split, sentence_setting = lsum_sentences(preds.texts, sentences)
    if qs:  # the answers inside QS hierarchies: Punkt only when asked (auto keeps the earlier convention)
        qs_report = _qs_report(
            preds, refs_per_example, refs_where, qs_lenient, aggregate, mode, no_stemmer, sentences == "punkt"
        )
    have_sources = all(s is not None for s in example_sources)
    if not shard.is_main:  # the others only score their share of the examples (the same collectives)
        wanted = [name for name in wanted if name in PER_EXAMPLE]
        bootstrap = 0
    report = evaluate_corpus(
        preds.texts,
        refs_per_example,
        example_sources if have_sources else None,
        metrics=wanted,
        mode=mode,
        use_stemmer=not no_stemmer,
        aggregate=aggregate,
        split_summaries=split,
        wordnet_exceptions=wordnet_exceptions,
        bootstrap=bootstrap,
        seed=seed,
        progress=_progress_hook(shard, len(preds.texts)),
        tokenizer=tokenizer,
        threads=threads or default_threads(),
        shard=shard if shard.distributed else None,
    )
    if not shard.is_main:  # the main process reports; the others only helped to score
        return
    if "rouge" in wanted:  # printed with the scores: which sentence splitting ROUGE-Lsum saw
        report["settings"]["sentences"] = sentence_setting
    if qs:
        report["settings"]["qs"] = qs_report.pop("settings")
        report["qs"] = qs_report
    report["inputs"] = {
        "predictions": str(predictions),
        "references": [str(p) for p in references],
        "sources": str(sources) if sources else None,
    }
    stdout_console().print(render_report(report))
    if json_out is not None:
        write_json(json_out, report)
        log.info("wrote %s", json_out)


def _check_options(
    input_format: str,
    aggregate: str,
    mode: str,
    sentences: str,
    tokenizer: str,
    metrics: str,
    json_out: Path | None,
) -> tuple[list[str], bool]:
    """Refuse an unknown choice in one line; the library's metrics asked for, and whether ``qs`` was."""
    from synopsis.evaluation.corpus import METRICS
    from synopsis.evaluation.rouge import AGGREGATES, MODES, TOKENIZERS

    for option, value, choices in (
        ("--format", input_format, _FORMATS),
        ("--aggregate", aggregate, AGGREGATES),
        ("--mode", mode, MODES),
        ("--sentences", sentences, SENTENCES),
        ("--tokenizer", tokenizer, TOKENIZERS),
    ):
        if value not in choices:
            raise ConfigError(f"{option} must be one of {', '.join(choices)}, got '{value}'")
    if json_out is not None and json_out.is_dir():
        raise InputError(f"{json_out}: is a directory, expected a file path for --json")
    wanted = [name.strip() for name in metrics.split(",") if name.strip()]
    if not wanted:
        raise ConfigError(f"--metrics: no metric given; choose from {', '.join((*METRICS, 'qs'))}")
    unknown = [name for name in wanted if name not in (*METRICS, "qs")]
    if unknown:
        choices = ", ".join((*METRICS, "qs"))
        raise ConfigError(f"--metrics: unknown metric(s) {', '.join(unknown)}; choose from {choices}")
    return [name for name in wanted if name != "qs"], "qs" in wanted


def _gather_references(
    preds: _Records, references: list[Path], input_format: str, reference_corpus: dict[str, Any] | None
) -> tuple[list[list[str]], list[list[str]], list[str | None]]:
    """Every reference set matched to the predictions: per example its references, where each came from,
    and the source document when a reference file carries one."""
    refs_per_example: list[list[str]] = [[] for _ in preds.texts]
    refs_where: list[list[str]] = [[] for _ in preds.texts]
    example_sources: list[str | None] = [None] * len(preds.texts)
    for path in references:
        if reference_corpus is None:
            refs = _read_references(path, input_format)
        else:  # the options not given keep the reader's defaults
            given = {k: v for k, v in reference_corpus.items() if v is not None and v != []}
            refs = _read_corpus_references(path, given)
        for i, j in enumerate(_align(preds, refs, "references")):
            refs_per_example[i].extend(refs.texts[j])
            refs_where[i].extend([refs.where[j]] * len(refs.texts[j]))
            example_sources[i] = example_sources[i] or refs.sources[j]
    return refs_per_example, refs_where, example_sources


def _progress_hook(shard: Shard, count: int):  # noqa: ANN202 - the library's Progress hook
    """The library's progress hook: a bar (or lines in logs) on the main process, nothing on the others."""

    def progress(items, description, total):  # noqa: ANN001, ANN202
        if not shard.is_main:
            return items
        if shard.distributed:
            description = f"{description} ({shard.describe()})"
        return track(items, description, total, unit="examples", announce=count >= ANNOUNCE_FROM)

    return progress


def _check_texts(preds: _Records, refs: list[list[str]], refs_where: list[list[str]], tokenizer: str) -> None:
    """Empty references, and text the ASCII tokenizer would score 0, as errors naming the file and line."""
    from synopsis.evaluation.rouge import is_non_latin

    for texts, wheres in zip(refs, refs_where, strict=True):
        for text, where in zip(texts, wheres, strict=True):
            if not text.strip():
                raise InputError(f"{where}: empty reference (it would score 0 whatever the prediction)")
    if tokenizer != "ascii":
        return
    candidates = [(t, w) for t, w in zip(preds.texts, preds.where, strict=True)] + [
        (t, w) for ts, ws in zip(refs, refs_where, strict=True) for t, w in zip(ts, ws, strict=True)
    ]
    for text, where in candidates:
        if is_non_latin(text):
            raise InputError(
                f"{where}: text mostly in a non-Latin script ({text[:12]!r}...): the rouge-score tokenizer "
                "keeps only a-z and 0-9 and would score it 0; pass --tokenizer unicode"
            )


def _qs_report(
    preds: _Records,
    refs: list[list[str]],
    refs_where: list[list[str]],
    lenient: bool,
    aggregate: str,
    mode: str,
    no_stemmer: bool,
    split_sentences: bool,
) -> dict[str, Any]:
    """``--metrics qs``: parse both sides (a malformed line is a file:line:column error) and score them."""
    from synopsis.evaluation.hierarchy import describe, evaluate_hierarchies, parse_hierarchies

    predicted, counts = parse_hierarchies(preds.texts, preds.where, lenient=lenient)
    flat, _ = parse_hierarchies([r for rs in refs for r in rs], [w for ws in refs_where for w in ws])
    references, start = [], 0
    for rs in refs:
        references.append(flat[start : start + len(rs)])
        start += len(rs)
    report = evaluate_hierarchies(
        predicted,
        references,
        aggregate=aggregate,
        use_stemmer=not no_stemmer,
        mode=mode,
        split_summaries=split_sentences,
    )
    if lenient:
        report["lenient"] = counts
    report["settings"] = describe(aggregate, lenient)
    return report
