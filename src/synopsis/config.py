"""Typed configuration: YAML/JSON files into dataclasses, with errors that name the bad key.

Every trainable method declares its settings as a dataclass; :func:`load_config` rejects unknown keys (naming
the closest valid one), wrong types and missing required values with a one-line
:class:`~synopsis.errors.ConfigError`. Every command that takes a config takes the same overrides,
``--set key.path=value`` (:func:`parse_overrides`), with values parsed as YAML: ``1e-3`` is a float,
``[a, b]`` a list, ``null`` None.

Every numeric setting has an allowed :class:`Range` (NaN and infinities are never allowed); a config
dataclass lists its fields' ranges in ``RANGES`` and checks them in ``__post_init__`` with
:func:`check_ranges`, so a bad value is a one-line error naming the field and the range before any work.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

from synopsis.errors import ConfigError, InputError
from synopsis.io import parse_json, read_text

T = TypeVar("T")


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity on Linux, else every CPU), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """The CPU threads to compute with when none are asked for: ``$OMP_NUM_THREADS`` if set, else the usable
    cores that other processes leave free (usable cores minus the 1-minute load average, rounded), at least 1.

    One thread per core (torch's own default) is the fastest setting only on an idle machine: on two cores at
    load average 3-8, every parallel op waits for a thread whose core is busy elsewhere, and a summary took
    5-10x as long as with one thread (issue 38). The load is read once, when a command starts."""
    try:
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    except (KeyError, ValueError):
        pass
    cores = usable_cores()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average (Windows)
        return cores
    return max(1, min(cores, cores - round(load)))


#: the thread count the library last gave torch (so a later call knows the count is its own, not the caller's)
_threads_set: list[int] = []


def _torch_default_threads() -> int:
    """What torch computes with when nobody set its threads: ``$OMP_NUM_THREADS`` (or ``$MKL_NUM_THREADS``)
    when set, else one thread per physical core (hyperthreads share one), as torch counts them."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        try:
            return max(1, int(os.environ[name]))
        except (KeyError, ValueError):
            pass
    try:
        cores = set()
        for cpu in os.sched_getaffinity(0):
            topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
            cores.add(((topology / "physical_package_id").read_text(), (topology / "core_id").read_text()))
        return max(1, len(cores))
    except (AttributeError, OSError):
        return usable_cores()


#: a :func:`use_threads` call put off until torch is loaded (``deferred=True`` before it was): its arguments
_deferred_threads: list[tuple[int | None, bool]] = []


def apply_deferred_threads() -> None:
    """Apply the :func:`use_threads` call that waited for torch (called where a model is built: the default
    summarizer loads torch only for a paper abstract, and an extractive summary never)."""
    if _deferred_threads:
        threads, respect_caller = _deferred_threads.pop()
        use_threads(threads, respect_caller=respect_caller)


def use_threads(threads: int | None = None, *, respect_caller: bool = True, deferred: bool = False) -> int:
    """Give torch ``threads`` intra-op threads, or when ``None`` :func:`default_threads` (the CLI's default);
    returns the count torch computes with.

    Every library entry point that computes (``load_summarizer``, the trainers) calls it, so the Python API
    runs as fast as the CLI on a loaded machine (issue 52: 200 abstracts took 241.6 s through the API with
    torch's one thread per core against 70.5 s through the CLI). With ``respect_caller`` (the library's
    way) a count already decided is kept: the one this function last set (a command's ``--threads``, an
    earlier call) or one the caller gave torch (any count but torch's own default; to be sure, pass
    ``threads``). The CLI owns its process and passes ``respect_caller=False``. With ``deferred`` and torch
    not loaded yet, the call waits for :func:`apply_deferred_threads` (returns the count it will ask for)."""
    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be >= 1, got {threads}")
    if deferred and "torch" not in sys.modules:
        _deferred_threads[:] = [(threads, respect_caller)]
        return threads if threads is not None else default_threads()
    import torch

    current = torch.get_num_threads()
    decided = current in _threads_set[-1:] or current != _torch_default_threads()
    if threads is None and respect_caller and decided:  # by this library, the command line or the caller
        return current
    wanted = threads if threads is not None else default_threads()
    if wanted != current:
        torch.set_num_threads(wanted)
    _threads_set[:] = [wanted]
    return wanted


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclasses.dataclass(frozen=True)
class Range:
    """The allowed values of a numeric setting: an interval, closed unless ``low_open``/``high_open``.

    NaN and infinities are outside every range, and so are booleans and non-numbers.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{_number(self.low)}, {_number(self.high)}{right}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {_number(self.low)}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {_number(self.high)}"
        return "a finite number"

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def check(self, name: str, value: Any) -> None:
        """Raise ``ValueError("name must be >= 1, got 0")`` unless ``value`` is in the range."""
        if value not in self:
            raise ValueError(f"{name} must be {self}, got {value!r}")


AT_LEAST_ONE = Range(1)
NON_NEGATIVE = Range(0)
POSITIVE = Range(0, low_open=True)
PROBABILITY = Range(0, 1)
DROPOUT = Range(0, 1, high_open=True)
FINITE = Range()


def check_ranges(config: Any, ranges: Mapping[str, Range]) -> None:
    """Check ``config``'s fields (dotted names reach into nested sections); ``None`` means "not set"."""
    for name, allowed in ranges.items():
        value = config
        for part in name.split("."):
            value = getattr(value, part)
        if value is not None:
            allowed.check(name, value)


class Checked:
    """Base of the configuration dataclasses: the fields named in ``RANGES`` (dotted names reach into nested
    sections) are checked when an instance is built, then :meth:`validate` (what a range cannot say)."""

    RANGES: ClassVar[Mapping[str, Range]] = {}

    def __post_init__(self) -> None:
        check_ranges(self, self.RANGES)
        self.validate()

    def validate(self) -> None:
        """Checks across fields; a ``ValueError`` that names the field."""


@dataclasses.dataclass(kw_only=True)
class ForHardware(Checked):
    """A trainer's or experiment's config that states the hardware it is meant for, for ``--dry-run``'s
    memory plan: ``devices`` (processes), the memory of one device (GB = 2**30 bytes; ``None``: not
    stated, the plan then says nothing about fitting) and ``device_type`` (``cuda``: GPUs, whose attention
    kernels and CUDA context the plan counts; ``cpu``). A subclass's ``RANGES`` start with
    :data:`HARDWARE`."""

    devices: int = 1
    device_memory_gb: float | None = None
    device_type: str = "cuda"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.device_type not in ("cuda", "cpu"):
            raise ValueError(f"device_type must be cuda or cpu, got {self.device_type!r}")


#: The ranges of :class:`ForHardware`'s fields.
HARDWARE: dict[str, Range] = {"devices": AT_LEAST_ONE, "device_memory_gb": POSITIVE}


def _check_type(value: Any, annotation: Any, where: str) -> Any:
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(annotation):
            try:
                return _check_type(value, option, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: expected {annotation}, got {type(value).__name__} {value!r}")
    if annotation is type(None):
        if value is None:
            return None
        raise ConfigError(f"{where}: expected null, got {value!r}")
    if origin in (list, tuple):
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} {value!r}")
        (inner, *_) = typing.get_args(annotation) or (Any,)
        return [_check_type(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        return dict(value)
    if dataclasses.is_dataclass(annotation):
        return from_dict(annotation, value, where)
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{where}: expected {annotation.__name__}, got a boolean")
    if annotation is float and isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: must be a finite number, got {value}")
    if isinstance(annotation, type) and not isinstance(value, annotation):
        raise ConfigError(f"{where}: expected {annotation.__name__}, got {type(value).__name__} {value!r}")
    return value


def from_dict(cls: type[T], data: Any, where: str = "config") -> T:
    """Build dataclass ``cls`` from a mapping, checking keys and types recursively."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(f"{where}: unknown key '{key}'; {hint}(valid keys: {', '.join(sorted(fields))})")
    kwargs = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _check_type(data[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required key '{name}'")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:  # __post_init__ validation
        raise ConfigError(f"{where}: {err}") from None


def parse_overrides(pairs: list[str] | None) -> dict[str, Any]:
    """``--set key.path=value`` pairs into a nested mapping; values are parsed as YAML (``1e-3`` is a float).

    YAML 1.1 reads ``1e-3`` as a string (it wants ``1.0e-3``); such values are taken as the float they are.
    """
    nested: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(f"--set {pair!r}: expected key.path=value, e.g. --set learning_rate=1e-4")
        try:
            if _DEEP_FLOW.search(raw):
                raise RecursionError
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError(f"--set {pair!r}: the value is not valid YAML") from None
        except RecursionError:
            raise ConfigError(f"--set {key}: nested too deeply (at most {MAX_CONFIG_DEPTH} levels)") from None
        check_depth(value, f"--set {key}")
        if isinstance(value, str):
            try:
                value = float(value) if value.strip().lower() not in ("nan", "inf", "-inf", "+inf") else value
            except ValueError:
                pass
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {pair!r}: '{part}' is set to a value and cannot have keys")
        node[leaf] = value
    return nested


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` on top of ``base``, recursively for nested sections."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


#: The deepest a configuration's mappings and lists may nest (every real one is under 5 levels).
MAX_CONFIG_DEPTH = 32
#: More flow collections opened in a row than that: ``[[[[...``.
_DEEP_FLOW = re.compile(r"[\[{](?:\s*[\[{]){" + str(MAX_CONFIG_DEPTH) + "}")


def check_depth(data: Any, where: str, limit: int = MAX_CONFIG_DEPTH) -> None:
    """Refuse mappings and lists nested more than ``limit`` deep (one line, never a ``RecursionError`` in
    whatever walks them later); walked without recursion."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    raise ConfigError(f"{where}: nested too deeply (at most {limit} levels)")
                stack.append((child, depth + 1))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML (or JSON) file's top-level mapping."""
    try:
        text = read_text(path)
    except InputError as err:
        raise ConfigError(str(err)) from None
    if not str(path).endswith((".yaml", ".yml")):
        data = parse_json(text, path, ConfigError, "not valid JSON")
    else:
        if _DEEP_FLOW.search(text):  # PyYAML's scanner takes time quadratic in the depth: refused before it
            raise ConfigError(f"{path}: nested too deeply (at most {MAX_CONFIG_DEPTH} levels)")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
        except RecursionError:  # PyYAML composes nested nodes recursively
            raise ConfigError(f"{path}: nested too deeply (at most {MAX_CONFIG_DEPTH} levels)") from None
    check_depth(data, str(path))
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def load_config(
    cls: type[T],
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    base: dict[str, Any] | None = None,
) -> T:
    """``cls`` from a YAML/JSON file (or ``base``, or the defaults), with nested ``overrides`` on top."""
    data = read_config_file(path) if path is not None else dict(base or {})
    return from_dict(cls, merge(data, overrides or {}), str(path) if path is not None else "options")


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


# ----------------------------------------------------------------------------- decoding options
@dataclasses.dataclass(frozen=True)
class DecodingOption:
    """One decoding option a caller may set: its name (as ``generate()`` names it), type, allowed range and
    help text. The CLI's flags and the service's request fields are built from these (and a test checks
    they agree); ``request_range`` is the tighter bound one HTTP request may ask for."""

    name: str
    type: type
    allowed: Range
    help: str
    request_range: Range

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


#: The decoding options every neural summarizer takes, in the order the CLI and the service list them.
DECODING_OPTIONS: dict[str, DecodingOption] = {
    option.name: option
    for option in (
        DecodingOption("num_beams", int, AT_LEAST_ONE, "Beam width (1: greedy).", Range(1, 16)),
        DecodingOption("min_length", int, NON_NEGATIVE, "Shortest summary (words/tokens).", Range(0, 1024)),
        DecodingOption("max_length", int, AT_LEAST_ONE, "Longest summary (words/tokens).", Range(1, 1024)),
        DecodingOption(
            "length_penalty", float, FINITE, "Beam search length penalty exponent.", Range(-10, 10)
        ),
        DecodingOption(
            "no_repeat_ngram_size", int, NON_NEGATIVE, "Never repeat an n-gram of this size (0: off).",
            Range(0, 16),
        ),
    )
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class DecodingOptions:
    """The decoding options a caller set (``None``: the model's own default), checked once, here.

    The one type behind ``synopsis summarize``'s flags, the service's ``options`` and a training config's
    ``generation``: :meth:`given` is what goes to Hugging Face ``generate()`` as keyword arguments, and the
    pointer-generator's :class:`~synopsis.generation.config.GenerationConfig` takes the same names.
    """

    num_beams: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    length_penalty: float | None = None
    no_repeat_ngram_size: int | None = None

    def __post_init__(self) -> None:
        self._validate()

    def _validate(self) -> None:
        """Every value in its range, and the lengths in order: the one check, when a value is built."""
        for option in DECODING_OPTIONS.values():
            value = getattr(self, option.name)
            if value is not None and value not in option.allowed:
                raise ConfigError(f"{option.flag} must be {option.allowed}, got {value!r}")
        self._check_lengths(self.min_length, self.max_length)

    @staticmethod
    def _check_lengths(low: int | None, high: int | None) -> None:
        if low is not None and high is not None and low > high:
            raise ConfigError(f"--min-length {low} is larger than --max-length {high}")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any] | None, *, request: bool = False) -> DecodingOptions:
        """Options by name (``None`` values: unset); an unknown name is a :class:`ConfigError` naming it.

        Where a value enters (the CLI's flags, a request's ``options``, a library call, a stored file), it is
        checked here, once, with one message for one mistake. ``request``: also within the tighter bound one
        HTTP request may ask for (``request_range``), after the range every caller shares."""
        options = dict(options or {})
        unknown = sorted(set(options) - set(DECODING_OPTIONS))
        if unknown:
            raise ConfigError(
                f"unknown generation option(s) {', '.join(unknown)}; valid: {', '.join(DECODING_OPTIONS)}"
            )
        for name, value in options.items():
            if value is not None:
                _check_type(value, DECODING_OPTIONS[name].type, DECODING_OPTIONS[name].flag)
        checked = cls(**options)
        for name, value in checked.given().items() if request else ():
            limit = DECODING_OPTIONS[name].request_range
            if value not in limit:
                raise ConfigError(
                    f"{DECODING_OPTIONS[name].flag} must be {limit} in one request, got {value!r}"
                )
        return checked

    def given(self) -> dict[str, Any]:
        """The options that are set, by name: keyword arguments of Hugging Face ``generate()``."""
        return {name: value for name in DECODING_OPTIONS if (value := getattr(self, name)) is not None}

    def update(self, **options: Any) -> DecodingOptions:
        """These options with ``options`` on top (``None`` values leave an option as it is), checked again."""
        return self.from_mapping({**self.given(), **{k: v for k, v in options.items() if v is not None}})


#: No decoding option set: every model's own defaults (one value, so that nothing builds and checks it again).
NO_DECODING = DecodingOptions()
