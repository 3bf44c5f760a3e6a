"""Every output the README (and docs/*.md) quotes comes from running its command (issue 60, item 6).

A quoted output is a ```text block right after a marker, an HTML comment (invisible on GitHub) that names
the stream, the command and which of its lines the block holds:

    <!-- stdout of `synopsis summarize examples/paper_abstract.txt` -->
    <!-- stdout of `synopsis summarize X`, lines 1-4 -->
    <!-- stdout of `synopsis summarize X`, last 6 lines -->
    <!-- stderr of `synopsis summarize X` -->

The test runs each command once (``python -m synopsis``, from the repository root, offline, without
progress lines) and checks that each block is exactly those lines of what it printed. A ```text block that
holds a command's output without a marker is refused, so none can drift again. After a change that changes
an output on purpose, ``python tests/test_readme_outputs.py --update`` rewrites the quoted blocks from what
the commands print now (then read the diff: it is what a reader will see).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
MARKER = re.compile(
    r"<!-- (?P<stream>stdout|stderr) of `(?P<command>synopsis [^`]+)`"
    r"(?:, lines (?P<first>\d+)-(?P<last>\d+)|, last (?P<tail>\d+) lines)? -->\n```text\n(?P<block>.*?)```",
    re.DOTALL,
)
SHARED_DATA = Path(os.environ.get("SYNOPSIS_SHARED_DATA", ROOT.parent / "shared" / "data"))


@dataclass(frozen=True)
class Quote:
    where: str  # file:line
    stream: str
    command: str
    lines: tuple[int, int] | None  # 1-based, inclusive
    tail: int | None
    block: str

    def selected(self, printed: str) -> str:
        lines = printed.splitlines()
        if self.lines is not None:
            lines = lines[self.lines[0] - 1 : self.lines[1]]
        elif self.tail is not None:
            lines = lines[-self.tail :]
        return "".join(line + "\n" for line in lines)


def quotes() -> list[Quote]:
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for match in MARKER.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            first, last, tail = match["first"], match["last"], match["tail"]
            found.append(
                Quote(
                    f"{path.relative_to(ROOT)}:{line}", match["stream"], match["command"],
                    (int(first), int(last)) if first else None, int(tail) if tail else None, match["block"],
                )  # fmt: skip
            )
    return found


@cache
def run(command: str) -> tuple[str, str]:
    """``command`` (``synopsis ...``) as a user runs it from the repository root: its stdout and stderr."""
    args = shlex.split(command)
    assert args[0] == "synopsis"
    if any("../shared/data" in arg for arg in args):
        if not SHARED_DATA.is_dir():
            if os.environ.get("SYNOPSIS_REQUIRE_SHARED_DATA") == "1":
                pytest.fail(f"shared data not found at {SHARED_DATA}")
            pytest.skip(f"shared data not found at {SHARED_DATA} (set SYNOPSIS_SHARED_DATA)")
        args = [arg.replace("../shared/data", str(SHARED_DATA)) for arg in args]
    # no progress lines: a plain one is printed every 30 s, so whether one shows depends on the machine
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SYNOPSIS_PROGRESS_INTERVAL": "1000000", "COLUMNS": "120"}
    done = subprocess.run(
        [sys.executable, "-m", "synopsis", *args[1:]], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"
    return done.stdout, done.stderr


QUOTES = quotes()


def test_every_text_block_of_the_readme_is_a_checked_quote() -> None:
    """The README's ```text blocks are all outputs (the abstract's summary, the paper's by section, the
    bundled model on the paper): each is under a marker, so none is an unchecked quote."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    marker = re.compile(r"<!-- std(out|err) of `synopsis [^`]+`.* -->")
    texts = [i for i, line in enumerate(lines) if line == "```text"]
    unmarked = [i + 1 for i in texts if not marker.fullmatch(lines[i - 1])]
    assert unmarked == [], f"README.md: ```text blocks without a marker at lines {unmarked}"
    assert len([q for q in QUOTES if q.where.startswith("README.md:")]) >= 3


@pytest.mark.slow  # each command once (~5-10 s: torch's import, the bundled model)
@pytest.mark.parametrize("quote", QUOTES, ids=[q.where for q in QUOTES])
def test_a_quoted_output_is_what_the_command_prints(quote: Quote) -> None:
    stdout, stderr = run(quote.command)
    printed = stdout if quote.stream == "stdout" else stderr
    assert quote.block == quote.selected(printed), f"{quote.where}: {quote.command} prints otherwise"


def update() -> None:
    """Rewrite every marked block with what its command prints now (``--update``)."""
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")

        def fresh(match: re.Match[str]) -> str:
            quote = next(q for q in QUOTES if q.block == match["block"] and q.command == match["command"])
            stdout, stderr = run(quote.command)
            block = quote.selected(stdout if quote.stream == "stdout" else stderr)
            return match.group(0)[: match.start("block") - match.start()] + block + "```"

        new = MARKER.sub(fresh, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"updated {path.relative_to(ROOT)}")


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    update()
