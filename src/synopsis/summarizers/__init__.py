"""Summarizers behind ``synopsis summarize``: one interface for extractive baselines and neural models.

Every summarizer keeps one contract, :class:`~synopsis.summarizers.base.Summarizer`:
``summarize(documents, instructions=None, references=None) -> list[str]`` on a batch. Models are imported
lazily so that choosing LEAD-3 never imports transformers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synopsis.config import DECODING_OPTIONS, use_threads
from synopsis.devices import check_device
from synopsis.errors import ConfigError, SynopsisError
from synopsis.io import read_json
from synopsis.summarizers.base import Summarizer, per_call_option
from synopsis.summarizers.decoders import AUTO, DECODERS, DEFAULT_BACKEND


@dataclass(frozen=True)
class LoadOptions:
    """What :func:`load_summarizer` was given, for a method's builder to take what it uses."""

    model: Path | None
    k: int
    max_source_length: int | None
    instruction_cache: bool
    dtype: str | None
    device: Any
    backend: str = DEFAULT_BACKEND
    compute_type: str | None = None


@dataclass(frozen=True)
class Method:
    """One ``--method``: its name (``lead-K``: any K >= 1), one line for ``--help`` and error messages, and
    how it is built (its module imported only then, so that LEAD-3 never imports transformers)."""

    name: str
    description: str
    build: Callable[[LoadOptions, re.Match[str]], Summarizer]
    torch: bool = True  #: computes with torch (its CPU threads are set before it is built)

    def matches(self, name: str) -> re.Match[str] | None:
        return re.fullmatch(re.escape(self.name).replace("K", r"(\d+)"), name)


def _lead(o: LoadOptions, m: re.Match[str]) -> Summarizer:
    from synopsis.summarizers.extractive import LeadSummarizer

    return LeadSummarizer(int(m.group(1)))


def _oracle(o: LoadOptions, m: re.Match[str]) -> Summarizer:
    from synopsis.summarizers.extractive import OracleSummarizer

    return OracleSummarizer()


def _salient(o: LoadOptions, m: re.Match[str]) -> Summarizer:
    from synopsis.summarizers.salient import SalientSummarizer

    return SalientSummarizer(k=o.k)


def _centrality(o: LoadOptions, m: re.Match[str]) -> Summarizer:
    from synopsis.summarizers.extractive import CentralitySummarizer

    return CentralitySummarizer(k=o.k)


def _default(o: LoadOptions, m: re.Match[str]) -> Summarizer:
    from synopsis.summarizers.default import DefaultSummarizer

    if o.model is not None:
        raise SynopsisError(
            "--method default uses the bundled model; for another model give --model alone "
            "(or with --method pointer-generator / seq2seq)"
        )
    return DefaultSummarizer.from_pretrained(k=o.k, device=o.device, max_source_tokens=o.max_source_length)


def _pointer_generator(o: LoadOptions, m: re.Match[str]) -> Summarizer:
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    return PointerGeneratorSummarizer.from_pretrained(
        o.model, device=o.device, max_source_tokens=o.max_source_length
    )


def _seq2seq(o: LoadOptions, m: re.Match[str]) -> Summarizer:
    from synopsis.summarizers.seq2seq import Seq2SeqSummarizer

    if o.model is None:
        raise SynopsisError("--method seq2seq needs --model (a Hugging Face directory or hub id)")
    backend = "torch" if o.backend == AUTO and o.dtype is not None else o.backend  # --dtype is torch's
    return Seq2SeqSummarizer.from_pretrained(
        o.model,
        backend=backend,
        max_source_length=o.max_source_length,
        device=o.device,
        dtype=o.dtype,
        compute_type=o.compute_type,
        instruction_cache=o.instruction_cache,
    )


_DEFAULT_LINE = (
    "the bundled pointer-generator for a paper abstract, for anything else salient sentences, with a note "
    "saying so"
)
_SALIENT_LINE = (
    "the document's most central sentences within --max-words (PacSum, directed centrality), k per section "
    "by section; with -i the most relevant ones (BM25 + sentence embeddings)"
)
#: Every method, once: ``--method``'s help, the error for an unknown one and :func:`load_summarizer` read it.
METHOD_TABLE = (
    Method("default", _DEFAULT_LINE, _default),
    Method("pointer-generator", "the bundled model (or --model) on any text", _pointer_generator),
    Method("seq2seq", "a BART, T5, LED or HIBRIDS checkpoint (--model: a directory or a hub id)", _seq2seq),
    Method("salient", _SALIENT_LINE, _salient),
    Method("lead-K", "the first K sentences (any K >= 1)", _lead, torch=False),
    Method("oracle", "the greedy ROUGE oracle (needs references)", _oracle, torch=False),
    Method("centrality", "the most central sentences", _centrality),
)
#: Methods ``synopsis summarize --method`` accepts (``lead-K`` takes any K >= 1).
METHODS = tuple(method.name for method in METHOD_TABLE)
#: Without a method or model: the bundled model where a document is in its domain, else salient sentences
#: with a note (:class:`~synopsis.summarizers.default.DefaultSummarizer`).
DEFAULT_METHOD = "default"


def methods_help() -> str:
    """``--method``'s help: what happens without it (:data:`DEFAULT_METHOD`), then every method's line."""
    lines = [
        f"Without it (the default): {m.description}"
        if m.name == DEFAULT_METHOD
        else f"{m.name}: {m.description}"
        for m in METHOD_TABLE
    ]
    return ". ".join(lines)


def find_method(name: str) -> tuple[Method, re.Match[str]]:
    """The table's entry for ``name``; an unknown one is a :class:`SynopsisError` listing them."""
    for method in METHOD_TABLE:
        found = method.matches(name)
        if found:
            return method, found
    raise SynopsisError(f"unknown method '{name}'; choose one of: {', '.join(METHODS)}")


def _model_family(model_dir: Path) -> str:
    """ "seq2seq" for a Hugging Face checkpoint (its config has ``model_type``), else "pointer-generator"."""
    config = model_dir / "config.json"
    if not config.is_file():
        raise SynopsisError(f"{model_dir}: no config.json; not a model directory")
    data = read_json(config, "a model directory", SynopsisError)
    return "seq2seq" if isinstance(data, dict) and "model_type" in data else "pointer-generator"


def check_backend(backend: str, method: str, compute_type: str | None, dtype: str | None) -> None:
    """One line for a backend the request cannot use (before any weights are read), read from the table of
    backends (:data:`~synopsis.summarizers.decoders.DECODERS`): a precision is the option of one backend
    (``auto`` decodes with torch when given one)."""
    if backend != AUTO and backend not in DECODERS:
        raise ConfigError(f"--backend must be one of {', '.join([AUTO, *DECODERS])}, got {backend!r}")
    row = DECODERS["torch" if backend == AUTO else backend]
    for option, value in (("dtype", dtype), ("compute_type", compute_type)):
        if value is None:
            continue
        owner = next(other for other in DECODERS.values() if other.precision_option == option)
        if owner is not row:
            takes = _flag(row.precision_option)
            raise ConfigError(f"{_flag(option)} applies to --backend {owner.name}; {row.name} takes {takes}")
        if value not in owner.precisions:
            raise ConfigError(f"{_flag(option)} must be one of {', '.join(owner.precisions)}, got {value!r}")
    if backend == AUTO:
        return
    if row.stock_only and method != "seq2seq":
        raise ConfigError(
            f"--backend {row.name} decodes Hugging Face seq2seq checkpoints (--model DIR), not {method}"
        )
    if not row.installed():  # an optional extra: one line, not an ImportError
        raise ConfigError(
            f"--backend {row.name} needs {row.requires}, absent here: pip install 'synopsis[{row.extra}]'"
        )


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def load_summarizer(
    method: str | None = None,
    model: str | Path | None = None,
    *,
    revision: str | None = None,
    k: int = 3,
    max_source_length: int | None = None,
    instruction_cache: bool = True,
    dtype: str | None = None,
    device: Any = "auto",
    threads: int | None = None,
    backend: str = DEFAULT_BACKEND,
    compute_type: str | None = None,
    **unknown: Any,
) -> Summarizer:
    """Build the summarizer for ``method`` (:data:`METHOD_TABLE`); with ``model`` and no method, the
    directory's config decides.

    ``model`` is a local directory or a Hugging Face hub id ``org/name`` (at ``revision``), read from
    huggingface_hub's cache and downloaded into it when online (:func:`synopsis.models.names.
    resolve_seq2seq`).

    Without either: ``default``, the bundled pointer-generator for documents in its domain (paper abstracts)
    and salient sentences for the rest, each with a note saying so (a named method or model is never
    replaced). Decoding options are not settings of a summarizer: give them per call,
    ``summarize(documents, decoding=DecodingOptions(num_beams=4, max_length=60))``.
    ``k`` is the number of sentences for centrality and salient (per section by section);
    ``max_source_length`` truncates neural inputs (words for the pointer-generator, subword tokens for
    Hugging Face models); ``instruction_cache=False`` makes an InstructSum model encode every prompt in full;
    ``dtype`` (fp32, bf16, fp16) casts a Hugging Face model's weights; ``device`` is where a neural model
    computes: ``auto`` (a GPU when torch sees one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``
    (:func:`~synopsis.devices.resolve_device`; an unusable one is an :class:`~synopsis.errors.InputError`).
    ``threads`` is torch's CPU threads for the methods that compute with torch; without it, the CLI's default
    (``$OMP_NUM_THREADS``, else the cores the load leaves free) unless the caller already set torch's
    threads (:func:`~synopsis.config.use_threads`). ``backend`` decodes a Hugging Face checkpoint with
    ``generate()`` (``torch``), CTranslate2 (``ctranslate2``: stock checkpoints, converted once and cached
    beside the model; ``compute_type`` float32, the default, int8 or int8_float32; see
    :mod:`~.decoders.ct2`), or, by default (``auto``), CTranslate2 where it writes ``generate()``'s
    tokens for the options asked and torch otherwise (:mod:`synopsis.summarizers.decoders.auto`).
    """
    check_device(device)  # an unusable device is refused before a model is looked up or read
    if model is not None or revision is not None:
        from synopsis.models.names import resolve_seq2seq

        if model is None:
            raise SynopsisError(f"revision {revision!r}: give the hub model it applies to (model='org/name')")
        model = resolve_seq2seq(model, revision)
    if method is None:
        method = _model_family(Path(model)) if model is not None else DEFAULT_METHOD
    if unknown:
        name = sorted(unknown)[0]
        if name in DECODING_OPTIONS:
            raise per_call_option(name)
        raise TypeError(f"load_summarizer() got an unexpected keyword argument '{name}'")
    check_backend(backend, method, compute_type, dtype)
    if dtype is not None and method != "seq2seq":
        raise SynopsisError(f"--dtype applies to Hugging Face (seq2seq) models, not to {method}")
    entry, found = find_method(method)
    if entry.torch:
        use_threads(threads, deferred=True)  # the methods that compute with torch, when they load it
    options = LoadOptions(
        model=None if model is None else Path(model),
        k=k,
        max_source_length=max_source_length,
        instruction_cache=instruction_cache,
        dtype=dtype,
        device=device,
        backend=backend,
        compute_type=compute_type,
    )
    return entry.build(options, found)
