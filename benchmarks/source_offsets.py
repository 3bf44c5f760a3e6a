"""How many sentences of real documents get exact sources: ``source[start:end]`` is the sentence, whitespace
(and in Markdown, markup) aside, and no span overlaps another.

Run on documents nobody here wrote (long READMEs from installed packages' ``*.dist-info/METADATA``, the GPL
text) with any version of synopsis on ``PYTHONPATH``; the offsets come from
:func:`synopsis.pipeline.read_source` (older versions: ``synopsis.data.readers.sentence_offsets``)::

    python benchmarks/source_offsets.py DOC.md DOC.txt ...
"""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

try:
    from synopsis.pipeline import read_source
except ImportError:  # versions before the runner
    read_source = None
    from synopsis.data.readers import read_document, sentence_offsets

_MARKUP = [
    (re.compile(r"\n[ \t]*(?:>[ \t]?)+"), "\n"),  # block quote markers
    (re.compile(r"\n[ \t]*(?:[-*+]|\d+[.)])[ \t]+"), "\n"),  # list markers
    (re.compile(r"\]\((?:[^()]|\([^()]*\))*\)"), ""),  # inline link and image destinations
    (re.compile(r"\]\[[^\]]*\]"), ""),  # full and collapsed reference links
    (re.compile(r"\[\^[^\]]+\]"), ""),  # footnote references
    (re.compile(r"<(https?://[^>\s]*|[^>\s@]+@[^>\s]+)>"), r"\1"),  # autolinks
    (re.compile(r"</?(?:a|b|i|em|strong|code|span|br|img|sup|sub|kbd|p|div)(?=[\s/>])[^>]*>", re.I), ""),
    (re.compile(r"\\([!-/:-@\[-`{-~])"), r"\1"),  # backslash escapes
]


def bare(text: str) -> str:
    return re.sub(r"[\s*_`\[\]!\\#|]", "", text)


def demarked(span: str) -> str:
    for pattern, replacement in _MARKUP:
        span = pattern.sub(replacement, span)
    return bare(html.unescape(span))


def exact_count(path: str) -> tuple[int, int, int]:
    """(sentences, exact, largest span in characters)."""
    source = open(path, encoding="utf-8").read()  # noqa: SIM115 - a one-shot read
    if read_source is not None:
        parsed = read_source(Path(path))
        document, offsets = parsed.document, parsed.offsets
    else:
        document = read_document(path)
        offsets = sentence_offsets(path, document)
    offsets = offsets or [None] * len(document.sentences)
    markdown = path.lower().endswith((".md", ".markdown"))
    exact, widest, previous_end = 0, 0, 0
    for sentence, span in zip(document.sentences, offsets, strict=True):
        if span is None:
            continue
        start, end = span
        widest = max(widest, end - start)
        found = demarked(source[start:end]) if markdown else "".join(source[start:end].split())
        wanted = bare(sentence.text) if markdown else "".join(sentence.text.split())
        if start >= previous_end and found == wanted:
            exact += 1
        previous_end = end
    return len(document.sentences), exact, widest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    print("| document | sentences | exact | widest span |")
    print("|---|---|---|---|")
    for path in args.paths:
        count, exact, widest = exact_count(path)
        share = 100 * exact / max(1, count)
        print(f"| {path.rsplit('/', 1)[-1]} | {count} | {exact} ({share:.0f}%) | {widest} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
