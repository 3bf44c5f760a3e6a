"""A sectioned document's opening: the preface or the introduction, which a reader weighs as LEAD is weighed
for news (Nenkova, 2005), and its defining sentence ("pyenv lets you ...", "The GNU General Public License is
a free, copyleft license ..."), which leads the document summary."""

from __future__ import annotations

import re

import numpy as np

from synopsis.document import Document
from synopsis.summarizers.salient.rules import is_transcript, spoken

# A sentence that says what something is or is for (a document's defining sentence).
_DEFINING = re.compile(
    r"\b(?:is|are)\s+(?:a|an|the)\b|\blets?\s+you\b|\ballows?\s+you\b|\bprovides?\b|\bis\s+(?:designed|"
    r"intended|meant|used)\b|\bthis\s+(?:document|guide|licen[cs]e|file|faq|manual|project|package|library|tool|"
    r"program|meeting|page|readme)\b",
    re.IGNORECASE,
)
# Says what its subject is or does: "X is a ...", "X lets you ...", "X provides ...".
_COPULA = re.compile(
    r"\b(?:is|are)\s+(?:a|an|the)\b|\b(?:lets?|allows?|helps?)\s+you\b|\bprovides?\b|"
    r"\bis\s+(?:designed|intended|meant|used)\b",
    re.IGNORECASE,
)

#: Headings of the section that opens a document when it has no preface of its own.
OPENING_HEADINGS = frozenset(
    "introduction overview about preamble description background summary abstract preface purpose".split()
)


def opening(document: Document, pool: list[int], names: frozenset[str]) -> tuple[np.ndarray, int | None]:
    """Each candidate's weight as part of the document's opening prose (1, 1/2, 1/3, ... for the opening's
    candidates in order, 0 elsewhere) and the position in ``pool`` of its defining sentence, if any: among the
    opening's first four candidates, the first that names the document's subject and says what it is
    (:func:`_defines` 2: "Termplot is a ...", "pyenv lets you ..."; a sentence that only says what something
    is, "This model is a ...", cost the arXiv/PubMed dev set 1.5 ROUGE-2 as the lead).
    A document without headings, and a transcript, have none. The opening is the preface (the text before
    the first heading) when it has candidates, else the first section headed like an introduction
    ("Introduction", "Overview", "About", ...); else there is none."""
    sentences = document.sentences
    sections = [sentences[i].section for i in pool]
    weight = np.zeros(len(pool))
    # A meeting opens with greetings and sound checks, not with what it is; a document without headings
    # has no opening apart from its body, whose order directed centrality already weighs (news).
    if is_transcript(document) or not any(s.heading for s in document.sections):
        return weight, None
    if any(section is document.root for section in sections):
        opening = document.root
    else:
        headed = [s for s in sections if (s.heading or "").strip().lower().rstrip(":") in OPENING_HEADINGS]
        opening = headed[0] if headed else None  # a FAQ's first answer is not an opening
    members = [k for k, section in enumerate(sections) if section is opening]
    for rank, k in enumerate(members):
        weight[k] = 1.0 / (1 + rank)
    scores = [_defines(spoken(sentences[pool[k]].text), names) for k in members[:4]]
    best = max(scores, default=0)
    if best < 2:  # only a sentence that names the document's subject
        return weight, None
    defining = scores.index(best)
    weight[members[:defining]] = 0.0  # what comes before it (a copyright line, a version) is not the opening
    return weight, members[defining]


def _defines(text: str, names: frozenset[str]) -> int:
    """How plainly a sentence says what the document's subject is: 2 when one of the title's ``names`` is
    among its first six words and a copula or "lets you" follows within twelve ("The GNU General Public
    License is a free, copyleft license ..."; "pyenv lets you ..."), 1 when it only says what something is
    or is for (:data:`_DEFINING`), else 0."""
    head = text.split()[:12]
    said = _COPULA.search(" ".join(head))
    named = any(word.strip("\"'“”(),.:;").lower() in names for word in head[:6])
    return 2 if said and named else int(bool(_DEFINING.search(text)))
