"""The one contract every summarizer keeps (in the spirit of rouge_score's ``scoring.BaseScorer``).

``summarize(documents, instructions=None, references=None, *, decoding=None) -> list[str]``: a batch in, one
summary per document out, in order. ``instructions`` (one per document, ``None`` entries allowed) steer
methods that take them and are ignored by the rest; ``references`` are read only by methods that need them
(the oracle) and ignored by the rest; ``decoding`` (one :class:`~synopsis.config.DecodingOptions`, checked
where it was built) is passed per call, as to ``generate()``, to the methods that decode
(:attr:`Summarizer.decoding_options`): a summarizer holds no decoding settings. Callers never check which
method they hold: they ask it (:meth:`Summarizer.describe`) and get a copy with its other options from it
(:meth:`Summarizer.with_options`: ``k``, ``max_words``).
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Self

from synopsis.config import DECODING_OPTIONS, NO_DECODING, DecodingOptions
from synopsis.devices import resolve_device
from synopsis.document import Document
from synopsis.errors import ConfigError, InputError
from synopsis.summarizers.batches import (
    DEFAULT_BATCH_SIZE,
    batch_size_in_force,
    batch_size_wanted,
    length_batches,
)
from synopsis.summarizers.citing import aligned_sentences
from synopsis.summarizers.decoders import INFERENCE_DTYPES
from synopsis.summarizers.schema import DocumentSummary, SummarySentence
from synopsis.summarizers.sections import DEFAULT_MAX_WORDS, summarize_by_section
from synopsis.summarizers.windows import Window, flat_document, window_document
from synopsis.text import split_sentences

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SummarizerInfo:
    """What a summarizer is and takes, for the CLI and the service to ask instead of checking its class."""

    method: str  #: the ``--method`` that builds it (``lead-3``, ``centrality``, ``seq2seq``, ...)
    description: str  #: one line for people (``GET /v1/models``)
    options: tuple[str, ...] = ()  #: what :meth:`Summarizer.with_options` takes
    takes_instructions: bool = False  #: whether instructions change the output
    needs_references: bool = False  #: whether it needs reference summaries (the oracle)
    reads_section_tree: bool = False  #: whether by section it reads each section as its subtree
    by_section: bool = True  #: whether it can summarize by section
    extractive: bool = False  #: whether it picks sentences (cheap: no batching, no model weights)
    device: str | None = None  #: where its model computes (``cuda:0``, ``cpu``); ``None``: no model
    dtype: str | None = None  #: its weights' precision (``float32``, ``bfloat16``); ``None``: no model
    backend: str | None = None  #: what decodes its model (``torch``, ``ctranslate2``); ``None``: no model


class ModelPlacement:
    """Where a summarizer's model (its ``model`` attribute, if any) computes and in which precision."""

    #: the torch module it computes with (CTranslate2's translator for that backend); ``None``: no model
    model: Any = None

    @property
    def device(self) -> Any:
        """The ``torch.device`` its model computes on (inputs are made there); ``None`` without a model."""
        parameter = self._first_parameter()
        return None if parameter is None else parameter.device

    @property
    def dtype(self) -> Any:
        """The ``torch.dtype`` of its model's weights; ``None`` without a model."""
        parameter = self._first_parameter()
        return None if parameter is None else parameter.dtype

    def _first_parameter(self) -> Any:
        if self.model is None:  # an extractive method: no torch to load
            return None
        import torch

        if not isinstance(self.model, torch.nn.Module):
            return None
        return next(iter(self.model.parameters()), None)

    def to(self, device: Any) -> Self:
        """Move the model (if any) to ``device`` (see :func:`~synopsis.devices.resolve_device`), e.g. a
        process's own GPU in a sharded run; returns self."""
        import torch

        if isinstance(self.model, torch.nn.Module):
            self.model.to(resolve_device(device))
        return self


class Summarizer(ModelPlacement, ABC):
    """Base class of every method behind ``synopsis summarize`` and the service."""

    #: whether ``instructions`` change the output (the CLI and the service say so when they do not)
    takes_instructions: bool = False
    #: whether ``references`` are required (the oracle)
    needs_references: bool = False
    #: whether the model reads the section tree, so that by section each section is read as its subtree
    reads_section_tree: bool = False
    #: whether the method picks whole sentences
    extractive: bool = False
    #: the options :meth:`with_options` takes
    options: tuple[str, ...] = ()
    #: the decoding options (:data:`~synopsis.config.DECODING_OPTIONS`) its calls take (``decoding=``)
    decoding_options: tuple[str, ...] = ()
    #: what decodes its model (``torch``; :mod:`~synopsis.summarizers.decoders` names the others)
    backend: str = "torch"
    #: the source cache it keeps across requests (InstructSum's K/V cache), for the service's metrics
    cache: Any = None

    def summarize(
        self,
        documents: Sequence[Document | str],
        instructions: Sequence[str | None] | None = None,
        references: Sequence[Sequence[str]] | None = None,
        *,
        decoding: DecodingOptions | None = None,
        batch_size: int | None = None,
    ) -> list[str]:
        """One summary per document (a :class:`Document`, or plain text: read as
        :meth:`Document.from_text` reads it); the batch is checked here, once for every method, and so is
        ``decoding`` (an option this summarizer does not take is a :class:`ConfigError` naming it).

        A model reads ``batch_size`` documents per call at most (default: the batch size of an enclosing
        call, else :data:`DEFAULT_BATCH_SIZE`, ``synopsis summarize``'s batch; extractive methods: all at
        once), sorted by length (:meth:`input_length`, :func:`length_batches`), so one call of many
        documents pads each to its neighbours' length, not to the longest of all."""
        checked = self.check_batch(documents, instructions, references)
        decoding = self.check_decoding(decoding)
        if not documents:
            return []
        if batch_size is not None and batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        docs = as_documents(documents)
        size = batch_size or batch_size_wanted() or (None if self.extractive else DEFAULT_BATCH_SIZE)
        if size is None or len(docs) <= size:
            with batch_size_in_force(size or len(docs)):
                return self._summarize_batch(docs, checked, references, decoding)
        out = [""] * len(docs)
        lengths = [self.input_length(" ".join(s.text for s in d.sentences)) for d in docs]
        for rows in length_batches(lengths, size):
            refs = None if references is None else [references[i] for i in rows]
            with batch_size_in_force(size):
                chunk, asked = [docs[i] for i in rows], [checked[i] for i in rows]
                made = self._summarize_batch(chunk, asked, refs, decoding)
            for row, summary in zip(rows, made, strict=True):
                out[row] = summary
        return out

    @abstractmethod
    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any,
        decoding: DecodingOptions,
    ) -> list[str]:
        """One summary per document of a checked, non-empty batch, decoded with ``decoding`` (checked)."""

    # ------------------------------------------------------------------ what it is, what it takes
    @abstractmethod
    def describe(self) -> SummarizerInfo:
        """What this summarizer is and which options it takes."""

    def _info(self, method: str, description: str) -> SummarizerInfo:
        """The :class:`SummarizerInfo` of this summarizer from its class attributes."""
        return SummarizerInfo(
            method=method,
            description=description,
            options=(*self.options, *self.decoding_options),
            takes_instructions=self.takes_instructions,
            needs_references=self.needs_references,
            reads_section_tree=self.reads_section_tree,
            by_section=not self.needs_references,
            extractive=self.extractive,
            device=None if self.device is None else str(self.device),
            dtype=None if self.dtype is None else str(self.dtype).removeprefix("torch."),
            backend=None if self.device is None else self.backend,
        )

    def with_options(self, **options: Any) -> Summarizer:
        """A summarizer with these options (``k``, ``max_words``; ``None``: unchanged) that shares this one's
        weights and caches; this one is never changed. An option it does not take is a :class:`ConfigError`
        naming it; decoding options are not settings of a summarizer but of each call
        (``summarize(..., decoding=...)``)."""
        options = {name: value for name, value in options.items() if value is not None}
        unknown = [name for name in options if name not in self.options]
        if unknown:
            name = unknown[0]
            if name in DECODING_OPTIONS:
                raise per_call_option(name)
            takes = ", ".join(self.options) or "none"
            raise ConfigError(f"{type(self).__name__} does not take option '{name}' (it takes: {takes})")
        return self._with_options(options) if options else self

    def check_decoding(self, decoding: DecodingOptions | None) -> DecodingOptions:
        """``decoding`` (``None``: none) for this summarizer's calls: an option it does not take is a
        :class:`ConfigError` naming it (values were checked when the value was built)."""
        if decoding is None:
            return NO_DECODING
        unknown = [name for name in decoding.given() if name not in self.decoding_options]
        if unknown:
            takes = ", ".join(self.decoding_options) or "none"
            name = type(self).__name__
            raise ConfigError(f"{name} does not take option '{unknown[0]}' (it decodes with: {takes})")
        return decoding

    def backend_for(self, decoding: DecodingOptions) -> str | None:
        """What decodes its model with ``decoding`` (``torch``, ``ctranslate2``: ``--backend auto`` chooses
        per set of options); ``None``: no model."""
        return None if self.device is None else self.backend

    def _with_options(self, options: dict[str, Any]) -> Summarizer:
        """The copy :meth:`with_options` returns, for known, non-empty ``options``."""
        raise NotImplementedError(f"{type(self).__name__} takes no options")

    def methods(self, documents: Sequence[Document]) -> list[str]:
        """The method that writes each document's summary: this summarizer's own
        (:meth:`describe`), unless it routes documents (the default chooses per document)."""
        return [self.describe().method] * len(documents)

    def notes(self, documents: Sequence[Document]) -> list[str | None]:
        """One line per document that the reader of its summary should see (how it was summarized, or how
        far it is from what the model was made for), ``None`` where there is nothing to say. By section it
        is :attr:`DocumentSummary.note`; by document the front end shows it beside the summary."""
        return [None] * len(documents)

    def prepare(self) -> None:  # noqa: B027 - most summarizers load everything when built
        """Load what is loaded lazily (an embedding model), so that a server pays for it before serving."""

    # ------------------------------------------------------------------ by section
    def input_capacity(self) -> int | None:
        """How much one model call reads, in :meth:`input_length` units (``None``: no limit)."""
        return None

    def input_capacity_for(self, document: Document) -> int | None:
        """How much one model call reads of ``document`` (:meth:`input_capacity` unless a summarizer routes
        documents: the default reads an article whole with its extractive method)."""
        return self.input_capacity()

    def input_length(self, text: str) -> int:
        """The length of ``text`` in the units of :meth:`input_capacity` (words unless a model says)."""
        return len(text.split())

    def summarize_windows(
        self, windows: Sequence[Window], instructions: Sequence[str | None] | None = None,
        decoding: DecodingOptions | None = None,
    ) -> list[list[SummarySentence]]:
        """The summary sentences of each window, each citing its window's sentences (``decoding``: as for
        :meth:`summarize`).

        This default summarizes each window as a document and cites by lexical alignment; methods that know
        where their words came from (extractive selection, the pointer-generator's attention) override it. A
        subtree window (a model that reads the section tree) is given as its section's subtree."""
        documents = [window_document(w) if w.subtree else flat_document(w) for w in windows]
        with batch_size_in_force(max(1, len(documents))):  # the caller's batch of windows is one call
            predictions = self.summarize(documents, instructions, decoding=decoding)
        out = []
        for window, prediction in zip(windows, predictions, strict=True):
            sentences = [s for line in prediction.split("\n") for s in split_sentences(line)]
            out.append(aligned_sentences(sentences, window))
        return out

    def summarize_by_section(
        self,
        documents: Sequence[Document | str],
        instructions: Sequence[str | None] | None = None,
        *,
        max_words: int = DEFAULT_MAX_WORDS,
        **options: Any,
    ) -> list[DocumentSummary]:
        """A summary of every section of each document and a document summary of at most ``max_words``
        words composed from them, every sentence with its sources: see
        :func:`synopsis.summarizers.sections.summarize_by_section` for the options."""
        checked = self.check_batch(documents, instructions)
        return self._by_section(as_documents(documents), checked, {"max_words": max_words, **options})

    def _by_section(
        self, documents: Sequence[Document], instructions: list[str | None], options: dict[str, Any]
    ) -> list[DocumentSummary]:
        """What :meth:`summarize_by_section` does with a checked batch (``options`` with ``max_words``): the
        hook a summarizer that sends each document to another one overrides, so that the public signature is
        written once."""
        return summarize_by_section(self, documents, instructions, **options)

    @staticmethod
    def check_batch(
        documents: Sequence[Document],
        instructions: Sequence[str | None] | None,
        references: Sequence[Sequence[str]] | None = None,
    ) -> list[str | None]:
        """Instructions as a list of the documents' length; mismatched lengths are an error."""
        if instructions is None:
            instructions = [None] * len(documents)
        if len(instructions) != len(documents):
            raise InputError(f"got {len(instructions)} instructions for {len(documents)} documents")
        if references is not None and len(references) != len(documents):
            raise InputError(f"got {len(references)} reference lists for {len(documents)} documents")
        return list(instructions)


def per_call_option(name: str) -> ConfigError:
    """The error for a decoding option given where a summarizer is built or copied: it belongs to each
    call (``summarize(..., decoding=DecodingOptions(...))``, as ``generate()`` takes its options)."""
    call = f"summarize(..., decoding=DecodingOptions({name}=...))"
    return ConfigError(f"'{name}' is a decoding option: give it per call, {call}")


def as_documents(documents: Sequence[Document | str]) -> list[Document]:
    """A batch as Documents: plain text (``str``) is read as :meth:`Document.from_text` reads it (paragraphs
    at blank lines, sentences split, with their spans, so that a model reads the text as written), so the
    library takes what a user has at hand."""
    return [Document.from_text(d, spans=True) if isinstance(d, str) else d for d in documents]


def say_where_on_first_call(model: Any, message: str) -> None:
    """Log ``message`` once, when ``model`` (or any of its modules) first computes, not when it is loaded: a
    summarizer may hold a model it never calls (the default summarizer, for a document outside its domain,
    writes the document's own sentences), and a line saying where a model runs would then be untrue."""
    handles: list[Any] = []
    lock = threading.Lock()

    def first_call(*_: Any) -> None:
        with lock:
            if not handles:  # another thread's call said it
                return
            for handle in handles:
                handle.remove()
            handles.clear()
        logger.info("%s", message)

    handles.extend(module.register_forward_pre_hook(first_call) for module in model.modules())


def check_dtype(dtype: str | None) -> None:
    """A ``--dtype`` torch cannot cast to is refused in one line (before any weights are read)."""
    if dtype is not None and dtype not in INFERENCE_DTYPES:
        raise ConfigError(f"--dtype must be one of {', '.join(INFERENCE_DTYPES)}, got {dtype!r}")


def place_model(model: Any, device: Any = "auto", dtype: str | None = None) -> Any:
    """``model`` in ``dtype`` (fp32, bf16, fp16; ``None``: as stored) on ``device`` (``auto``: a GPU when
    torch sees one, else the CPU; see :func:`~synopsis.devices.resolve_device`), with one log line saying
    where it runs when it first computes (:func:`say_where_on_first_call`). Half precision on the CPU is
    allowed, as asked, with a warning where the CPU has no instructions for it (:func:`cpu_runs_natively`):
    there its kernels are emulated, far slower than fp32 (about 100x for bf16 generation on an AVX2 CPU),
    while bf16 on a CPU with AVX512-BF16/AMX was 2.3-2.8x faster than fp32."""
    import torch

    from synopsis.config import apply_deferred_threads

    apply_deferred_threads()
    check_dtype(dtype)
    precisions = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    target = resolve_device(device)
    model = model.to(device=target, dtype=None if dtype is None else precisions[dtype])
    weights = next(iter(model.parameters()), None)
    precision = "" if weights is None else f" ({str(weights.dtype).removeprefix('torch.')})"
    say_where_on_first_call(model, f"model runs on {target}{precision}")
    if target.type == "cpu" and dtype in NATIVE_CPU_FLAGS and not cpu_runs_natively(dtype):
        flags = "/".join(NATIVE_CPU_FLAGS[dtype])
        message = "--dtype %s on this CPU is much slower than fp32 (it has no %s instructions: %s)"
        logger.warning(message, dtype, dtype, flags)
    return model


#: The CPU features (``/proc/cpuinfo``'s flags on x86-64, its Features on ARM) that run a half precision in
#: hardware; without one, torch emulates it.
NATIVE_CPU_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16", "bf16"), "fp16": ("avx512_fp16", "amx_fp16")}


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux lists them in ``/proc/cpuinfo`` (empty where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    flags: set[str] = set()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return frozenset(flags)


def cpu_runs_natively(dtype: str) -> bool:
    """Whether this CPU computes ``dtype`` (bf16, fp16) with instructions of its own
    (:data:`NATIVE_CPU_FLAGS`), read once from what the CPU reports; not known counts as not."""
    return any(flag in cpu_flags() for flag in NATIVE_CPU_FLAGS.get(dtype, ()))
