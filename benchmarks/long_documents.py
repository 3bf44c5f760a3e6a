"""Long structured documents by section: QMSum meetings (general queries; topics are sections) and SciSummNet
papers (abstract removed from the input), the bundled pointer-generator by section vs by document vs LEAD
and centrality at the same number of words.

Two steps, so that the document summary's composition can be compared without decoding again:

    # decode: section summaries (and the --by document summary) of each example, with times
    nice python benchmarks/long_documents.py decode --corpus qmsum --split val -o runs/ld/qmsum_val.jsonl
    nice python benchmarks/long_documents.py decode --corpus scisummnet --skip 20 --limit 50 \\
        -o runs/ld/scisummnet.jsonl
    # score: compose within --max-words (coverage, round-robin, second pass), LEAD, centrality; ROUGE-1/2/L F,
    # sections covered, support, words, time
    python benchmarks/long_documents.py score runs/ld/qmsum_val.jsonl --corpus qmsum --split val

``--free`` decodes without the source restriction (for the support comparison); ``--second-pass`` also runs
the model over the section summaries (windows of them, then coverage to the budget).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from synopsis.data.readers import read_corpus
from synopsis.document import Document
from synopsis.evaluation.rouge import RougeScorer
from synopsis.summarizers.citing import aligned_sentences
from synopsis.summarizers.schema import Source, SummarySentence
from synopsis.summarizers.sections import COMPOSERS, compose
from synopsis.summarizers.windows import Window, section_sources

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def examples(corpus: str, split: str | None, skip: int, limit: int | None) -> list:
    """The examples, one per document: QMSum's general query of each meeting, SciSummNet without abstract."""
    if corpus == "qmsum":
        reader = read_corpus("qmsum", DATA / "qmsum", split=split or "val", queries="general")
        out = [e for e in reader if e.id.endswith("#general-0")]
    else:
        out = list(read_corpus("scisummnet", DATA / "scisummnet"))
        for example in out:
            root = example.document.root
            root.children = [c for c in root.children if (c.heading or "").lower() != "abstract"]
            example.document.reindex()
    return out[skip : None if limit is None else skip + limit]


def decode(args: argparse.Namespace) -> None:
    import torch

    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    torch.set_num_threads(args.threads)  # on a shared, loaded box one thread is several times faster

    start = time.perf_counter()
    summarizer = PointerGeneratorSummarizer.from_pretrained()
    load = time.perf_counter() - start
    summarizer.restrict_to_source = not args.free
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"load_seconds": load, "free": args.free}) + "\n")
        for example in examples(args.corpus, args.split, args.skip, args.limit):
            document = example.document
            start = time.perf_counter()
            (result,) = summarizer.summarize_by_section([document], max_words=args.max_words)
            by_section = time.perf_counter() - start
            start = time.perf_counter()
            (flat,) = summarizer.summarize([document])
            by_document = time.perf_counter() - start
            record = {
                "id": example.id,
                "words": document.num_words(),
                "result": result.to_dict(),
                "document_prediction": flat,
                "seconds": {"section": by_section, "document": by_document},
            }
            if args.second_pass:
                sentences = [s for node in result.walk() for s in node.summary]
                start = time.perf_counter()
                (again,) = summarizer.summarize_by_section(
                    [Document.from_sentences([s.text for s in sentences], id=example.id)],
                    max_words=args.max_words,
                )
                record["second_pass"] = again.prediction
                record["seconds"]["second_pass"] = time.perf_counter() - start
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()
            print(f"{example.id}: {document.num_words()} words, {by_section:.1f} s", file=sys.stderr)


def _sentences(data: dict) -> list[SummarySentence]:
    """The section summaries' sentences of a stored result, in document order."""
    out, stack = [], list(reversed(data["sections"]))
    while stack:
        node = stack.pop()
        for item in node["summary"]:
            sources = [Source(tuple(s["path"]), s["sentence"], s["text"]) for s in item["sources"]]
            out.append(SummarySentence(item["text"], sources, item.get("support")))
        stack.extend(reversed(node["sections"]))
    return out


def _top_sections(document: Document, minimum: int = 50) -> set[int]:
    """Top-level sections with at least ``minimum`` words in their subtree."""
    words: dict[int, int] = {}
    for sentence in document.sentences:
        node = sentence.section
        while node.parent is not None and node.parent.parent is not None:
            node = node.parent
        if node.parent is not None:
            i = node.parent.children.index(node)
            words[i] = words.get(i, 0) + len(sentence.text.split())
    return {i for i, n in words.items() if n >= minimum}


def _within(texts: list[str], max_words: int) -> list[str]:
    out, used = [], 0
    for text in texts:
        n = len(text.split())
        if used + n > max_words:
            continue
        out.append(text)
        used += n
    return out


def score(args: argparse.Namespace) -> None:
    scorer = RougeScorer(("rouge1", "rouge2", "rougeLsum"), use_stemmer=True)
    lines = args.input.read_text(encoding="utf-8").splitlines()
    header, records = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    wanted = {r["id"] for r in records}
    by_id = {e.id: e for e in examples(args.corpus, args.split, 0, None) if e.id in wanted}
    centrality = None
    if not args.no_centrality:
        from synopsis.summarizers.extractive import CentralitySummarizer

        centrality = CentralitySummarizer()
    systems: dict[str, list[dict]] = {}

    def add(
        system: str,
        sentences: list[SummarySentence],
        references: list[str],
        document: Document,
        seconds: float | None,
    ) -> None:
        prediction = "\n".join(s.text for s in sentences)
        scores = scorer.score_multi(references, prediction)
        top = _top_sections(document)
        cited = {s.path[0] for sentence in sentences for s in sentence.sources if s.path}
        supports = [s.support for s in sentences if s.support is not None]
        systems.setdefault(system, []).append(
            {
                "r1": scores["rouge1"].fmeasure,
                "r2": scores["rouge2"].fmeasure,
                "rl": scores["rougeLsum"].fmeasure,
                "covered": len(top & cited) / len(top) if top else None,
                "support": statistics.mean(supports) if supports else None,
                "words": sum(len(s.text.split()) for s in sentences),
                "seconds": seconds,
            }
        )

    long_sections = summarized = 0
    section_support: list[float] = []
    for record in records:
        example = by_id[record["id"]]
        document, references = example.document, example.references
        stack = list(record["result"]["sections"])
        while stack:  # every section with 50+ words of its own must have a summary
            node = stack.pop()
            stack.extend(node["sections"])
            section = document.root
            for i in node["path"]:
                section = section.children[i]
            section_support.extend(x["support"] for x in node["summary"] if x["support"] is not None)
            if sum(len(s.split()) for p in section.paragraphs for s in p) >= 50:
                long_sections += 1
                summarized += bool(node["summary"])
        sources = [s for node in section_sources(document).values() for p in node for s in p]
        whole = Window(0, document.root, (), sources, [s.text for s in sources])
        flat = _sentences(record["result"])
        for method in COMPOSERS:
            add(
                f"section ({method})",
                compose(flat, document, args.max_words, method),
                references,
                document,
                record["seconds"]["section"],
            )
        if "second_pass" in record:
            texts = _within(record["second_pass"].split("\n"), args.max_words)
            add(
                "section + second pass",
                aligned_sentences(texts, whole),
                references,
                document,
                record["seconds"]["section"] + record["seconds"]["second_pass"],
            )
        read, used = [], 0
        for source in sources:  # what --by document reads: the first 250 words
            if used >= 250:
                break
            read.append(source)
            used += len(source.text.split())
        first = Window(0, document.root, (), read, [s.text for s in read])
        add(
            "document (first 250 words)",
            aligned_sentences([record["document_prediction"]], first),
            references,
            document,
            record["seconds"]["document"],
        )
        lead, used = [], 0
        for source in sources:  # the first sentences that fit, whole
            if used + len(source.text.split()) <= args.max_words:
                lead.append(SummarySentence(source.text, [source], 1.0))
                used += len(source.text.split())
        add("LEAD", lead, references, document, 0.0)
        if centrality is not None:
            start = time.perf_counter()
            ranked = centrality.scores(document).argsort()[::-1].tolist()
            picked, used = [], 0
            for i in ranked:
                n = len(sources[i].text.split())
                if used + n <= args.max_words:
                    picked.append(i)
                    used += n
            seconds = time.perf_counter() - start
            add(
                "centrality",
                [SummarySentence(sources[i].text, [sources[i]], 1.0) for i in sorted(picked)],
                references,
                document,
                seconds,
            )

    def mean(rows: list[dict], key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return statistics.mean(values) if values else None

    table = {name: {key: mean(rows, key) for key in rows[0]} for name, rows in systems.items()}
    report = {
        "input": str(args.input),
        "examples": len(records),
        "max_words": args.max_words,
        "free_decoding": header.get("free"),
        "load_seconds": header.get("load_seconds"),
        "systems": table,
    }
    report["sections_50_words_summarized"] = [summarized, long_sections]
    report["section_summary_support"] = statistics.mean(section_support) if section_support else None
    share = sum(x >= 0.8 for x in section_support) / max(1, len(section_support))
    print(
        f"section summaries: {len(section_support)} sentences, mean support "
        f"{report['section_summary_support']:.3f}, {share:.0%} of them >= 0.8"
    )
    print(f"sections with 50+ words of their own that have a summary: {summarized} of {long_sections}")
    load = header.get("load_seconds")
    print(f"{args.input}: {len(records)} examples, at most {args.max_words} words, model load {load:.1f} s")
    print(
        f"{'system':30} {'R-1':>6} {'R-2':>6} {'R-L':>6} {'covered':>8} {'support':>8} {'words':>6} "
        f"{'s/doc':>6}"
    )
    for name, row in table.items():

        def fmt(value: float | None, scale: float = 100.0, digits: int = 2) -> str:
            return "-" if value is None else f"{value * scale:.{digits}f}"

        print(
            f"{name:30} {fmt(row['r1']):>6} {fmt(row['r2']):>6} {fmt(row['rl']):>6} "
            f"{fmt(row['covered'], 100, 0):>7}% {fmt(row['support'], 1, 2):>8} {fmt(row['words'], 1, 0):>6} "
            f"{fmt(row['seconds'], 1, 1):>6}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    dec = commands.add_parser("decode")
    dec.add_argument("--corpus", choices=("qmsum", "scisummnet"), required=True)
    dec.add_argument("--split", default=None)
    dec.add_argument("--skip", type=int, default=0)
    dec.add_argument("--limit", type=int, default=None)
    dec.add_argument("--max-words", type=int, default=150)
    dec.add_argument("--free", action="store_true", help="no source restriction")
    dec.add_argument("--second-pass", action="store_true")
    dec.add_argument("--threads", type=int, default=1)
    dec.add_argument("-o", "--output", type=Path, required=True)
    sc = commands.add_parser("score")
    sc.add_argument("input", type=Path)
    sc.add_argument("--corpus", choices=("qmsum", "scisummnet"), required=True)
    sc.add_argument("--split", default=None)
    sc.add_argument("--max-words", type=int, default=150)
    sc.add_argument("--no-centrality", action="store_true")
    sc.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    decode(args) if args.command == "decode" else score(args)


if __name__ == "__main__":
    main()
