"""Extractive methods by section at equal words (issue 38 item 2): ``salient`` (LexRank over all-MiniLM-L6-v2
or TF-IDF, informative sentences only, MMR) against sumy's LexRank, TextRank and LSA, this project's
embedding degree centrality, LEAD and the bundled pointer-generator by section.

Every method goes the same way: each section (window) gives ``--k`` sentences, and the document summary is
composed from them within ``--max-words`` (``compose``, coverage), so the methods differ only in what they
pick per section. LEAD is the document's first whole sentences within the same words. ROUGE F x100 with this
project's scorer (rouge-score, Porter stemming, R-Lsum over sentence lines); **prose**: the share of the
document summary's sentences that pass :func:`synopsis.summarizers.salient.is_informative` (salient picks
only those by construction: read this column as how often the others pick backchannels, fragments, code or
ToC lines); ``--dump`` writes every summary for reading.

    pip install sumy   # the benchmark only; tokenised here (sumy's own tokenizer needs nltk data offline)
    nice python benchmarks/extractive_methods.py --corpus qmsum --limit 8 --json out.json --dump out.jsonl
    nice python benchmarks/extractive_methods.py --corpus scisummnet --skip 20 --limit 12
    nice python benchmarks/extractive_methods.py --corpus arxiv --limit 6
    nice python benchmarks/extractive_methods.py --corpus pubmed --limit 6
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from synopsis.data.readers import read_corpus
from synopsis.document import Document
from synopsis.evaluation.rouge import RougeScorer
from synopsis.summarizers.extractive import CentralitySummarizer, _Selecting
from synopsis.summarizers.salient import SalientSummarizer, TfidfVectors, is_informative
from synopsis.text import word_tokenize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long_documents import DATA, examples  # noqa: E402 - the same QMSum / SciSummNet examples

SYSTEMS = (
    "salient", "salient-tfidf", "centrality", "lexrank", "textrank", "lsa", "lead", "pointer-generator"
)  # fmt: skip


class _WordsTokenizer:
    """sumy's tokenizer interface over this project's tokenisation (sumy's own needs nltk's punkt data)."""

    language = "english"

    def to_words(self, text: str) -> list[str]:
        return [w for w in word_tokenize(text) if any(c.isalnum() for c in w)]


class SumySelector(_Selecting):
    """One of sumy's summarizers (LexRank, TextRank, LSA; English stemmer and stop words) picking ``k``
    sentences of each window."""

    def __init__(self, name: str, k: int) -> None:
        from sumy.nlp.stemmers import Stemmer
        from sumy.summarizers.lex_rank import LexRankSummarizer
        from sumy.summarizers.lsa import LsaSummarizer
        from sumy.summarizers.text_rank import TextRankSummarizer
        from sumy.utils import get_stop_words

        kind = {"lexrank": LexRankSummarizer, "textrank": TextRankSummarizer, "lsa": LsaSummarizer}[name]
        self.summarizer = kind(Stemmer("english"))
        self.summarizer.stop_words = get_stop_words("english")
        self.name, self.k = name, k

    def select(self, document: Document, instruction: str | None = None) -> list[int]:
        from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence

        tokenizer = _WordsTokenizer()
        sentences = [Sentence(s.text, tokenizer) for s in document.sentences]
        if not sentences:
            return []
        position = {id(s): i for i, s in enumerate(sentences)}
        chosen = self.summarizer(ObjectDocumentModel([Paragraph(sentences)]), self.k)
        return sorted(position[id(s)] for s in chosen)

    def describe(self) -> Any:
        return self._info(self.name, f"sumy {self.name}")


def load_examples(corpus: str, split: str | None, skip: int, limit: int) -> list:
    if corpus in ("qmsum", "scisummnet"):
        return examples(corpus, split, skip, limit)
    rows = list(read_corpus(corpus, DATA / "arxiv_pubmed_sample" / f"{corpus}.jsonl"))
    return rows[skip : skip + limit]


def build(system: str, k: int) -> Any:
    if system == "salient":
        return SalientSummarizer(k=k)
    if system == "salient-tfidf":
        return SalientSummarizer(k=k, vectors=TfidfVectors())
    if system == "centrality":
        return CentralitySummarizer(k=k)
    if system in ("lexrank", "textrank", "lsa"):
        return SumySelector(system, k)
    if system == "pointer-generator":
        from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

        return PointerGeneratorSummarizer.from_pretrained()
    raise SystemExit(f"unknown system {system}")


def lead(document: Document, max_words: int) -> list[str]:
    out, words = [], 0
    for sentence in document.sentences:
        n = len(sentence.text.split())
        if words + n > max_words:
            break
        out.append(sentence.text)
        words += n
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("qmsum", "scisummnet", "arxiv", "pubmed"), required=True)
    parser.add_argument("--split", default=None)
    parser.add_argument("--skip", type=int, default=0)
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--k", type=int, default=3, help="sentences per section")
    parser.add_argument("--max-words", type=int, default=150)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the table's numbers here")
    parser.add_argument("--dump", type=Path, help="write every summary here (JSONL) for reading")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    scorer = RougeScorer(("rouge1", "rouge2", "rougeLsum"), use_stemmer=True)
    data = load_examples(args.corpus, args.split, args.skip, args.limit)
    systems = args.systems.split(",")
    built = {name: build(name, args.k) for name in systems if name != "lead"}
    for summarizer in built.values():
        summarizer.prepare()  # the embedding model loads before the clock starts
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in systems}
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    for example in data:
        document = example.document
        for name in systems:
            start = time.perf_counter()
            if name == "lead":
                sentences = lead(document, args.max_words)
            else:
                (result,) = built[name].summarize_by_section([document], max_words=args.max_words)
                sentences = [s.text for s in result.summary]
            seconds = time.perf_counter() - start
            scores = scorer.score_multi(example.references, "\n".join(sentences))
            rows[name].append(
                {
                    "r1": 100 * scores["rouge1"].fmeasure,
                    "r2": 100 * scores["rouge2"].fmeasure,
                    "rl": 100 * scores["rougeLsum"].fmeasure,
                    "prose": sum(map(is_informative, sentences)) / max(1, len(sentences)),
                    "words": sum(len(s.split()) for s in sentences),
                    "seconds": seconds,
                }
            )
            if dump:
                dump.write(json.dumps({"id": example.id, "system": name, "summary": sentences}) + "\n")
        print(f"{example.id}: done", file=sys.stderr, flush=True)
    table = {
        name: {key: statistics.mean(r[key] for r in runs) for key in runs[0]} for name, runs in rows.items()
    }
    print(f"{args.corpus}, {len(data)} documents, {args.k} sentences per section, {args.max_words} words")
    print("| system | R-1 | R-2 | R-L | prose | words | s/doc |\n|---|---:|---:|---:|---:|---:|---:|")
    for name, m in table.items():
        scores = " | ".join(f"{m[key]:.2f}" for key in ("r1", "r2", "rl"))
        print(f"| {name} | {scores} | {m['prose']:.0%} | {m['words']:.0f} | {m['seconds']:.1f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"documents": [e.id for e in data], "table": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
