"""A Hugging Face hub cache laid out as huggingface_hub lays it out, holding tiny random models.

``models--ORG--NAME/refs/<revision>`` holds a commit hash and ``snapshots/<hash>/`` the files (each a link
to ``blobs/<sha256>``, as the hub's downloads leave them), so ``HF_HOME`` pointed at the parent and
``HF_HUB_OFFLINE=1`` make huggingface_hub, transformers and synopsis read them as downloaded models.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import torch
import transformers
from transformers import GenerationConfig

from helpers.tiny_models import bart_tokenizer, save_tiny_bart, save_tiny_t5, t5_tokenizer

#: Each tiny model's own decoding (its generation_config.json): not the library's defaults, so a run that
#: ignored them would decode otherwise.
GENERATION = {
    "num_beams": 2, "min_length": 5, "max_length": 14, "no_repeat_ngram_size": 2, "length_penalty": 1.5
}  # fmt: skip
#: The task prefix the tiny T5's config carries (task_specific_params.summarization.prefix).
T5_PREFIX = "summarize briefly: "


def use_offline_cache(monkeypatch: Any, hf_home: Path) -> None:
    """``HF_HOME`` at ``hf_home``, offline, for this process (huggingface_hub read its settings at import)
    and for any it starts."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hf_home / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def put_in_cache(hf_home: Path, repo_id: str, files: Path, revision: str = "main") -> Path:
    """Lay out ``files`` (a model directory) as the cached snapshot of ``repo_id`` at ``revision``."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    commit = hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / revision).write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for path in sorted(files.iterdir()):
        blob = repo / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copyfile(path, blob)
        (snapshot / path.name).symlink_to(Path("../../blobs") / blob.name)
    return snapshot


def _with_generation(directory: Path, max_input: int | None) -> Path:
    config = GenerationConfig.from_pretrained(directory)
    config.update(**GENERATION)
    config.save_pretrained(directory)
    if max_input is not None:  # the tokenizer's own input length, as a checkpoint's tokenizer_config has it
        path = directory / "tokenizer_config.json"
        data = json.loads(path.read_text())
        data["model_max_length"] = max_input
        path.write_text(json.dumps(data))
    return directory


def _t5_ids() -> dict[str, int]:
    return {"pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0}


def _bart_layers() -> dict[str, int]:
    return {
        "d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
        "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
    }  # fmt: skip


#: Tiny configs of the stock families beyond BART, T5 and LED (tests/tiny_models.py): PEGASUS-style models
#: read T5's SentencePiece vocabulary (their configs name only its ids), mBART GPT-2's byte-level BPE.
FAMILY_CONFIGS = {
    "pegasus": lambda: transformers.PegasusConfig(
        **_bart_layers(), max_position_embeddings=512, forced_eos_token_id=1, **_t5_ids()
    ),
    "pegasus_x": lambda: transformers.PegasusXConfig(
        **_bart_layers(), max_position_embeddings=256, block_size=16, num_global_tokens=4, **_t5_ids()
    ),
    "bigbird_pegasus": lambda: transformers.BigBirdPegasusConfig(
        **_bart_layers(), max_position_embeddings=256, block_size=8, num_random_blocks=2, **_t5_ids()
    ),
    "longt5": lambda: transformers.LongT5Config(  # transient-global attention, as google/long-t5-tglobal-*
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        local_radius=8,
        global_block_size=4,
        encoder_attention_type="transient-global",
        **_t5_ids(),
    ),  # fmt: skip
    "umt5": lambda: transformers.UMT5Config(
        d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, **_t5_ids()
    ),
    "mbart": lambda: transformers.MBartConfig(
        **_bart_layers(),
        max_position_embeddings=128,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    ),  # fmt: skip
}


def save_tiny_family(model_type: str, directory: Path, tokenizers_dir: Path) -> Path:
    """A tiny random model of ``model_type`` (a key of :data:`FAMILY_CONFIGS`) with its tokenizer."""
    torch.manual_seed(0)
    tokenizer = bart_tokenizer(tokenizers_dir) if model_type == "mbart" else t5_tokenizer(tokenizers_dir)
    config = FAMILY_CONFIGS[model_type]()
    config.vocab_size = len(tokenizer)
    transformers.AutoModelForSeq2SeqLM.from_config(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def build_hub_cache(hf_home: Path, tokenizers_dir: Path, max_input: int = 96) -> dict[str, Path]:
    """The tiny models as hub repos (BART, PEGASUS, LongT5, a T5 whose config names a summarization prefix),
    each with its own generation settings and a tokenizer that reads ``max_input`` tokens; also a BERT
    repo, a pickle-only repo and one whose safetensors index maps to a ``.bin``. Returns each repo's
    snapshot."""
    work = hf_home / "build"
    t5 = {"task_specific_params": {"summarization": {"prefix": T5_PREFIX}}}
    builders = {
        "tiny-org/bart-sum": lambda d: save_tiny_bart(d, tokenizers_dir),
        "tiny-org/pegasus-sum": lambda d: save_tiny_family("pegasus", d, tokenizers_dir),
        "tiny-org/long-t5-sum": lambda d: save_tiny_family("longt5", d, tokenizers_dir),
        "tiny-org/t5-prefix": lambda d: save_tiny_t5(d, tokenizers_dir, **t5),
    }
    snapshots = {}
    for repo_id, build in builders.items():
        directory = _with_generation(build(work / repo_id), max_input)
        snapshots[repo_id] = put_in_cache(hf_home, repo_id, directory)
    bert = work / "bert"
    bert.mkdir(parents=True)
    (bert / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    snapshots["tiny-org/bert-encoder"] = put_in_cache(hf_home, "tiny-org/bert-encoder", bert)
    pickled = work / "pickled"
    shutil.copytree(work / "tiny-org/bart-sum", pickled)
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")  # never read: a pickle's name
    snapshots["tiny-org/pickled"] = put_in_cache(hf_home, "tiny-org/pickled", pickled)
    indexed = work / "indexed"
    shutil.copytree(pickled, indexed)
    index = {"metadata": {}, "weight_map": {"model.shared.weight": "pytorch_model.bin"}}
    (indexed / "model.safetensors.index.json").write_text(json.dumps(index))
    snapshots["tiny-org/indexed"] = put_in_cache(hf_home, "tiny-org/indexed", indexed)
    shutil.rmtree(work)
    return snapshots
