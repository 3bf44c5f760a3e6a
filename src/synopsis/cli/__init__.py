"""The ``synopsis`` command line.

Each command group lives in its own module; this file only wires them together and turns
:class:`~synopsis.errors.SynopsisError` into a one-line message and exit code 2 (no traceback). Command
modules import torch and models lazily inside the command, so ``synopsis --help`` stays fast.
"""

from __future__ import annotations

import sys
import warnings
from typing import TextIO

import typer
from rich.console import Console

from synopsis.cli import data as data_cli
from synopsis.cli import evaluate as evaluate_cli
from synopsis.cli import lm as lm_cli
from synopsis.cli import pointer_generator as pointer_generator_cli
from synopsis.cli import seq2seq as seq2seq_cli
from synopsis.cli import serve as serve_cli
from synopsis.cli import summarize as summarize_cli
from synopsis.errors import SynopsisError

app = typer.Typer(
    name="synopsis",
    help="Controllable, structure-aware neural abstractive summarization.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
train_app = typer.Typer(help="Train a summarization model.", no_args_is_help=True)
experiment_app = typer.Typer(help="Run the papers' experiments at CPU scale.", no_args_is_help=True)

app.command("summarize")(summarize_cli.summarize)
app.command("evaluate")(evaluate_cli.evaluate)
app.command("serve")(serve_cli.serve)
app.add_typer(data_cli.app, name="data")
app.add_typer(lm_cli.app, name="lm")
app.add_typer(train_app, name="train")
app.add_typer(experiment_app, name="experiment")
train_app.command("pointer-generator")(pointer_generator_cli.train)
train_app.command("seq2seq")(seq2seq_cli.train)
experiment_app.command("hie-bart-heads")(seq2seq_cli.hie_bart_heads_experiment)
experiment_app.command("domain-lm")(lm_cli.domain_lm_experiment)

_err = Console(stderr=True, highlight=False, soft_wrap=True)


_default_show_warning = warnings.showwarning


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Warnings meant for the user (UserWarning) as one ``warning: ...`` line, not a source listing."""
    if issubclass(category, UserWarning):
        _err.print(f"warning: {message}", style="yellow", markup=False, highlight=False)
    else:
        _default_show_warning(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: user errors become ``error: ...`` on stderr and exit code 2."""
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            app(args=argv, standalone_mode=False)
    except SynopsisError as err:
        _err.print(f"[bold red]error:[/] {err}")
        return 2
    except typer.Exit as exit_:
        return exit_.exit_code
    except typer.Abort:
        _err.print("aborted")
        return 130
    except KeyboardInterrupt:
        _err.print("interrupted")
        return 130
    except Exception as err:  # click usage errors (unknown option, missing argument, bad choice)
        import click

        if isinstance(err, click.ClickException):
            err.show()
            return err.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
