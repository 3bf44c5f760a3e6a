"""What every command shares at run time: signals, consoles, output safety, the command line.

* **Signals.** :func:`signals_as_interrupts` (installed by :func:`synopsis.cli.main`) turns SIGTERM into a
  :class:`Terminated` (a ``KeyboardInterrupt``), so a kill runs the same clean-up as Ctrl-C: atomic writes
  drop their temporary files, streamed outputs keep whole lines. A command that saved something says what
  with :func:`reporting_interrupts`; ``main`` then prints that one line and exits 130 (SIGINT) or 143
  (SIGTERM). :func:`deferred_signals` holds a signal back until a write of whole lines is complete.
* **Consoles.** :func:`stdout_console`: tables and text for stdout, never wrapped when stdout is not a
  terminal. Messages go through :mod:`logging` (``synopsis.cli``), which the one handler prints without
  markup, so a path such as ``a[/]b`` is printed as it is.
* **Output safety.** :func:`refuse_to_overwrite_inputs`: no command writes over one of its own inputs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console

from synopsis.errors import OutputError

T = TypeVar("T")
log = logging.getLogger("synopsis.cli")


# ------------------------------------------------------------------------------------------ signals
class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Python was when the signal came, like Ctrl-C's KeyboardInterrupt."""

    signum = signal.SIGTERM


class Interrupted(Exception):  # noqa: N818 - what the user did, not a failure
    """A command stopped by a signal, with a one-line account of what it saved (printed by ``main``)."""

    def __init__(self, message: str, signum: int = signal.SIGINT, every_process: bool = False) -> None:
        super().__init__(message)
        self.signum = signum
        self.every_process = every_process  # under a launcher: each process has its own account

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


#: the signal of the last interrupt (typer turns an unreported KeyboardInterrupt into exit status 130)
last_signal: list[int] = []


def signal_of(err: BaseException) -> int:
    return int(getattr(err, "signum", signal.SIGINT))


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def _on_sigterm(signum: int, frame: Any) -> None:
    last_signal.append(signum)
    raise Terminated()


def _on_sigint(signum: int, frame: Any) -> None:
    last_signal.append(signum)
    raise KeyboardInterrupt()


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated`; SIGINT keeps raising KeyboardInterrupt (unless it is ignored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    last_signal.clear()
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _on_sigterm)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back while the block runs (a write of whole lines); then act on them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler not in (signal.SIG_IGN, signal.SIG_DFL, None):
            previous[signum] = signal.signal(signum, lambda s, _frame: pending.append(s))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            last_signal.append(pending[0])
            raise Terminated() if pending[0] == signal.SIGTERM else KeyboardInterrupt()


def is_main_process() -> bool:
    """False in the processes of rank > 0 that ``torchrun`` / ``accelerate launch`` start: only the main
    process says what an interrupted run saved (every process exits with the same status)."""
    rank = os.environ.get("RANK", "0")
    return not rank.isdigit() or int(rank) == 0


@contextlib.contextmanager
def reporting_interrupts(describe: Callable[[], str], every_process: bool = False) -> Iterator[None]:
    """A KeyboardInterrupt (or SIGTERM) inside the block becomes :class:`Interrupted` with ``describe()``,
    printed by the main process only unless ``every_process`` (each then tells what it saved itself)."""
    try:
        yield
    except KeyboardInterrupt as err:
        signum = signal_of(err)
        try:
            message = describe()
        except Exception as problem:  # the account must not hide the interrupt
            message = f"(could not tell what was saved: {problem})"
        raise Interrupted(message, signum, every_process) from None


# ------------------------------------------------------------------------------------------ command line
_invocation: list[list[str]] = []


def set_invocation(argv: Sequence[str] | None) -> None:
    _invocation[:] = [list(sys.argv[1:] if argv is None else argv)]


def resume_command() -> str:
    """This command line with ``--resume`` added (for "resume with: ..." messages)."""
    args = list(_invocation[0]) if _invocation else []
    if "--resume" not in args:
        args.append("--resume")
    return shlex.join(["synopsis", *args])


# ------------------------------------------------------------------------------------------ consoles
def stdout_console() -> Console:
    """Rich output for stdout; when stdout is a pipe or a file, lines are never wrapped or cut."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=100_000, soft_wrap=True, color_system=None)
    return console


def print_plan(plan: Any, plan_json: Path | None) -> None:
    """``train ... --dry-run``: the memory plan (:class:`synopsis.training.memory.MemoryPlan`) on stdout,
    and as JSON into ``plan_json`` when given."""
    from synopsis.io import write_json

    stdout_console().print(plan.report(), markup=False, highlight=False)
    if plan_json is not None:
        write_json(plan_json, plan.to_json())


# ------------------------------------------------------------------------------------------ outputs
def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def refuse_to_overwrite_inputs(output: Path | None, inputs: Iterable[Path | None], option: str) -> None:
    """An :class:`OutputError` if ``output`` is one of ``inputs``, or an existing file inside an input folder
    (which may be one of the corpus's own files)."""
    if output is None:
        return
    for given in inputs:
        if given is None:
            continue
        if _same_file(output, given):
            raise OutputError(
                f"{output}: {option} would overwrite the input {given}; choose another {option}"
            )
        if given.is_dir() and output.exists() and output.resolve().is_relative_to(given.resolve()):
            raise OutputError(
                f"{output}: {option} is an existing file inside the input folder {given} (it may be one "
                f"of the input files); choose another {option}"
            )


# ------------------------------------------------------------------------------------------ training runs
def training_account(run_dir: Path, step: int | None = None, unit: str = "step") -> str:
    """What an interrupted training run saved: ``at step 1234; last checkpoint: ... (step 1200); resume
    with: ...``, or that it stopped before its first checkpoint (then the same command starts afresh)."""
    from synopsis.checkpoint import CheckpointManager
    from synopsis.errors import CheckpointError

    at = f" at {unit} {step}" if step is not None else ""
    try:
        latest = CheckpointManager(run_dir).latest()
    except CheckpointError:
        latest = None
    if latest is None:
        return (
            f"stopped{at}, before the first checkpoint: nothing to resume; the same command starts "
            f"afresh in {run_dir}"
        )
    saved = latest.name.rpartition("-")[2].lstrip("0") or "0"
    return f"stopped{at}; last checkpoint: {latest} ({unit} {saved}); resume with: {resume_command()}"
