"""The models a server offers, built once at start; clients name a model, never a path.

Each :class:`ModelEntry` holds a loaded summarizer (``synopsis.summarizers``, shared with the CLI) and what
it takes, as the summarizer describes itself. Options never mutate the shared summarizer: a request gets a
light copy that shares the weights, so concurrent requests with different options cannot interfere.
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synopsis.config import DECODING_OPTIONS, DecodingOptions
from synopsis.document import Document
from synopsis.errors import ConfigError, SynopsisError
from synopsis.hub import is_hub_id
from synopsis.models.names import resolve_seq2seq
from synopsis.sharding import resolve_device
from synopsis.summarizers import Summarizer, load_summarizer
from synopsis.summarizers.base import SummarizerInfo

logger = logging.getLogger("synopsis.serve")

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DEFAULT_MODEL = "default"

_WARM_UP_TEXT = (
    "The service loads every model when it starts. It then summarizes this short text once, so that the "
    "first real request does not pay for lazy initialisation. Nobody reads this summary. It only has to be "
    "long enough for the neural models' minimum summary length."
)

@dataclass
class ModelEntry:
    """One servable model: its name, the loaded summarizer and what it is and takes, as the summarizer
    describes itself (:meth:`~synopsis.summarizers.Summarizer.describe`)."""

    name: str
    summarizer: Summarizer
    description: str = ""  # for people (``GET /v1/models``); default: the summarizer's own
    source: str = "builtin"  # "builtin" or "user" (--model NAME=DIR); never the path
    info: SummarizerInfo = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.info = self.summarizer.describe()
        self.description = self.description or self.info.description

    @property
    def method(self) -> str:
        return self.info.method

    @property
    def instructions(self) -> bool:
        return self.info.instructions

    @property
    def options(self) -> tuple[str, ...]:
        return self.info.options

    @property
    def by_section(self) -> bool:
        return self.info.by_section

    @property
    def extractive(self) -> bool:  # picks sentences: cheap, so never waits for a batch
        return self.info.extractive

    def with_options(self, options: Mapping[str, Any]) -> Summarizer:
        """The summarizer to use for one request with these (already type-checked) options: a copy that
        shares the weights (:meth:`~synopsis.summarizers.Summarizer.with_options`).

        Raises :class:`OptionError` for an option this model does not take, or a combination it refuses
        (the message names the option); the caller reports it as a 422.
        """
        try:  # the values first, as the CLI checks them before it loads a model: built once, here
            decoding = DecodingOptions.from_mapping(
                {name: value for name, value in options.items() if name in DECODING_OPTIONS}, request=True
            )
        except ConfigError as err:
            raise OptionError(_named_option(options, err), str(err)) from None
        unsupported = [name for name in options if name not in self.options]
        if unsupported:
            takes = ", ".join(self.options) or "none"
            raise OptionError(
                unsupported[0],
                f"model '{self.name}' does not take option '{unsupported[0]}' (it takes: {takes})",
            )
        others = {name: value for name, value in options.items() if name not in DECODING_OPTIONS}
        try:  # the value travels as it is: nothing below checks it again
            return self.summarizer.with_options(decoding if decoding.given() else None, **others)
        except (ValueError, ConfigError) as err:
            # A cross-field problem (min_length > max_length, also against the model's own defaults).
            raise OptionError(_named_option(options, err), str(err)) from None

    def public(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": self.method,
            "description": self.description,
            "instructions": self.instructions,
            "options": list(self.options),
            "source": self.source,
            "device": self.info.device,
            "dtype": self.info.dtype,
            "backend": self.info.backend,
        }


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

    def __init__(self) -> None:
        self._entries: dict[str, ModelEntry] = {}

    def add(self, entry: ModelEntry) -> ModelEntry:
        if not NAME_RE.fullmatch(entry.name):
            raise ConfigError(
                f"model name '{entry.name}': use letters, digits, '.', '_' or '-' (at most 64 characters)"
            )
        if entry.name in self._entries:
            raise ConfigError(f"model name '{entry.name}' is used twice")
        self._entries[entry.name] = entry
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
def describe(name: str, summarizer: Summarizer, description: str = "", source: str = "builtin") -> ModelEntry:
    """A :class:`ModelEntry` for a summarizer from :func:`synopsis.summarizers.load_summarizer`, checked
    for serving (no reference summaries needed) and prepared (what loads lazily is loaded now)."""
    if not isinstance(summarizer, Summarizer):
        raise ConfigError(f"model '{name}': cannot serve a {type(summarizer).__name__} (not a Summarizer)")
    entry = ModelEntry(name, summarizer, description, source)
    if entry.info.references:
        raise ConfigError(f"model '{name}': cannot serve {entry.method}: it needs reference summaries")
    summarizer.prepare()  # load what is lazy (an embedding model) now, not in a request
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
    backend: str = "torch",
    compute_type: str | None = None,
) -> ModelRegistry:
    """The server's models: the bundled default, the extractive methods, then each ``NAME=DIR``.

    Every model with weights computes on ``device`` (``auto``: a GPU when torch sees one, else the CPU;
    :func:`~synopsis.sharding.resolve_device`), so the batcher's calls run there too; ``dtype`` (fp32, bf16,
    fp16) is the precision of the ``NAME=DIR`` Hugging Face models (the library refuses it for a
    pointer-generator; the bundled one stays as stored); ``backend``/``compute_type`` decode them with
    ``generate()`` or CTranslate2 (:mod:`synopsis.summarizers.ct2`). The centrality method needs the optional
    embedding model (``synopsis[embeddings]``); without it the server starts without that entry and says
    so in the log.
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
        summarizer = load_summarizer(
            None, Path(directory), device=target, dtype=dtype, backend=backend, compute_type=compute_type
        )
        entry = describe(name, summarizer, source="user")
        registry.add(entry)
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
