"""Which sentences an instruction finds in a real document: the top candidates of the default's document
summary by the instruction's cosine with each sentence (all-MiniLM-L6-v2), with each sentence under its
heading ("Termination: ..."), and mixed as the default mixes them (issue 48 review item 5; the readings are
in docs/results/default_real_documents.md). Any version of synopsis with ``_heading_weights`` on
``PYTHONPATH``::

    python benchmarks/instruction_relevance.py /root/.pyenv/README.md "How do I install pyenv?"
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from synopsis.pipeline import read_source
from synopsis.summarizers import salient


def main(path: str, instruction: str, top: int = 5) -> None:
    document = read_source(Path(path)).document
    summarizer = salient.SalientSummarizer()
    summarizer.names = salient.title_names(document.title)
    pool = summarizer.candidates(document)
    texts = [salient._spoken(document.sentences[i].text) for i in pool]
    sections = [document.sentences[i].section for i in pool]
    headed = [salient._under_heading(section, t) for section, t in zip(sections, texts, strict=True)]
    weights = salient._heading_weights(document, pool)
    vectors = summarizer.vectors.encode([*texts, *headed, instruction])
    plain, under = vectors[: len(texts)] @ vectors[-1], vectors[len(texts) : -1] @ vectors[-1]
    mixed = plain + weights * (under - plain)
    for name, score in (("sentence", plain), ("heading: sentence", under), ("mixed", mixed)):
        print(f"-- {name}")
        for k in np.argsort(-score)[:top]:
            heading = document.sentences[pool[k]].section.heading or ""
            print(f"  {score[k]:.2f} [{heading[:30]}] {texts[k][:100]}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
