"""Summarizers behind ``synopsis summarize``: one interface for extractive baselines and neural models.

Every summarizer keeps one contract, :class:`~synopsis.summarizers.base.Summarizer`:
``summarize(documents, instructions=None, references=None) -> list[str]`` on a batch. Models are imported
lazily so that choosing LEAD-3 never imports transformers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from synopsis.config import DecodingOptions, use_threads
from synopsis.errors import SynopsisError
from synopsis.io import read_json
from synopsis.summarizers.base import Summarizer

#: Methods ``synopsis summarize --method`` accepts (``lead-K`` takes any K >= 1).
METHODS = ("default", "pointer-generator", "seq2seq", "salient", "lead-K", "oracle", "centrality")
#: Without a method or model: the bundled model where a document is in its domain, else salient sentences
#: with a note (:class:`~synopsis.summarizers.default.DefaultSummarizer`).
DEFAULT_METHOD = "default"


def _model_family(model_dir: Path) -> str:
    """ "seq2seq" for a Hugging Face checkpoint (its config has ``model_type``), else "pointer-generator"."""
    config = model_dir / "config.json"
    if not config.is_file():
        raise SynopsisError(f"{model_dir}: no config.json; not a model directory")
    data = read_json(config, "a model directory", SynopsisError)
    return "seq2seq" if isinstance(data, dict) and "model_type" in data else "pointer-generator"


def load_summarizer(
    method: str | None = None,
    model: str | Path | None = None,
    *,
    revision: str | None = None,
    k: int = 3,
    max_source_length: int | None = None,
    instruction_cache: bool = True,
    dtype: str | None = None,
    device: Any = "auto",
    decoding: DecodingOptions | None = None,
    threads: int | None = None,
    backend: str = "torch",
    compute_type: str | None = None,
    **generation: Any,
) -> Summarizer:
    """Build the summarizer for ``method``; with ``model`` and no method, the directory's config decides.

    ``model`` is a local directory or a Hugging Face hub id ``org/name`` (at ``revision``), read from
    huggingface_hub's cache and downloaded into it when online (:func:`synopsis.models.names.
    resolve_seq2seq`).

    Without either: ``default``, the bundled pointer-generator for documents in its domain (paper abstracts)
    and salient sentences for the rest, each with a note saying so (a named method or model is never
    replaced). ``decoding`` (checked once, when it was built) or loose ``generation`` keywords (num_beams,
    min_length, max_length, length_penalty, no_repeat_ngram_size) are the neural methods' decoding options;
    ``k`` is the number of sentences for centrality and salient (per section by section);
    ``max_source_length`` truncates neural inputs (words for the pointer-generator, subword tokens for
    Hugging Face models); ``instruction_cache=False`` makes an InstructSum model encode every prompt in full;
    ``dtype`` (fp32, bf16, fp16) casts a Hugging Face model's weights; ``device`` is where a neural model
    computes: ``auto`` (a GPU when torch sees one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``
    (:func:`~synopsis.sharding.resolve_device`; an unusable one is an :class:`~synopsis.errors.InputError`).
    ``threads`` is torch's CPU threads for the methods that compute with torch; without it, the CLI's default
    (``$OMP_NUM_THREADS``, else the cores the load leaves free) unless the caller already set torch's
    threads (:func:`~synopsis.config.use_threads`). ``backend`` decodes a Hugging Face checkpoint with
    ``generate()`` (``torch``) or CTranslate2 (``ctranslate2``: stock checkpoints, converted once and cached
    beside the model; ``compute_type`` float32, the default, int8 or int8_float32; see
    :mod:`synopsis.summarizers.ct2`).
    """
    if model is not None or revision is not None:
        from synopsis.models.names import resolve_seq2seq

        if model is None:
            raise SynopsisError(f"revision {revision!r}: give the hub model it applies to (model='org/name')")
        model = resolve_seq2seq(model, revision)
    if method is None:
        method = _model_family(Path(model)) if model is not None else DEFAULT_METHOD
    decoding = (decoding or DecodingOptions()).update(**generation) if generation else decoding
    if backend != "torch" or compute_type is not None:
        from synopsis.summarizers.ct2 import check_backend

        check_backend(backend, method, compute_type, dtype)
    if dtype is not None and method != "seq2seq":
        raise SynopsisError(f"--dtype applies to Hugging Face (seq2seq) models, not to {method}")
    lead = re.fullmatch(r"lead-(\d+)", method)
    if lead:
        from synopsis.summarizers.extractive import LeadSummarizer

        return LeadSummarizer(int(lead.group(1)))
    if method == "oracle":
        from synopsis.summarizers.extractive import OracleSummarizer

        return OracleSummarizer()
    use_threads(threads)  # every method below computes with torch
    if method == "salient":
        from synopsis.summarizers.salient import SalientSummarizer

        return SalientSummarizer(k=k)
    if method == "default":
        if model is not None:
            raise SynopsisError(
                "--method default uses the bundled model; for another model give --model alone "
                "(or with --method pointer-generator / seq2seq)"
            )
        from synopsis.summarizers.default import DefaultSummarizer

        given = decoding.given() if decoding is not None else {}
        return DefaultSummarizer.from_pretrained(
            k=k, device=device, max_source_tokens=max_source_length, **given
        )
    if method == "centrality":
        from synopsis.summarizers.extractive import CentralitySummarizer

        return CentralitySummarizer(k=k)
    if method == "pointer-generator":
        from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

        given = decoding.given() if decoding is not None else {}
        return PointerGeneratorSummarizer.from_pretrained(
            model, device=device, max_source_tokens=max_source_length, **given
        )
    if method == "seq2seq":
        if model is None:
            raise SynopsisError("--method seq2seq needs --model (a Hugging Face directory or hub id)")
        if backend == "ctranslate2":
            from synopsis.summarizers.ct2 import CTranslate2Summarizer

            return CTranslate2Summarizer.from_pretrained(
                model, max_source_length, compute_type=compute_type, device=device, decoding=decoding
            )
        from synopsis.summarizers.seq2seq import Seq2SeqSummarizer

        return Seq2SeqSummarizer.from_pretrained(
            model,
            max_source_length=max_source_length,
            instruction_cache=instruction_cache,
            dtype=dtype,
            device=device,
            decoding=decoding,
        )
    raise SynopsisError(f"unknown method '{method}'; choose one of: {', '.join(METHODS)}")
