"""Running the ``synopsis`` command in-process, as the CLI tests do."""

from __future__ import annotations

import pytest

from synopsis.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """``synopsis ARGV...`` (each argument as a string): exit code, stdout, stderr."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line_error(code: int, err: str, *fragments: str) -> str:
    """Assert exit status 2 with one ``error: ...`` line holding every fragment (no traceback); the line."""
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]
