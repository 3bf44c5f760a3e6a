"""Structured encoder inputs: Documents (and instructions) tokenized once, every token mapped to its place.

The seq2seq models read more than token ids. Hie-BART needs sentence boundaries, HIBRIDS the section of
every token and the section tree's relations, InstructSum which tokens are the instruction. One builder,
:class:`Seq2SeqInputs`, makes what every model shares in a single tokenizer call: ids, the mask, and each
token's sentence, document section and segment. What a method adds (a marker, a prompt, HIBRIDS' section
nodes and relations, a field of the batch) comes from its input features
(:mod:`synopsis.models.features`: a feature takes the roles its method has, beside the method's code,
found through :data:`~synopsis.models.registry.INPUT_FEATURES`, composed as an
:class:`~synopsis.models.features.InputFeatureList`); this module knows no method by name, and a model
that reads no method's field computes and pads none:

1. The source text is assembled from pieces (the model's prefix such as T5's ``"summarize: "``, the
   instruction and its template, then the document's sentences, with Hie-BART's sentence-start marker
   before each one and each section's heading before its first sentence, as HIBRIDS reads section
   titles), and every character is labelled with its sentence, section and segment (a heading's tokens
   belong to its section and to no sentence).
2. The text is tokenized once with offsets; a token takes the labels of its first character, so a token
   is mapped to the sentence (and section) whose text contains it. Special tokens, the prefix and the
   instruction belong to no sentence or section (-1).
3. Truncation to ``max_source_length`` cuts content tokens at the end and keeps the special tokens, as the
   tokenizer's own truncation does; the maps are cut with the ids, so they stay aligned. A warning says
   how much was cut. A method whose prompt has parts with budgets of their own (InstructSum) truncates
   them itself.

:meth:`Seq2SeqInputs.collate` pads the generic fields, then each feature's, into a batch record;
:meth:`Seq2SeqInputs.model_inputs` keeps the fields a given model reads (stock models: ids and mask; the
registry's :attr:`~synopsis.models.registry.CheckpointType.inputs` names the others).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from synopsis.document import Document
from synopsis.errors import CheckpointError, ConfigError, InputError
from synopsis.models.features import (
    INSTRUCTION_SEGMENT,
    SOURCE_SEGMENT,
    CachedSourcePrompt,
    InputFeatureList,
    Limits,
    Piece,
    TextMarkers,
    fixed_source_length,
    input_features,
    pad_rows,
)
from synopsis.models.registry import checkpoint_type, config_setting, position_table

logger = logging.getLogger(__name__)

__all__ = ["INSTRUCTION_SEGMENT", "SOURCE_SEGMENT", "Seq2SeqInputs", "SourceEncoding", "Truncation"]

#: T5 has relative positions and no hard limit; its pre-training length is the default maximum.
T5_DEFAULT_MAX_SOURCE_LENGTH = 512
DEFAULT_MAX_INSTRUCTION_LENGTH = 128
#: The generic per-token fields of a batch record and their padding values.
PAD_VALUES = {"sentence_ids": -1, "document_section_ids": -1, "segment_ids": SOURCE_SEGMENT}


def source_length_limits(config: Any, tokenizer: PreTrainedTokenizerBase) -> tuple[int, int]:
    """(default, maximum) input length in tokens.

    A model with a position table reads at most that many; by default, what its tokenizer truncates to
    (``model_max_length``, the checkpoint's own input length) when that is shorter. A model with relative
    positions (T5's family) has no hard limit: by default its tokenizer's length, else its family's
    (:attr:`~synopsis.models.registry.CheckpointType.source_length`: T5's conventional 512, LongT5's 16k),
    and a stock T5 accepts up to 1024 when asked (``longest_asked``: InstructSum's "Full" baseline at
    inference). A method that reads a fixed length says so (InstructSum's source part: the paper's 1024)."""
    fixed = fixed_source_length(config)
    if fixed is not None:
        return fixed, fixed
    stated = tokenizer.model_max_length
    stated = int(stated) if stated and stated < 1_000_000 else None
    table = position_table(config)
    if table is not None:
        return min(table, stated or table), table
    entry = checkpoint_type(config)
    if entry is None:
        return (stated or T5_DEFAULT_MAX_SOURCE_LENGTH,) * 2
    default = stated or entry.source_length
    return default, max(default, entry.longest_asked)


def model_max_source_length(config: Any, tokenizer: PreTrainedTokenizerBase) -> int:
    """The input length a model reads by default (:func:`source_length_limits`)."""
    return source_length_limits(config, tokenizer)[0]


def default_source_prefix(config: Any) -> str:
    """T5 checkpoints carry their task prefix (``"summarize: "``) in ``task_specific_params``."""
    params = config_setting(config, "task_specific_params") or {}
    prefix = params.get("summarization", {}).get("prefix")
    if prefix is not None:
        return prefix
    entry = checkpoint_type(config)
    return "" if entry is None else entry.task_prefix


@dataclass
class Truncation:
    """How much truncation cut from a batch of sequences."""

    truncated: int = 0  # sequences that were cut
    total: int = 0  # sequences seen
    tokens_cut: int = 0
    longest: int = 0  # longest sequence before truncation (tokens)

    def add(self, before: int, after: int) -> None:
        self.total += 1
        self.longest = max(self.longest, before)
        if before > after:
            self.truncated += 1
            self.tokens_cut += before - after

    def message(self, what: str, limit: int) -> str:
        return (
            f"truncated {self.truncated} of {self.total} {what} to {limit} tokens "
            f"({self.tokens_cut} tokens cut; the longest had {self.longest})"
        )


@dataclass
class SourceEncoding:
    """One encoded source: token ids and, per token, its sentence, document section and segment; then the
    fields its model's input features add.

    ``sentence_ids`` index ``document.sentences`` (non-empty ones), ``document_section_ids`` index
    ``document.sections`` (pre-order, the root is 0); both are -1 for special tokens, the prefix and the
    instruction. ``fields``: what the features add by name (:meth:`~synopsis.models.features.InputFields.
    source_fields`; HIBRIDS: ``section_ids``, each token's node of its section tree, and the tree's
    unpadded ``section_relations``), read as attributes too, as transformers'
    ``BatchEncoding`` reads its keys; a model without such a feature has none of them.
    """

    input_ids: list[int]
    sentence_ids: list[int]
    document_section_ids: list[int]
    segment_ids: list[int]
    length_before_truncation: int = 0
    sentence_sections: list[int] = field(default_factory=list)  # document section of each sentence index
    fields: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__.get("fields") or {}
        if name in fields:
            return fields[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r} (no feature of its model adds it)")

    @property
    def tokens_cut(self) -> int:
        return self.length_before_truncation - len(self.input_ids)

    def __len__(self) -> int:
        return len(self.input_ids)


class Seq2SeqInputs:
    """Builds encoder inputs and labels for one model + tokenizer.

    ``prefix``: text put before every source (``None``: the checkpoint's own, ``"summarize: "`` for T5);
    ``instruction_template``: how an instruction is combined with the source text (``{instruction}`` and
    ``{source}`` placeholders; the template's text belongs to the instruction segment; ``None``:
    ``"{instruction}\n{source}"``, or for HIBRIDS on BART/LED the public code's ``<s> question <s> document
    </s>``, see ``question_start``);
    ``max_source_length``: ``None`` means the model's maximum (larger values are refused);
    ``sentence_marker``: text put before every sentence (Hie-BART's sentence-start token); ``None`` reads
    it from a Hie-BART config; ``headings``: read section headings (``None``: the config's
    ``source_headings``, default on).

    What a method adds comes from its input features (:mod:`synopsis.models.features`), found through the
    model's checkpoint type: ``features``, an :class:`~synopsis.models.features.InputFeatureList` in the
    registry's order. Prompts on the T5 path follow
    InstructSum (Nishida et al.): an InstructSum checkpoint always, and a plain T5 given an instruction, read
    ``Instructions: {I} According to the above instructions, summarize the following article. Title: {Ti}
    Article: {S}`` (without an instruction: ``Summarize the following article. Title: ... Article: ...``).
    The instruction part is segment 1 and is truncated to ``max_instruction_length`` on its own; the source
    part (segment 0) to ``max_source_length``, so the source's tokens never depend on the instruction.
    """

    def __init__(
        self,
        model_config: Any,
        tokenizer: PreTrainedTokenizerBase,
        max_source_length: int | None = None,
        max_target_length: int = 128,
        prefix: str | None = None,
        instruction_template: str | None = None,
        sentence_marker: str | None = None,
        max_instruction_length: int = DEFAULT_MAX_INSTRUCTION_LENGTH,
        headings: bool | None = None,
    ) -> None:
        self.config = model_config
        self.tokenizer = tokenizer
        # what the model's methods add (models/features.py), in the registry's order
        self.features: InputFeatureList = input_features(model_config, tokenizer)
        limit, maximum = source_length_limits(model_config, tokenizer)
        if max_source_length is not None and not 1 <= max_source_length <= maximum:
            raise ConfigError(
                f"max_source_length must be in 1..{maximum} (the model's maximum), got {max_source_length}"
            )
        self.max_source_length = max_source_length or limit
        self.max_target_length = max_target_length
        self.prefix = default_source_prefix(model_config) if prefix is None else prefix
        # A token alone between a question and the document (HIBRIDS on a BOS tokenizer: the public code's
        # [<s>] + question + [<s>] + document + [</s>]); any other model reads "question\ndocument".
        self.question_start = self.features.first(TextMarkers, lambda feature: feature.question_start)
        if instruction_template is None:
            instruction_template = "{instruction}" + ("" if self.question_start else "\n") + "{source}"
        if instruction_template.count("{source}") != 1 or instruction_template.count("{instruction}") != 1:
            raise ConfigError(
                f"instruction_template {instruction_template!r}: needs one {{instruction}} and one {{source}}"
            )
        self.instruction_template = instruction_template
        if sentence_marker is None:
            sentence_marker = self.features.first(TextMarkers, lambda feature: feature.sentence_marker)
        self.sentence_marker = sentence_marker
        if max_instruction_length < 1:
            raise ConfigError(f"max_instruction_length must be >= 1, got {max_instruction_length}")
        self.max_instruction_length = max_instruction_length
        # Section headings are read before their section's text (HIBRIDS reads section titles); a model
        # config may turn them off with ``source_headings: false``.
        if headings is None:
            headings = bool(config_setting(model_config, "source_headings"))
        self.headings = headings
        self.last_truncation = Truncation()

    def prompt_room(self) -> int:
        """Tokens a method's prompt takes around a document beside any instruction (InstructSum: the
        instruction's own budget and the fixed ``Title: ... Article:`` lead-in); 0 for other models."""
        owner = self.features.prompt_owner(None)
        return 0 if owner is None else owner.prompt_room(self.max_instruction_length)

    @property
    def limits(self) -> Limits:
        return Limits(self.max_source_length, self.max_instruction_length)

    # ------------------------------------------------------------------ text pieces
    def _section_marker(self, section: Any) -> str | None:
        return self.features.first(TextMarkers, lambda feature: feature.section_marker(section))

    def _pieces(self, document: Document, instruction: str | None) -> list[Piece]:
        sentences = [s for s in document.sentences if s.text.strip()]
        if not sentences:
            where = f"document {document.id}" if document.id else "document"
            raise InputError(f"{where}: no text to summarize")
        owner = self.features.prompt_owner(instruction)
        if owner is not None:  # the prompt normalises whitespace and reads no markers
            return owner.prompt(document, self._body_pieces(document, sentences, markers=False), instruction)
        source = self._body_pieces(document, sentences, markers=True)
        pieces = [Piece(self.prefix)] if self.prefix else []
        if not instruction:
            return pieces + source
        for part in re.split(r"(\{instruction\}|\{source\})", self.instruction_template):
            if part == "{source}":
                if self.question_start is not None:  # HIBRIDS' second <s>: the start chunk (no section)
                    pieces.append(Piece(self.question_start))
                pieces += source
            elif part:  # the instruction and the template's own words form the instruction segment
                text = instruction if part == "{instruction}" else part
                pieces.append(Piece(text, segment=INSTRUCTION_SEGMENT))
        return pieces

    def _body_pieces(self, document: Document, sentences: list[Any], *, markers: bool) -> list[Piece]:
        """The document's text: each sentence (labelled with its index and section), and, when a sentence
        starts a section, the headings of the sections entered since the previous sentence (a heading's
        tokens belong to its section, to no sentence), with a feature's section marker (SECTOK/LVLSECTOK)
        before the section's own heading and the sentence marker (Hie-BART) before the sentence
        (``markers``)."""
        sections = document.sections
        pieces: list[Piece] = []
        # Without markers a stock model reads the text as written: each sentence and the whitespace between
        # two sentences as the source has them (two spaces, a line break), as tokenizer(text) would read it
        # (a byte-level BPE encodes every space); elsewhere one space.
        as_written = markers and self.sentence_marker is None and document.source is not None

        def add(text: str, sentence: int, section: int, gap: str | None = None) -> None:
            # The space before a piece belongs to it, so a token that carries a leading space does too.
            pieces.append(Piece(((gap or " ") if pieces else "") + text, sentence, section))

        for index, sentence in enumerate(sentences):
            section = sentence.section
            starts = index == 0 or sentences[index - 1].section is not section
            entered = sections[(sentences[index - 1].section.index + 1 if index else 0) : section.index + 1]
            if starts and self.headings:
                for node in entered[:-1]:  # sections without text of their own, e.g. a parent's title
                    if node.heading and node.heading.strip():
                        add(" ".join(node.heading.split()), -1, node.index)
            marker = self._section_marker(section) if markers and starts else None
            if marker is not None:
                add(marker, index, section.index)
            if starts and self.headings and section.heading and section.heading.strip():
                add(" ".join(section.heading.split()), -1, section.index)
            text = sentence.text if markers else " ".join(sentence.text.split())
            gap = None
            if as_written:
                text = document.written(sentence)
                if index and pieces and pieces[-1].sentence == index - 1:  # nothing added between them
                    gap = document.written_gap(sentences[index - 1], sentence)
            if markers and self.sentence_marker is not None:  # markers belong to the sentence they start
                if self.sentence_marker != self.tokenizer.bos_token:
                    text = f"{self.sentence_marker} {text}"
                elif index:
                    # BART's own <s> (Hie-BART's default, as in the paper): the tokenizer's leading <s> starts
                    # the first sentence; a later one keeps the space before it as a token of its own, so the
                    # space goes after it ("A.<s> B." tokenizes A. and B. exactly as "A. B." does).
                    pieces.append(Piece(f"{self.sentence_marker} {text}", index, section.index))
                    continue
            add(text, index, section.index, gap)
        return pieces

    def source_text(self, document: Document, instruction: str | None = None) -> str:
        """The text the encoder reads."""
        return "".join(p.text for p in self._pieces(document, instruction))

    # ------------------------------------------------------------------ encoding
    def encode_sources(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None
    ) -> list[SourceEncoding]:
        """One :class:`SourceEncoding` per document, truncated to ``max_source_length`` (with a warning)."""
        instructions = instructions if instructions is not None else [None] * len(documents)
        if len(instructions) != len(documents):
            raise InputError(f"got {len(instructions)} instructions for {len(documents)} documents")
        all_pieces = [self._pieces(d, i) for d, i in zip(documents, instructions, strict=True)]
        texts = ["".join(p.text for p in pieces) for pieces in all_pieces]
        try:
            encoded = self.tokenizer(texts, return_offsets_mapping=True, return_special_tokens_mask=True)
        except NotImplementedError:
            raise CheckpointError(
                f"{type(self.tokenizer).__name__}: a fast (tokenizers) tokenizer is needed for offsets"
            ) from None
        report = Truncation()
        out = []
        for row, (document, pieces) in enumerate(zip(documents, all_pieces, strict=True)):
            ids = np.asarray(encoded["input_ids"][row], dtype=np.int64)
            offsets = np.asarray(encoded["offset_mapping"][row], dtype=np.int64).reshape(-1, 2)
            special = np.asarray(encoded["special_tokens_mask"][row], dtype=bool)
            labels = self._token_labels(pieces, offsets, special)
            owner = self.features.prompt_owner(instructions[row])
            if owner is not None:
                keep = owner.kept(special, labels[2], labels[3], self.limits)
            else:
                keep = self._kept_positions(special, self.max_source_length)
            report.add(len(ids), int(keep.sum()))
            sentences = [s for s in document.sentences if s.text.strip()]
            encoding = SourceEncoding(
                input_ids=ids[keep].tolist(),
                sentence_ids=labels[0][keep].tolist(),
                document_section_ids=labels[1][keep].tolist(),
                segment_ids=labels[2][keep].tolist(),
                length_before_truncation=len(ids),
                sentence_sections=[s.section.index for s in sentences],
            )
            self.features.source_fields(document, encoding)  # what the model's methods read besides
            out.append(encoding)
        if report.truncated:
            logger.warning(report.message("inputs", self.max_source_length))
        self.last_truncation = report
        return out

    def _kept_positions(self, special: np.ndarray, limit: int) -> np.ndarray:
        """Truncation as the tokenizer does it: content tokens are cut, special tokens stay."""
        budget = limit - int(special.sum())
        content = ~special
        if self.tokenizer.truncation_side == "left":
            rank = np.cumsum(content[::-1])[::-1]
        else:
            rank = np.cumsum(content)
        return special | (content & (rank <= budget))

    @staticmethod
    def _token_labels(
        pieces: list[Piece], offsets: np.ndarray, special: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(sentence, section, segment, cuttable) per token, read at the token's first character."""
        lengths = [len(p.text) for p in pieces]
        starts = np.concatenate([[0], np.cumsum(lengths)])
        total = int(starts[-1])
        piece_of_char = np.repeat(np.arange(len(pieces)), lengths)
        table = np.array(
            [(p.sentence, p.section, p.segment, p.cut) for p in pieces] + [(-1, -1, SOURCE_SEGMENT, 0)],
            dtype=np.int64,
        )
        first = np.clip(offsets[:, 0], 0, max(total - 1, 0))
        piece = piece_of_char[first] if total else np.full(len(offsets), len(pieces))
        piece = np.where(special, len(pieces), piece)  # special tokens map to the "nothing" row
        labels = table[piece]
        return labels[:, 0], labels[:, 1], labels[:, 2], labels[:, 3].astype(bool)

    def encode_targets(self, summaries: Sequence[str]) -> list[list[int]]:
        full = self.tokenizer(text_target=list(summaries))["input_ids"]
        limit = self.max_target_length
        ids = self.tokenizer(text_target=list(summaries), truncation=True, max_length=limit)["input_ids"]
        report = Truncation()
        for before, after in zip(full, ids, strict=True):
            report.add(len(before), len(after))
        if report.truncated:
            logger.warning(report.message("target summaries", limit))
        return ids

    # ------------------------------------------------------------------ batches
    @property
    def reads_section_tree(self) -> bool:
        """Whether the model reads the section tree's relations (HIBRIDS), so that by section it reads each
        section's subtree."""
        entry = checkpoint_type(self.config)
        return entry is not None and entry.reads_section_tree

    @property
    def caches_source(self) -> bool:
        """Whether the model decodes from a cached source part (InstructSum: one encoding of a document
        serves every instruction; :meth:`cached_prompts`)."""
        return bool(self.features.of(CachedSourcePrompt))

    def cached_prompts(self, sources: Sequence[SourceEncoding]) -> list[Any]:
        """Each source as the prompt the model's source cache reads
        (:meth:`~synopsis.models.features.CachedSourcePrompt.cached_prompt`; InstructSum's
        :class:`~synopsis.models.instructsum.PromptIds`)."""
        reader = next(iter(self.features.of(CachedSourcePrompt)), None)
        if reader is None:
            raise ConfigError(f"a {self.config.model_type} model decodes from no cached source")
        return [reader.cached_prompt(source) for source in sources]

    def collate(
        self, sources: Sequence[SourceEncoding], targets: Sequence[Sequence[int]] | None = None
    ) -> dict[str, torch.Tensor]:
        """Pad a batch record: ids, mask, the per-token sentence, document section and segment, then each
        input feature's own fields (HIBRIDS' ``section_ids`` and ``section_relations``, LED's
        ``global_attention_mask``); labels use -100 on padding."""
        batch = dict(self.tokenizer.pad({"input_ids": [s.input_ids for s in sources]}, return_tensors="pt"))
        width = batch["input_ids"].shape[1]
        left = self.tokenizer.padding_side == "left"
        for name, value in PAD_VALUES.items():
            batch[name] = pad_rows((getattr(s, name) for s in sources), width, value, left=left)
        self.features.batch_fields(sources, batch)
        if targets is not None:
            labels = self.tokenizer.pad({"input_ids": [list(t) for t in targets]}, return_tensors="pt")
            batch["labels"] = labels["input_ids"].masked_fill(labels["attention_mask"] == 0, -100)
        return batch

    def model_inputs(self, batch: dict[str, torch.Tensor], device: torch.device | str | None = None) -> dict:
        """The fields of a batch record this model reads, on ``device``."""
        names = {"input_ids", "attention_mask", "labels"}
        entry = checkpoint_type(self.config)
        names.update(() if entry is None else entry.inputs)
        return {k: (v if device is None else v.to(device)) for k, v in batch.items() if k in names}
