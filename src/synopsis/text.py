"""Text utilities shared by readers, models and metrics: sentence splitting and word tokenisation."""

from __future__ import annotations

import re
from functools import lru_cache

import punkt

# Academic text is full of "et al." and "Eq."; Punkt's curated prefixes cover "e.g.", "Fig.", "No. 5", ...
_EXTRA_ABBREVIATIONS = {"al", "eq", "eqs", "sec", "secs", "tab", "approx", "resp", "cf", "vs"}


@lru_cache(maxsize=1)
def _sentence_tokenizer() -> punkt.PunktSentenceTokenizer:
    params = punkt.with_nonbreaking_prefixes(punkt.load_model("english"), "english")
    params.abbrev_types.update(_EXTRA_ABBREVIATIONS)
    return punkt.PunktSentenceTokenizer(params, line_breaks="ignore")


# Chinese and Japanese end sentences with full-width marks and no space after them (Punkt needs the space);
# closing quotes and brackets after the mark stay with the sentence.
_CJK_SENTENCE_END = re.compile(r"[。！？]+[」』”’）》〉】]*")


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences with Punkt (handles abbreviations, decimals, "e.g."); "。", "！" and
    "？" end sentences too."""
    text = text.strip()
    if not text:
        return []
    pieces = [text]
    if _CJK_SENTENCE_END.search(text):
        pieces, start = [], 0
        for match in _CJK_SENTENCE_END.finditer(text):
            pieces.append(text[start : match.end()])
            start = match.end()
        pieces.append(text[start:])
    tokenizer = _sentence_tokenizer()
    sentences = (s.strip() for piece in pieces if piece.strip() for s in tokenizer.tokenize(piece.strip()))
    return [s for s in sentences if s]


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs are separated by one or more blank lines; lines inside a paragraph are joined."""
    blocks = re.split(r"\n\s*\n", text.replace("\r\n", "\n").replace("\r", "\n"))
    return [
        " ".join(line.strip() for line in block.splitlines() if line.strip())
        for block in blocks
        if block.strip()
    ]


_WORD_RE = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]", re.UNICODE)


def word_tokenize(text: str, lower: bool = False) -> list[str]:
    """Simple reversible-enough tokenisation for vocabularies and statistics (words and punctuation)."""
    tokens = _WORD_RE.findall(text)
    return [t.lower() for t in tokens] if lower else tokens
