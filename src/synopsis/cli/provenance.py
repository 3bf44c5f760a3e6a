"""What produced a predictions file, so that ``synopsis summarize --resume`` never mixes two runs' output.

A run that writes ``--output out.jsonl`` records its method, model and every option that changes a summary
in a sidecar, ``out.jsonl.run.json`` (the predictions file itself stays what every reader expects). A
``--resume`` compares: a run that differs is refused, naming what differs, as a training run refuses a
checkpoint of another configuration; so is an output that holds ids the corpus does not have (a file of
another corpus). An output without a sidecar (from before sidecars, or whose sidecar was lost) is resumed
with a warning, and gets one that says how many of its lines came before it, their provenance unknown
(``"unrecorded_lines"``), so the record never claims the whole file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from synopsis.cli.output import OutputTarget
from synopsis.errors import OutputError
from synopsis.io import read_json, write_json

log = logging.getLogger("synopsis.cli")

SUFFIX = ".run.json"
#: The sidecar's count of the output's lines written before any record: what made them is unknown.
UNRECORDED = "unrecorded_lines"


def sidecar_path(output: Path) -> Path:
    return output.with_name(output.name + SUFFIX)


def run_record(
    spec: Any, by: str, max_words: int, instructions: Sequence[str], method: str, backend: str | None = None
) -> dict[str, Any]:
    """What makes a summary what it is, from ``synopsis summarize``'s options (``spec``: its ModelSpec),
    ``method``, the loaded summarizer's (``--method``, else what the model's config or the default chose),
    and ``backend``, what decodes the model (``--backend auto``'s choice; ``None``: no model, or torch)."""
    backend = backend or "torch"
    return {
        "method": method,
        "model": str(spec.model.resolve()) if spec.model is not None else "(bundled default)",
        "k": spec.k,
        "max_source_length": spec.max_source_length,
        "dtype": spec.dtype,
        **({"backend": backend, "compute_type": spec.compute_type} if backend != "torch" else {}),
        "decoding": spec.decoding.given(),
        "by": by,
        "max_words": max_words,
        "instructions": list(instructions),
    }


def _recordable(output: Path) -> bool:
    """A regular file (or one to be made): not /dev/stdout, a pipe or a terminal."""
    return not output.exists() or output.is_file()


def check_resume(
    target: OutputTarget, produced_by: Mapping[str, Any], ids: Sequence[str], write: bool = True
) -> None:
    """Record ``produced_by`` for a fresh run's output file (``target.path``); on ``--resume``, refuse an
    output made by other options (:class:`OutputError` naming each difference) or holding ids that ``ids``
    lacks. ``write``: whether this process writes the sidecar (the main one of a launch; every process
    checks alike)."""
    output = target.path
    if output is None or not _recordable(output):
        return
    sidecar = sidecar_path(output)
    produced_by = json.loads(json.dumps(dict(produced_by)))  # as it reads back: lists, not tuples
    continuing = target.resume and output.exists()
    if continuing:
        if sidecar.exists():
            recorded = read_json(sidecar, "a run record of synopsis summarize", OutputError, dict)
            differences = _differences(recorded, produced_by)
            if differences:
                raise OutputError(
                    f"--resume: {output} was written with other options ({'; '.join(differences)}); give the "
                    "same options, or a new --output"
                )
        else:
            log.warning(
                "%s: no record of the options that wrote it (%s); resuming on trust", output, sidecar.name
            )
            produced_by[UNRECORDED] = _complete_lines(output)  # made by options this record cannot tell
        _refuse_foreign_ids(output, ids, target.jsonl)
    if write and not (continuing and sidecar.exists()):
        write_json(sidecar, produced_by)


def _complete_lines(output: Path) -> int:
    with open(output, "rb") as handle:
        return sum(line.endswith(b"\n") for line in handle)  # a last line cut short is redone


def _differences(recorded: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    keys = sorted((set(recorded) | set(given)) - {UNRECORDED})
    return [
        f"{key}: {json.dumps(recorded.get(key))} then, {json.dumps(given.get(key))} now"
        for key in keys
        if recorded.get(key) != given.get(key)
    ]


def _refuse_foreign_ids(output: Path, ids: Sequence[str], jsonl: bool) -> None:
    """JSONL outputs name their examples: each must be one of ``ids``; plain outputs (one line per example,
    in order) may hold at most ``len(ids)`` lines."""
    with open(output, "rb") as handle:
        lines = [line for line in handle if line.endswith(b"\n")]  # a last line cut short is redone
    if not jsonl:
        if len(lines) > len(ids):
            raise OutputError(
                f"--resume: {output} holds {len(lines)} predictions, more than the {len(ids)} documents of "
                "this run: it was written for other input; give a new --output"
            )
        return
    known = set(ids)
    for number, line in enumerate(lines, start=1):
        try:
            found = str(json.loads(line)["id"])
        except (ValueError, KeyError, TypeError):
            continue  # not a prediction line: the writer says so when it reads the file
        if found not in known:
            raise OutputError(
                f"--resume: {output}:{number} holds id '{found}', which this run's input does not have: it "
                "was written for other input; give a new --output"
            )
