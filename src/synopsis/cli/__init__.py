"""The ``synopsis`` command line.

Each command group lives in its own module; this file only wires them together, turns
:class:`~synopsis.errors.SynopsisError` into a one-line message and exit code 2 (no traceback), and owns
the one message channel: library code logs through :mod:`logging` and never prints; here one handler
renders those records on stderr (``-v`` for more, ``-q`` for errors only), and user warnings become one
``warning: ...`` line. Third-party noise (weight-loading progress bars, advisory warnings) is silenced unless
``-v``. Commands are loaded from a table (:data:`COMMANDS`) when they run, and their modules import torch
and models lazily inside the command, so ``--version`` and ``--help`` stay fast.

Exit statuses: 0 done, 2 a problem the user can fix (one ``error:`` line, usage errors included), 130 Ctrl-C
and 143 SIGTERM (one line saying what was saved; see :mod:`synopsis.cli.runtime`).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import warnings
from typing import Any, TextIO

import typer
import typer.core
import typer.main
from rich.console import Console

from synopsis.cli import runtime
from synopsis.errors import SynopsisError

#: The command table: name -> (module, attribute, the line ``synopsis --help`` shows). A command's module is
#: imported only when the command runs or its own ``--help`` is asked, so ``synopsis --version`` and
#: ``synopsis --help`` import neither torch, numpy nor pydantic, and each command imports only what it uses
#: (tests/test_cli_startup.py checks both, and that each line is its command's own first line of help).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "summarize": (
        "synopsis.cli.summarize",
        "summarize",
        "Summarize documents. Without --output, summaries go to stdout, one block per document.",
    ),
    "evaluate": (
        "synopsis.cli.evaluate",
        "evaluate",
        "Score predictions against references; print tables with the settings and optionally write JSON.",
    ),
    "serve": (
        "synopsis.cli.serve",
        "serve",
        "Serve the summarizers: JSON API under /v1, the web page at /, the API reference at /docs.",
    ),
    "models": (
        "synopsis.cli.models",
        "models",
        "List the models in the Hugging Face cache (HF_HOME / HF_HUB_CACHE) that synopsis can run: a seq2seq "
        "summarization family with safetensors weights; give one to --model by its name.",
    ),
    "data": ("synopsis.cli.data", "app", "Convert corpora to synopsis JSONL and inspect them."),
    "lm": ("synopsis.cli.lm", "app", "Domain-attribute LSTM language models."),
    "train": ("synopsis.cli.groups", "train_app", "Train a summarization model."),
    "experiment": ("synopsis.cli.groups", "experiment_app", "Run the papers' experiments at CPU scale."),
    "convert": (
        "synopsis.cli.groups",
        "convert_app",
        "Turn a checkpoint into another method's model (its config.json then says what it is).",
    ),
}


def load_command(name: str) -> Any:
    """The click command of ``name`` in :data:`COMMANDS`, its module imported now; built as the root app
    builds what it holds (a group under ``add_typer``, a function under ``command``)."""
    module, attribute, _ = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer(add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    command = typer.main.get_group(holder).commands[name]
    _classic_usage(command)
    return command


class _ClassicArgument(typer.core.TyperArgument):
    """An argument in a usage line as click (and every man page) writes it, ``INPUTS...`` or ``[PATH]``;
    Typer's own form is ``{inputs}...``."""

    def _usage_display_name(self) -> str:
        name = (self.metavar or self.name or "").upper() + ("..." if self.nargs != 1 else "")
        return name if self.required else f"[{name}]"


def _classic_usage(command: Any) -> None:
    """``command``'s arguments (and its subcommands') in click's usage form (:class:`_ClassicArgument`)."""
    for param in command.params:
        if type(param) is typer.core.TyperArgument:
            param.__class__ = _ClassicArgument
    for sub in getattr(command, "commands", {}).values():
        _classic_usage(sub)


class LazyGroup(typer.core.TyperGroup):
    """The root group over :data:`COMMANDS`: ``--help`` lists each command from its table line; running a
    command (or asking its own help) imports its module then."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loaded: dict[str, Any] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name in self._loaded:
            return self._loaded[cmd_name]
        return typer.core.TyperCommand(name=cmd_name, help=COMMANDS[cmd_name][2])  # a line of the listing

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[Any, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name in COMMANDS and name not in self._loaded:
            self._loaded[name] = load_command(name)
        return name, self._loaded.get(name, command), rest


app = typer.Typer(
    name="synopsis",
    help="Controllable, structure-aware neural abstractive summarization.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=LazyGroup,
)

_err = Console(stderr=True, highlight=False, soft_wrap=True)


class ConsoleHandler(logging.Handler):
    """Log records as plain lines on stderr: ``warning: ...`` / ``error: ...`` prefixes, never markup."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message, style = record.getMessage(), None
            if record.levelno >= logging.ERROR:
                message, style = f"error: {message}", "bold red"
            elif record.levelno >= logging.WARNING:
                message, style = f"warning: {message}", "yellow"
            _err.print(message, style=style, markup=False, highlight=False)
        except Exception:  # a broken stderr must not crash the command
            self.handleError(record)


def configure_logging(verbosity: int) -> None:
    """One handler on the root logger; ``verbosity`` -1 (quiet), 0 (default) or 1 (verbose).

    The ``synopsis`` loggers speak at INFO (DEBUG with ``-v``, errors only with ``-q``); third-party loggers
    only at WARNING unless ``-v``.
    """
    verbosity = max(-1, min(1, verbosity))
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if not isinstance(h, ConsoleHandler)] + [ConsoleHandler()]
    root.setLevel(logging.INFO if verbosity > 0 else logging.WARNING)
    logging.getLogger("synopsis").setLevel({-1: logging.ERROR, 0: logging.INFO, 1: logging.DEBUG}[verbosity])
    if verbosity < 1:  # read when transformers / huggingface_hub are imported, i.e. later, inside a command
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
        warnings.filterwarnings("ignore", module=r"(transformers|huggingface_hub|accelerate|torch)(\.|$)")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"synopsis {version('synopsis')}")
        raise typer.Exit()


@app.callback()
def _options(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="More messages (and third-party ones)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Errors only; no progress messages."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Controllable, structure-aware neural abstractive summarization."""
    configure_logging(1 if verbose else -1 if quiet else 0)


_default_show_warning = warnings.showwarning


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Warnings meant for the user (UserWarning) go to the log channel: one ``warning: ...`` line."""
    if issubclass(category, UserWarning):
        logging.getLogger("synopsis").warning("%s", message)
    else:
        _default_show_warning(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: the exit status of the command.

    User errors become one ``error: ...`` line on stderr and exit status 2 (usage errors too); Ctrl-C and
    SIGTERM stop cleanly with one line saying what was saved and exit status 130 / 143.
    """
    runtime.set_invocation(argv)
    try:
        with warnings.catch_warnings(), runtime.signals_as_interrupts():
            warnings.showwarning = _show_warning
            result = app(args=argv, prog_name="synopsis", standalone_mode=False)
    except runtime.Interrupted as stop:
        if stop.every_process or runtime.is_main_process():
            _say(f"{_stopped(stop.signum)}: {stop}")
        return stop.exit_code
    except SynopsisError as err:
        _say(f"error: {err}", style="bold red")
        return 2
    except typer.Exit as exit_:
        return exit_.exit_code
    except typer.Abort:
        _say("aborted")
        return 130
    except KeyboardInterrupt as stop:  # outside a command (while parsing, say)
        _say(_stopped(runtime.signal_of(stop)))
        return 128 + runtime.signal_of(stop)
    except OSError as err:  # an OS failure no library call turned into a SynopsisError (disk, permissions)
        if err.filename is None and err.strerror is None:
            raise
        where = f"{err.filename}: " if err.filename else ""
        _say(f"error: {where}{err.strerror or err}", style="bold red")
        return 2
    except Exception as err:  # click usage errors (unknown option, missing argument, value out of range)
        # typer >= 0.20 vendors its own click, so match the exception by its interface, not its class
        if callable(getattr(err, "show", None)) and isinstance(getattr(err, "exit_code", None), int):
            one_line = callable(getattr(err, "format_message", None))
            if type(err).__name__ == "NoArgsIsHelpError" or not one_line:
                err.show()
            else:
                _say(f"error: {_usage_error(err)}", style="bold red")
            return err.exit_code
        raise
    if isinstance(result, int) and result == 130:  # typer's status for a KeyboardInterrupt
        signum = runtime.last_signal[-1] if runtime.last_signal else signal.SIGINT
        _say(_stopped(signum))
        return 128 + signum
    return result if isinstance(result, int) else 0


def _say(message: str, style: str | None = None) -> None:
    """One line on stderr, never parsed as markup (paths may hold ``[/]``)."""
    _err.print(message, style=style, markup=False, highlight=False)


def _stopped(signum: int) -> str:
    verb = "interrupted" if signum == signal.SIGINT else "terminated"
    return f"{verb} ({runtime.signal_name(signum)})"


def _usage_error(err: Exception) -> str:
    """A click usage error as one line: the problem, then where to read about the command."""
    message = " ".join(str(err.format_message()).split())  # type: ignore[attr-defined]
    ctx = getattr(err, "ctx", None)
    return f"{message} (see '{ctx.command_path} --help')" if ctx is not None else message


if __name__ == "__main__":
    sys.exit(main())
