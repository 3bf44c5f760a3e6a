"""Hugging Face seq2seq checkpoints (BART, PEGASUS, T5, LED, ... and the methods'): loading and conversion.

* :func:`load_seq2seq` loads a model (a directory or a hub id) and its tokenizer with one-line errors for
  the usual mistakes (missing config, missing weights, unsupported architecture, empty tokenizer), or
  builds it with random weights from the directory's ``config.json``. What the model is (BART, Hie-BART
  with N word heads, ...) is read from that config alone.
* :func:`convert_checkpoint` turns a checkpoint into another method's model (``synopsis convert``), e.g. a
  stock BART into Hie-BART; the result says what it is in its own ``config.json``.

Model inputs are built by :class:`synopsis.models.inputs.Seq2SeqInputs`.
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from huggingface_hub.errors import StrictDataclassError
from safetensors import SafetensorError
from transformers import (
    AddedToken,
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from synopsis.checkpoint import CONFIG_FILE, check_finite_tensors
from synopsis.errors import CheckpointError, ConfigError, InputError
from synopsis.hub import SAFETENSORS_INDEX, check_safetensors_weights
from synopsis.models.hibrids import (
    SECTION_MARKER_KINDS,
    add_qs_tokens,
    add_section_tokens,
    convert_to_hibrids,
)
from synopsis.models.hie_bart import DEFAULT_SENTENCE_START_TOKEN, HieBartConfig, convert_to_hie_bart
from synopsis.models.instructsum import convert_to_instructsum
from synopsis.models.names import read_model_config, resolve_seq2seq
from synopsis.models.registry import stacked_type

logger = logging.getLogger(__name__)

WEIGHT_FILES = ("model.safetensors", SAFETENSORS_INDEX)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "vocab.txt")
#: The largest tokenizer file loaded (mT5's and NLLB's tokenizer.json are 16-17 MB): a 42 MB one took 29 s and
#: 1.2 GB before it was refused (issue 58).
MAX_TOKENIZER_BYTES = 32 * 1024 * 1024


def load_tokenizer(model_dir: str | Path) -> PreTrainedTokenizerBase:
    """The tokenizer saved in ``model_dir`` (never downloaded); refuses missing or empty tokenizers."""
    model_dir = Path(model_dir)
    if not any((model_dir / name).is_file() for name in TOKENIZER_FILES):
        raise CheckpointError(f"{model_dir}: no tokenizer files (one of {', '.join(TOKENIZER_FILES)})")
    for name in (*TOKENIZER_FILES, "merges.txt", "tokenizer_config.json", "special_tokens_map.json"):
        path = model_dir / name
        if path.is_file() and path.stat().st_size > MAX_TOKENIZER_BYTES:  # refused before it is parsed
            raise CheckpointError(
                f"{path}: {path.stat().st_size / 2**20:.0f} MB, larger than the "
                f"{MAX_TOKENIZER_BYTES >> 20} MB a tokenizer file may be"
            )
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except Exception as err:  # noqa: BLE001 - the tokenizers library raises a bare Exception on a bad file
        if isinstance(err, KeyboardInterrupt | SystemExit):
            raise
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

    from synopsis.io import read_json, read_text

    vocab = read_json(vocab_file, "a BPE vocabulary")
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

    BART's own ``<s>`` (the paper's marker, the default) is already there. A new token (the ``<sent>``
    option) is added as a special token that swallows the space before it (like BART's ``<mask>``), so
    ``"<sent> A. <sent> B."`` tokenizes each sentence exactly as it would without the marker; the embedding
    matrix then grows by one row (initialised to the mean embedding).
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
    model: str | Path, random_init: bool = False, *, revision: str | None = None, progress: bool | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a BART / PEGASUS / T5 / LED / ... checkpoint (or a method's: Hie-BART, HIBRIDS, InstructSum) and
    its tokenizer; its config.json says what it is. ``model`` is a local directory or a hub id ``org/name``
    at ``revision`` (:func:`resolve_seq2seq`; ``progress``: download bars).

    ``random_init`` builds the model from ``config.json`` alone (no weights needed). Weights load from
    safetensors files only (:func:`synopsis.hub.check_safetensors_weights`)."""
    model_dir = resolve_seq2seq(model, revision, progress=progress)
    read_model_config(model_dir)
    if not random_init:
        check_safetensors_weights(model_dir)
        if not any((model_dir / name).is_file() for name in WEIGHT_FILES):
            raise CheckpointError(
                f"{model_dir}: no model weights ({' or '.join(WEIGHT_FILES)}); "
                "to start from random weights, train with random_init: true"
            )
    try:
        config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    except (ValueError, TypeError, StrictDataclassError) as err:  # d_model: NaN, encoder_layers: "abc"
        problem = " ".join(str(err).split()).split(". Errors:")[0]  # the rest repeats it per type
        raise CheckpointError(f"{model_dir / CONFIG_FILE}: {problem}") from None
    tokenizer = load_tokenizer(model_dir)
    try:
        if random_init:
            model = AutoModelForSeq2SeqLM.from_config(config)
        else:  # the config's class decides (registered Hie-BART included)
            model = AutoModelForSeq2SeqLM.from_pretrained(
                str(model_dir), local_files_only=True, use_safetensors=True
            )
    except (OSError, ValueError, RuntimeError, SafetensorError) as err:
        raise CheckpointError(
            f"{model_dir}: cannot load the model weights: {str(err).splitlines()[0]}"
        ) from None
    if not random_init:  # from_pretrained loads NaN/inf weights without complaint
        check_finite_tensors(model.state_dict(), model_dir)
    if isinstance(model.config, HieBartConfig) and model.config.sentence_heads > 0:
        add_sentence_start_token(model, tokenizer)
    vocab = model.get_input_embeddings().num_embeddings
    if len(tokenizer) > vocab:
        raise CheckpointError(
            f"{model_dir}: the tokenizer has {len(tokenizer)} tokens but the model only {vocab} embeddings"
        )
    return model, tokenizer


def enable_gradient_checkpointing(model: PreTrainedModel) -> None:
    """Recompute each encoder/decoder layer's activations in the backward pass instead of keeping them
    (Chen et al., 2016, "Training Deep Nets with Sublinear Memory Cost"): the activations kept shrink to the
    layers' inputs, for about one more forward pass of compute.

    Hugging Face's switch (``activation_checkpointing_enable``), non-reentrant
    (``torch.utils.checkpoint(use_reentrant=False)``): every layer is a ``GradientCheckpointingLayer``, so
    the custom attention inside the layers of Hie-BART, HIBRIDS and InstructSum is recomputed with its
    layer, its extra arguments (sentence masks, section biases, segment ids) passed as they are, and
    dropout masks and autocast replayed from the saved state.
    """
    if not model.supports_gradient_checkpointing:
        raise ConfigError(f"gradient_checkpointing: {type(model).__name__} does not support it")
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False  # no key/value cache in training (HF turns it off anyway, with a warning)


def convert_hie_bart(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    *,
    word_heads: int,
    sentence_start_token: str = DEFAULT_SENTENCE_START_TOKEN,
) -> PreTrainedModel:
    """A BART (stock, Hie-BART or HIBRIDS: :func:`~synopsis.models.hie_bart.convert_to_hie_bart`) as
    Hie-BART with ``word_heads`` word-level heads: the same weights.

    ``sentence_start_token``: BART's ``<s>`` (the paper's) or a new token (e.g. ``<sent>``, added to the
    tokenizer and the embeddings when there are sentence heads)."""
    stacked_type(model.config, "hie_bart")  # a one-line refusal before reading BART's settings
    heads = model.config.encoder_attention_heads
    if not 1 <= word_heads <= heads:
        raise ConfigError(f"word_heads must be in 1..{heads} (the model's encoder heads), got {word_heads}")
    if not sentence_start_token.strip():
        raise ConfigError("sentence_start_token must be a token, got an empty string")
    converted = convert_to_hie_bart(model, word_heads=word_heads, sentence_start_token=sentence_start_token)
    if converted.config.sentence_heads > 0:
        add_sentence_start_token(converted, tokenizer)
    return converted


def convert_instructsum(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """A T5 whose encoder reads instructions with InstructSum's block mask: the same weights (a HIBRIDS T5
    keeps its tables: :func:`~synopsis.models.instructsum.convert_to_instructsum`). Through
    :func:`convert_seq2seq` its generation config gets the paper's decoding (:data:`METHOD_DECODING`)."""
    return convert_to_instructsum(model)


def convert_hibrids(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, **options: Any
) -> PreTrainedModel:
    """A BART/T5/LED with HIBRIDS' section-tree attention biases, zero-initialised (Cao & Wang, 2022);
    ``options`` are :func:`~synopsis.models.hibrids.convert_to_hibrids`' (``encoder``, ``decoder``,
    ``selected``, ``decoder_per_head``, ``global_bias``), with its defaults.

    The tokenizer and embeddings also get the QS hierarchy markers (:func:`add_qs_tokens`), so the model can
    be fine-tuned for QS generation; text without markers tokenizes as before."""
    try:
        converted = convert_to_hibrids(model, **options)
    except ValueError as err:
        raise CheckpointError(f"HIBRIDS: {err}") from None
    add_qs_tokens(converted, tokenizer)
    return converted


def convert_section_tokens(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, markers: str, max_depth: int = 4
) -> PreTrainedModel:
    """The SECTOK / LVLSECTOK baselines of HIBRIDS: a marker token before every section (by depth for
    LVLSECTOK), added to the tokenizer and the embeddings; the config records ``section_markers``."""
    if markers not in SECTION_MARKER_KINDS:
        kinds = ", ".join(SECTION_MARKER_KINDS)
        raise ConfigError(f"section markers must be one of {kinds}, got {markers!r}")
    if max_depth < 1:
        raise ConfigError(f"max_depth must be >= 1, got {max_depth}")
    add_section_tokens(model, tokenizer, markers, max_depth)
    add_qs_tokens(model, tokenizer)  # the HIBRIDS paper's QS task, as for convert hibrids
    model.config.section_markers = markers
    model.config.section_marker_max_depth = max_depth
    return model


#: Decoding a method's paper prescribes, written over the source's generation settings on conversion.
#: InstructSum (Nishida et al., Appendix B, Table 4): beam 2, target length at most 192 tokens.
METHOD_DECODING: dict[str, dict[str, Any]] = {
    "instructsum": {"num_beams": 2, "max_new_tokens": 192, "max_length": None},
}

#: ``synopsis convert KIND``: functions from a loaded checkpoint (+ its tokenizer) to the converted model.
CONVERTERS: dict[str, Callable[..., PreTrainedModel]] = {
    "hie-bart": convert_hie_bart,
    "instructsum": convert_instructsum,
    "hibrids": convert_hibrids,
    "section-tokens": convert_section_tokens,
}


def converter_options(kind: str) -> frozenset[str]:
    """The keyword options converter ``kind`` takes (HIBRIDS' are those of
    :func:`~synopsis.models.hibrids.convert_to_hibrids`, which :func:`convert_hibrids` forwards)."""
    function = convert_to_hibrids if kind == "hibrids" else CONVERTERS[kind]
    parameters = inspect.signature(function).parameters.values()
    return frozenset(p.name for p in parameters if p.name not in ("model", "tokenizer"))


def keep_generation_settings(
    source: PreTrainedModel, converted: PreTrainedModel, method_decoding: dict[str, Any] | None = None
) -> PreTrainedModel:
    """``converted`` decodes as ``source`` did: a copy of its generation config (beams, length penalty,
    minimum and maximum length, n-gram blocking, ...), then the decoding the method's paper prescribes
    (``method_decoding``, :data:`METHOD_DECODING`). A converter that builds a new model would otherwise
    give it the library's defaults (greedy, 20 tokens). Every conversion goes through this one function
    (:func:`convert_seq2seq`)."""
    if converted is not source:
        converted.generation_config = copy.deepcopy(source.generation_config)
    for name, value in (method_decoding or {}).items():
        setattr(converted.generation_config, name, value)
    return converted


def convert_seq2seq(kind: str, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, **options: Any):
    """Apply converter ``kind`` (see :data:`CONVERTERS`); options are the converter's keyword arguments.
    The result keeps the source's generation settings (:func:`keep_generation_settings`)."""
    if kind not in CONVERTERS:
        raise ConfigError(f"unknown conversion {kind!r}; choose one of: {', '.join(CONVERTERS)}")
    unknown = sorted(set(options) - converter_options(kind))
    if unknown:
        takes = ", ".join(sorted(converter_options(kind))) or "no options"
        raise ConfigError(f"convert {kind}: unknown option(s) {', '.join(unknown)}; it takes: {takes}")
    try:
        converted = CONVERTERS[kind](model, tokenizer, **options)
    except TypeError as err:  # a misspelt or missing option
        raise ConfigError(f"convert {kind}: {err}") from None
    return keep_generation_settings(model, converted, METHOD_DECODING.get(kind))


def convert_checkpoint(
    kind: str, source: str | Path, output: str | Path, *, revision: str | None = None, **options: Any
) -> Path:
    """Load ``source`` (a directory, or a hub id at ``revision``), convert it, and save the result (model +
    tokenizer) to a new directory ``output``."""
    output = Path(output)
    if output.resolve() == Path(source).resolve():
        raise ConfigError(f"{output}: the output directory must differ from the input checkpoint")
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ConfigError(f"{output}: already exists and is not empty; choose a new directory")
    model, tokenizer = load_seq2seq(source, revision=revision)
    converted = convert_seq2seq(kind, model, tokenizer, **options)
    from synopsis.io import write_directory_atomically

    def write(directory: Path) -> None:
        converted.save_pretrained(directory)
        tokenizer.save_pretrained(directory)

    write_directory_atomically(output, write)
    logger.info("wrote %s (%s) to %s", converted.config.model_type, kind, output)
    return output
