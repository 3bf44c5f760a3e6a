"""``synopsis lm`` and ``synopsis experiment domain-lm``. (Owned by the domain-LM work.)"""

from __future__ import annotations

import typer

from synopsis.errors import SynopsisError

app = typer.Typer(help="Domain-attribute LSTM language models.", no_args_is_help=True)


def domain_lm_experiment() -> None:
    """Leave-one-domain-out experiment."""
    raise SynopsisError("domain-lm experiment is not available yet")
