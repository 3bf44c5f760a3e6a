"""Where models compute: ``--device`` / ``device=``.

:func:`resolve_device` turns ``auto`` (the default: a GPU when torch sees one, else the CPU), ``cpu``,
``cuda`` or ``cuda:N`` into a ``torch.device``, and an unusable value into a one-line
:class:`~synopsis.errors.InputError`; :func:`check_device` checks a value the same way without importing
torch where no GPU is named. Under a launch of N processes (:mod:`synopsis.sharding`) ``auto`` and ``cuda``
give process ``LOCAL_RANK`` its own GPU, as accelerate's ``PartialState`` does, so a launch keeps one GPU
per process. :func:`compute_device` sets what ``auto`` means for the commands that build their models deep
inside (the experiments), for the length of a block.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Any

from synopsis.errors import InputError
from synopsis.sharding import launched_processes

#: what ``--device`` and ``device=`` take, for help texts and errors
DEVICE_CHOICES = "auto (a GPU when torch sees one, else the CPU), cpu, cuda or cuda:N"
#: what ``auto`` means inside :func:`compute_device` (``None``: a GPU when torch sees one, else the CPU)
_CHOSEN_DEVICE: contextvars.ContextVar[str | None] = contextvars.ContextVar("synopsis_device", default=None)


def check_device(spec: Any = "auto") -> Any:
    """``spec`` checked as :func:`resolve_device` checks it, without importing torch where no GPU is named:
    ``auto`` and ``cpu`` come back as they are, resolved when a model is placed (an extractive method never
    loads torch); any other spec is :func:`resolve_device`'s ``torch.device``."""
    text = "auto" if spec is None else spec.strip().lower() if isinstance(spec, str) else None
    if text in ("auto", "cpu"):
        return text
    return resolve_device(spec)


def resolve_device(spec: Any = "auto") -> Any:
    """The ``torch.device`` that ``spec`` names: ``auto`` or ``None`` (a GPU when torch sees one, else the
    CPU; inside :func:`compute_device`, the device chosen there), ``cpu``, ``cuda`` (this process's GPU) or
    ``cuda:N``. A ``torch.device`` is taken as it is (tests run models on ``meta``). A value that names no
    device, a device type other than these, or a GPU torch does not see is a one-line :class:`InputError`.
    """
    import torch

    if isinstance(spec, torch.device):
        return spec
    text = "auto" if spec is None else str(spec).strip().lower()
    if text == "auto":
        chosen = _CHOSEN_DEVICE.get()
        if chosen is not None:
            return resolve_device(chosen)
        return torch.device("cuda", _local_gpu()) if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise InputError(f"--device {spec!r} is not a device; use {DEVICE_CHOICES}") from None
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise InputError(f"--device {spec}: synopsis computes on cpu or cuda, not {device.type}")
    if not torch.cuda.is_available():
        raise InputError(f"--device {spec}: torch sees no CUDA GPU on this machine; use --device cpu or auto")
    count = torch.cuda.device_count()
    index = _local_gpu() if device.index is None else device.index
    if index >= count:
        raise InputError(f"--device {spec}: this machine has {count} GPU(s), cuda:0 to cuda:{count - 1}")
    return torch.device("cuda", index)


def _local_gpu() -> int:
    """This process's GPU: ``LOCAL_RANK`` (modulo the GPUs) under a launch of several processes, as
    accelerate assigns them; else torch's current device (GPU 0 unless ``torch.cuda.set_device``)."""
    import torch

    if launched_processes() > 1:
        try:
            return int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count()
        except (KeyError, ValueError):
            pass
    return torch.cuda.current_device()


@contextlib.contextmanager
def compute_device(spec: str | None) -> Iterator[None]:
    """Inside the block, ``auto`` means ``spec`` (checked now: an unusable one is an :class:`InputError`);
    ``None`` changes nothing. For commands whose models are built deep inside (``experiment``)."""
    if spec is None or str(spec).strip().lower() == "auto":
        yield
        return
    resolve_device(spec)
    token = _CHOSEN_DEVICE.set(spec)
    try:
        yield
    finally:
        _CHOSEN_DEVICE.reset(token)
