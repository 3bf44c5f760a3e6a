"""The models a server offers, built once at start; clients name a model, never a path.

Each :class:`ModelEntry` holds a loaded summarizer (``synopsis.summarizers``, shared with the CLI) and what
it takes, as the summarizer describes itself. Options never mutate the shared summarizer: a request gets a
light copy that shares the weights, so concurrent requests with different options cannot interfere.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synopsis.config import DECODING_OPTIONS, NO_DECODING, DecodingOptions
from synopsis.devices import resolve_device
from synopsis.document import Document
from synopsis.errors import ConfigError, SynopsisError
from synopsis.hub import is_hub_id
from synopsis.io import read_json
from synopsis.models.names import resolve_seq2seq
from synopsis.summarizers import Summarizer, check_backend, load_summarizer
from synopsis.summarizers.base import SummarizerInfo
from synopsis.summarizers.decoders import DECODERS, DEFAULT_BACKEND

logger = logging.getLogger("synopsis.serve")

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DEFAULT_MODEL = "default"

_WARM_UP_TEXT = (
    "The service loads every model when it starts. It then summarizes this short text once, so that the "
    "first real request does not pay for lazy initialisation. Nobody reads this summary. It only has to be "
    "long enough for the neural models' minimum summary length."
)

#: The options that pick what decodes a model rather than how (``--backend``, ``--compute-type``).
BACKEND_OPTIONS = ("backend", "compute_type")
#: How many models loaded on another backend for requests (a variant: ``backend`` and ``compute_type``)
#: the server keeps at once, all models together, when ``--max-variants`` is not given.
DEFAULT_MAX_VARIANTS = 2


class LoadedVariants:
    """The variants requests had the server load (a model on another backend or compute type), least
    recently used first, at most ``size`` of them across all models: loading one more unloads the least
    recently used (a request still using it keeps it until it ends). ``size`` 0: requests get only the
    backends the operator loaded. Unbounded, a client with the token could load torch and three
    CTranslate2 compute types of every model, never unloaded (issue 58)."""

    def __init__(self, size: int = DEFAULT_MAX_VARIANTS) -> None:
        self.size = size
        self._order: OrderedDict[tuple[int, tuple[str, str | None]], ModelEntry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._order)

    def used(self, entry: ModelEntry, key: tuple[str, str | None]) -> None:
        with self._lock:
            if (id(entry), key) in self._order:
                self._order.move_to_end((id(entry), key))

    def make_room(self) -> None:
        """Before a load: the least recently used unloaded until one more fits (so the memory of one is
        freed before the next is loaded, not after)."""
        self._evict(self.size - 1)

    def admit(self, entry: ModelEntry, key: tuple[str, str | None]) -> None:
        """``entry``'s variant ``key`` was loaded: the most recently used, and the least recently used
        others unloaded while there are more than ``size`` (loads of two models at once)."""
        with self._lock:
            self._order[(id(entry), key)] = entry
            self._order.move_to_end((id(entry), key))
        self._evict(self.size)

    def _evict(self, keep: int) -> None:
        while True:
            with self._lock:
                if len(self._order) <= max(keep, 0):
                    return
                (_, old), owner = self._order.popitem(last=False)
            owner.unload(old)


@dataclass(frozen=True)
class RequestOptions:
    """A request's options, checked once at the edge (:meth:`ModelEntry.request_options`) into one frozen,
    hashable value: what decodes the model (``backend``, ``compute_type``), the one
    :class:`~synopsis.config.DecodingOptions` and the model's other options (``k``). Two requests' summaries
    share a model call only when theirs are equal: it is the batcher's key."""

    backend: str = "torch"
    compute_type: str | None = None
    decoding: DecodingOptions = NO_DECODING
    others: tuple[tuple[str, Any], ...] = ()


@dataclass
class ModelEntry:
    """One servable model: its name, the loaded summarizer and what it is and takes, as the summarizer
    describes itself (:meth:`~synopsis.summarizers.Summarizer.describe`). ``loader`` loads the same model
    on another backend (``--model NAME=DIR`` Hugging Face checkpoints: a request's ``backend``), the first
    time a request asks; ``config`` is such a checkpoint's config.json, read to refuse at once a backend it
    cannot take."""

    name: str
    summarizer: Summarizer
    description: str = ""  # for people (``GET /v1/models``); default: the summarizer's own
    source: str = "builtin"  # "builtin" or "user" (--model NAME=DIR); never the path
    loader: Callable[[str, str | None], Summarizer] | None = field(default=None, repr=False)
    config: Mapping[str, Any] | None = field(default=None, repr=False)
    info: SummarizerInfo = field(init=False, repr=False)
    _backends: dict[tuple[str, str | None], Summarizer] = field(init=False, repr=False)
    _loading: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)
    #: the server's bound on variants loaded for requests (set by :meth:`ModelRegistry.add`)
    variants: LoadedVariants = field(init=False, repr=False, default_factory=LoadedVariants)

    def __post_init__(self) -> None:
        self.info = self.summarizer.describe()
        self.description = self.description or self.info.description
        self._backends = {self._loaded_backend(): self.summarizer}

    @property
    def method(self) -> str:
        return self.info.method

    @property
    def instructions(self) -> bool:
        return self.info.takes_instructions

    @property
    def options(self) -> tuple[str, ...]:
        return self.info.options

    @property
    def by_section(self) -> bool:
        return self.info.by_section

    @property
    def extractive(self) -> bool:  # picks sentences: cheap, so never waits for a batch
        return self.info.extractive

    def request_options(self, options: Mapping[str, Any]) -> RequestOptions:
        """A request's (already type-checked) ``options`` as one value, checked here, once, as the CLI checks
        its flags before it loads a model: the backend (the server's unless the request names one; one the
        model cannot take is refused with the CLI's line), the decoding values, and the options this model
        takes. Raises :class:`OptionError` naming the option; the caller reports it as a 422."""
        backend, compute_type = self._backend(options.get("backend"), options.get("compute_type"))
        try:
            decoding = DecodingOptions.from_mapping(
                {name: value for name, value in options.items() if name in DECODING_OPTIONS}, request=True
            )
        except ConfigError as err:
            raise OptionError(_named_option(options, err), str(err)) from None
        chosen = [name for name in options if name not in BACKEND_OPTIONS]
        unsupported = [name for name in chosen if name not in self.options]
        if unsupported:
            takes = ", ".join(self.options) or "none"
            raise OptionError(
                unsupported[0],
                f"model '{self.name}' does not take option '{unsupported[0]}' (it takes: {takes})",
            )
        others = tuple(sorted((name, options[name]) for name in chosen if name not in DECODING_OPTIONS))
        return RequestOptions(backend, compute_type, decoding, others)

    def loaded(self, options: RequestOptions) -> bool:
        """Whether the model is loaded on ``options``' backend (else :meth:`summarizer_for` loads it)."""
        return (options.backend, options.compute_type) in self._backends

    def summarizer_for(self, options: RequestOptions) -> Summarizer:
        """The summarizer of one request: a copy with its options (``k``, ``max_words``) that shares the
        weights (:meth:`~synopsis.summarizers.Summarizer.with_options`), on its backend (loaded now, blocking,
        the first time one is asked for: call it off the event loop unless :meth:`loaded`). Its decoding
        options go with each call; one the model refuses (``min_length`` over its own ``max_length``, a
        setting its decoder cannot honour) is an :class:`OptionError` here, before any work."""
        summarizer = self._on_backend(options.backend, options.compute_type)
        given = {**options.decoding.given(), **dict(options.others)}
        try:  # the decoding value travels as it is, with each call: nothing below checks it again
            summarizer.check_decoding(options.decoding)
            return summarizer.with_options(**dict(options.others))
        except (ValueError, ConfigError) as err:
            raise OptionError(_named_option(given, err), str(err)) from None

    def _loaded_backend(self) -> tuple[str, str | None]:
        """The backend the server loaded this model on (``torch`` for a model without one), and its compute
        type where the backend takes one (the ``compute_type`` of a request)."""
        backend = self.info.backend or "torch"
        return backend, self.info.dtype if _takes_compute_type(backend) else None

    def _backend(self, backend: str | None, compute_type: str | None) -> tuple[str, str | None]:
        """The backend a request asks for (the loaded one unless it names another), checked as the CLI checks
        ``--backend``/``--compute-type`` (:func:`~synopsis.summarizers.check_backend`)."""
        loaded, loaded_compute = self._loaded_backend()
        if backend == "auto" and (self.loader is None or self.info.backend == "auto"):
            backend = None  # the server's own choice already decides per request (or there is no other)
        chosen = backend or loaded
        if compute_type is None and chosen == loaded:
            compute_type = loaded_compute
        try:
            check_backend(chosen, self.method, compute_type, None)
            if chosen in DECODERS and self.config is not None:  # a Hugging Face model, loaded already
                DECODERS[chosen].decoder_class().check_checkpoint(f"model '{self.name}'", self.config)
        except ConfigError as err:
            named = "compute_type" if "--compute-type" in str(err) else "backend"
            raise OptionError(named, str(err)) from None
        if compute_type is None and _takes_compute_type(chosen):
            compute_type = DECODERS[chosen].precisions[0]  # its default: one key for it, named or not
        return chosen, compute_type

    def _on_backend(self, backend: str, compute_type: str | None) -> Summarizer:
        key = (backend, compute_type)
        loaded = self._backends.get(key)  # without the lock: a load in progress must not stall the loop
        if loaded is not None:
            if key != self._loaded_backend():
                self.variants.used(self, key)
            return loaded
        if self.loader is None:
            raise OptionError("backend", f"model '{self.name}' is served on {self._loaded_backend()[0]} only")
        if self.variants.size == 0:
            raise OptionError(
                "backend",
                f"model '{self.name}' is served on {self._loaded_backend()[0]} only: this server loads no "
                "other backend for a request (--max-variants 0)",
            )
        with self._loading:  # one load per backend, however many requests ask at once
            summarizer = self._backends.get(key)
            if summarizer is None:
                logger.info("loading model %s on %s (%s) for a request", self.name, backend, compute_type)
                self.variants.make_room()
                try:
                    summarizer = self._backends[key] = self.loader(backend, compute_type)
                except ConfigError as err:  # a generation setting CTranslate2 cannot honour
                    raise OptionError("backend", str(err)) from None
                self.variants.admit(self, key)  # may unload this model's or another's oldest variant
            return summarizer

    def unload(self, key: tuple[str, str | None]) -> None:
        """Forget a variant loaded for requests (never the backend the server loaded); requests using it
        keep it until they end."""
        if key != self._loaded_backend() and self._backends.pop(key, None) is not None:
            logger.info("unloaded model %s on %s (%s): --max-variants reached", self.name, *key)
            _return_freed_memory()

    def public(self) -> dict[str, Any]:
        """``GET /v1/models``' entry (``ModelInfo``): what it is and takes, where and how it computes."""
        about = ("name", "method", "description", "instructions", "source")
        named = {name: getattr(self, name) for name in about}
        placed = {name: getattr(self.info, name) for name in ("device", "dtype", "backend")}
        return {**named, "options": list(self.options), **placed}


def _takes_compute_type(backend: str) -> bool:
    """Whether a request's ``compute_type`` is ``backend``'s precision (CTranslate2's; torch's is --dtype)."""
    return backend in DECODERS and DECODERS[backend].precision_option == "compute_type"


def _return_freed_memory() -> None:
    """Hand the memory an unloaded model freed back to the system: glibc keeps freed memory in its arenas,
    so without ``malloc_trim`` each reload of a variant grew the process (three CTranslate2 variants of a
    7 MB checkpoint loaded in turn under a bound of 1: 460 → 540, 571, 588, 619 MB over four rounds; with it
    506, 523, 530, 536, 535, 530 MB over six). A no-op where there is no C library to ask."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()  # what only a cycle held
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is not None:
        trim(0)


def _named_option(options: Mapping[str, Any], err: Exception) -> str:
    """The option an error's message is about, by name or by flag (DecodingOptions names the CLI's flag)."""
    message = str(err)
    flags = {name: DECODING_OPTIONS[name].flag if name in DECODING_OPTIONS else name for name in options}
    return next((name for name in options if name in message or flags[name] in message), next(iter(options)))


class OptionError(ConfigError):
    """A per-request option the chosen model refuses; ``option`` names it for the 422 response."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


class UnknownModelError(SynopsisError):
    pass


class ModelRegistry:
    """Name -> :class:`ModelEntry`, in the order models were added (the first is listed first)."""

    def __init__(self, max_variants: int = DEFAULT_MAX_VARIANTS) -> None:
        self._entries: dict[str, ModelEntry] = {}
        self.variants = LoadedVariants(max_variants)  #: shared by the entries: one bound for the server

    def limit_variants(self, size: int) -> None:
        """At most ``size`` variants loaded for requests at once (``--max-variants``)."""
        self.variants.size = size

    def add(self, entry: ModelEntry) -> ModelEntry:
        if not NAME_RE.fullmatch(entry.name):
            raise ConfigError(
                f"model name '{entry.name}': use letters, digits, '.', '_' or '-' (at most 64 characters)"
            )
        if entry.name in self._entries:
            raise ConfigError(f"model name '{entry.name}' is used twice")
        self._entries[entry.name] = entry
        entry.variants = self.variants
        return entry

    def get(self, name: str) -> ModelEntry:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownModelError(
                f"unknown model '{name}'; available: {', '.join(self._entries) or 'none'}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[ModelEntry]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        return list(self._entries)

    @property
    def device(self) -> str:
        """Where its models compute (``cuda:0``, ``cpu``; several, comma-separated, when they differ), as
        their weights say; extractive methods without weights compute on the CPU."""
        devices = [entry.info.device for entry in self if entry.info.device is not None]
        return ", ".join(dict.fromkeys(devices)) or "cpu"

    def warm_up(self) -> None:
        """Summarize a short text with every model once, so lazy initialisation happens before serving."""
        document = Document.from_text(_WARM_UP_TEXT)
        for entry in self:
            start = time.perf_counter()
            with warnings.catch_warnings():  # startup is single-threaded, so this is safe here
                warnings.simplefilter("ignore")
                entry.summarizer.summarize([document], ["What is this?"] if entry.instructions else None)
            logger.info("model %s ready (warm-up %.0f ms)", entry.name, 1000 * (time.perf_counter() - start))


# ----------------------------------------------------------------------------- describing summarizers
def describe(
    name: str,
    summarizer: Summarizer,
    description: str = "",
    source: str = "builtin",
    loader: Callable[[str, str | None], Summarizer] | None = None,
    config: Mapping[str, Any] | None = None,
) -> ModelEntry:
    """A :class:`ModelEntry` for a summarizer from :func:`synopsis.summarizers.load_summarizer`, checked
    for serving (no reference summaries needed) and prepared (what loads lazily is loaded now)."""
    if not isinstance(summarizer, Summarizer):
        raise ConfigError(f"model '{name}': cannot serve a {type(summarizer).__name__} (not a Summarizer)")
    summarizer.prepare()  # load what is lazy (an embedding model, the default's model) now, not in a request
    entry = ModelEntry(name, summarizer, description, source, loader, config)  # describes it as loaded
    if entry.info.needs_references:
        raise ConfigError(f"model '{name}': cannot serve {entry.method}: it needs reference summaries")
    return entry


def parse_model_spec(spec: str) -> tuple[str, Path]:
    """``NAME=DIR`` (or ``NAME=ORG/MODEL[@REVISION]``, a hub id) from ``--model`` into (name, directory),
    checked before anything is loaded; a hub id is resolved here, once, through huggingface_hub's cache
    (:func:`~synopsis.models.names.resolve_seq2seq`), so every worker reads the same files."""
    name, sep, directory = spec.partition("=")
    if not sep or not name or not directory:
        raise ConfigError(f"--model {spec!r}: expected NAME=DIR or NAME=ORG/MODEL[@REVISION]")
    if not NAME_RE.fullmatch(name):
        raise ConfigError(f"--model {spec!r}: the name may hold letters, digits, '.', '_' or '-'")
    path = Path(directory).expanduser()
    repo_id, _, revision = directory.partition("@")
    if not path.exists() and is_hub_id(repo_id):
        return name, resolve_seq2seq(repo_id, revision or None)
    if not path.is_dir():
        raise ConfigError(f"--model {spec!r}: {path} is not a directory")
    if not (path / "config.json").is_file():
        raise ConfigError(f"--model {spec!r}: {path} has no config.json; not a model directory")
    return name, path


def build_registry(
    models: Mapping[str, str | Path] | None = None,
    *,
    builtin: bool = True,
    warm_up: bool = True,
    device: Any = "auto",
    dtype: str | None = None,
    backend: str = DEFAULT_BACKEND,
    compute_type: str | None = None,
) -> ModelRegistry:
    """The server's models: the bundled default, the extractive methods, then each ``NAME=DIR``.

    Every model with weights computes on ``device`` (``auto``: a GPU when torch sees one, else the CPU;
    :func:`~synopsis.devices.resolve_device`), so the batcher's calls run there too; ``dtype`` (fp32, bf16,
    fp16) is the precision of the ``NAME=DIR`` Hugging Face models (the library refuses it for a
    pointer-generator; the bundled one stays as stored); ``backend``/``compute_type`` decode them with
    ``generate()`` or CTranslate2 (:mod:`synopsis.summarizers.decoders`), by default ``auto``: CTranslate2
    where it writes ``generate()``'s tokens for a request's options. The
    centrality method needs the optional embedding model (``synopsis[embeddings]``); without it the server
    starts without that entry and says so in the log.
    """
    registry = ModelRegistry()
    started = time.perf_counter()
    target = resolve_device(device)  # once: an unusable device is refused before any weights are read
    if dtype is not None and not models:
        logger.warning("--dtype %s applies to --model NAME=DIR Hugging Face models; none is served", dtype)
    if builtin:
        # the library's default: the bundled model in its domain, else salient sentences
        registry.add(describe(DEFAULT_MODEL, load_summarizer(device=target)))
        registry.add(
            describe(
                "pointer-generator",
                load_summarizer("pointer-generator", device=target),
                "the bundled pointer-generator + coverage, trained on SciTLDR, on any document",
            )
        )
        registry.add(describe("salient", load_summarizer("salient")))
        registry.add(describe("lead-3", load_summarizer("lead-3")))
        try:
            registry.add(describe("centrality", load_summarizer("centrality")))
        except SynopsisError as err:
            logger.warning("model centrality not offered: %s", err)
    for name, directory in (models or {}).items():
        if name in registry:
            raise ConfigError(f"--model {name}=...: the name '{name}' is taken by a built-in model")
        registry.add(_user_model(name, Path(directory), target, dtype, backend, compute_type))
    logger.info(
        "loaded %d model(s) in %.1f s, computing on %s: %s",
        len(registry),
        time.perf_counter() - started,
        registry.device,
        ", ".join(registry.names()),
    )
    if warm_up:
        registry.warm_up()
    return registry


def _user_model(
    name: str, directory: Path, device: Any, dtype: str | None, backend: str, compute_type: str | None
) -> ModelEntry:
    """A ``--model NAME=DIR`` entry on the server's backend; a Hugging Face checkpoint may be asked for on
    the other backend too (loaded then, with the same device; ``--dtype`` is the torch backend's)."""

    def load(other: str, other_compute: str | None) -> Summarizer:
        precision = None if _takes_compute_type(other) else dtype  # --dtype is torch's (and auto's)
        return load_summarizer(
            None, directory, device=device, dtype=precision, backend=other, compute_type=other_compute
        )

    summarizer = load_summarizer(
        None, directory, device=device, dtype=dtype, backend=backend, compute_type=compute_type
    )
    path = directory / "config.json"  # read by the load already: a Hugging Face one has a model_type
    config = read_json(path, "a model directory", ConfigError) if path.is_file() else None
    seq2seq = isinstance(config, dict) and "model_type" in config
    return describe(
        name, summarizer, source="user", loader=load if seq2seq else None, config=config if seq2seq else None
    )
