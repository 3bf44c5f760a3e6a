"""Running the ``synopsis`` command in-process, as the CLI tests do."""

from __future__ import annotations

import pytest

from synopsis.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """``synopsis ARGV...`` (each argument as a string): exit code, stdout, stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err
