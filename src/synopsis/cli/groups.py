"""The command groups made of other modules' commands: ``train``, ``experiment`` and ``convert``.

Imported only when one of them runs (or its ``--help`` is asked): see the command table in
:mod:`synopsis.cli`.
"""

from __future__ import annotations

import typer

from synopsis.cli import lm as lm_cli
from synopsis.cli import pointer_generator as pointer_generator_cli
from synopsis.cli import seq2seq as seq2seq_cli

train_app = typer.Typer(help="Train a summarization model.", no_args_is_help=True)
experiment_app = typer.Typer(help="Run the papers' experiments at CPU scale.", no_args_is_help=True)
convert_app = typer.Typer(
    help="Turn a checkpoint into another method's model (its config.json then says what it is).",
    no_args_is_help=True,
)

convert_app.command("hie-bart")(seq2seq_cli.convert_hie_bart)
convert_app.command("instructsum")(seq2seq_cli.convert_instructsum)
convert_app.command("hibrids")(seq2seq_cli.convert_hibrids)
convert_app.command("section-tokens")(seq2seq_cli.convert_section_tokens)
train_app.command("pointer-generator")(pointer_generator_cli.train)
train_app.command("seq2seq")(seq2seq_cli.train)
for name, command in seq2seq_cli.EXPERIMENT_COMMANDS.items():
    experiment_app.command(name)(command)
experiment_app.command("hibrids-probe")(seq2seq_cli.hibrids_probe_experiment)
experiment_app.command("domain-lm")(lm_cli.domain_lm_experiment)
