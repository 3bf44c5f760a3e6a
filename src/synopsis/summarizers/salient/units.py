"""Lead-ins that come with what they introduce: "Install it with pip:" and its command, "It supports:" and
its list, one candidate each (:func:`lead_in_units`), shown as one line (:func:`unit_text`), each part
citing itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from synopsis.document import Document
from synopsis.summarizers.salient.rules import ends_as_sentence, is_informative, stands_alone
from synopsis.summarizers.schema import Source
from synopsis.summarizers.windows import section_sources

#: The longest lead-in with its list that is one candidate (:func:`lead_in_units`), in words.
MAX_UNIT_WORDS = 80
#: A code block a lead-in brings is a command, not a program: at most this many non-empty lines ...
MAX_CODE_LINES = 2
#: ... of at most this many characters each (:func:`lead_in_units`).
MAX_CODE_LINE_CHARS = 100


def all_sources(document: Document, offsets: Sequence[tuple[int, int] | None] | None = None) -> list[Source]:
    """One :class:`Source` per sentence of :attr:`Document.sentences`, in the same order."""
    own = section_sources(document, offsets).values()
    return [source for paragraphs in own for paragraph in paragraphs for source in paragraph]


def lead_in_units(
    document: Document,
    sources: Sequence[Source],
    spans: bool,
    names: frozenset[str] = frozenset(),
    cased: bool = True,
    speech: bool = True,
) -> dict[int, list[Source]]:
    """The lead-ins that come with what they introduce: ``{sentence index: [its Source, one per list
    item]}`` for each sentence ending in ":" that closes its paragraph, is followed in its section by list
    items (Markdown or plain-text list blocks, not chosen on their own where the section has prose), and
    would stand alone as a sentence (:func:`stands_alone`, its colon read as a full stop), the unit
    informative (:func:`is_informative`) and at most :data:`MAX_UNIT_WORDS` long; or ``[its Source, a
    CodeSource]`` when it is followed by a short code block (a command: :func:`_code_after`, "Install it
    with pip:" + ``pip install x``), lead-in and command informative read as one sentence, so that "How do I
    install it?" can find the command. Each item cites its own text, the code its block; with ``spans`` (the
    input is one text or Markdown file) their characters in the input too. ``sentence`` is ``None`` for an
    item or code: it is not one of its section's own sentences (:attr:`Document.sentences`). What a lead-in
    introduces that is neither (a longer code block, a table) is never carried, so such a lead-in stays
    out; no sentence is ever chosen from code."""
    out: dict[int, list[Source]] = {}
    sentences = document.sentences
    for i, sentence in enumerate(sentences):
        text = sentence.text.rstrip()
        if not text.endswith(":") or not stands_alone(text[:-1] + ".", names, cased, speech):
            continue
        if i + 1 < len(sentences) and (sentences[i + 1].section, sentences[i + 1].paragraph) == (
            sentence.section,
            sentence.paragraph,
        ):
            continue  # not the end of its paragraph: what follows is not what it introduces
        items = _list_after(sentence.section, sentence.paragraph, sources[i].path, spans)
        unit = [sources[i], *items]
        if items and is_informative(unit_text(unit)) and len(unit_text(unit).split()) <= MAX_UNIT_WORDS:
            out[i] = unit
        code = _code_after(sentence.section, sentence.paragraph, sources[i].path, spans)
        # read as one sentence ("Install it with pip: pip install x."), the command's words counted
        if code is not None and is_informative(f"{text[:-1]} {' '.join(code.text.split())}."):
            out[i] = [sources[i], code]
    return out


def brings_code(unit: Sequence[Source]) -> bool:
    """Whether a lead-in unit brings a command: a candidate only for an instruction ("How do I install
    it?"), since without one a command or a value (``PATH=...``) would push prose out of a summary."""
    return isinstance(unit[-1], CodeSource)


class CodeSource(Source):
    """A short code block that a lead-in brings (:func:`lead_in_units`): ``text`` is the code verbatim,
    ``start``/``end`` the whole block's characters (fences included); a summary shows it as inline code
    (:func:`unit_text`)."""


def _code_after(section: Any, paragraph: int, path: tuple[int, ...], spans: bool) -> CodeSource | None:
    """The code block right after paragraph ``paragraph`` of ``section`` when it is short, a command and not
    a program: at most :data:`MAX_CODE_LINES` non-empty lines of at most :data:`MAX_CODE_LINE_CHARS`
    characters each; else ``None``."""
    blocks = section.paragraphs[paragraph + 1 : paragraph + 2]
    if not blocks or getattr(blocks[0], "kind", "prose") != "code" or len(blocks[0]) != 1:
        return None
    lines = [line.strip() for line in blocks[0][0].splitlines() if line.strip()]
    if not 0 < len(lines) <= MAX_CODE_LINES or max(len(line) for line in lines) > MAX_CODE_LINE_CHARS:
        return None
    known = getattr(blocks[0], "spans", None) if spans else None
    span = known[0] if known and known[0] is not None else (None, None)
    return CodeSource(path, None, "\n".join(lines), *span)


def inline_code(code: str) -> str:
    """A short code block as Markdown inline code, one span per line parted by "; " (a backtick inside a
    line is fenced by two, CommonMark 6.1), so that text, Markdown and JSON show it alike."""
    return "; ".join(f"`` {line} ``" if "`" in line else f"`{line}`" for line in code.splitlines())


def _list_after(section: Any, paragraph: int, path: tuple[int, ...], spans: bool) -> list[Source]:
    """The list items right after paragraph ``paragraph`` of ``section``, one Source per item sentence."""
    items: list[Source] = []
    for block in section.paragraphs[paragraph + 1 :]:
        if getattr(block, "kind", "prose") != "list":
            break
        known = getattr(block, "spans", None) if spans else None
        for j, text in enumerate(block):
            span = known[j] if known is not None and known[j] is not None else (None, None)
            items.append(Source(path, None, text, *span))
    return items


def unit_text(unit: Sequence[Source]) -> str:
    """A candidate's text as a summary shows it: a sentence; or a lead-in and its list items on one line,
    an item without final punctuation followed by "; " (as the list's line breaks would part them); or a
    lead-in and its command as inline code (:func:`inline_code`)."""
    parts = [unit[0].text]
    for source in unit[1:]:
        if not ends_as_sentence(parts[-1]) and not parts[-1].endswith(":"):
            parts[-1] += ";"
        parts.append(inline_code(source.text) if isinstance(source, CodeSource) else source.text)
    return " ".join(parts)
