"""The default summary against what users compare it with, side by side on the dev sets (issue 57).

One run scores, with this project's ROUGE (rouge-score's conventions: Porter stemming, F1 x 100; the mean and
the max over each document's references):

* **news** (../shared/data/news: 98 CNN/DailyMail test articles, PTB-tokenized, one reference each, at
  ``--news-words`` words, LEAD-3's mean length): the default (``synopsis summarize ARTICLE --max-words N``,
  through the same runner), ``salient``, LEAD-3, sumy's LexRank, Luhn and TextRank at the same budget
  (their sentence ranking, filled with whole sentences as salient fills it), PacSum over all-MiniLM-L6-v2
  instead of TF-IDF, and the 24 published systems' outputs that ship with the data;
* **SciSummNet** (the first ``--papers`` papers, human summaries), **arXiv/PubMed** (the 12-paper sample,
  abstracts) and **QMSum general** (val meetings as plain "Speaker: text" transcripts, "Summarize the whole
  meeting") at ``--max-words``: the default, salient, LEAD within the budget and sumy;
* **QMSum specific** (val, every specific query, at ``--query-words``): ``-i QUERY`` (the default's
  document summary with the instruction), a TF-IDF match of the query against the sentences of 6+ words,
  and the gold-span oracle (the first sentence of each turn of the query's ``relevant_text_span``);
* with ``--ablate``, each of salient's weights and rules switched off or changed, on every set.

``--speed``: CPU seconds of one whole ``synopsis summarize`` process on a 600-word article (and of sumy's
LexRank in a process of its own), and milliseconds inside one process, medians of ``--repeats``.

    pip install sumy            # the peer users know; its own tokenizers need nltk data, so ours is used
    nice python benchmarks/default_quality.py --json benchmarks/results/default_quality.json \
        --dump /tmp/default_quality.jsonl [--ablate] [--speed]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from synopsis.data.readers import read_corpus
from synopsis.document import Document
from synopsis.evaluation.rouge import RougeScorer
from synopsis.pipeline import ParsedDocument, SummarizeRunner, read_source
from synopsis.summarizers import load_summarizer
from synopsis.summarizers.salient import SalientSummarizer, TfidfVectors, Weights, default_vectors
from synopsis.text import word_tokenize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TYPES = ("rouge1", "rouge2", "rougeL")
_MARKER = re.compile(r"\{[a-z_]+\}")  # QMSum's {disfmarker}, {vocalsound}: not said


@dataclass
class Item:
    """One document to summarize: as read, its references, its budget, and an instruction (or none)."""

    id: str
    parsed: ParsedDocument
    references: list[str]
    words: int
    instruction: str | None = None
    gold: list[int] | None = None  # QMSum: the first sentence of each turn of the relevant span


# ------------------------------------------------------------------------------------------- the dev sets
def news(words: int) -> list[Item]:
    rows = [json.loads(line) for line in (DATA / "news" / "realsumm_cnndm.jsonl").open(encoding="utf-8")]
    return [Item(str(r["id"]), read_source(r["text"]), [r["reference"]], words) for r in rows]


def published(rows_path: Path = DATA / "news" / "realsumm_cnndm.jsonl") -> dict[str, list[str]]:
    """The 24 published systems' outputs, by system, in the articles' order."""
    rows = [json.loads(line) for line in rows_path.open(encoding="utf-8")]
    return {name: [r["systems"][name]["summary"] for r in rows] for name in rows[0]["systems"]}


def scisummnet(papers: int, words: int) -> list[Item]:
    out = []
    for example in read_corpus("scisummnet", DATA / "scisummnet"):
        if len(out) == papers:
            break
        out.append(
            Item(example.id, ParsedDocument(example.document, "json", None), example.references, words)
        )
    return out


def arxiv_pubmed(words: int) -> list[Item]:
    return [
        Item(e.id, ParsedDocument(e.document, "json", None), e.references, words)
        for split in ("arxiv", "pubmed")
        for e in read_corpus("arxiv", DATA / "arxiv_pubmed_sample", split=split)
    ]


def transcript(record: dict[str, Any]) -> tuple[str, list[int]]:
    """A QMSum meeting as a user would have it (one "Speaker: text" paragraph per turn, no topic headings)
    and, for each paragraph, its turn's index in the record."""
    turns, index = [], []
    for i, turn in enumerate(record["meeting_transcripts"]):
        text = " ".join(_MARKER.sub("", turn["content"]).split())
        if text:
            turns.append(f"{turn['speaker']}: {text}")
            index.append(i)
    return "\n\n".join(turns), index


def qmsum(
    split: str, words: int, query_words: int, meetings: int | None = None
) -> tuple[list[Item], list[Item]]:
    """The general summaries and the specific queries of a QMSum split (its first ``meetings``)."""
    general, specific = [], []
    for path in sorted((DATA / "qmsum" / split).glob("*.json"))[:meetings]:
        record = json.loads(path.read_text(encoding="utf-8"))
        text, turns = transcript(record)
        parsed = read_source(text)
        first: dict[int, int] = {}
        for i, sentence in enumerate(parsed.document.sentences):
            first.setdefault(sentence.paragraph, i)
        paragraph = {turn: p for p, turn in enumerate(turns)}
        query = record["general_query_list"][0]
        general.append(Item(path.stem, parsed, [query["answer"]], words))
        for n, query in enumerate(record["specific_query_list"]):
            spans = [(int(a), int(b)) for a, b in query["relevant_text_span"]]
            gold = [first[paragraph[t]] for a, b in spans for t in range(a, b + 1)
                    if t in paragraph and paragraph[t] in first]  # fmt: skip
            specific.append(
                Item(f"{path.stem}#{n}", parsed, [query["answer"]], query_words, query["query"], gold)
            )
    return general, specific


# ------------------------------------------------------------------------------------------- the systems
def fill(
    ranked: Sequence[int], document: Document, words: int, eligible: Callable[[str], bool] | None = None
) -> str:
    """Whole sentences in rank order while they fit ``words`` (as salient fills its budget), in document
    order, one a line."""
    chosen, left = [], words
    for i in ranked:
        text = document.sentences[i].text
        n = len(text.split())
        if n <= left and (eligible is None or eligible(text)):
            chosen.append(i)
            left -= n
    return "\n".join(document.sentences[i].text for i in sorted(chosen))


def lead(item: Item) -> str:
    """The first sentences while they fit the budget."""
    out, left = [], item.words
    for sentence in item.parsed.document.sentences:
        n = len(sentence.text.split())
        if n > left:
            break
        out.append(sentence.text)
        left -= n
    return "\n".join(out)


def lead3(item: Item) -> str:
    return "\n".join(s.text for s in item.parsed.document.sentences[:3])


class Sumy:
    """One of sumy's summarizers ranking every sentence of our split (English stemmer and stop words)."""

    def __init__(self, name: str) -> None:
        from sumy.nlp.stemmers import Stemmer
        from sumy.summarizers.lex_rank import LexRankSummarizer
        from sumy.summarizers.luhn import LuhnSummarizer
        from sumy.summarizers.text_rank import TextRankSummarizer
        from sumy.utils import get_stop_words

        kind = {"lexrank": LexRankSummarizer, "luhn": LuhnSummarizer, "textrank": TextRankSummarizer}[name]
        self.summarizer = kind(Stemmer("english"))
        self.summarizer.stop_words = get_stop_words("english")

    def ranking(self, document: Document) -> list[int]:
        """Every sentence's index, best first by sumy's own rating (its summarizer asked for all of them,
        the ratings read where it sorts them)."""
        from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence

        sentences = [Sentence(s.text, _Words()) for s in document.sentences]
        if not sentences:
            return []
        ratings: list[float] = []

        def best(candidates: Any, count: Any, rating: Any, *args: Any, **kwargs: Any) -> Any:
            rate = (
                (lambda s: rating[s]) if isinstance(rating, dict) else (lambda s: rating(s, *args, **kwargs))
            )
            ratings.extend(float(rate(s)) for s in candidates)
            return ()

        self.summarizer._get_best_sentences = best  # an instance attribute: sumy calls it unbound
        self.summarizer(ObjectDocumentModel([Paragraph(sentences)]), len(sentences))
        return sorted(range(len(sentences)), key=lambda i: -ratings[i])


class _Words:
    """sumy's tokenizer interface over this project's tokenisation (sumy's own needs nltk's punkt data)."""

    language = "english"

    def to_words(self, text: str) -> list[str]:
        return [w for w in word_tokenize(text) if any(c.isalnum() for c in w)]


def runner_summaries(summarizer: Any, items: list[Item]) -> list[str]:
    """Each item through the CLI's runner (by document or by section as ``auto`` decides), its budget as
    ``--max-words``, its instruction as ``-i``."""
    out = []
    runners: dict[int, SummarizeRunner] = {}
    for item in items:
        runner = runners.setdefault(item.words, SummarizeRunner(summarizer, max_words=item.words))
        (summary,) = runner.run(item.parsed, [item.instruction] if item.instruction else [])
        out.append(summary.prediction)
    return out


def tfidf_query(item: Item) -> str:
    """The query's TF-IDF cosine with each sentence of 6+ words, best first, within the budget."""
    sentences = [s.text for s in item.parsed.document.sentences]
    vectors = TfidfVectors().encode([*sentences, item.instruction or ""])
    ranked = np.argsort(-(vectors[:-1] @ vectors[-1]), kind="stable")
    return fill(ranked, item.parsed.document, item.words, lambda t: len(t.split()) >= 6)


def oracle_span(item: Item) -> str:
    return fill(item.gold or [], item.parsed.document, item.words)


# ------------------------------------------------------------------------------------------- scoring
def score(predictions: Sequence[str], items: Sequence[Item], scorer: RougeScorer) -> dict[str, float]:
    """ROUGE F1 x 100 per type: the mean over documents of the mean and of the max over references."""
    mean: dict[str, list[float]] = {t: [] for t in TYPES}
    best: dict[str, list[float]] = {t: [] for t in TYPES}
    for prediction, item in zip(predictions, items, strict=True):
        each = [scorer.score(reference, prediction) for reference in item.references]
        for t in TYPES:
            values = [s[t].fmeasure for s in each]
            mean[t].append(100 * statistics.fmean(values))
            best[t].append(100 * max(values))
    out = {f"{t}": round(statistics.fmean(v), 2) for t, v in mean.items()}
    out.update({f"{t}_max": round(statistics.fmean(v), 2) for t, v in best.items()})
    out["words"] = round(statistics.fmean(len(p.split()) for p in predictions), 1)
    return out


def paired(ours: Sequence[str], theirs: Sequence[str], items: Sequence[Item], scorer: RougeScorer) -> dict:
    """ROUGE-2 F1 of ``ours`` less ``theirs`` per document: the mean, a 95% interval by a paired bootstrap of
    the documents (10,000 resamples, seed 0) and the documents each wins."""
    differences = np.array(
        [
            100
            * (
                scorer.score(i.references[0], a)["rouge2"].fmeasure
                - scorer.score(i.references[0], b)["rouge2"].fmeasure
            )
            for a, b, i in zip(ours, theirs, items, strict=True)
        ]
    )
    rng = np.random.default_rng(0)
    means = differences[rng.integers(0, len(differences), (10_000, len(differences)))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "mean": round(float(differences.mean()), 2),
        "interval_95": [round(float(low), 2), round(float(high), 2)],
        "wins": int((differences > 0).sum()),
        "ties": int((differences == 0).sum()),
        "losses": int((differences < 0).sum()),
    }


def row(name: str, scores: dict[str, float], seconds: float | None = None) -> str:
    timing = "" if seconds is None else f" | {seconds:.1f}"
    return (
        f"| {name} | {scores['rouge1']:.2f} | {scores['rouge2']:.2f} | {scores['rougeL']:.2f} | "
        f"{scores['rouge2_max']:.2f} | {scores['words']:.0f}{timing} |"
    )


def timed(make: Callable[[], list[str]]) -> tuple[list[str], float]:
    begin = time.process_time()
    out = make()
    return out, time.process_time() - begin


# ------------------------------------------------------------------------------------------- speed
def speed(article: Item, repeats: int) -> dict[str, Any]:
    """CPU seconds of whole processes (``synopsis summarize`` and a process running sumy's LexRank on the
    same sentences) and milliseconds inside this one (the default and sumy), medians of ``repeats``."""
    path = Path("/tmp/default_quality_article.txt")
    text = "\n".join(s.text for s in article.parsed.document.sentences)
    path.write_text(text, encoding="utf-8")
    words = len(text.split())
    sumy_script = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); from default_quality import Sumy; "
        "from synopsis.pipeline import read_source; "
        f"d = read_source(open({str(path)!r}).read()).document; r = Sumy('lexrank').ranking(d); print(r[:3])"
    )

    def cpu(command: list[str]) -> float:
        begin = _children_cpu()
        subprocess.run(command, check=True, capture_output=True)
        return _children_cpu() - begin

    ours = [
        cpu(["synopsis", "summarize", str(path), "--max-words", str(article.words)]) for _ in range(repeats)
    ]
    theirs = [cpu([sys.executable, "-c", sumy_script]) for _ in range(repeats)]
    default = load_summarizer()
    runner = SummarizeRunner(default, max_words=article.words)
    runner.run(article.parsed)  # first call: what loads lazily
    inside = []
    for _ in range(repeats):
        begin = time.process_time()
        runner.run(read_source(text))
        inside.append(1000 * (time.process_time() - begin))
    lexrank = Sumy("lexrank")
    sumy_inside = []
    for _ in range(repeats):
        begin = time.process_time()
        lexrank.ranking(read_source(text).document)
        sumy_inside.append(1000 * (time.process_time() - begin))
    return {
        "article_words": words,
        "process_cpu_s": {"synopsis": statistics.median(ours), "sumy_lexrank": statistics.median(theirs)},
        "in_process_cpu_ms": {
            "synopsis": statistics.median(inside),
            "sumy_lexrank": statistics.median(sumy_inside),
        },
    }


def _distance_from_600(item: Item) -> int:
    return abs(sum(len(s.text.split()) for s in item.parsed.document.sentences) - 600)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------------------------------- the run
ABLATIONS: dict[str, Weights] = {
    "salient (chosen weights)": Weights(),
    "lambda1 -0.5": Weights(lambda1=-0.5),
    "lambda1 -0.7": Weights(lambda1=-0.7),
    "beta 0.1": Weights(beta=0.1),
    "no opening weight": Weights(opening=0.0),
    "opening 0.3": Weights(opening=0.3),
    "no defining sentence first": Weights(defining_first=False),
    "no pronoun rule": Weights(anaphora=False),
    "no stand-alone rule": Weights(stand_alone=False),
    "no informative-prose rule": Weights(informative=False),
    "undirected (lambda1 0: degree over later edges)": Weights(lambda1=0.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--news-words", type=int, default=84, help="LEAD-3's mean length on the news set")
    parser.add_argument("--max-words", type=int, default=150)
    parser.add_argument("--query-words", type=int, default=100)
    parser.add_argument("--papers", type=int, default=40, help="SciSummNet papers (the first N)")
    parser.add_argument("--sets", default="news,scisummnet,arxiv,qmsum,queries")
    parser.add_argument(
        "--qmsum-split", default="val", help="val (the dev set) or train (where -i was tuned)"
    )
    parser.add_argument("--meetings", type=int, default=None, help="QMSum: the first N meetings only")
    parser.add_argument("--ablate", action="store_true", help="each weight and rule of salient changed")
    parser.add_argument("--minilm-graph", action="store_true", help="news: PacSum over MiniLM too (slow)")
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--dump", type=Path, help="every summary, for reading (JSONL)")
    args = parser.parse_args()

    logging.getLogger("synopsis").setLevel(logging.ERROR)  # the default's note, once per document
    wanted = set(args.sets.split(","))
    scorer = RougeScorer(TYPES, use_stemmer=True)
    sets: dict[str, list[Item]] = {}
    if "news" in wanted:
        sets["news"] = news(args.news_words)
    if "scisummnet" in wanted:
        sets["SciSummNet"] = scisummnet(args.papers, args.max_words)
    if "arxiv" in wanted:
        sets["arXiv/PubMed"] = arxiv_pubmed(args.max_words)
    if wanted & {"qmsum", "queries"}:
        general, specific = qmsum(args.qmsum_split, args.max_words, args.query_words, args.meetings)
        if "qmsum" in wanted:
            sets["QMSum general"] = general
        if "queries" in wanted:
            sets["QMSum specific (-i)"] = specific
    results: dict[str, Any] = {}
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    default, salient = load_summarizer(), load_summarizer("salient")
    for name, items in sets.items():
        print(f"\n### {name} ({len(items)} documents, budget {items[0].words} words)\n", flush=True)
        print("| system | R-1 | R-2 | R-L | R-2 (max ref) | words | CPU s |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        systems: dict[str, Callable[[], list[str]]] = {}
        if name.startswith("QMSum specific"):

            def asked(items: list[Item] = items) -> list[str]:
                """``-i`` as the CLI runs it for several instructions on one document: one run per meeting,
                its sentences encoded once for all its queries."""
                out, runs = [], {}
                for item in items:
                    key = id(item.parsed)
                    if key not in runs:
                        runs[key] = salient.for_document(item.parsed.document)
                    out.append(
                        "\n".join(s.text for s in runs[key].document_summary(item.instruction, item.words))
                    )
                return out

            systems["-i (default and salient)"] = asked
            systems["TF-IDF query match"] = lambda items=items: [tfidf_query(i) for i in items]
            systems["gold-span oracle"] = lambda items=items: [oracle_span(i) for i in items]
            systems["LEAD (no query)"] = lambda items=items: [lead(i) for i in items]
        else:
            systems["default"] = lambda items=items: runner_summaries(default, items)
            systems["salient"] = lambda items=items: runner_summaries(salient, items)
            if name == "news":
                systems["LEAD-3"] = lambda items=items: [lead3(i) for i in items]
            systems["LEAD (budget)"] = lambda items=items: [lead(i) for i in items]
            for peer in ("lexrank", "luhn", "textrank"):
                ranker = Sumy(peer)
                systems[f"sumy {peer}"] = lambda items=items, r=ranker: [
                    fill(r.ranking(i.parsed.document), i.parsed.document, i.words) for i in items
                ]
            if args.minilm_graph and name == "news":  # the embedding graph on the set it was compared on
                minilm = SalientSummarizer(graph_vectors=default_vectors())
                systems["salient, PacSum over MiniLM"] = lambda items=items, m=minilm: runner_summaries(
                    m, items
                )
            if args.ablate:
                for label, weights in list(ABLATIONS.items())[1:]:
                    variant = SalientSummarizer(weights=weights)
                    systems[f"ablation: {label}"] = lambda items=items, v=variant: runner_summaries(v, items)
        results[name] = {}
        made: dict[str, list[str]] = {}
        for system, make in systems.items():
            predictions, seconds = timed(make)
            made[system] = predictions
            scores = score(predictions, items, scorer)
            results[name][system] = scores
            print(row(system, scores, seconds), flush=True)
            if name.startswith("QMSum specific"):  # the questions alone, not "Summarize the discussion of X"
                asked = [
                    k for k, i in enumerate(items) if not (i.instruction or "").lower().startswith("summar")
                ]
                subset = score([predictions[k] for k in asked], [items[k] for k in asked], scorer)
                results[name][f"{system} (questions)"] = subset
                print(row(f"{system}, the {len(asked)} questions", subset), flush=True)
            if dump:
                for item, prediction in zip(items, predictions, strict=True):
                    record = {"set": name, "system": system, "id": item.id}
                    record.update(instruction=item.instruction, summary=prediction)
                    dump.write(json.dumps(record) + "\n")
        if name == "news":
            for system in ("default", "salient"):
                results[name][f"{system} - LEAD-3, R-2"] = versus = paired(
                    made[system], made["LEAD-3"], items, scorer
                )
                print(f"\n{system} - LEAD-3, ROUGE-2 per article: {json.dumps(versus)}\n")
            for system, predictions in published().items():
                scores = score(predictions, items, scorer)
                results[name][f"published: {system}"] = scores
                print(row(f"published: {system}", scores), flush=True)
    if args.speed and "news" in sets:
        article = min(sets["news"], key=_distance_from_600)
        results["speed"] = speed(article, args.repeats)
        print("\n### speed\n", json.dumps(results["speed"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
