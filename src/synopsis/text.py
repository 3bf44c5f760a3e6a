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


# English function words (articles, pronouns, auxiliaries, prepositions, conjunctions, common adverbs): the
# words that carry no content of their own, so that "support" (the share of a summary sentence's content
# words found in the sentences it cites) and source-restricted decoding look only at content words.
FUNCTION_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each either else etc even ever every few
    for from further had has have having he her here hers herself him himself his how however i if in into
    is it its itself just may me might more most must my myself neither no nor not now of off on once only
    or other ought our ours ourselves out over own per rather same shall she should since so some such than
    that the their theirs them themselves then there these they this those though through thus to too
    under until up upon us very was we were what when where whether which while who whom whose why will
    with within without would yet you your yours yourself yourselves 's n't 're 've 'll 'd 'm""".split()
)


def content_words(text: str | list[str]) -> list[str]:
    """The lowercased content words of ``text`` (or of already-tokenised words): word tokens that hold a
    letter or digit and are not :data:`FUNCTION_WORDS`."""
    tokens = word_tokenize(text, lower=True) if isinstance(text, str) else [t.lower() for t in text]
    return [t for t in tokens if t not in FUNCTION_WORDS and any(c.isalnum() for c in t)]


#: What may stand between two characters of a sentence in its source: whitespace, and the inline markup
#: characters a Markdown reader drops (emphasis, code, strike-through).
_MARKUP_GAP = r"[\s*_`~]*"


def locate_sentences(source: str, sentences: list[str], window: int = 20_000) -> list[tuple[int, int] | None]:
    """Character offsets ``(start, end)`` of each sentence in ``source``, in order, or ``None`` where one
    cannot be found.

    Sentences are searched for in order from where the previous one ended, whitespace-insensitively (a reader
    joins the lines of a paragraph, a Markdown reader drops markup), within ``window`` characters plus the
    sentence's length, so a long file costs linear time. A sentence whose characters are interrupted by markup
    (``*emphasis*``, a link's URL) is found as the shortest span that starts with its first word and ends with
    its last one; ``source[start:end]`` is then the sentence with that markup. Inline markup characters
    (``*``, ``_``, backquotes, ``~``) may stand between any two characters, as whitespace may.
    """
    out: list[tuple[int, int] | None] = []
    cursor = 0
    for sentence in sentences:
        chars = "".join(sentence.split())
        if not chars:
            out.append(None)
            continue
        limit = min(len(source), cursor + window + 4 * len(sentence))
        pattern = _MARKUP_GAP.join(re.escape(c) for c in chars)
        match = re.compile(pattern).search(source, cursor, limit)
        if match is None:
            words = sentence.split()
            first = re.compile(_MARKUP_GAP.join(re.escape(c) for c in words[0]))
            last = re.compile(_MARKUP_GAP.join(re.escape(c) for c in words[-1]))
            head = first.search(source, cursor, limit)
            tail = last.search(source, head.end(), limit + len(sentence)) if head else None
            match = (head.start(), tail.end()) if head and tail else None
            if match is None:
                out.append(None)
                continue
            out.append(match)
        else:
            out.append((match.start(), match.end()))
        cursor = out[-1][1]
    return out
