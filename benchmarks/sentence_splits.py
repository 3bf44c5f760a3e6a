"""Where sentence splitters cut where a reader would not, on real documents and PTB-tokenized news (issue 60,
item 4): Punkt as it was (its English model, curated prefixes and our academic abbreviations), Punkt as
:func:`synopsis.text.sentence_spans` has it now (``eg``, ``ie``, ``etc`` and the joins), and pysbd (if
installed). Each splitter splits the same paragraphs: the readers' blocks (prose, list items, quotes) of each
document, and each news text whole. A cut is counted as bad when, across it:

* ``opens closed``: the next piece opens with closing punctuation or a sentence's end (``, ' kamal said``,
  a lone ``.``, ``)``, ``-RRB-``, ``’``; not "...", with which a quote goes on);
* ``quoted ?/! then lowercase``: the piece ends in ``?`` or ``!`` closed by a quote or bracket and the next
  opens with a lowercase word (check the "In a hurry?" section);
* ``after an abbreviation``: the piece ends in ``eg.``, ``ie.``, ``e.g.``, ``i.e.``, ``etc.``, ``cf.``,
  ``vs.`` and the next opens with a lowercase word or a digit, or a title's split-off period ("Sgt . Smith");
* ``opening quote left behind``: the piece ends with an opening quote or bracket (``````, ``(``, ``“``).

These are the patterns the fixes target, so the counts show what changed, not every kind of error: the
``disagreements`` column counts the cuts one splitter makes and the other does not, and
docs/results/sentence_splitting.md reads a sample of them by hand.

    python benchmarks/sentence_splits.py DOC... [--news PATH] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import punkt

from synopsis.data.readers import read_document
from synopsis.text import sentence_spans

_CLOSED = re.compile(r"^(?:[,;:)\]}”’»?!]|\.(?!\.)|-R[RSC]B-)")
_QUOTED = re.compile(r"[?!] ?(?:[\"'”’»)\]]|-R[RS]B-)+$")
_ABBREVIATION = re.compile(r"(?:^|[\s(])(?:eg|ie|e\.g|i\.e|etc|cf|vs)\.$", re.IGNORECASE)
_TITLE = re.compile(r"(?:^|\s)(?:Mr|Mrs|Ms|Dr|Sgt|Capt|Gen|Lt|Col|Prof) \.$")
_OPENING = re.compile(r"(?:``|[(“‘]|-LRB-)$")


def bad_cuts(pieces: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for previous, piece in zip(pieces, pieces[1:], strict=False):
        if _CLOSED.match(piece):
            counts["opens closed"] += 1
        elif piece[:1].islower() and _QUOTED.search(previous[-12:]):
            counts["quoted ?/! then lowercase"] += 1
        elif (_ABBREVIATION.search(previous[-8:]) and re.match(r"[a-z0-9]", piece)) or (
            _TITLE.search(previous[-8:]) and piece[:1].isupper()
        ):
            counts["after an abbreviation"] += 1
        elif _OPENING.search(previous):
            counts["opening quote left behind"] += 1
    return counts


def punkt_before() -> Callable[[str], list[str]]:
    """The splitter as main had it before issue 60: no eg/ie/etc, no joins."""
    params = punkt.with_nonbreaking_prefixes(punkt.load_model("english"), "english")
    params.abbrev_types.update({"al", "eq", "eqs", "sec", "secs", "tab", "approx", "resp", "cf", "vs"})
    tokenizer = punkt.PunktSentenceTokenizer(params, line_breaks="ignore")
    return lambda text: [s.strip() for s in tokenizer.tokenize(text.strip()) if s.strip()]


def punkt_now(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


def splitters() -> dict[str, Callable[[str], list[str]]]:
    out = {"punkt (before)": punkt_before(), "punkt + abbreviations + joins (now)": punkt_now}
    try:
        import pysbd  # noqa: PLC0415 (optional: measured only where installed)
    except ImportError:
        return out
    segmenter = pysbd.Segmenter(language="en", clean=False, char_span=False)
    out["pysbd 0.3"] = lambda text: [s.strip() for s in segmenter.segment(text) if s.strip()]
    return out


def paragraphs(path: Path) -> list[str]:
    """The document's summarizable blocks as the reader joined them (their sentences joined again)."""
    document = read_document(path)
    out = []
    for block in document.blocks:
        if block.kind in ("prose", "list", "quote"):
            out.append(" ".join(block.section.paragraphs[block.paragraph]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="*", type=Path)
    parser.add_argument("--news", type=Path, help="a JSONL file whose 'text' fields are PTB-tokenized news")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--examples", type=int, default=0, help="print this many disagreements per corpus")
    args = parser.parse_args()
    corpora = {path.name: paragraphs(path) for path in args.documents}
    if args.news:
        corpora[args.news.name] = [json.loads(line)["text"] for line in args.news.open() if line.strip()]
    results = []
    for name, texts in corpora.items():
        split: dict[str, list[list[str]]] = {}
        for splitter, function in splitters().items():
            started = time.perf_counter()
            split[splitter] = [function(text) for text in texts]
            seconds = time.perf_counter() - started
            counts: Counter[str] = Counter()
            for pieces in split[splitter]:
                counts.update(bad_cuts(pieces))
            results.append({
                "corpus": name, "splitter": splitter, "sentences": sum(map(len, split[splitter])),
                "bad cuts": sum(counts.values()), **counts, "seconds": round(seconds, 3),
            })  # fmt: skip
            print(json.dumps(results[-1], ensure_ascii=False))
        names = list(split)
        for other in names[2:]:
            differ = [
                (a, b) for a, b in zip(split[names[1]], split[other], strict=True) if a != b
            ]
            print(f"{name}: {len(differ)} of {len(texts)} paragraphs split differently: {names[1]}, {other}")
            for a, b in differ[: args.examples]:
                print("  now:  ", a)
                print("  other:", b)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
