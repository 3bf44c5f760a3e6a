"""``synopsis data``: convert corpora to our JSONL and print statistics. (Owned by the readers work.)"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from synopsis.cli.options import count_option, ranged, seed_option, switch
from synopsis.cli.runtime import refuse_to_overwrite_inputs, stdout_console
from synopsis.config import NON_NEGATIVE, POSITIVE
from synopsis.errors import InputError
from synopsis.progress import track

if TYPE_CHECKING:
    from synopsis.data.example import Example
    from synopsis.data.instructsum import BuildStats

logger = logging.getLogger(__name__)

app = typer.Typer(help="Convert corpora to synopsis JSONL and inspect them.", no_args_is_help=True)

_CORPUS_HELP = (
    "Corpus format: auto, synopsis, documents, scitldr, scisummnet, qmsum, qmsum-qs, qmsum-qs-childq, cnn, "
    "arxiv, pubmed, jsonl, csv, hf (Hugging Face datasets: save_to_disk folder, parquet, arrow; "
    "auto guesses from the files)."
)


def _given(**options: Any) -> dict[str, Any]:
    """Only the reader options the user gave, so each corpus reader can reject the ones it does not take."""
    return {key: value for key, value in options.items() if value not in (None, False, [])}


def _read_corpus(
    corpus: str,
    path: Path,
    split: str | None,
    skip_bad_lines: bool,
    reader_options: dict[str, Any] | None,
    counts: dict[str, int],
) -> Iterator[Example]:
    """The examples of ``convert`` and ``stats``, with a live count on stderr while they stream through
    (the total is not known in advance); ``counts`` receives the reader's counts (skipped lines, ...)."""
    from synopsis.data.readers import read_corpus

    options = reader_options or {}
    examples = read_corpus(corpus, path, split=split, skip_bad_lines=skip_bad_lines, stats=counts, **options)
    return track(examples, f"reading {path}", None, "examples")


# Options shared by both commands (typer needs them spelled out per command).
_CORPUS = typer.Option("auto", "--corpus", help=_CORPUS_HELP)
_SPLIT = typer.Option(None, "--split", help="Split inside a corpus folder (train, dev/val).")
_SKIP_BAD_LINES = switch("--skip-bad-lines", "Skip malformed lines or records and report how many.")
#: The reader options of ``convert`` and ``stats``: parameter -> (the readers' keyword, type, flag, help);
#: each is off (``None``, ``False``) unless given.
_READER_FLAGS: dict[str, tuple[str, Any, str, str]] = {
    "text_column": ("text_column", str | None, "--text-column", "jsonl/csv: column with the document text."),
    "summary_column": (
        "summary_column",
        list[str] | None,
        "--summary-column",
        "jsonl/csv: column with the reference(s); repeat for several columns.",
    ),
    "id_column": (
        "id_column",
        str | None,
        "--id-column",
        "jsonl/csv: column with the example id (default: an 'id' field if the record has one).",
    ),
    "instruction_column": (
        "instruction_column",
        str | None,
        "--instruction-column",
        "jsonl/csv: column with the instruction.",
    ),
    "title_column": (
        "title_column",
        str | None,
        "--title-column",
        "jsonl/csv: column with the document title.",
    ),
    "attribute_column": (
        "attribute_columns",
        list[str] | None,
        "--attribute-column",
        "jsonl/csv: column kept as an attribute (e.g. style, topic); repeatable.",
    ),
    "queries": ("queries", str | None, "--queries", "qmsum: general, specific or all (default) queries."),
    "relevant_span_only": (
        "relevant_span_only",
        bool,
        "--relevant-span-only",
        "qmsum: a specific query's document is only its relevant turns.",
    ),
    "document_format": (
        "format",
        str | None,
        "--format",
        "documents: text, markdown, json, scisummnet, story, arxiv, qmsum (default: auto).",
    ),
}
_MAX_INPUT_MB = ranged(
    None, "--max-input-mb", allowed=POSITIVE, help="documents: refuse files larger than this (default 20)."
)
#: parameter -> (the readers' keyword, type, typer option).
_READER_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    **{
        name: (keyword, kind, typer.Option(False if kind is bool else None, flag, help=text))
        for name, (keyword, kind, flag, text) in _READER_FLAGS.items()
    },
    "max_input_mb": ("max_mb", float | None, _MAX_INPUT_MB),
}
_SPAN_ONLY = _READER_OPTIONS["relevant_span_only"][2]  # also an option of ``instructsum``


def _with_reader_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with the reader options as its last parameters (typer reads them from the signature);
    it receives those the user gave as one ``reader_options`` dict (:func:`_given`)."""
    own = inspect.signature(command, eval_str=True).parameters.values()
    parameters = [p for p in own if p.name != "reader_options"] + [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option, annotation=kind)
        for name, (_, kind, option) in _READER_OPTIONS.items()
    ]

    def run(**values: Any) -> None:
        given = {keyword: values.pop(name) for name, (keyword, _, _) in _READER_OPTIONS.items()}
        command(**values, reader_options=_given(**given))

    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    run.__name__, run.__doc__ = command.__name__, command.__doc__
    return run


def convert(
    corpus: str = _CORPUS,
    input_path: Path = typer.Option(..., "--input", help="Corpus file or folder."),
    output: Path = typer.Option(..., "--output", "-o", help="Our JSONL file to write (written atomically)."),
    split: str | None = _SPLIT,
    skip_bad_lines: bool = _SKIP_BAD_LINES,
    reader_options: dict[str, Any] | None = None,
) -> None:
    """Read a corpus and write it as synopsis JSONL (one Example per line)."""
    from synopsis.data.example import write_examples

    refuse_to_overwrite_inputs(output, [input_path], "--output")
    counts: dict[str, int] = {}
    examples = _read_corpus(corpus, input_path, split, skip_bad_lines, reader_options, counts)
    first = next(examples, None)  # an empty corpus must not replace an existing output with nothing
    if first is None:
        raise InputError(f"{input_path}: no examples found (nothing written)")
    count = write_examples(itertools.chain([first], examples), output)
    typer.echo(
        f"wrote {count:,} examples to {output}; skipped {counts.get('skipped', 0):,} bad lines"
        + _extra(counts)
    )


def _extra(stats: dict[str, int]) -> str:
    extra = {k: v for k, v in stats.items() if k != "skipped" and v}
    return "".join(f"; {k.replace('_', ' ')}: {v:,}" for k, v in extra.items())


def stats(
    path: Path = typer.Argument(..., help="Our JSONL file, or any corpus file/folder with --corpus."),
    corpus: str = _CORPUS,
    split: str | None = _SPLIT,
    skip_bad_lines: bool = _SKIP_BAD_LINES,
    json_output: Path | None = typer.Option(None, "--json", help="Also write the numbers to this JSON file."),
    reader_options: dict[str, Any] | None = None,
) -> None:
    """Print counts, lengths (words, sentences), section depth and references per example."""
    from synopsis.data.stats import corpus_stats, stats_table
    from synopsis.io import write_json

    refuse_to_overwrite_inputs(json_output, [path], "--json")
    read_stats: dict[str, int] = {}
    numbers = corpus_stats(_read_corpus(corpus, path, split, skip_bad_lines, reader_options, read_stats))
    if numbers["examples"] == 0:
        raise InputError(f"{path}: no examples found")
    numbers["skipped"] = read_stats.get("skipped", 0)
    title = f"{path}" + (f" ({split})" if split else "")
    stdout_console().print(stats_table(numbers, title=title))
    if numbers["skipped"] or _extra(read_stats):
        typer.echo(f"skipped {numbers['skipped']:,} bad lines" + _extra(read_stats))
    if json_output is not None:
        write_json(json_output, {"path": str(path), "split": split, **numbers, **read_stats})


def instructsum(
    articles: Path | None = typer.Option(
        None,
        "--articles",
        help="JSONL of titled articles with lead sections (schema: synopsis.data.instructsum).",
    ),
    annotations: Path | None = typer.Option(
        None,
        "--annotations",
        help="JSONL of annotated instruction sentences and relevance flags per cluster.",
    ),
    qmsum: Path | None = typer.Option(
        None,
        "--qmsum",
        help="QMSum folder or meeting file: its general and specific queries as instructions.",
    ),
    output_dir: Path = typer.Option(
        ..., "--output-dir", "-o", help="Folder for the JSONL files and stats.json."
    ),
    split: str | None = typer.Option(None, "--split", help="qmsum: split inside the folder (train, val)."),
    queries: str = typer.Option("all", "--queries", help="qmsum: general, specific or all queries."),
    relevant_span_only: bool = _SPAN_ONLY,
    ratio: float = ranged(
        0.7,
        "--levenshtein",
        allowed=POSITIVE,
        help="Drop a target at least this x its length (words) from all others.",
    ),
    min_cluster_size: int = count_option(5, "--min-cluster-size", help="Drop clusters smaller than this."),
    min_title_words: int = count_option(2, "--min-title-words", help="Cluster only titles this long."),
    keep_noncontiguous: bool = switch(
        "--keep-noncontiguous", "Keep instructions whose relevant target sentences are not contiguous."
    ),
    test_category_absent: str | None = typer.Option(
        None,
        "--test-category-absent",
        help="Split: clusters with no article in a category starting with this (paper: Geography) are test.",
    ),
    dev_clusters: int = ranged(
        50, "--dev-clusters", allowed=NON_NEGATIVE, help="Split: random non-test clusters for dev."
    ),
    seed: int = seed_option("Split: random seed."),
    skip_bad_lines: bool = switch("--skip-bad-lines", "Skip malformed article lines."),
) -> None:
    """Build InstructSum data: title clusters, filters and cumulative instructions; or QMSum instructions."""
    from synopsis.data import instructsum as build
    from synopsis.data.example import write_examples
    from synopsis.io import write_json

    if articles is None and qmsum is None:
        raise InputError("give --articles (titled articles with leads) and/or --qmsum (a QMSum folder)")
    if annotations is not None and articles is None:
        raise InputError("--annotations needs --articles (the clusters are rebuilt from the articles)")
    stats = build.BuildStats()
    written: list[str] = []

    def write(chosen: list[Example], name: str) -> int:
        path = output_dir / name
        written.append(str(path))
        return write_examples(chosen, path)

    if articles is not None:
        _instructsum_from_articles(
            articles=articles,
            annotations=annotations,
            clusters_path=output_dir / "clusters.jsonl",
            stats=stats,
            write=write,
            written=written,
            skip_bad_lines=skip_bad_lines,
            ratio=ratio,
            min_cluster_size=min_cluster_size,
            min_title_words=min_title_words,
            keep_noncontiguous=keep_noncontiguous,
            test_category_absent=test_category_absent,
            dev_clusters=dev_clusters,
            seed=seed,
        )
    if qmsum is not None:
        examples = build.qmsum_instruction_examples(qmsum, split, queries, relevant_span_only, stats)
        if not examples:
            raise InputError(f"{qmsum}: no QMSum queries found")
        write(examples, f"qmsum{'_' + split if split else ''}.jsonl")
    write_json(output_dir / "stats.json", stats.counts)
    for line in stats.lines():
        typer.echo(line)
    typer.echo(f"wrote {', '.join(written)} and {output_dir / 'stats.json'}")


def _instructsum_from_articles(
    articles: Path,
    annotations: Path | None,
    clusters_path: Path,
    stats: BuildStats,
    write: Callable[[list[Example], str], int],
    written: list[str],
    *,
    skip_bad_lines: bool,
    ratio: float,
    min_cluster_size: int,
    min_title_words: int,
    keep_noncontiguous: bool,
    test_category_absent: str | None,
    dev_clusters: int,
    seed: int,
) -> None:
    """``data instructsum --articles``: the title clusters (``clusters_path``), split when asked, and the
    annotated examples of each split through ``write``; ``stats`` counts every step, ``written`` lists
    the files in the order they are written."""
    from synopsis.data import instructsum as build

    read_stats: dict[str, int] = {}
    usable = list(build.read_articles(articles, skip_bad_lines=skip_bad_lines, stats=read_stats))
    for key in ("articles_read", "skipped", "no_lead_or_source"):
        stats.add(key, read_stats.get(key, 0))
    clusters = build.build_clusters(usable, stats, ratio, min_cluster_size, min_title_words)
    examples = []
    if annotations is not None:  # matched first, so the split can give every split examples
        examples = build.annotated_examples(
            clusters, build.read_annotations(annotations), stats, keep_noncontiguous
        )
    if test_category_absent is not None:
        annotated = {e.metadata["cluster"] for e in examples} if annotations is not None else None
        build.split_clusters(clusters, test_category_absent, dev_clusters, seed, annotated)
        split_of = {c.id: c.split for c in clusters}
        for example in examples:
            example.metadata["split"] = split_of[example.metadata["cluster"]]
        for name in ("train", "dev", "test"):
            stats.add(f"clusters_{name}", sum(c.split == name for c in clusters))
    build.write_jsonl((c.to_dict() for c in clusters), clusters_path)
    written.append(str(clusters_path))
    if annotations is None:
        return
    if test_category_absent is None:
        write(examples, "examples.jsonl")
        return
    for name in ("train", "dev", "test"):
        chosen = [e for e in examples if e.metadata["split"] == name]
        stats.add(f"examples_{name}", write(chosen, f"examples_{name}.jsonl"))
        if not chosen and not (name == "dev" and dev_clusters == 0):
            logger.warning(
                "InstructSum split %s has no annotated examples (%s)",
                name,
                "no annotated cluster lacks a " + test_category_absent + " article"
                if name == "test"
                else "too few annotated clusters",
            )


app.command("convert")(_with_reader_options(convert))
app.command("stats")(_with_reader_options(stats))
app.command("instructsum")(instructsum)
