"""The documents the bundled model's domain check is fitted and measured on, each group split into a half
for fitting (``fit``) and a half for the report (``report``), so that no reported document was seen when
the style classifier's weights or threshold were set. Shared by ``benchmarks/build_style_check.py`` and
``benchmarks/domain_check.py``; everything is read from ``../shared/data`` and the installed packages.

| group | fit | report |
|---|---|---|
| SciTLDR abstracts (positives) | train (1,992) | dev (619) |
| news, other text | CNN ``.story`` files (20); MASC (written, spoken) in chunks | REALSumm CNN/DM (98) |
| QMSum | train: 150-600-word chunks of transcripts | val: meetings as the default reads them, and chunks |
| SciSummNet | sections of the first half of the papers (by id) | sections of the second half |
| arXiv/PubMed sample | - | whole papers and single sections |
| READMEs (METADATA long descriptions) | even positions (sorted by package) | odd positions |
"""

from __future__ import annotations

import json
import random
import sysconfig
from collections.abc import Iterator, Sequence
from pathlib import Path

from synopsis.data.readers import read_corpus, read_document
from synopsis.document import Document, Section

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])


def chunks(sentences: Sequence[str], seed: str, low: int = 150, high: int = 600) -> Iterator[Document]:
    """Consecutive sentences in pieces of ``low``-``high`` words (each piece's length drawn at random,
    seeded by ``seed``): a part of a long text as a user might paste it. A last piece under ``low`` is
    dropped."""
    rng = random.Random(seed)
    target, piece, words = rng.randint(low, high), [], 0
    for sentence in sentences:
        piece.append(sentence)
        words += len(sentence.split())
        if words >= target:
            yield Document.from_sentences(piece)
            target, piece, words = rng.randint(low, high), [], 0


def scitldr(split: str) -> list[Document]:
    lines = (DATA / "scitldr" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
    return [Document.from_sentences(json.loads(line)["source"]) for line in lines]


def news_realsumm() -> list[Document]:
    lines = (DATA / "news" / "realsumm_cnndm.jsonl").read_text(encoding="utf-8").splitlines()
    return [Document.from_text(json.loads(line)["text"]) for line in lines]


def news_stories() -> list[Document]:
    """The CNN ``.story`` files' articles (the text before the first ``@highlight``)."""
    out = []
    for path in sorted((DATA / "cnndm_stories").glob("*.story")):
        article = path.read_text(encoding="utf-8").split("@highlight")[0]
        out.append(Document.from_text(article))
    return out


def masc_chunks() -> list[Document]:
    """MASC's written documents (news, essays, letters, fiction, government, technical...) and spoken
    transcripts, in 150-600-word chunks."""
    from synopsis.data.lm_corpus import read_masc

    out = []
    for document in read_masc(DATA / "masc" / "masc_tagged.zip", lowercase=False):
        lines = [" ".join(line) for line in document.lines if line]
        out.extend(chunks(lines, document.id))
    return out


def qmsum(split: str) -> tuple[list[Document], list[Document]]:
    """(meetings as the default reads them, 150-600-word chunks of their transcripts)."""
    meetings = {}
    for example in read_corpus("qmsum", DATA / "qmsum", split=split, queries="general"):
        meetings.setdefault(example.document.id, example.document)
    pieces = [c for m in meetings.values() for c in chunks([s.text for s in m.sentences], str(m.id))]
    return list(meetings.values()), pieces


def scisummnet() -> list[Document]:
    return sorted(
        (e.document for e in read_corpus("scisummnet", DATA / "scisummnet")), key=lambda d: str(d.id)
    )


def sections_alone(document: Document, min_words: int = 40) -> tuple[list[Document], list[Document]]:
    """(each top-level section but the abstract as a document of its own, without its heading; the
    abstract alone): the hard negatives, close to abstracts. Sections under ``min_words`` are left out."""
    sections, abstracts = [], []
    for section in document.root.children:
        sentences = [s for p in _paragraphs(section) for s in p]
        if sum(len(s.split()) for s in sentences) < min_words:
            continue
        alone = Document.from_sentences(sentences)
        (abstracts if (section.heading or "").strip().lower() == "abstract" else sections).append(alone)
    return sections, abstracts


def _paragraphs(section: Section) -> Iterator[list[str]]:
    yield from section.paragraphs
    for child in section.children:
        yield from _paragraphs(child)


def arxiv_pubmed() -> tuple[list[Document], list[Document]]:
    """(whole papers as the default reads them, their sections alone)."""
    papers = []
    for name in ("arxiv", "pubmed"):
        papers += [e.document for e in read_corpus(name, DATA / "arxiv_pubmed_sample" / f"{name}.jsonl")]
    return papers, [s for p in papers for s in sections_alone(p)[0]]


def readmes(scratch: Path, min_words: int = 150) -> list[Document]:
    """Each installed package's long description (the METADATA body after the headers) as Markdown."""
    scratch.mkdir(parents=True, exist_ok=True)
    out = []
    for metadata in sorted(SITE_PACKAGES.glob("*.dist-info/METADATA")):
        body = metadata.read_text(encoding="utf-8", errors="replace").partition("\n\n")[2]
        if len(body.split()) < min_words:
            continue
        path = scratch / f"{metadata.parent.name}.md"
        path.write_text(body, encoding="utf-8")
        out.append(read_document(path, format="markdown"))
    return out


def groups(scratch: Path = Path("/tmp/domain_check")) -> dict[str, dict[str, list[Document]]]:
    """``{"fit": {name: documents}, "report": {name: documents}}``; the first fit group and the first
    report group are the abstracts (positives)."""
    papers = scisummnet()
    half = len(papers) // 2
    fit_sections = [s for p in papers[:half] for s in sections_alone(p)[0]]
    report_split = [sections_alone(p) for p in papers[half:]]
    meetings_train, chunks_train = qmsum("train")
    meetings_val, chunks_val = qmsum("val")
    whole, sections = arxiv_pubmed()
    docs = readmes(scratch)
    return {
        "fit": {
            "SciTLDR train": scitldr("train"),
            "CNN stories": news_stories(),
            "MASC chunks": masc_chunks(),
            "QMSum train chunks": chunks_train,
            "SciSummNet sections (first half)": fit_sections,
            "READMEs (even)": docs[0::2],
        },
        "report": {
            "SciTLDR dev": scitldr("dev"),
            "news (REALSumm CNN/DM)": news_realsumm(),
            "QMSum val meetings": meetings_val,
            "QMSum val chunks (150-600 words)": chunks_val,
            "SciSummNet sections (second half)": [s for pair in report_split for s in pair[0]],
            "arXiv/PubMed papers": whole,
            "arXiv/PubMed sections": sections,
            "READMEs (odd)": docs[1::2],
        },
        "extra": {
            "SciSummNet abstracts (second half)": [a for pair in report_split for a in pair[1]],
            "QMSum train meetings": meetings_train,
        },
    }
