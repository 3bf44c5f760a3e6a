"""Typed configuration: YAML/JSON files into dataclasses, with errors that name the bad key.

Every trainable method declares its settings as a dataclass; :func:`load_config` rejects unknown keys,
wrong types and missing required values with a one-line :class:`~synopsis.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from synopsis.errors import ConfigError, InputError
from synopsis.io import read_text

T = TypeVar("T")


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
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(fields))}"
        )
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


def load_config(cls: type[T], path: str | Path, overrides: dict[str, Any] | None = None) -> T:
    """Read a YAML (or JSON) file into ``cls``; ``overrides`` are applied on top (e.g. from the CLI)."""
    try:
        text = read_text(path)
    except InputError as err:
        raise ConfigError(str(err)) from None
    try:
        data = yaml.safe_load(text) if str(path).endswith((".yaml", ".yml")) else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path}: not valid YAML/JSON: {str(err).splitlines()[0]}") from None
    data = {**(data or {}), **(overrides or {})}
    return from_dict(cls, data, str(path))


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)
