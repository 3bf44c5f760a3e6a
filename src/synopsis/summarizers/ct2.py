"""Stock Hugging Face checkpoints decoded by CTranslate2 (``--backend ctranslate2``): the same summaries as
``generate()``, faster on a CPU.

CTranslate2 (Klein et al., 2020, the OpenNMT inference engine) runs a converted copy of the weights with
its own fused kernels and beam search. Here:

* **Conversion** happens once per weights: :func:`converted_model` converts the checkpoint with
  CTranslate2's Transformers converter (from the weights synopsis loaded and checked) into
  ``<model>/.ctranslate2/<key>/``, where the key is a SHA-256 over the checkpoint's files (weights, config,
  tokenizer) and CTranslate2's version. It is written to a temporary folder and renamed into place (two
  processes converting at once keep one copy); later runs reuse it once its files pass a digest check (a
  truncated or overwritten ``model.bin`` is converted again); a change to the weights changes the key, so
  the next run converts again and removes the stale copy. Only folders holding synopsis' :data:`MARKER`
  are ever removed, and a cache folder that is a link or resolves elsewhere is refused. A model folder
  that cannot be written, or a snapshot in huggingface_hub's cache, caches under
  ``$XDG_CACHE_HOME/synopsis/ctranslate2``.
* **Precision**: the conversion keeps float32 weights; ``compute_type`` picks how they run (``float32``,
  the default, gives the same token ids as ``generate()``; ``int8`` and ``int8_float32`` quantize the
  weights when loaded: faster, other tokens; ``docs/results/decoding.md`` has the numbers).
* **Decoding options** map one to one (:func:`translate_options`): beams, lengths (as ``generate()``
  counts them, with the checkpoint's forced end token), length penalty, no-repeat n-grams, early stopping
  and a forced first token. Two differences under beam search are kept and said
  (:func:`differs_from_generate`, which ``--backend auto`` consults): CTranslate2 renormalizes the scores
  after banning no-repeat n-grams, as ``generate(renormalize_logits=True)`` does (plain ``generate()`` does
  not; :attr:`CTranslate2Summarizer.renormalizes`), and it ends a search as ``early_stopping=True`` does
  (``generate()``'s default searches on). Anything else the
  checkpoint's generation config sets that CTranslate2 cannot do the same way (sampling, repetition
  penalties, several returned sequences, ...) is refused in one line, never dropped.
* **What it runs**: stock checkpoints of the families CTranslate2 converts (:data:`CT2_MODEL_TYPES`); a
  checkpoint carrying a method (HIBRIDS, Hie-BART, InstructSum), whose attention CTranslate2 does not have,
  or another family (LED) is refused in one line.

Inputs, by-section windows and sources are those of :class:`~synopsis.summarizers.seq2seq.Seq2SeqSummarizer`
(this class only replaces the call that decodes a batch), so both backends summarize the same way.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from synopsis.config import NO_DECODING, DecodingOptions
from synopsis.document import Document
from synopsis.errors import ConfigError, InputError
from synopsis.models.registry import PAPER_NAMES, checkpoint_type
from synopsis.summarizers.base import SummarizerInfo
from synopsis.summarizers.seq2seq import Seq2SeqSummarizer, generate_kwargs

logger = logging.getLogger(__name__)

#: The ``model_type``s whose stock checkpoints CTranslate2's Transformers converter makes a Translator of.
CT2_MODEL_TYPES = frozenset({"bart", "mbart", "pegasus", "marian", "t5", "mt5", "umt5", "m2m_100"})
#: The families of BART's converter whose layers normalize before attention (BART and Marian after it).
PRE_NORM_MODEL_TYPES = frozenset({"mbart", "pegasus"})
#: The families of BART's converter with a layer norm on the embeddings (not PEGASUS, not Marian).
EMBEDDING_NORM = frozenset({"bart", "mbart"})
#: ``generate()``'s length when neither the checkpoint nor the caller sets one (new tokens)
DEFAULT_NEW_TOKENS = 20
#: Where a checkpoint's conversions are kept, inside its folder.
CACHE_DIR = ".ctranslate2"
#: Generation-config fields CTranslate2 cannot honour as ``generate()`` does, with their neutral values.
UNSUPPORTED = {
    "do_sample": False,
    "num_return_sequences": 1,
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "encoder_no_repeat_ngram_size": 0,
    "num_beam_groups": 1,
    "diversity_penalty": 0.0,
    "penalty_alpha": None,
    "bad_words_ids": None,
    "force_words_ids": None,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "sequence_bias": None,
    "exponential_decay_length_penalty": None,
    "forced_decoder_ids": None,
}


def check_convertible(model_dir: Path | str, config: Mapping[str, Any]) -> None:
    """A checkpoint with a method, or of a family CTranslate2 does not convert, is refused in one line
    (``model_dir``: how the line names it; the service names its model, never a path)."""
    model_type = config.get("model_type")
    entry = checkpoint_type(model_type)
    if entry is not None and entry.methods:
        names = ", ".join(sorted(PAPER_NAMES[m] for m in entry.methods))
        raise ConfigError(
            f"{model_dir}: --backend ctranslate2 runs stock checkpoints; this one carries {names}, whose "
            "attention CTranslate2 does not have (use --backend torch)"
        )
    if model_type not in CT2_MODEL_TYPES:
        raise ConfigError(
            f"{model_dir}: CTranslate2 cannot convert model_type {model_type!r} (it converts: "
            f"{', '.join(sorted(CT2_MODEL_TYPES))}); use --backend torch"
        )


# ------------------------------------------------------------------------------------------ the cache
def _file_digest(path: Path, memo: dict[str, Any]) -> str:
    """SHA-256 of a file, remembered by (size, mtime) so a large checkpoint is read once, not every run."""
    stat = path.stat()
    stamp = [stat.st_size, stat.st_mtime_ns]
    known = memo.get(path.name)
    if isinstance(known, dict) and known.get("stamp") == stamp:
        return str(known["sha256"])
    with path.open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    memo[path.name] = {"stamp": stamp, "sha256": digest}
    return digest


def weights_key(model_dir: Path, cache: Path) -> str:
    """The key of a conversion: SHA-256 over the checkpoint's files (weights, config, tokenizer; not
    ``generation_config.json``, which is read at run time), CTranslate2's version and the cache's layout
    (conversions made before it had a :data:`MARKER` are left alone, never deleted)."""
    import ctranslate2

    memo_path = cache / "digests.json"
    try:
        memo = json.loads(memo_path.read_text())
    except (OSError, ValueError):
        memo = {}
    if not isinstance(memo, dict):
        memo = {}
    total = hashlib.sha256(f"ctranslate2 {ctranslate2.__version__} layout 2".encode())
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and not path.name.startswith(".") and path.name != "generation_config.json":
            total.update(f"{path.name} {_file_digest(path, memo)}\n".encode())
    try:
        cache.mkdir(parents=True, exist_ok=True)
        _write_atomically(memo_path, json.dumps(memo))
    except OSError:  # a read-only cache still converts; it only hashes again next time
        pass
    return total.hexdigest()[:20]


def _write_atomically(path: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _user_cache(model_dir: Path) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "synopsis" / "ctranslate2"
    return base / hashlib.sha256(str(model_dir.resolve()).encode()).hexdigest()[:16]


def in_hub_cache(model_dir: Path) -> bool:
    """Whether ``model_dir`` is a snapshot in huggingface_hub's cache (``models--org--name/snapshots/<rev>``),
    whose folder is the hub's: a conversion inside it would count as the model's files."""
    for path in (model_dir, model_dir.resolve()):
        if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
            return True
    return False


def cache_root(model_dir: Path) -> Path:
    """``<model>/.ctranslate2`` where the model's folder can be written and is not a snapshot of the hub's
    cache, else a per-model folder under the user's cache (``$XDG_CACHE_HOME/synopsis/ctranslate2``).

    A cache folder that is a symbolic link, or not a folder, or resolves outside its parent is refused in one
    line (issue 58: ``ln -s victim model/.ctranslate2`` had the clean-up delete the victim's folders)."""
    beside = model_dir / CACHE_DIR
    if in_hub_cache(model_dir) or not os.access(beside if beside.is_dir() else model_dir, os.W_OK):
        root = _user_cache(model_dir)
    else:
        root = beside
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        kind = "a symbolic link" if root.is_symlink() else "not a folder"
        raise ConfigError(f"{root}: the CTranslate2 cache is {kind}; refusing to use it (remove it)")
    if root.exists() and root.resolve().parent != root.parent.resolve():
        raise ConfigError(f"{root}: the CTranslate2 cache resolves outside {root.parent}; refusing to use it")
    return root


#: The file synopsis writes into each conversion (and each folder a conversion is built in): only folders
#: holding it are ever deleted, and it holds the digests a conversion is checked against before it is used.
MARKER = ".synopsis-ctranslate2.json"
#: A ``.building-*`` folder older than this was left by a conversion that died: removed.
STALE_BUILD_S = 6 * 3600


def _ours(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and (path / MARKER).is_file()


def _record_digests(folder: Path) -> None:
    """The marker of a finished conversion: each file's size, mtime and SHA-256."""
    files = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != MARKER:
            stat = path.stat()
            with path.open("rb") as handle:
                digest = hashlib.file_digest(handle, "sha256").hexdigest()
            files[path.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
    (folder / MARKER).write_text(json.dumps({"made_by": "synopsis", "files": files}))


def _intact(folder: Path) -> bool:
    """Whether a conversion is ours and its files are those it was written with: sizes first (a truncated
    file), then the SHA-256 of any file whose mtime changed (random bytes written over it)."""
    if not _ours(folder) or not (folder / "model.bin").is_file():
        return False
    try:
        files = json.loads((folder / MARKER).read_text())["files"]
        for name, known in files.items():
            stat = (folder / name).stat()
            if stat.st_size != known["size"]:
                return False
            if stat.st_mtime_ns != known["mtime_ns"]:
                with (folder / name).open("rb") as handle:
                    if hashlib.file_digest(handle, "sha256").hexdigest() != known["sha256"]:
                        return False
        return "model.bin" in files
    except (OSError, ValueError, KeyError, TypeError):
        return False


def converted_model(model_dir: str | Path) -> Path:
    """The CTranslate2 copy of ``model_dir``'s weights, converted now unless an intact copy of these weights
    exists (see the module's docstring for the key, the atomic write and the clean-up); a copy that fails
    its digest check is converted again."""
    model_dir = Path(model_dir)
    root = cache_root(model_dir)
    target = root / weights_key(model_dir, root)
    if _intact(target):
        logger.debug("CTranslate2 model reused: %s", target)
        return target
    if _ours(target):
        logger.warning("the CTranslate2 conversion %s failed its digest check: converting again", target)
        shutil.rmtree(target, ignore_errors=True)
    elif target.exists() or target.is_symlink():
        raise ConfigError(f"{target}: not a conversion synopsis made; refusing to replace it (remove it)")
    logger.info("converting %s for CTranslate2 (once for these weights) into %s", model_dir, target)
    root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=root, prefix=".building-"))
    try:
        (building / MARKER).write_text(json.dumps({"made_by": "synopsis", "building": True}))
        _convert(model_dir, building / "model")
        _record_digests(building / "model")
        try:
            os.replace(building / "model", target)
        except OSError:  # another process put its copy there first: keep that one
            if not _intact(target):
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    _remove_stale(root, target)
    return target


def _remove_stale(root: Path, target: Path) -> None:
    """Conversions of weights this folder no longer holds, and ``.building-*`` folders a conversion that
    died left: only folders synopsis made (their :data:`MARKER`), never a link or anything else."""
    now = time.time()
    for stale in root.iterdir():
        if stale == target or not _ours(stale):
            continue
        if stale.name.startswith(".building-"):
            try:
                if now - (stale / MARKER).stat().st_mtime < STALE_BUILD_S:
                    continue  # another process may be converting into it now
            except OSError:
                continue
        elif stale.name.startswith("."):
            continue
        shutil.rmtree(stale, ignore_errors=True)


def _convert(model_dir: Path, output: Path) -> None:
    """Convert with CTranslate2's Transformers converter from the weights synopsis loads (checked finite)."""
    from ctranslate2.converters import TransformersConverter

    from synopsis.models.seq2seq import load_seq2seq

    model, tokenizer = load_seq2seq(model_dir)
    vocabulary = sorted(tokenizer.get_vocab().values())
    if vocabulary != list(range(len(vocabulary))):
        raise InputError(f"{model_dir}: the tokenizer's ids are not 0..{len(vocabulary) - 1}; cannot convert")
    missing = (("normalize_before", PRE_NORM_MODEL_TYPES), ("normalize_embedding", EMBEDDING_NORM))
    for name, families in missing:
        if not hasattr(model.config, name):  # read by the BART converter, gone from transformers 5's configs
            setattr(model.config, name, model.config.model_type in families)

    class Loaded(TransformersConverter):  # converts the model in memory, not a second load from disk
        def load_model(self, model_class: Any, path: str, **kwargs: Any) -> Any:
            return model

        def load_tokenizer(self, tokenizer_class: Any, path: str, **kwargs: Any) -> Any:
            return tokenizer

    Loaded(str(model_dir)).convert(str(output), quantization="float32", force=True)


# ------------------------------------------------------------------------------------------ decoding
def translate_options(
    generation_config: Any, decoding: DecodingOptions, max_positions: int | None = None
) -> tuple[dict[str, Any], int | None]:
    """``translate_batch`` keywords that decode as ``generate()`` would with the checkpoint's generation
    config and the caller's options on top, and the forced first token (``None``: none).

    ``generate()`` counts ``max_length``/``min_length`` with the decoder's start token and, with a
    ``forced_eos_token_id``, spends the last step on the end token; CTranslate2 counts predicted tokens and
    stops at the length. ``early_stopping=True`` is CTranslate2's patience 1 (stop once ``num_beams``
    hypotheses are done). ``max_positions``: the decoder's positions, which cap ``generate()``'s default
    length."""
    config = copy.deepcopy(generation_config)
    config.update(**generate_kwargs(decoding))
    refused = [name for name, off in UNSUPPORTED.items() if getattr(config, name, None) not in (off, None)]
    if refused:
        name = refused[0]
        raise ConfigError(
            f"--backend ctranslate2 cannot honour {name}={getattr(config, name)!r} of this checkpoint's "
            "generation config as generate() does; use --backend torch"
        )
    if config.early_stopping == "never":
        raise ConfigError("--backend ctranslate2 cannot honour early_stopping='never'; use --backend torch")
    if config.max_new_tokens is not None:
        steps = config.max_new_tokens
    elif config.max_length is not None:
        steps = config.max_length - 1  # generate() counts the decoder's start token
    else:  # generate()'s default: 20 new tokens, within the decoder's positions
        steps = min(DEFAULT_NEW_TOKENS, (max_positions or DEFAULT_NEW_TOKENS + 1) - 1)
    least = config.min_new_tokens
    if least is None:
        least = max(0, (config.min_length or 0) - 1)
    if config.forced_eos_token_id is not None:
        steps -= 1
    options = {
        "beam_size": config.num_beams or 1,
        "max_decoding_length": max(1, steps),
        "min_decoding_length": min(least, max(1, steps)),
        "length_penalty": float(config.length_penalty if config.length_penalty is not None else 1.0),
        "no_repeat_ngram_size": config.no_repeat_ngram_size or 0,
        "patience": 1.0,
        **({"end_token": ends} if (ends := _end_ids(config)) else {}),  # the ids generate() stops on
        "max_input_length": 0,  # the inputs are already cut to what the model reads
    }
    return options, config.forced_bos_token_id


def differs_from_generate(
    generation_config: Any, decoding: DecodingOptions, max_positions: int | None = None
) -> str | None:
    """Why CTranslate2 would not write ``generate()``'s tokens with these settings (the checkpoint's
    generation config and the caller's options on top), in a few words; ``None`` where it writes them (the
    settings tests/test_ct2_backend.py holds equal). What it cannot honour at all (:func:`translate_options`
    refuses it) is a reason, and under beam search (docs/results/decoding.md has the measurements):

    * n-gram blocking: CTranslate2 bans the n-grams on the logits, before its log-softmax, so the allowed
      tokens' probabilities are renormalized; ``generate()`` bans them after its log-softmax;
    * ``early_stopping`` other than ``True``: ``generate()``'s default keeps searching after ``num_beams``
      hypotheses have ended, until no running beam can beat them; CTranslate2 stops when ``num_beams`` have
      ended (``patience`` 1: ``early_stopping=True``'s rule);
    * ``length_penalty`` 0: CTranslate2 then stops as soon as its best beam ends."""
    try:
        options, _ = translate_options(generation_config, decoding, max_positions)
    except ConfigError as err:
        return str(err)
    if options["beam_size"] == 1:
        return None
    if options["no_repeat_ngram_size"] > 0:
        return "no-repeat n-grams under beam search (CTranslate2 renormalizes the scores after the ban)"
    config = copy.deepcopy(generation_config)
    config.update(**generate_kwargs(decoding))
    if config.early_stopping is not True:
        return (
            f"beam search with early_stopping={config.early_stopping!r} (generate() searches on after "
            "num_beams hypotheses end, CTranslate2 stops)"
        )
    if options["length_penalty"] == 0:
        return "beam search with length_penalty 0 (CTranslate2 stops when its best beam ends)"
    return None


def checkpoint_generation_config(model_dir: Path, config: Any) -> Any:
    """The checkpoint's generation config (its ``generation_config.json``, else its model config's), as
    ``generate()`` reads it."""
    from transformers import GenerationConfig

    if (model_dir / "generation_config.json").is_file():
        return GenerationConfig.from_pretrained(str(model_dir), local_files_only=True)
    return GenerationConfig.from_model_config(config)


def _end_ids(config: Any) -> list[int]:
    ends = config.eos_token_id
    return [] if ends is None else [ends] if isinstance(ends, int) else list(ends)


class CTranslate2Summarizer(Seq2SeqSummarizer):
    """A stock seq2seq checkpoint decoded by CTranslate2; inputs, windows and sources as with torch."""

    backend = "ctranslate2"

    def __init__(
        self,
        translator: Any,
        tokenizer: Any,
        inputs: Any,
        generation_config: Any,
        vocabulary: list[str],
        compute_type: str = "float32",
        decoding: DecodingOptions | None = None,
        start_token: int | None = None,
    ) -> None:
        self.model = None  # no torch weights are held
        self.start_token = start_token  # given as the first target token where the model names none (mBART)
        self.cache = None
        self.translator = translator
        self.tokenizer = tokenizer
        self.inputs = inputs
        self.generation_config = generation_config
        self.vocabulary = vocabulary
        self.token_ids = {token: index for index, token in enumerate(vocabulary)}
        self.compute_type = compute_type
        self.decoding = decoding or NO_DECODING
        self.translate, self.first_token = translate_options(
            generation_config, self.decoding, getattr(inputs.config, "max_position_embeddings", None)
        )
        #: whether n-gram bans renormalize the beam scores (generate(renormalize_logits=True)'s way)
        self.renormalizes = self.translate["beam_size"] > 1 and self.translate["no_repeat_ngram_size"] > 0

    @classmethod
    def from_pretrained(  # type: ignore[override]
        cls,
        model_dir: str | Path,
        max_source_length: int | None = None,
        compute_type: str | None = None,
        device: Any = "auto",
        decoding: DecodingOptions | None = None,
    ) -> CTranslate2Summarizer:
        """Load (converting once, see :func:`converted_model`) ``model_dir`` for CTranslate2 on ``device``
        (``auto``: a GPU when there is one, else the CPU) with ``torch.get_num_threads()`` CPU threads."""
        import ctranslate2
        import torch
        from transformers import AutoConfig

        from synopsis.devices import resolve_device
        from synopsis.models.inputs import Seq2SeqInputs
        from synopsis.models.seq2seq import load_tokenizer, read_model_config

        model_dir = Path(model_dir)
        check_convertible(model_dir, read_model_config(model_dir))
        target = resolve_device(device)
        config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
        generation_config = checkpoint_generation_config(model_dir, config)
        tokenizer = load_tokenizer(model_dir)
        positions = getattr(config, "max_position_embeddings", None)
        translate_options(generation_config, decoding or DecodingOptions(), positions)  # before converting
        path = converted_model(model_dir)
        translator = ctranslate2.Translator(
            str(path),
            device=target.type,
            device_index=target.index or 0,
            compute_type=compute_type or "float32",
            intra_threads=torch.get_num_threads(),
        )
        vocabulary = json.loads((path / "shared_vocabulary.json").read_text())
        named = json.loads((path / "config.json").read_text()).get("decoder_start_token")
        start = None if named is not None else generation_config.decoder_start_token_id
        inputs = Seq2SeqInputs(config, tokenizer, max_source_length=max_source_length)
        logger.info("CTranslate2 runs on %s (%s)", target, compute_type or "float32")
        compute = compute_type or "float32"
        summarizer = cls(
            translator, tokenizer, inputs, generation_config, vocabulary, compute, decoding, start
        )
        if summarizer.renormalizes:
            logger.warning(
                "--backend ctranslate2 renormalizes beam scores after banning repeated n-grams, as "
                "generate(renormalize_logits=True) does: summaries may differ from --backend torch"
            )
        return summarizer

    def describe(self) -> SummarizerInfo:
        return self._info("seq2seq", f"Hugging Face seq2seq checkpoint on CTranslate2 ({self.compute_type})")

    @property
    def device(self) -> Any:
        import torch

        if self.translator.device == "cpu":
            return torch.device("cpu")
        return torch.device(self.translator.device, self.translator.device_index[0])

    @property
    def dtype(self) -> Any:
        return self.compute_type

    @property
    def reads_section_tree(self) -> bool:  # type: ignore[override]
        return False  # stock checkpoints only

    def copy_with(self, decoding: DecodingOptions) -> CTranslate2Summarizer:  # type: ignore[override]
        """The same translator with other decoding options (one per request; checked when built)."""
        other = type(self)(
            self.translator,
            self.tokenizer,
            self.inputs,
            self.generation_config,
            self.vocabulary,
            self.compute_type,
            decoding,
            self.start_token,
        )
        other.auto = self.auto
        return other

    def _summarize_batch(
        self, documents: list[Document], instructions: list[str | None], references: Any
    ) -> list[str]:
        encodings = self.inputs.encode_sources(documents, instructions)
        source = [[self.vocabulary[i] for i in encoding.input_ids] for encoding in encodings]
        forced = [i for i in (self.start_token, self.first_token) if i is not None]
        prefix = [[self.vocabulary[i] for i in forced]] * len(source) if forced else None
        results = self.translator.translate_batch(source, prefix, **self.translate)
        return self._decode([[self.token_ids[t] for t in result.hypotheses[0]] for result in results])
