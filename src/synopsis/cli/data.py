"""``synopsis data``: convert corpora to our JSONL and print statistics. (Owned by the readers work.)"""

from __future__ import annotations

import typer

app = typer.Typer(help="Convert corpora to synopsis JSONL and inspect them.", no_args_is_help=True)
