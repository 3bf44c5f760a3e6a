"""Issue 52 item 4: start-up imports only what a command uses. ``synopsis --version`` and ``--help`` import
neither torch, numpy nor pydantic (checked in a fresh interpreter's ``sys.modules``, not by timing), and a
command imports its own module, not the others'."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from synopsis import cli

HEAVY = ("torch", "numpy", "pydantic", "transformers")
PROBE = """
import contextlib, io, json, sys
from synopsis.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    status = main(sys.argv[1:])
print(json.dumps({"status": status, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _run(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_version_and_help_import_no_heavy_module(args: tuple[str, ...]) -> None:
    result = _run(*args)
    assert result["status"] == 0
    assert [name for name in HEAVY if name in result["modules"]] == []
    commands = [m for m in result["modules"] if m.startswith("synopsis.cli.")]
    assert commands == ["synopsis.cli.runtime"]


def test_help_lists_every_command_of_the_table() -> None:
    result = _run("--help")
    for name, (_, _, line) in cli.COMMANDS.items():
        assert name in result["out"]
        assert line.split()[0] in result["out"]


def test_a_command_imports_its_own_module_only() -> None:
    result = _run("data", "--help")
    assert result["status"] == 0
    ours = {m for m in result["modules"] if m.startswith("synopsis.cli.")}
    assert "synopsis.cli.data" in ours
    others = {"synopsis.cli.summarize", "synopsis.cli.serve", "synopsis.cli.seq2seq", "synopsis.cli.lm"}
    assert not ours & others
    assert "torch" not in result["modules"]


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_table_line_is_its_commands_own_help(name: str) -> None:
    """The listing's line (kept in the table so that --help loads nothing) is the first paragraph of the
    command's own help, so the two cannot drift."""
    command = cli.load_command(name)
    first = " ".join(command.help.split("\n\n")[0].split())
    assert cli.COMMANDS[name][2] == first
