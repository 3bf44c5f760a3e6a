"""Options that mean the same thing in every command, and numeric options with an allowed range.

Short flags, one meaning each across all commands: ``-o`` output (file or run directory), ``-c`` config,
``-m`` model, ``-i`` instruction (repeatable), ``-p``/``-r`` predictions/references, ``-a`` attribute;
``-v``/``-q`` are global.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from synopsis.config import AT_LEAST_ONE, DECODING_OPTIONS, Range, default_threads

#: What the help of a decoding flag adds: which methods take it and what it defaults to.
NEURAL_DEFAULT = "Neural models; default: the model's."
THREADS_HELP = (
    "CPU threads to compute with (default: $OMP_NUM_THREADS if set, else the cores other processes leave "
    "free: cores minus the load average, at least 1)."
)


def _checker(allowed: Range) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if item is not None and item not in allowed:
                raise typer.BadParameter(f"must be {allowed}, got {item}")
        return value

    return check


def ranged(default: Any, *names: str, allowed: Range, help: str, **kwargs: Any) -> Any:  # noqa: A002
    """A ``typer.Option`` whose value must lie in ``allowed`` (NaN and infinities never do); the range is
    checked while the command line is parsed, before any work, and shown in ``--help``."""
    from rich.markup import escape  # typer renders help as rich markup: "[a finite number]" would vanish

    described = f"{help} {escape(f'[{allowed}]')}"
    return typer.Option(default, *names, help=described, callback=_checker(allowed), **kwargs)


def switch(name: str, help: str) -> Any:  # noqa: A002
    """An on/off ``typer.Option``, off unless given."""
    return typer.Option(False, name, help=help)


def threads_option() -> Any:
    """``--threads``: the same option, default and range in every command that computes."""
    return ranged(None, "--threads", allowed=AT_LEAST_ONE, help=THREADS_HELP)


def decoding_option(name: str) -> Any:
    """The flag of one decoding option (``--num-beams``, ...): its name, range and help come from the one
    definition the service's request schema shares (:data:`synopsis.config.DECODING_OPTIONS`)."""
    option = DECODING_OPTIONS[name]
    return ranged(None, option.flag, allowed=option.allowed, help=f"{option.help} {NEURAL_DEFAULT}")


def set_torch_threads(threads: int | None) -> None:
    """``torch.set_num_threads``: ``--threads`` when given, else :func:`synopsis.config.default_threads`
    (the cores other processes leave free: torch's default, one per core, is 5-10x slower on a busy box)."""
    import torch

    torch.set_num_threads(threads if threads is not None else default_threads())
