"""Whether the default's summaries cite exact sources on real documents: every source of every document- and
section-summary sentence of ``synopsis summarize DOC`` (the runner, every default) has offsets whose letters
and digits, Markdown link destinations dropped, are the sentence's (issue 48's evidence,
docs/results/default_real_documents.md). Any version of synopsis on ``PYTHONPATH``::

    python benchmarks/cited_sources.py /root/.pyenv/README.md /usr/share/common-licenses/GPL-3
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from synopsis.pipeline import SummarizeRunner
from synopsis.summarizers import load_summarizer


def _alnum(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z]", "", text)


def _demarked(span: str) -> str:
    return re.sub(r"\]\([^)]*\)|\]\[[^\]]*\]", "", span)


def main(paths: list[str]) -> None:
    runner = SummarizeRunner(load_summarizer())
    for name in paths:
        path = Path(name)
        text = path.read_text(encoding="utf-8")
        (summary,) = runner.run(path)
        sentences = [*summary.result.summary, *(s for node in summary.result.walk() for s in node.summary)]
        sources = [source for sentence in sentences for source in sentence.sources]
        exact = [
            s for s in sources
            if s.start is not None and _alnum(_demarked(text[s.start : s.end])) == _alnum(s.text)
        ]  # fmt: skip
        print(f"{name}: {len(exact)}/{len(sources)} sources exact", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
