"""Attribute-labelled documents, the MASC reader, domain grids, vocabulary and BPTT batching.

A corpus is a list of :class:`AttributedDocument` (token lines + an attribute dict). Readers:

* MASC ``masc_tagged.zip`` (read in place with :mod:`zipfile`): ``word_TAG`` tokens, one utterance or sentence
  per line; attributes ``{"mode": "written"|"spoken", "genre": <categories.txt genre>}``.
* JSONL with ``{"text": ..., "attributes": {...}}`` per line, or our :class:`~synopsis.data.example.Example`
  JSONL (the document's sentences are the lines).

A *domain* is a combination of attribute values (e.g. style=spoken, topic=public-affairs) with a selector on
the documents' own attributes (e.g. genre in {court-transcript, debate-transcript}). Each line ends with
``<eos>``; words seen fewer than ``min_count`` times in training map to ``<unk>``.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

import torch

from synopsis.data.example import Example
from synopsis.errors import InputError
from synopsis.io import iter_jsonl
from synopsis.text import word_tokenize
from synopsis.vocab import LM_SPECIALS, Vocab

UNK, EOS = LM_SPECIALS


@dataclass
class AttributedDocument:
    id: str
    attributes: dict[str, str]
    lines: list[list[str]]

    @property
    def num_tokens(self) -> int:
        """Words plus one ``<eos>`` per line: what the language model predicts."""
        return sum(len(line) + 1 for line in self.lines)


# ------------------------------------------------------------------------------------------------ readers


def read_masc(path: str | Path, lowercase: bool = True) -> list[AttributedDocument]:
    """Documents of MASC's ``masc_tagged.zip``, POS tags stripped; files not in categories.txt are skipped."""
    path = Path(path)
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, OSError) as err:
        raise InputError(f"{path}: cannot read as a zip archive ({err})") from None
    with archive:
        names = archive.namelist()
        categories = [n for n in names if n.endswith("categories.txt")]
        if not categories:
            raise InputError(f"{path}: no categories.txt inside; not a MASC masc_tagged.zip")
        root = categories[0][: -len("categories.txt")]
        documents = []
        listing = archive.read(categories[0]).decode("utf-8")
        for number, row in enumerate(listing.splitlines(), start=1):
            if not row.strip():
                continue
            parts = row.split()
            if len(parts) != 2:
                raise InputError(f"{path}:{categories[0]}:{number}: expected '<file> <genre>', got {row!r}")
            name, genre = parts
            try:
                raw = archive.read(root + name).decode("utf-8", errors="replace")
            except KeyError:
                raise InputError(f"{path}: categories.txt line {number} names missing file {name}") from None
            lines = []
            for text_line in raw.splitlines():
                words = [token.rsplit("_", 1)[0] for token in text_line.split()]
                words = [w.lower() if lowercase else w for w in words if w]
                if words:
                    lines.append(words)
            mode = name.split("/", 1)[0]
            documents.append(AttributedDocument(name, {"mode": mode, "genre": genre}, lines))
    return documents


def read_jsonl_corpus(path: str | Path, lowercase: bool = True) -> list[AttributedDocument]:
    """``{"text", "attributes"}`` records (lines split on newlines) or synopsis Example records."""
    documents = []
    for where, record in iter_jsonl(path):
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
        if "document" in record:
            example = Example.from_dict(record, where)
            texts = [s.text for s in example.document.sentences]
            attributes, doc_id = example.attributes, example.id
        elif "text" in record:
            if not isinstance(record["text"], str):
                raise InputError(f"{where}: field 'text' must be a string")
            attributes = record.get("attributes", {})
            if not isinstance(attributes, dict) or not all(isinstance(v, str) for v in attributes.values()):
                raise InputError(f"{where}: field 'attributes' must map names to strings")
            texts = record["text"].splitlines()
            doc_id = str(record.get("id", where))
        else:
            raise InputError(f"{where}: expected a field 'text' (or an Example with 'document')")
        lines = [tokens for t in texts if (tokens := word_tokenize(t, lower=lowercase))]
        documents.append(AttributedDocument(doc_id, dict(attributes), lines))
    return documents


def read_attributed_documents(path: str | Path, lowercase: bool = True) -> list[AttributedDocument]:
    """Dispatch on the file: ``.zip`` is MASC, anything else JSONL."""
    path = Path(path)
    if path.suffix == ".zip":
        return read_masc(path, lowercase)
    return read_jsonl_corpus(path, lowercase)


# ------------------------------------------------------------------------------------------------ domains


@dataclass
class DomainSpec:
    """A domain: its attribute values, and which documents belong to it.

    ``select`` maps a document attribute to the accepted values (e.g. ``{"genre": ["blog"]}``); empty means
    "documents whose attributes include ``attributes``".
    """

    attributes: dict[str, str]
    select: dict[str, list[str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in sorted(self.attributes.items()))

    def matches(self, document: AttributedDocument) -> bool:
        select = self.select or {k: [v] for k, v in self.attributes.items()}
        return all(document.attributes.get(k) in values for k, values in select.items())


def check_grid(domains: Sequence[DomainSpec]) -> list[str]:
    """The attribute names of a full product grid; a missing or duplicate combination is an error."""
    if len(domains) < 2:
        raise InputError(f"a domain grid needs at least 2 domains, got {len(domains)}")
    names = sorted(domains[0].attributes)
    if not names:
        raise InputError(f"domain {domains[0].name or '#1'} has no attributes")
    values: dict[str, list[str]] = {n: [] for n in names}
    seen = set()
    for spec in domains:
        if sorted(spec.attributes) != names:
            raise InputError(f"domain {spec.name} has attributes {sorted(spec.attributes)}, expected {names}")
        key = tuple(spec.attributes[n] for n in names)
        if key in seen:
            raise InputError(f"domain {spec.name} appears twice in the grid")
        seen.add(key)
        for n in names:
            if spec.attributes[n] not in values[n]:
                values[n].append(spec.attributes[n])
    for n in names:
        if len(values[n]) < 2:
            raise InputError(f"attribute {n!r} has only one value ({values[n][0]}) in the grid; need >= 2")
    for key in product(*(values[n] for n in names)):
        if key not in seen:
            missing = ", ".join(f"{n}={v}" for n, v in zip(names, key, strict=True))
            raise InputError(f"the domain grid is missing domain {missing} (every combination is needed)")
    return names


def select_domains(
    documents: Sequence[AttributedDocument],
    domains: Sequence[DomainSpec],
    max_tokens: int | None = None,
    check: bool = True,
) -> dict[str, list[AttributedDocument]]:
    """Documents per domain (keyed by ``DomainSpec.name``), relabelled with the domain's attributes.

    With ``max_tokens``, larger domains are cut down to that size by keeping the same leading fraction of
    every document (so the genre mix inside a domain is kept); the paper balanced its domains the same way
    (~42k words each). ``check`` requires a full attribute grid (:func:`check_grid`).
    """
    if check:
        check_grid(domains)
    selected: dict[str, list[AttributedDocument]] = {}
    for spec in domains:
        docs = [d for d in documents if spec.matches(d) and d.lines]
        if not docs:
            raise InputError(
                f"domain {spec.name} is empty: no document matches {spec.select or spec.attributes}"
            )
        total = sum(d.num_tokens for d in docs)
        fraction = 1.0 if max_tokens is None or total <= max_tokens else max_tokens / total
        relabelled = []
        for d in docs:
            lines, budget = [], round(d.num_tokens * fraction)
            for line in d.lines:
                if budget <= 0:
                    break
                lines.append(line[: max(budget - 1, 1)])
                budget -= len(lines[-1]) + 1
            relabelled.append(AttributedDocument(d.id, dict(spec.attributes), lines))
        selected[spec.name] = relabelled
    return selected


def split_train_dev(
    documents: Sequence[AttributedDocument], dev_fraction: float
) -> tuple[list[AttributedDocument], list[AttributedDocument]]:
    """The last ``dev_fraction`` of the domain's lines (in document order) is dev; the rest is train."""
    lines = [(d, line) for d in documents for line in d.lines]
    cut = len(lines) - max(1, round(len(lines) * dev_fraction))
    if cut < 1:
        raise InputError(f"domain {documents[0].attributes} is too small to split ({len(lines)} lines)")

    def regroup(part: list[tuple[AttributedDocument, list[str]]]) -> list[AttributedDocument]:
        out: dict[str, AttributedDocument] = {}
        for d, line in part:
            out.setdefault(d.id, AttributedDocument(d.id, d.attributes, [])).lines.append(line)
        return list(out.values())

    return regroup(lines[:cut]), regroup(lines[cut:])


# --------------------------------------------------------------------------------------------- vocabulary


def build_vocabulary(documents: Sequence[AttributedDocument], min_count: int = 3) -> Vocab:
    """The language model's vocabulary: ``<unk>``, ``<eos>``, then the words seen ``min_count`` times."""
    lines = (line for d in documents for line in d.lines)
    return Vocab.build(lines, min_count=min_count, specials=LM_SPECIALS)


# ----------------------------------------------------------------------------------------------- batching


@dataclass
class TokenStream:
    """All documents' tokens in one stream; ``groups[i]`` indexes the attribute set of token i's document."""

    ids: torch.Tensor  # (T,) long
    groups: torch.Tensor  # (T,) long
    attribute_sets: list[dict[str, str]]

    @classmethod
    def from_documents(cls, documents: Sequence[AttributedDocument], vocab: Vocab) -> TokenStream:
        ids: list[int] = []
        groups: list[int] = []
        sets: list[dict[str, str]] = []
        index: dict[tuple[tuple[str, str], ...], int] = {}
        for d in documents:
            key = tuple(sorted(d.attributes.items()))
            group = index.setdefault(key, len(sets))
            if group == len(sets):
                sets.append(dict(d.attributes))
            for line in d.lines:
                encoded = vocab.encode(line)
                ids.extend(encoded)
                groups.extend([group] * len(encoded))
        if not ids:
            raise InputError("no tokens to build a stream from (all documents are empty)")
        return cls(torch.tensor(ids), torch.tensor(groups), sets)

    def __len__(self) -> int:
        return len(self.ids)

    def with_attributes(self, attributes: Mapping[str, str]) -> TokenStream:
        """The same tokens, every one labelled with ``attributes`` (to evaluate with given attributes)."""
        return TokenStream(self.ids, torch.zeros_like(self.groups), [dict(attributes)])

    def mask_table(self, attribute_mask: Callable[[Mapping[str, str]], torch.Tensor]) -> torch.Tensor:
        """(G, N) slot masks of the stream's attribute sets, from a model's ``attribute_mask``."""
        return torch.stack([attribute_mask(a) for a in self.attribute_sets])


def batchify(stream: TokenStream, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut the stream into ``batch_size`` contiguous rows, (B, L) ids and groups (the tail is dropped)."""
    length = len(stream) // batch_size
    if length < 2:
        raise InputError(f"only {len(stream)} tokens: too few for batch size {batch_size}")
    cut = length * batch_size
    return stream.ids[:cut].view(batch_size, length), stream.groups[:cut].view(batch_size, length)


def bptt_windows(
    ids: torch.Tensor, groups: torch.Tensor, bptt: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(inputs, targets, input groups) windows of at most ``bptt`` steps over batchified rows."""
    for start in range(0, ids.shape[1] - 1, bptt):
        end = min(start + bptt, ids.shape[1] - 1)
        yield ids[:, start:end], ids[:, start + 1 : end + 1], groups[:, start:end]


def num_windows(ids: torch.Tensor, bptt: int) -> int:
    return -(-(ids.shape[1] - 1) // bptt)
