"""What CTranslate2's int8 costs in ROUGE: a small BART trained on SciTLDR, decoded four ways (issue 52).

No pretrained BART can be downloaded here, so the model is a small BART (d_model 256, 3+3 layers, 4 heads,
FFN 1024, 512 positions) with a byte-level BPE of 8,000 tokens trained on SciTLDR train (BART's special
tokens at ids 0..4: the bundled GPT-2 BPE's 50k-word output layer would dominate each step of a model
this small), trained from random weights on SciTLDR train with synopsis's own seq2seq training. Its best
checkpoint then summarizes SciTLDR dev with ``generate()`` (the default backend) and ``--backend
ctranslate2`` in float32, int8 and int8_float32; each is scored with synopsis's evaluation (rouge-score with
stemming, the best of each paper's references) and compared summary by summary with ``generate()``'s.

    python benchmarks/int8_rouge.py init runs/int8/init
    OMP_NUM_THREADS=1 nice -n 5 synopsis train seq2seq --model runs/int8/init --random-init \\
        --output runs/int8/run --train ../shared/data/scitldr --corpus scitldr --train-split train \\
        --dev-split dev --threads 1 --set max_source_length=192 --set max_target_length=48 \\
        --batch-size 16 --lr 1e-3 --set warmup_steps=50 --max-steps 450 --eval-every 150 \\
        --set max_dev_examples=48 --patience 0
    python benchmarks/int8_rouge.py compare runs/int8/run/best --json benchmarks/results/int8_rouge.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SYNOPSIS_SHARED_DATA", ROOT.parent / "shared" / "data"))
SMALL = {
    "d_model": 256, "encoder_layers": 3, "decoder_layers": 3, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "encoder_ffn_dim": 1024, "decoder_ffn_dim": 1024,
    "max_position_embeddings": 512,
}  # fmt: skip
BACKENDS = ("generate", "float32", "int8", "int8_float32")


def init(directory: Path, kind: str = "corpus-bpe", vocab_size: int = 8000) -> None:
    """A small BART's config.json and a BPE trained on SciTLDR train (``--random-init`` builds the weights;
    ``kind="gpt2"``: the bundled GPT-2 BPE instead)."""
    from transformers import BartConfig

    from synopsis.data.readers import read_corpus
    from synopsis.experiments.small_bart import experiment_tokenizer

    def texts() -> list[str]:
        pairs = read_corpus("scitldr", SHARED / "scitldr", split="train")
        return [text for example in pairs for text in (example.document.text, *example.references)]

    tokenizer = experiment_tokenizer(kind, SHARED, directory / "bpe", vocab_size, texts)
    special = {f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("pad", "bos", "eos")}
    end = tokenizer.eos_token_id
    BartConfig(
        **SMALL, **special, vocab_size=len(tokenizer), decoder_start_token_id=end, forced_eos_token_id=end
    ).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def summaries(
    model: Path, backend: str, documents: list[Any], args: argparse.Namespace
) -> tuple[list[str], float]:
    """One backend's summaries of ``documents`` and the seconds they took (the load not counted)."""
    from synopsis.config import DecodingOptions
    from synopsis.summarizers import load_summarizer

    ngrams = args.no_repeat_ngram_size or None
    decoding = DecodingOptions(num_beams=args.beams, max_length=args.max_length, no_repeat_ngram_size=ngrams)
    backend_options: dict[str, Any] = {"backend": "torch"}
    if backend != "generate":
        backend_options = {"backend": "ctranslate2", "compute_type": backend}
    summarizer = load_summarizer(model=model, threads=args.threads, **backend_options)
    started = time.perf_counter()
    out: list[str] = []
    for start in range(0, len(documents), args.batch_size):
        out += summarizer.summarize(documents[start : start + args.batch_size], decoding=decoding)
    return out, time.perf_counter() - started


def token_agreement(summaries: list[str], reference: list[str]) -> float:
    """Share of word positions where two systems' summaries hold the same word (the longer summary's
    length counts, so a word one has and the other lacks disagrees)."""
    same = total = 0
    for a, b in zip(summaries, reference, strict=True):
        x, y = a.split(), b.split()
        same += sum(u == v for u, v in zip(x, y, strict=False))
        total += max(len(x), len(y))
    return same / total if total else 1.0


def compare(model: Path, args: argparse.Namespace) -> dict[str, Any]:
    """ROUGE of each backend on SciTLDR dev, its agreement with ``generate()``, how many different summaries
    it wrote (a model that ignores its input writes few) and its documents/s."""
    from synopsis.data.readers import read_corpus
    from synopsis.evaluation.corpus import evaluate_corpus

    examples = list(read_corpus("scitldr", SHARED / "scitldr", split="dev"))[: args.documents or None]
    documents = [example.document for example in examples]
    references = [example.references for example in examples]
    rows = []
    outputs: dict[str, list[str]] = {}
    for backend in BACKENDS:
        outputs[backend], seconds = summaries(model, backend, documents, args)
        report = evaluate_corpus(outputs[backend], references, metrics=("rouge",), bootstrap=0)
        same = sum(a == b for a, b in zip(outputs[backend], outputs["generate"], strict=True))
        agree = token_agreement(outputs[backend], outputs["generate"])
        rouge = report["rouge"]
        scores = {name: round(100 * rouge[name]["fmeasure"], 2) for name in ("rouge1", "rouge2", "rougeL")}
        rows.append({
            "backend": backend, **scores, "identical_to_generate": f"{same}/{len(documents)}",
            "token_agreement": round(agree, 4), "distinct_summaries": len(set(outputs[backend])),
            "documents_per_s": round(len(documents) / seconds, 3),
        })  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return {
        "dev_papers": len(documents),
        "rows": rows,
        "examples": {name: texts[:3] for name, texts in outputs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("init", "compare"))
    parser.add_argument(
        "model", type=Path, help="init: where to write the config; compare: the trained model"
    )
    parser.add_argument("--documents", type=int, default=None, help="the first N dev papers (default: all)")
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=48)
    parser.add_argument("--no-repeat-ngram-size", type=int, default=None, help="default: the model's")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=None, help="default: the library's")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.step == "init":
        init(args.model)
        return
    settings = {k: getattr(args, k) for k in ("documents", "beams", "max_length", "no_repeat_ngram_size")}
    result = {
        "command": "python benchmarks/int8_rouge.py " + " ".join(sys.argv[1:]),
        **settings,
        "threads": args.threads,
        "load_average_before": os.getloadavg(),
        **compare(args.model, args),
        "load_average_after": os.getloadavg(),
    }
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
