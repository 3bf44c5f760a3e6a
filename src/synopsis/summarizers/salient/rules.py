"""What may be a sentence of an extractive summary: informative prose that stands alone.

Each rule here was kept because an ablation on the dev sets showed that it helps, or that it costs nothing
and keeps summaries readable (docs/results/default_quality.md has the table). Text comes as written or
PTB-tokenized (CNN/DailyMail as published: `` '' -LRB- n't, quotes and brackets split off), lowercased or
not (the arXiv/PubMed release), so the rules read quotes, brackets and casing either way.
"""

from __future__ import annotations

import re

from synopsis.document import Document
from synopsis.text import content_words

#: Fewer words than this is a fragment ("Number one.", "For our stuff.").
MIN_WORDS = 6
#: Fewer content words than this says nothing of its own ("OK, we're on.").
MIN_CONTENT_WORDS = 3
#: More than one word in this many a talk filler ("uh", "yeah", "I mean") is a backchannel, not a statement.
MAX_FILLER_SHARE_INVERSE = 3
#: A sentence without final punctuation and shorter than this is a heading, list or ToC entry, not prose.
UNPUNCTUATED_MIN_WORDS = 15
#: Fewer words than this is not a sentence that stands alone (:func:`stands_alone`).
MIN_STANDALONE_WORDS = 4

# A meeting transcript's speaker label ("Grad A: ", "Professor C: ") is not part of what was said.
_SPEAKER = re.compile(r"^[A-Z][\w.' -]{0,30}(?<! ):\s+")  # not a headline "Drank himself to death : ..."
# Ends like a sentence: . ! ?, then closing quotes or brackets, PTB's split off by a space ("time . ''").
_FINAL_PUNCTUATION = re.compile(r"[.!?](?:\s?(?:''|[\"')\]”’]|-RRB-|-RSB-))*$")
# Opening quotes and brackets, as written or PTB-tokenized (`` ' -LRB-), before a sentence's first word.
_OPENING = r"(?:``\s?|''\s?|-LRB-\s?|-LSB-\s?|[\"'“‘(\[]\s?)*"
# Opens as a sentence: a capital, a digit or the pronoun "i" of lowercased text, after opening marks only
# (not "*", "-", "|").
_SENTENCE_START = re.compile(_OPENING + r"(?:[A-Z0-9]|i\b)")
# A news dateline in brackets, "(CNN)" or PTB's "-LRB- CNN -RRB- --": not part of the sentence.
_DATELINE = re.compile(r"^(?:-LRB-|\()\s?[A-Za-z]{2,12}\s?(?:-RRB-|\))\s*(?:--\s*)?")
# Tokens that only code and commands have: calls, paths, options, assignments, operators, identifiers.
# (PTB's bracket tokens -LRB- -RRB- and a lone "$" of "$ 5" are prose.)
_CODE_TOKEN = re.compile(
    r"\w[(\[]|[{}<>=|\\]|\$[A-Za-z_{(]|^-{1,2}(?!(?:LRB|RRB|LSB|RSB|LCB|RCB)-$)\w|\w_\w|^\w+\.\w+\.\w+$|^[a-z]+[A-Z]\w*$|"
    r"::|->|=>|&&|;$(?<=\);)"
)
#: Words of talk that carry nothing (with FUNCTION_WORDS): a sentence of mostly these is a backchannel.
FILLER_WORDS = frozenset(
    """uh um eh hmm mm mm-hmm uh-huh huh oh ah yeah yep yes no okay ok right well like so mean know think
    guess gonna wanna kind sort thing things just really actually anyway alright sure good great""".split()
)
#: Words that join a sentence to the one before it ("Which now allows us ...", "Plus all the ..."): a
#: sentence opening with one does not stand alone.
CONTINUING = frozenset("which plus nor whereas whom whose thus hence".split())
#: ... and in speech, where a turn runs on ("And so I think ..."); written prose opens with them freely
#: ("But the vehicles returned to base ...").
CONTINUING_SPEECH = CONTINUING | frozenset("and but or".split())
#: Pronouns that stand for something the sentence before named ("It includes ..."): a sentence opening with
#: one is taken into a document summary only after the sentence before it.
ANAPHORIC = frozenset("it its they their them he she his her".split())


def spoken(text: str) -> str:
    """A transcript turn's words without its speaker label ("Grad A: ...")."""
    return _SPEAKER.sub("", text.strip())


def ends_as_sentence(text: str) -> bool:
    """Whether ``text`` ends as a sentence does: . ! ? then closing quotes or brackets (a colon introduces a
    list or a code block)."""
    return bool(_FINAL_PUNCTUATION.search(text))


def first_word(words: list[str]) -> str:
    """The lowercase first word, without the quotes, brackets and markup around it."""
    return words[0].strip("\"'“‘([*_`").rstrip(",.;:").lower() if words else ""


def is_cased(document: Document) -> bool:
    """Whether the document's sentences start with capitals, as written (not a lowercased corpus such as
    the arXiv/PubMed release, where a capital is no sign of a sentence start)."""
    letters = []
    for sentence in document.sentences:
        text = _DATELINE.sub("", spoken(sentence.text)).lstrip("\"'`“‘([- ")
        if text[:1].isalpha():
            letters.append(text[0])
    return not letters or 2 * sum(c.islower() for c in letters) <= len(letters)


def stands_alone(
    text: str, names: frozenset[str] = frozenset(), cased: bool = True, speech: bool = True
) -> bool:
    """Whether a sentence reads on its own in a summary: at least :data:`MIN_STANDALONE_WORDS` words, final
    punctuation, it starts as a sentence does (a capital or a digit after opening quotes or brackets, not a
    footnote or bullet marker such as ``*``, and not the lowercase tail of a sentence split after a
    quotation; in a lowercased document (``cased=False``) any word), unless its first word is one of
    ``names`` (the document's own lowercase names: "pyenv lets you ..."); it does not open with a word that
    joins it to the sentence before (:data:`CONTINUING`: "Which now allows us ...", "Plus all the ...";
    in ``speech`` also "And", "But", "Or"), is not, in ``speech``, talk that restarts (:func:`_disfluent`:
    written text repeats words on purpose, "phi phi", and lowercased news writes the pronoun "i"), and is
    not a lead-in: one ending in ":" introduces a list or a code block, which come with it only as a unit
    (:func:`~synopsis.summarizers.salient.units.lead_in_units`), and one ending in "..." or "…" runs on into
    the next block (an image, a list). A bracketed dateline ("(CNN)") is not part of the sentence, and what
    follows it may be in any case."""
    text = spoken(text)
    dated = _DATELINE.sub("", text)
    words = dated.split()
    if len(words) < MIN_STANDALONE_WORDS or not _FINAL_PUNCTUATION.search(text):
        return False
    if speech and _disfluent(words):
        return False
    if dated.rstrip("\"')]”’ ").endswith(("...", "…")) or first_word(words) in (
        CONTINUING_SPEECH if speech else CONTINUING
    ):
        return False
    if not cased or dated != text or _SENTENCE_START.match(text):
        return True
    first = words[0].strip("\"'“‘([").rstrip(",.;:")
    return first[:1].isalpha() and first.lower() in names


def _disfluent(words: list[str]) -> bool:
    """Speech that restarts ("that 's that 's", "not speech not speech", "speech speech"): a word or a word
    pair said twice in a row, or a single cut-off letter ("So i if two ...")."""
    lower = [w.lower().strip(",.?!;:") for w in words if w not in (",", "-")]
    repeats = sum(lower[i] == lower[i - 1] for i in range(1, len(lower)))
    repeats += sum(lower[i - 1 : i + 1] == lower[i + 1 : i + 3] for i in range(1, len(lower) - 2))
    return repeats > 0 or any(w == "i" for w in words)


def title_names(title: str | None) -> frozenset[str]:
    """The lowercase words of a document's title: names a sentence may start with (:func:`stands_alone`)."""
    return frozenset(w.lower() for w in re.findall(r"[\w][\w.+-]*", title or "") if w[:1].isalpha())


def is_informative(text: str) -> bool:
    """Whether a sentence is prose worth putting in a summary: at least :data:`MIN_WORDS` words and
    :data:`MIN_CONTENT_WORDS` content words of three letters or more that are not talk fillers, at most a
    third of its words fillers, final punctuation unless long, and no more than a quarter of its tokens
    code-like (calls, options, paths, operators)."""
    text = spoken(text)
    words = text.split()
    if len(words) < MIN_WORDS:
        return False
    # Two letters or fewer: clitics a transcript split off ("we 'll" gives "ll"), cut-off words ("th", "c").
    meaningful = [w for w in content_words(text) if w not in FILLER_WORDS and len(w) > 2 and not w.isdigit()]
    if len(meaningful) < MIN_CONTENT_WORDS:
        return False
    fillers = sum(w.lower().strip(",.") in FILLER_WORDS for w in words)
    if fillers * MAX_FILLER_SHARE_INVERSE > len(words):  # "Yeah , uh , I mean , so , right ." is talk
        return False
    if not _FINAL_PUNCTUATION.search(text) and len(words) < UNPUNCTUATED_MIN_WORDS:
        return False
    code = sum(bool(_CODE_TOKEN.search(w)) for w in words)
    return code * 4 <= len(words)


def is_transcript(document: Document) -> bool:
    """Whether most paragraphs open with a speaker's label ("Professor E: ..."): a meeting's turns."""
    paragraphs = document.paragraphs
    labelled = sum(bool(_SPEAKER.match(p[0])) for p in paragraphs if p)
    return bool(paragraphs) and 2 * labelled > len(paragraphs)
