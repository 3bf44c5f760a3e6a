"""Options that mean the same thing in every command, and numeric options with an allowed range.

Short flags, one meaning each across all commands: ``-o`` output (file or run directory), ``-c`` config,
``-m`` model, ``-i`` instruction (repeatable), ``-p``/``-r`` predictions/references, ``-a`` attribute;
``-v``/``-q`` are global.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from synopsis.config import (
    AT_LEAST_ONE,
    DECODING_OPTIONS,
    NON_NEGATIVE,
    Range,
    use_threads,
)
from synopsis.devices import DEVICE_CHOICES
from synopsis.summarizers.decoders import AUTO_HELP, DECODERS, DEFAULT_BACKEND

#: What the help of a decoding flag adds: which methods take it and what it defaults to.
NEURAL_DEFAULT = "Neural models; default: the model's."
THREADS_HELP = (
    "CPU threads to compute with (default: $OMP_NUM_THREADS if set, else the cores other processes leave "
    "free: cores minus the load average, at least 1)."
)
DEVICE_HELP = f"Where models compute: {DEVICE_CHOICES}. Under a launch of N processes, one GPU each."
#: ``--dtype`` of the experiments: the training precision of every run whose config leaves it unset
EXPERIMENT_DTYPE_HELP = "Training precision of every run (autocast; default: the launcher's, else fp32)."
#: ``--dtype`` of ``summarize`` and ``serve``: the weights' precision for inference (the library refuses it
#: for a model it cannot cast, and warns that half precision on the CPU is slow)
INFERENCE_DTYPE_HELP = "Hugging Face models: compute in this precision (default: as stored)"
#: the precisions ``--dtype`` takes
DTYPES = ("fp32", "bf16", "fp16")


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


def count_option(default: int | None, *names: str, help: str, **kwargs: Any) -> Any:  # noqa: A002
    """A whole-number option that must be >= 1, a count or a limit (``None``: unset, the command's own
    default), checked as :func:`ranged` checks."""
    return ranged(default, *names, allowed=AT_LEAST_ONE, help=help, **kwargs)


def seed_option(help: str) -> Any:  # noqa: A002
    """``--seed``: a random seed, 0 unless given, never negative; ``help`` says what it seeds."""
    return ranged(0, "--seed", allowed=NON_NEGATIVE, help=help)


def switch(name: str, help: str) -> Any:  # noqa: A002
    """An on/off ``typer.Option``, off unless given."""
    return typer.Option(False, name, help=help)


def threads_option() -> Any:
    """``--threads``: the same option, default and range in every command that computes."""
    return count_option(None, "--threads", help=THREADS_HELP)


def device_option() -> Any:
    """``--device``: the same option, default and help in every command that computes with a model; the
    value is checked when the model is placed (:func:`synopsis.devices.resolve_device`: a one-line
    :class:`~synopsis.errors.InputError`, exit 2)."""
    return typer.Option("auto", "--device", help=DEVICE_HELP)


def _check_dtype(value: str | None) -> str | None:
    if value is not None and value not in DTYPES:
        raise typer.BadParameter(f"must be one of {', '.join(DTYPES)}, got {value!r}")
    return value


def dtype_option(help: str) -> Any:  # noqa: A002
    """``--dtype`` (fp32, bf16, fp16; unset: the command's default), checked while the command line is
    parsed; ``help`` says what the precision applies to in that command."""
    return typer.Option(None, "--dtype", help=f"{help} ({', '.join(DTYPES)})", callback=_check_dtype)


def experiment_dtype_option() -> Any:
    """``--dtype`` of the experiments: the training precision of every run whose config leaves it unset."""
    return dtype_option(EXPERIMENT_DTYPE_HELP)


def inference_dtype_option(which: str = "") -> Any:
    """``--dtype`` of a command that summarizes: the weights' precision for inference; ``which`` says which
    models it applies to where that is not all of them."""
    return dtype_option(INFERENCE_DTYPE_HELP + which)


def decoding_option(name: str) -> Any:
    """The flag of one decoding option (``--num-beams``, ...): its name, range and help come from the one
    definition the service's request schema shares (:data:`synopsis.config.DECODING_OPTIONS`). The range is
    shown in ``--help`` and checked where the command builds its :class:`~synopsis.config.DecodingOptions`
    (one message for the CLI, the service and the library), not by a parser callback."""
    from rich.markup import escape  # typer renders help as rich markup: "[1, 16]" would vanish

    option = DECODING_OPTIONS[name]
    described = f"{option.help} {NEURAL_DEFAULT} {escape(f'[{option.allowed}]')}"
    return typer.Option(None, option.flag, help=described)


def set_torch_threads(threads: int | None) -> None:
    """``torch.set_num_threads``: ``--threads`` when given, else :func:`synopsis.config.default_threads`
    (the cores other processes leave free: torch's default, one per core, is 5-10x slower on a busy box).
    The command owns its process, so the count is set whatever torch held (:func:`synopsis.config.use_threads`
    is the library's one rule)."""
    use_threads(threads, respect_caller=False, deferred=True)  # set when a model loads torch


#: ``--backend``: how Hugging Face checkpoints decode, from the table of backends
BACKEND_HELP = "Hugging Face checkpoints: " + "; ".join(
    [*(f"{row.name} ({row.help})" for row in DECODERS.values()), f"auto ({AUTO_HELP})"]
)
COMPUTE_TYPE_HELP = "--backend ctranslate2: float32 (default: the same tokens as torch), int8, int8_float32."


def backend_option() -> Any:
    """``--backend`` of the commands that summarize (checked by the library: a one-line error, exit 2)."""
    return typer.Option(DEFAULT_BACKEND, "--backend", help=BACKEND_HELP)


def compute_type_option() -> Any:
    """``--compute-type`` of the commands that summarize: CTranslate2's precision."""
    return typer.Option(None, "--compute-type", help=COMPUTE_TYPE_HELP)
