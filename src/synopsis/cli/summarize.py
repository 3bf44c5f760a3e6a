"""``synopsis summarize``: one document to stdout, or a whole corpus to a predictions file."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from synopsis.errors import InputError


def summarize(
    inputs: list[Path] = typer.Argument(..., help="Document file(s), or one corpus file/dir with --corpus."),
    method: str | None = typer.Option(
        None,
        "--method",
        "-m",
        help="pointer-generator (default: bundled model), seq2seq, lead-K, oracle, centrality.",
    ),
    model: Path | None = typer.Option(
        None, "--model", help="Model directory (pointer-generator or Hugging Face)."
    ),
    instruction: list[str] | None = typer.Option(
        None,
        "--instruction",
        "-i",
        help="Instruction or query (centrality, T5/InstructSum); repeat it for one summary per instruction.",
    ),
    no_cache: bool = typer.Option(
        False, "--no-cache", help="InstructSum: encode every prompt in full (same block mask; for checks)."
    ),
    corpus: str | None = typer.Option(
        None,
        "--corpus",
        help="Read INPUT as a corpus (synopsis, scitldr, qmsum, cnn, ...) and summarize every example.",
    ),
    split: str | None = typer.Option(None, "--split", help="Corpus split, where the corpus has them."),
    input_format: str = typer.Option(
        "auto", "--format", help="Document format (auto, text, markdown, json, ...)."
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write predictions (.jsonl or one per line)."
    ),
    k: int = typer.Option(3, "--k", help="Sentences to extract (centrality)."),
    num_beams: int | None = typer.Option(None, "--num-beams"),
    min_length: int | None = typer.Option(None, "--min-length"),
    max_length: int | None = typer.Option(None, "--max-length"),
    length_penalty: float | None = typer.Option(None, "--length-penalty"),
    no_repeat_ngram_size: int | None = typer.Option(None, "--no-repeat-ngram-size"),
    max_source_length: int | None = typer.Option(
        None, "--max-source-length", help="Truncate model inputs (pointer-generator: words; HF: tokens)."
    ),
    batch_size: int = typer.Option(16, "--batch-size"),
    max_input_mb: float = typer.Option(20.0, "--max-input-mb", help="Refuse documents larger than this."),
    skip_bad_lines: bool = typer.Option(
        False, "--skip-bad-lines", help="Skip malformed JSONL lines (counted)."
    ),
    outline: bool = typer.Option(
        False,
        "--outline",
        help="Show each summary, a question-summary hierarchy ([L↓]/[L-]/[L↑]), as an indented outline.",
    ),
) -> None:
    """Summarize documents. Without --output, summaries go to stdout, one block per document."""
    from rich.console import Console
    from rich.progress import track

    from synopsis.data.readers import detect_corpus, read_corpus, read_document
    from synopsis.io import open_for_atomic_write
    from synopsis.summarizers import load_summarizer

    err = Console(stderr=True)
    instructions_given = list(instruction or [])
    if corpus is not None:
        if len(inputs) != 1:
            raise InputError("--corpus takes exactly one input path")
        if len(instructions_given) > 1:
            raise InputError("--corpus takes at most one --instruction (it applies to every example)")
        stats: dict[str, int] = {}
        name = detect_corpus(inputs[0]) if corpus == "auto" else corpus
        # Generic JSONL/CSV need no reference column to be summarized (only the oracle reads references).
        options = {"summary_column": None} if name in ("jsonl", "csv") and method != "oracle" else {}
        examples = list(
            read_corpus(name, inputs[0], split=split, skip_bad_lines=skip_bad_lines, stats=stats, **options)
        )
        if stats.get("skipped"):
            err.print(f"skipped {stats['skipped']} malformed line(s) in {inputs[0]}")
        if not examples:
            raise InputError(f"{inputs[0]}: no examples found for corpus '{corpus}'")
        ids = [e.id for e in examples]
        documents = [e.document for e in examples]
        instructions = [(instructions_given or [None])[0] or e.instruction for e in examples]
        references = [e.references for e in examples]
    else:
        documents = [read_document(path, format=input_format, max_mb=max_input_mb) for path in inputs]
        for path, doc in zip(inputs, documents, strict=True):
            if doc.is_empty():
                raise InputError(f"{path}: document has no text to summarize")
        ids = [str(p) for p in inputs]
        references = None
        if len(instructions_given) > 1:  # one summary per (document, instruction), in order, labelled
            ids = [f"{doc_id} | {text}" for doc_id in ids for text in instructions_given]
            documents = [doc for doc in documents for _ in instructions_given]
            instructions = instructions_given * len(inputs)
        else:
            instructions = [(instructions_given or [None])[0]] * len(documents)

    summarizer = load_summarizer(
        method,
        model,
        k=k,
        max_source_length=max_source_length,
        instruction_cache=not no_cache,
        num_beams=num_beams,
        min_length=min_length,
        max_length=max_length,
        length_penalty=length_penalty,
        no_repeat_ngram_size=no_repeat_ngram_size,
    )
    batches = range(0, len(documents), batch_size)
    if len(documents) > batch_size:
        batches = track(batches, description="summarizing", console=err, transient=True)
    predictions: list[str] = []
    for start in batches:
        end = start + batch_size
        predictions += summarizer.summarize(
            documents[start:end],
            instructions[start:end],
            None if references is None else references[start:end],
        )

    if outline and output is None:
        predictions = [_as_outline(p, doc_id) for p, doc_id in zip(predictions, ids, strict=True)]
    if output is None:
        for i, (doc_id, prediction) in enumerate(zip(ids, predictions, strict=True)):
            if len(predictions) > 1:
                typer.echo(f"{'' if i == 0 else chr(10)}== {doc_id}")
            typer.echo(prediction)
        return
    with open_for_atomic_write(output) as handle:
        for doc_id, prediction in zip(ids, predictions, strict=True):
            if output.suffix == ".jsonl":
                handle.write(json.dumps({"id": doc_id, "prediction": prediction}, ensure_ascii=False) + "\n")
            else:  # one summary per line: sentences joined by a space
                handle.write(" ".join(prediction.split("\n")) + "\n")
    err.print(f"wrote {len(predictions)} summaries to {output}")


def _as_outline(prediction: str, doc_id: str) -> str:
    """A generated hierarchy as an outline; what could not be parsed is said in one warning line."""
    import logging

    from synopsis.qs import parse_lenient, render_outline

    parsed = parse_lenient(prediction)
    if parsed.problems:
        logging.getLogger("synopsis").warning(
            "%s: malformed generated hierarchy (%d problem(s), %d pair(s) dropped); showing what parsed",
            doc_id,
            len(parsed.problems),
            parsed.dropped,
        )
    return render_outline(parsed.tree)
