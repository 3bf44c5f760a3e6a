"""Text utilities shared by readers, models and metrics: sentence splitting and word tokenisation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

import punkt

# Academic text is full of "et al." and "Eq."; Punkt's curated prefixes cover "e.g.", "Fig.", "No. 5", ...
# Guides write "eg." and "ie." without the inner period, and "etc." mostly inside a sentence ("fora, eg.
# comp.lang.c++"; "plots, etc. are kept"); Punkt still ends a sentence at "etc." before a word that usually
# starts one ("etc. The ...").
_EXTRA_ABBREVIATIONS = {
    "al", "eq", "eqs", "sec", "secs", "tab", "approx", "resp", "cf", "vs", "eg", "ie", "etc",
}  # fmt: skip


@lru_cache(maxsize=1)
def _sentence_tokenizer() -> punkt.PunktSentenceTokenizer:
    params = punkt.with_nonbreaking_prefixes(punkt.load_model("english"), "english")
    params.abbrev_types.update(_EXTRA_ABBREVIATIONS)
    return punkt.PunktSentenceTokenizer(params, line_breaks="ignore")


# Chinese and Japanese end sentences with full-width marks and no space after them (Punkt needs the space);
# closing quotes and brackets after the mark stay with the sentence.
_CJK_SENTENCE_END = re.compile(r"[。！？]+[」』”’）》〉】]*")


# Where Punkt cuts and a reader would not (docs/results/sentence_splitting.md), looked at across each cut:
# a "sentence" that opens with closing punctuation or a sentence's end ("?, ' kamal said", a lone "."), or
# with a lowercase word after "?" or "!" closed by a quote or bracket (check the "In a hurry?" section;
# `` Stop ! '' he said), or a name after a title whose period a tokenizer split off ("Sgt . Smith"): each is
# joined to the sentence before it.
_OPENS_CLOSED = re.compile(r"(?:[,;:)\]}”’»?!]|\.(?!\.)|-R[RSC]B-)")  # not "...": a quote goes on
_QUOTED_MARK_END = re.compile(r"[?!] ?(?:[\"'”’»)\]]|-R[RS]B-)+$")  # searched in a sentence's last characters
_TITLES = "Mr Mrs Ms Dr Sgt Capt Gen Lt Col Prof Rep Sen Gov Rev Cpl Pvt Maj Det".split()
_TITLE_CUT = re.compile(rf"(?:^|\s)(?:{'|'.join(_TITLES)}) \.$")


def _joins_previous(previous: str, sentence: str) -> bool:
    """Whether ``sentence`` goes on the sentence before it (see the comment above)."""
    if _OPENS_CLOSED.match(sentence):
        return True
    if sentence[:1].islower() and _QUOTED_MARK_END.search(previous[-12:]):
        return True
    return sentence[:1].isupper() and _TITLE_CUT.search(previous[-8:]) is not None


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of a paragraph in ``text``, stripped of surrounding whitespace:
    Punkt (handles abbreviations, decimals, "e.g.", "eg.", "etc."), and "。", "！" and "？" end sentences
    too; a cut a reader would not make (a lowercase word after a quoted "?", a comma after a cut, as
    PTB-tokenized news has them) is joined again (:func:`_joins_previous`)."""
    begin, end = len(text) - len(text.lstrip()), len(text.rstrip())
    if begin >= end:
        return []
    pieces = [(begin, end)]
    if _CJK_SENTENCE_END.search(text, begin, end):
        pieces, start = [], begin
        for match in _CJK_SENTENCE_END.finditer(text, begin, end):
            pieces.append((start, match.end()))
            start = match.end()
        pieces.append((start, end))
    tokenizer = _sentence_tokenizer()
    out = []
    for piece_start, piece_end in pieces:
        piece = text[piece_start:piece_end]
        offset = piece_start + len(piece) - len(piece.lstrip())
        for start, stop in tokenizer.span_tokenize(piece.strip()):
            sentence = text[offset + start : offset + stop]
            lead = len(sentence) - len(sentence.lstrip())
            if not sentence.strip():
                continue
            span = (offset + start + lead, offset + start + len(sentence.rstrip()))
            if out and _joins_previous(text[out[-1][0] : out[-1][1]], text[span[0] : span[1]]):
                span = (out.pop()[0], span[1])
            out.append(span)
    return out


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences (:func:`sentence_spans`)."""
    return [text[start:end] for start, end in sentence_spans(text)]


class SourceMap:
    """Text rebuilt from a source (markup dropped, lines joined, entities decoded) that remembers, for each
    of its characters, the span of the source it came from, so a sentence of the text maps back to
    ``source[start:end]``. Built piece by piece with :meth:`add`, then read with :meth:`sentences`."""

    def __init__(self) -> None:
        self._chars: list[str] = []
        self._starts: list[int] = []
        self._ends: list[int] = []

    def add(self, text: str, start: int, end: int | None = None) -> None:
        """``text`` taken from ``source[start:end]``: character by character when ``end`` is left out (the
        text is the source's own characters), else every character maps to the whole span (an entity,
        an escape, a line break)."""
        self._chars.extend(text)
        if end is None:
            self._starts.extend(range(start, start + len(text)))
            self._ends.extend(range(start + 1, start + len(text) + 1))
        else:
            self._starts.extend([start] * len(text))
            self._ends.extend([end] * len(text))

    def __len__(self) -> int:
        return len(self._chars)

    def start_at(self, index: int, start: int) -> None:
        """The character at ``index`` starts at ``start`` (markup before it that a sentence starting there
        takes in: a link's ``[``, emphasis' ``**``)."""
        self._starts[index] = min(self._starts[index], start)

    def drop_trailing_space(self) -> None:
        """Drop the last character when it is whitespace (before markup that showed nothing)."""
        if self._chars and self._chars[-1].isspace():
            del self._chars[-1], self._starts[-1], self._ends[-1]

    def collapse_whitespace(self) -> SourceMap:
        """A copy with each whitespace run one space and none at either end (``" ".join(text.split())``)."""
        out = SourceMap()
        for char, start, end in zip(self._chars, self._starts, self._ends, strict=True):
            if char.isspace():
                if not out._chars or out._chars[-1] == " ":
                    continue
                char = " "
            out._chars.append(char)
            out._starts.append(start)
            out._ends.append(end)
        if out._chars and out._chars[-1] == " ":
            del out._chars[-1], out._starts[-1], out._ends[-1]
        return out

    @property
    def text(self) -> str:
        return "".join(self._chars)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The source span of the text's characters ``[start, end)`` (``end > start``)."""
        return self._starts[start], self._ends[end - 1]

    def sentences(self) -> list[tuple[str, tuple[int, int]]]:
        """Each sentence of the text (:func:`sentence_spans`) with its span in the source."""
        text = self.text
        return [(text[start:end], self.span(start, end)) for start, end in sentence_spans(text)]


_LINE = re.compile(r"[^\n]*\n|[^\n]+")


def line_blocks(text: str) -> Iterator[list[tuple[str, int]]]:
    """The blocks of lines of plain text, each line with its start: blocks are separated by lines holding only
    whitespace; ``"\\r\\n"`` and ``"\\r"`` end lines as ``"\\n"`` does, and the other line boundaries of
    ``str.splitlines`` split a line further. Lazily, block by block, so a reader that stops early (at a
    limit) has not split the rest."""
    # "\r\n" and "\r" end lines as "\n" does; replacing each by one "\n"-sized stand-in keeps positions.
    normal = text.replace("\r\n", " \n").replace("\r", "\n")
    current: list[tuple[str, int]] = []
    for match in _LINE.finditer(normal):
        line = match.group()
        if not line.strip():
            if current:
                yield current
            current = []
            continue
        position = match.start()
        for part in line.splitlines(keepends=True):
            if part.strip():
                current.append((part, position))
            position += len(part)
    if current:
        yield current


def _joined(lines: list[tuple[str, int]]) -> SourceMap:
    """Lines stripped and joined with single spaces, each character mapped to its place in the text."""
    mapped = SourceMap()
    for part, position in lines:
        if mapped._chars:
            mapped.add(" ", position, position)
        mapped.add(part.strip(), position + len(part) - len(part.lstrip()))
    return mapped


def paragraph_maps(text: str) -> list[SourceMap]:
    """The paragraphs of plain text with their source spans: paragraphs are separated by lines holding only
    whitespace, and the lines of a paragraph are stripped and joined with single spaces."""
    return [_joined(lines) for lines in line_blocks(text)]


_LIST_MARKER = re.compile(r"[ \t]*(?:[-*+•‣◦▪]|\d{1,3}[.)])[ \t]+(?=\S)")


def text_blocks(text: str) -> Iterator[tuple[str, SourceMap]]:
    """The blocks of plain text as ``("prose" | "list", paragraph)``: a block whose first line starts with
    a bullet (``-``, ``*``, ``+``, ``•``) or a number (``1.``, ``2)``) and whose every other line does too,
    or is indented deeper as the item's continuation, is a list, one paragraph per item with the marker
    dropped; any other block is one prose paragraph (:func:`paragraph_maps`). Lazily, as
    :func:`line_blocks`."""
    for lines in line_blocks(text):
        yield from lines_blocks(lines)


def lines_blocks(lines: list[tuple[str, int]]) -> list[tuple[str, SourceMap]]:
    """One block of lines (each with its start, as :func:`line_blocks` gives them) as :func:`text_blocks`
    reads it: a list, one paragraph per item, or one prose paragraph."""
    items = _list_items(lines)
    if items is None:
        return [("prose", _joined(lines))]
    return [("list", _joined(item)) for item in items]


def _list_items(lines: list[tuple[str, int]]) -> list[list[tuple[str, int]]] | None:
    first = lines[0][0]
    if _LIST_MARKER.match(first) is None:
        return None
    indent = len(first) - len(first.lstrip())
    items: list[list[tuple[str, int]]] = []
    for part, position in lines:
        marker = _LIST_MARKER.match(part)
        if marker is not None:
            items.append([(part[marker.end() :], position + marker.end())])
        elif len(part) - len(part.lstrip()) > indent:
            items[-1].append((part, position))
        else:
            return None
    return items


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs are separated by one or more blank lines; lines inside a paragraph are joined."""
    return [mapped.text for mapped in paragraph_maps(text)]


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


def has_letter(word: str) -> bool:
    """Whether ``word`` holds a letter (``isalpha()`` first: one C call settles most words)."""
    return word.isalpha() or any(c.isalpha() for c in word)


def content_words(text: str | list[str]) -> list[str]:
    """The lowercased content words of ``text`` (or of already-tokenised words): word tokens that hold a
    letter or digit and are not :data:`FUNCTION_WORDS`."""
    tokens = word_tokenize(text, lower=True) if isinstance(text, str) else [t.lower() for t in text]
    # isalnum() first: one C call settles most tokens (those without a hyphen, an apostrophe or an underscore)
    return [t for t in tokens if t not in FUNCTION_WORDS and (t.isalnum() or any(c.isalnum() for c in t))]
