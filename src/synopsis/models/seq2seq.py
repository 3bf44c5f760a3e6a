"""Local Hugging Face seq2seq checkpoints (BART, Hie-BART, T5, LED) and their inputs.

One path for every encoder-decoder the toolkit fine-tunes or runs:

* :func:`load_seq2seq` loads a model directory and its tokenizer with one-line errors for the usual
  mistakes (missing config, missing weights, unsupported architecture, empty tokenizer), optionally as
  Hie-BART (``hie_bart_word_heads``) or randomly initialised from the directory's ``config.json``.
* :class:`Seq2SeqInputs` turns Documents (and optional instructions) into model inputs: a source prefix
  such as T5's ``"summarize: "``, Hie-BART's sentence-start markers, truncation to the model's maximum
  with a warning that says how much was cut, and LED's global attention on the first token.

Methods built on this path (HIBRIDS, InstructSum) subclass :class:`Seq2SeqInputs` and override
:meth:`Seq2SeqInputs.source_text` or :meth:`Seq2SeqInputs.collate` instead of forking the loading code.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from transformers import (
    AddedToken,
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from synopsis.document import Document
from synopsis.errors import CheckpointError, ConfigError, InputError
from synopsis.models.hie_bart import HieBartConfig

logger = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = ("bart", "hie_bart", "t5", "mt5", "led")
BART_MODEL_TYPES = ("bart", "hie_bart")
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "vocab.txt")
#: T5 has relative positions and no hard limit; its pre-training length is the default maximum.
T5_DEFAULT_MAX_SOURCE_LENGTH = 512


def read_model_config(model_dir: str | Path) -> dict[str, Any]:
    """The checkpoint's ``config.json`` as a dict, checking that it is a supported seq2seq model."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise CheckpointError(f"{model_dir}: no such model directory")
    path = model_dir / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{model_dir}: no config.json; not a Hugging Face model directory")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: corrupt JSON ({err})") from None
    model_type = data.get("model_type") if isinstance(data, dict) else None
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CheckpointError(
            f"{path}: model_type {model_type!r} is not a supported seq2seq model "
            f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    return data


def load_tokenizer(model_dir: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved in ``model_dir`` (never downloaded); refuses missing or empty tokenizers."""
    model_dir = Path(model_dir)
    if not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise CheckpointError(f"{model_dir}: no tokenizer files (one of {', '.join(TOKENIZER_FILES)})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except (OSError, ValueError, TypeError) as err:
        raise CheckpointError(f"{model_dir}: cannot load the tokenizer: {str(err).splitlines()[0]}") from None
    # transformers 5 silently builds a tokenizer with only its special tokens from some incomplete files
    if len(tokenizer) <= len(tokenizer.all_special_tokens):
        raise CheckpointError(f"{model_dir}: the tokenizer is empty ({len(tokenizer)} tokens)")
    return tokenizer


def bart_tokenizer_from_files(vocab_file: str | Path, merges_file: str | Path) -> PreTrainedTokenizerBase:
    """A BART (byte-level BPE) tokenizer from ``vocab.json`` + ``merges.txt``, e.g. GPT-2's files.

    transformers 5 silently builds an EMPTY tokenizer from the v4-style ``vocab_file=`` arguments, so the
    files are read here and passed as data. BART's special tokens are added when the vocabulary lacks them.
    """
    from transformers import BartTokenizer

    from synopsis.io import read_text

    try:
        vocab = json.loads(read_text(vocab_file))
    except json.JSONDecodeError as err:
        raise InputError(f"{vocab_file}: not valid JSON ({err})") from None
    lines = read_text(merges_file).splitlines()
    merges = [tuple(line.split()) for line in lines if line.strip() and not line.startswith("#version")]
    if not isinstance(vocab, dict) or not vocab or any(len(m) != 2 for m in merges):
        raise InputError(f"{vocab_file}, {merges_file}: not a byte-level BPE vocabulary and merge list")
    tokenizer = BartTokenizer(vocab=vocab, merges=merges)
    if len(tokenizer) < len(vocab):
        raise InputError(
            f"{vocab_file}: tokenizer has {len(tokenizer)} tokens for a {len(vocab)}-entry vocabulary"
        )
    return tokenizer


def add_sentence_start_token(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> int:
    """Make sure the tokenizer has Hie-BART's sentence-start token and the model knows its id.

    The token is added as a special token that swallows the space before it (like BART's ``<mask>``), so
    ``"<sent> A. <sent> B."`` tokenizes each sentence exactly as it would without the marker. The
    embedding matrix grows by one row when the token is new (initialised to the mean embedding).
    """
    config = model.config
    token = config.sentence_start_token
    if token not in tokenizer.get_vocab():
        tokenizer.add_tokens(
            [AddedToken(token, lstrip=True, rstrip=False, special=True, normalized=False)],
            special_tokens=True,
        )
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        model.resize_token_embeddings(len(tokenizer))
    config.sentence_start_token_id = tokenizer.convert_tokens_to_ids(token)
    return config.sentence_start_token_id


def load_seq2seq(
    model_dir: str | Path,
    hie_bart_word_heads: int | None = None,
    random_init: bool = False,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a local BART / Hie-BART / T5 / LED checkpoint and its tokenizer.

    ``hie_bart_word_heads`` runs a BART (or Hie-BART) checkpoint as Hie-BART with that many word-level
    heads; ``random_init`` builds the model from ``config.json`` alone (no weights needed).
    """
    model_dir = Path(model_dir)
    data = read_model_config(model_dir)
    if not random_init and not any((model_dir / name).is_file() for name in WEIGHT_FILES):
        raise CheckpointError(
            f"{model_dir}: no model weights ({' or '.join(WEIGHT_FILES[::2])}); "
            "to start from random weights, train with random_init: true"
        )
    config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    if hie_bart_word_heads is not None:
        if data["model_type"] not in BART_MODEL_TYPES:
            raise CheckpointError(
                f"{model_dir}: --hie-bart-word-heads needs a BART checkpoint, "
                f"this one is {data['model_type']!r}"
            )
        heads = config.encoder_attention_heads
        if not 1 <= hie_bart_word_heads <= heads:
            raise ConfigError(
                f"hie_bart_word_heads must be in 1..{heads} (the model's encoder heads), "
                f"got {hie_bart_word_heads}"
            )
        config = HieBartConfig.from_bart_config(config, word_heads=hie_bart_word_heads)
    tokenizer = load_tokenizer(model_dir)
    try:
        if random_init:
            model = AutoModelForSeq2SeqLM.from_config(config)
        else:  # the config's class decides (registered Hie-BART included)
            model = AutoModelForSeq2SeqLM.from_pretrained(
                str(model_dir), config=config, local_files_only=True
            )
    except (OSError, ValueError, RuntimeError, SafetensorError) as err:
        raise CheckpointError(
            f"{model_dir}: cannot load the model weights: {str(err).splitlines()[0]}"
        ) from None
    if isinstance(model.config, HieBartConfig) and model.config.sentence_heads > 0:
        add_sentence_start_token(model, tokenizer)
    vocab = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > vocab:
        raise CheckpointError(
            f"{model_dir}: the tokenizer has {len(tokenizer)} tokens but the model only {vocab} embeddings"
        )
    return model, tokenizer


def model_max_source_length(config: Any, tokenizer: PreTrainedTokenizerBase) -> int:
    """The longest input the model can encode: its position table, or T5's conventional 512."""
    if config.model_type == "led":
        return int(config.max_encoder_position_embeddings)
    if config.model_type in BART_MODEL_TYPES:
        return int(config.max_position_embeddings)
    limit = tokenizer.model_max_length
    return int(limit) if limit and limit < 1_000_000 else T5_DEFAULT_MAX_SOURCE_LENGTH


def default_source_prefix(config: Any) -> str:
    """T5 checkpoints carry their task prefix (``"summarize: "``) in ``task_specific_params``."""
    params = getattr(config, "task_specific_params", None) or {}
    prefix = params.get("summarization", {}).get("prefix")
    if prefix is not None:
        return prefix
    return "summarize: " if config.model_type in ("t5", "mt5") else ""


@dataclass
class Truncation:
    """How much truncation cut from a batch of sequences."""

    truncated: int = 0  # sequences that were cut
    total: int = 0  # sequences seen
    tokens_cut: int = 0
    longest: int = 0  # longest sequence before truncation (tokens)

    def message(self, what: str, limit: int) -> str:
        return (
            f"truncated {self.truncated} of {self.total} {what} to {limit} tokens "
            f"({self.tokens_cut} tokens cut; the longest had {self.longest})"
        )


class Seq2SeqInputs:
    """Builds encoder inputs and labels for one model + tokenizer.

    ``prefix``: text put before every source (``None``: the checkpoint's own, ``"summarize: "`` for T5);
    ``instruction_template``: how an instruction is combined with the source text;
    ``max_source_length``: ``None`` means the model's maximum (larger values are refused).
    """

    def __init__(
        self,
        model_config: Any,
        tokenizer: PreTrainedTokenizerBase,
        max_source_length: int | None = None,
        max_target_length: int = 128,
        prefix: str | None = None,
        instruction_template: str = "{instruction}\n{source}",
    ) -> None:
        self.config = model_config
        self.tokenizer = tokenizer
        limit = model_max_source_length(model_config, tokenizer)
        if max_source_length is not None and max_source_length > limit:
            raise ConfigError(
                f"max_source_length {max_source_length} exceeds the model's maximum of {limit} tokens"
            )
        self.max_source_length = max_source_length or limit
        self.max_target_length = max_target_length
        self.prefix = default_source_prefix(model_config) if prefix is None else prefix
        self.instruction_template = instruction_template
        self.sentence_marker = (
            model_config.sentence_start_token
            if isinstance(model_config, HieBartConfig) and model_config.sentence_heads > 0
            else None
        )

    def source_text(self, document: Document, instruction: str | None = None) -> str:
        """The text the encoder reads; Hie-BART puts the sentence-start marker before every sentence."""
        sentences = [s.text for s in document.sentences if s.text.strip()]
        if not sentences:
            where = f"document {document.id}" if document.id else "document"
            raise InputError(f"{where}: no text to summarize")
        if self.sentence_marker is not None:
            source = " ".join(f"{self.sentence_marker} {s}" for s in sentences)
        else:
            source = " ".join(sentences)
        if instruction:
            source = self.instruction_template.format(instruction=instruction, source=source)
        return self.prefix + source

    def _encode(self, texts: list[str], limit: int, what: str, target: bool = False) -> list[list[int]]:
        key = "text_target" if target else "text"
        full = self.tokenizer(**{key: texts})["input_ids"]
        ids = self.tokenizer(**{key: texts}, truncation=True, max_length=limit)["input_ids"]
        report = Truncation(total=len(texts))
        for before, after in zip(full, ids, strict=True):
            if len(before) > len(after):
                report.truncated += 1
                report.tokens_cut += len(before) - len(after)
            report.longest = max(report.longest, len(before))
        if report.truncated:
            logger.warning(report.message(what, limit))
        self.last_truncation = report
        return ids

    def encode_sources(
        self, documents: Sequence[Document], instructions: Sequence[str | None] | None = None
    ) -> list[list[int]]:
        """Token ids per document, truncated to ``max_source_length`` (with a warning saying how much)."""
        instructions = instructions if instructions is not None else [None] * len(documents)
        if len(instructions) != len(documents):
            raise InputError(f"got {len(instructions)} instructions for {len(documents)} documents")
        texts = [self.source_text(d, i) for d, i in zip(documents, instructions, strict=True)]
        return self._encode(texts, self.max_source_length, "inputs")

    def encode_targets(self, summaries: Sequence[str]) -> list[list[int]]:
        return self._encode(list(summaries), self.max_target_length, "target summaries", target=True)

    def collate(
        self, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]] | None = None
    ) -> dict[str, torch.Tensor]:
        """Pad a batch; labels use -100 on padding; LED gets global attention on the first token."""
        batch = dict(self.tokenizer.pad({"input_ids": [list(s) for s in sources]}, return_tensors="pt"))
        if self.config.model_type == "led":
            global_mask = torch.zeros_like(batch["input_ids"])
            global_mask[:, 0] = 1
            batch["global_attention_mask"] = global_mask
        if targets is not None:
            labels = self.tokenizer.pad({"input_ids": [list(t) for t in targets]}, return_tensors="pt")
            batch["labels"] = labels["input_ids"].masked_fill(labels["attention_mask"] == 0, -100)
        return batch
