"""What the bundled model's domain check (:class:`synopsis.summarizers.domain.DomainCheck`) says about
SciTLDR abstracts (its domain: train and dev), long real Markdown documents (the READMEs in the installed
packages' ``*.dist-info/METADATA``), QMSum meetings and SciSummNet papers, against the old check (the
vocabulary floor at the lowest dev share, 84%).

    python benchmarks/domain_check.py [--site-packages DIR] [--min-words 300]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import sysconfig
from collections import Counter
from pathlib import Path

from synopsis.data.readers import read_corpus, read_document
from synopsis.document import Document
from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def readmes(site_packages: Path, min_words: int, scratch: Path) -> list[Document]:
    """Each installed package's long description (the METADATA body after the headers) read as Markdown."""
    out = []
    for metadata in sorted(site_packages.glob("*.dist-info/METADATA")):
        body = metadata.read_text(encoding="utf-8", errors="replace").partition("\n\n")[2]
        if len(body.split()) < min_words:
            continue
        path = scratch / f"{metadata.parent.name}.md"
        path.write_text(body, encoding="utf-8")
        out.append(read_document(path, format="markdown"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--site-packages", type=Path, default=Path(sysconfig.get_paths()["purelib"]))
    parser.add_argument("--min-words", type=int, default=300)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/domain_check"))
    args = parser.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)

    new = PointerGeneratorSummarizer.from_pretrained()
    profile = new.model.config.source_profile
    old = PointerGeneratorSummarizer(new.model, new.vocab, new.generation)
    old.domain_check = lambda: dataclasses.replace(  # type: ignore[method-assign]
        PointerGeneratorSummarizer.domain_check(new), min_known_word_rate=profile.known_word_rate_min
    )

    def scitldr(split: str) -> list[Document]:
        lines = (DATA / "scitldr" / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        return [Document.from_sentences(json.loads(line)["source"]) for line in lines]

    qmsum = [e.document for e in read_corpus("qmsum", DATA / "qmsum", split="val", queries="general")]
    groups = {
        "SciTLDR train": scitldr("train"),
        "SciTLDR dev": scitldr("dev"),
        f"READMEs ({args.min_words}+ words)": readmes(args.site_packages, args.min_words, args.scratch),
        "QMSum val meetings": list({id(d): d for d in qmsum}.values()),
        "SciSummNet papers (first 100)": [e.document for e in read_corpus("scisummnet", DATA / "scisummnet")][
            :100
        ],
    }
    print(
        f"vocabulary floor {profile.known_word_rate_floor:.4f} (old: {profile.known_word_rate_min:.4f}); "
        "length > 2 x p99"
    )
    print("| documents | n | far (old check) | far | by length | by sections | by vocabulary |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, documents in groups.items():
        reasons = [[d.measure for d in new.distances(doc)] for doc in documents]
        far_old = sum(bool(old.distances(doc)) for doc in documents)
        counts = Counter(m for r in reasons for m in r)
        far = sum(bool(r) for r in reasons)
        print(
            f"| {name} | {len(documents)} | {far_old} | {far} | {counts['length']} | {counts['sections']} "
            f"| {counts['vocabulary']} |"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
