"""The word vocabulary of the word-level models (the pointer-generator and the domain-attribute LM).

A vocabulary is its special tokens followed by the ``max_size`` most frequent training words seen at least
``min_count`` times (ties broken alphabetically, so it is deterministic). Each model names its specials:
the pointer-generator uses ``<pad> <unk> <s> </s>`` (:data:`SPECIALS`), the language model ``<unk> <eos>``
(:data:`LM_SPECIALS`); ids are looked up by name, never hard-coded by callers.

For the pointer-generator (See et al., 2017) each article also gets its own OOV list: the encoder sees UNK
for those words, but the copy distribution addresses them as ids ``len(vocab) + k`` (``k`` = position in
the article's OOV list), so a copied OOV word comes out as the article's own word.

Files: ``*.json`` holds ``{"itos": [...]}``; anything else one ``token<TAB>count`` line per entry, in id
order, so ids never depend on anything but the file. A SHA-256 of the token list
(:attr:`Vocab.fingerprint`) is stored in the pointer-generator's config to detect a vocabulary that does
not belong to a checkpoint.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from synopsis.errors import InputError
from synopsis.io import open_for_atomic_write, read_json, read_text, write_json

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
LM_EOS = "<eos>"
LM_SPECIALS = (UNK, LM_EOS)


@dataclass
class ExtendedVocabIds:
    """The pointer-generator's copy mechanism's view of one source: ``ids`` (OOV -> UNK) for the encoder,
    ``extended_ids`` (each OOV -> its place after the vocabulary) for copying, and the ``oovs`` in order.
    (A transformer's encoded source is :class:`synopsis.models.inputs.SourceEncoding`.)"""

    ids: list[int]
    extended_ids: list[int]
    oovs: list[str]


class Vocab:
    """Token <-> id mapping with the special tokens first; ids are positions in :attr:`tokens`.

    ``pad_id``/``unk_id``/``bos_id``/``eos_id`` are the ids of the specials this vocabulary has (``None``
    for those it has not); ``<eos>`` counts as the end token of a language-model vocabulary.
    """

    def __init__(
        self, tokens: Sequence[str], counts: Sequence[int] | None = None, specials: Sequence[str] = SPECIALS
    ) -> None:
        specials = tuple(specials)
        if tuple(tokens[: len(specials)]) != specials:
            raise InputError(f"vocabulary must start with the special tokens {', '.join(specials)}")
        if len(set(tokens)) != len(tokens):
            duplicates = sorted(t for t, n in Counter(tokens).items() if n > 1)[:5]
            raise InputError(f"vocabulary has duplicate tokens: {', '.join(duplicates)}")
        self.specials = specials
        self.tokens = list(tokens)
        self.counts = list(counts) if counts is not None else [0] * len(tokens)
        self._index = {token: i for i, token in enumerate(self.tokens)}
        self.pad_id, self.unk_id, self.bos_id = (self._index.get(t) for t in (PAD, UNK, BOS))
        self.eos_id = self._index.get(EOS, self._index.get(LM_EOS))

    @property
    def itos(self) -> list[str]:
        return self.tokens

    @property
    def stoi(self) -> dict[str, int]:
        return self._index

    # ------------------------------------------------------------------ construction and files
    @classmethod
    def from_words(cls, words: Iterable[str], specials: Sequence[str] = SPECIALS) -> Vocab:
        """The specials followed by ``words`` (specials among them are dropped)."""
        return cls([*specials, *(w for w in words if w not in specials)], specials=specials)

    @classmethod
    def build(
        cls,
        token_lists: Iterable[Sequence[str]],
        max_size: int | None = None,
        min_count: int = 1,
        specials: Sequence[str] = SPECIALS,
    ) -> Vocab:
        """The ``max_size`` (``None``: all) commonest tokens seen ``min_count`` times; ties alphabetical."""
        if max_size is not None and max_size < 1:
            raise ValueError(f"max_size must be >= 1, got {max_size}")
        counter: Counter[str] = Counter()
        for tokens in token_lists:
            counter.update(tokens)
        for special in specials:
            counter.pop(special, None)
        ranked = sorted(
            (item for item in counter.items() if item[1] >= min_count), key=lambda x: (-x[1], x[0])
        )
        ranked = ranked[:max_size]
        counts = [0] * len(specials) + [c for _, c in ranked]
        return cls([*specials, *(t for t, _ in ranked)], counts, specials=specials)

    def save(self, path: str | Path) -> None:
        if str(path).endswith(".json"):
            write_json(path, {"itos": self.tokens, "specials": list(self.specials)})
            return
        with open_for_atomic_write(path) as handle:
            for token, count in zip(self.tokens, self.counts, strict=True):
                handle.write(f"{token}\t{count}\n")

    @classmethod
    def load(cls, path: str | Path, specials: Sequence[str] = SPECIALS) -> Vocab:
        """A saved vocabulary; a JSON file names its own specials (older files: ``<unk> <eos>``)."""
        if str(path).endswith(".json"):
            data = read_json(path, "a vocabulary file", expect=dict)
            try:
                return cls(data["itos"], specials=data.get("specials", LM_SPECIALS))
            except (KeyError, TypeError) as err:
                raise InputError(f"{path}: not a vocabulary file (no {err})") from None
            except InputError as err:
                raise InputError(f"{path}: {err}") from None
        tokens, counts = [], []
        for number, line in enumerate(read_text(path).splitlines(), start=1):
            token, sep, count = line.rpartition("\t")
            if not sep or not token or not count.isdigit():
                raise InputError(f"{path}:{number}: expected 'token<TAB>count', got {line[:40]!r}")
            tokens.append(token)
            counts.append(int(count))
        try:
            return cls(tokens, counts, specials)
        except InputError as err:
            raise InputError(f"{path}: {err}") from None

    # ------------------------------------------------------------------ lookups
    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def id(self, token: str) -> int:
        return self._index.get(token, self.unk_id)

    def encode(self, tokens: Sequence[str], add_eos: bool = True) -> list[int]:
        """Ids of ``tokens`` (unknown -> ``<unk>``), with the end token appended (a language-model line)."""
        ids = [self._index.get(t, self.unk_id) for t in tokens]
        return ids + [self.eos_id] if add_eos else ids

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256("\n".join(self.tokens).encode("utf-8")).hexdigest()[:16]

    # ------------------------------------------------------------------ extended vocabulary
    def encode_source(self, tokens: Sequence[str]) -> ExtendedVocabIds:
        """Encoder ids (OOV -> UNK) and extended ids (OOV -> ``len(self) + k``) plus the OOV list."""
        ids, extended, oovs = [], [], []
        oov_index: dict[str, int] = {}
        for token in tokens:
            i = self._index.get(token)
            if i is None:
                if token not in oov_index:
                    oov_index[token] = len(oovs)
                    oovs.append(token)
                ids.append(self.unk_id)
                extended.append(len(self.tokens) + oov_index[token])
            else:
                ids.append(i)
                extended.append(i)
        return ExtendedVocabIds(ids, extended, oovs)

    def encode_target(self, tokens: Sequence[str], oovs: Sequence[str]) -> list[int]:
        """Target ids in the article's extended vocabulary: an OOV found in the article gets its copy id."""
        oov_index = {token: k for k, token in enumerate(oovs)}
        out = []
        for token in tokens:
            i = self._index.get(token)
            if i is None:
                k = oov_index.get(token)
                i = self.unk_id if k is None else len(self.tokens) + k
            out.append(i)
        return out

    def decode(self, ids: Iterable[int], oovs: Sequence[str] = (), skip_special: bool = True) -> list[str]:
        """Extended ids back to words; ids past the article's OOV list (never produced by a correct model)
        decode to UNK rather than raising."""
        words = []
        special_ids = {self.pad_id, self.bos_id, self.eos_id}
        for i in ids:
            i = int(i)
            if skip_special and i in special_ids:
                continue
            if i < len(self.tokens):
                words.append(self.tokens[i])
            elif i - len(self.tokens) < len(oovs):
                words.append(oovs[i - len(self.tokens)])
            else:
                words.append(UNK)
        return words
