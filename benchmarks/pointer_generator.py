"""Pointer-generator speed at the paper's sizes on CPU, side by side with OpenNMT-py's copy-attention model.

Measures, on the same SciTLDR training pairs (lowercased words, source <= 400 / target <= 100 tokens):

* training throughput (target tokens per second, batch 16, Adagrad) of synopsis' pointer-generator with
  coverage (embedding 128, hidden 256, bidirectional encoder) and of OpenNMT-py 3.5.1 with
  ``copy_attn + coverage_attn`` (brnn encoder, ``global_attention mlp``, embedding 128, hidden 256);
* decoding speed (summaries per second, beam 4, batch 16, every system forced to exactly ``--length``
  tokens so that the work is identical) of synopsis' batched beam search, of a straightforward
  unbatched beam search over the same model (one hypothesis per step call), and of ``onmt_translate``;
* peak resident memory of every run (each runs in its own process).

Everything runs with one thread (the box is shared; more threads only add contention noise). OpenNMT-py
lives in its own virtual environment, created on first use under ``--cache-dir`` (``pip install --no-deps
OpenNMT-py==3.5.1`` plus the packages it really needs; its ``torch<2.3`` pin is ignored, torch 2.13.0 is
used). Two bugs of 3.5.1 are worked around from outside (its code is not changed): its copy-attention
checkpoints do not load for translation (the generator's keys are looked up wrongly), and onmt_translate
does not build the copy inputs (src_map). Where it cannot be installed or run, the table says why and the
unbatched beam search remains the comparison.

    python benchmarks/pointer_generator.py                 # table + benchmarks/results/pointer_generator.json
    python benchmarks/pointer_generator.py --skip-opennmt  # only synopsis and the unbatched baseline
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside the repository, or $SYNOPSIS_SHARED_DATA (as in the tests).
SHARED = Path(os.environ.get("SYNOPSIS_SHARED_DATA", ROOT.parent / "shared" / "data"))
OPENNMT_PACKAGES = [
    "torch==2.13.0",
    "configargparse",
    "pyyaml",
    "sacrebleu",
    "rapidfuzz",
    "six",
    "pyonmttok",
    "spacy",
    "pyahocorasick",
    "fasttext-wheel",
    "tensorboard",
    "waitress",
    "flask",
]
# onmt_translate in 3.5.1 builds its input iterator without copy=True, so a copy-attention model fails with
# KeyError 'src_map'. This driver does what onmt_translate does, through OpenNMT's own functions, with
# copy=True, and times the translation alone (model loading excluded, as for synopsis).
OPENNMT_TRANSLATE = """\
import sys, time
from onmt.bin.translate import _get_parser
from onmt.constants import CorpusTask
from onmt.inference_engine import InferenceEnginePY
from onmt.inputters.dynamic_iterator import build_dynamic_dataset_iter
from onmt.utils.parse import ArgumentParser

opt = _get_parser().parse_args(sys.argv[1:])
ArgumentParser.validate_translate_opts(opt)
ArgumentParser._get_all_transform_translate(opt)
ArgumentParser._validate_transforms_opts(opt)
ArgumentParser.validate_translate_opts_dynamic(opt)
engine = InferenceEnginePY(opt)
infer_iter = build_dynamic_dataset_iter(
    opt, engine.transforms_cls, engine.vocabs, task=CorpusTask.INFER, device_id=engine.device_id, copy=True
)
start = time.perf_counter()
engine._translate(infer_iter)
print(f"DECODE_SECONDS {time.perf_counter() - start:.4f}")
"""
SIZES = {"embedding_dim": 128, "hidden_dim": 256, "vocab_max": 50_000, "max_source": 400, "max_target": 100}


# ---------------------------------------------------------------------- shared data
def load_pairs(limit: int) -> list[tuple[list[str], list[str]]]:
    from synopsis.data.readers import read_corpus
    from synopsis.text import word_tokenize

    pairs = []
    for example in read_corpus("scitldr", SHARED / "scitldr", split="train"):
        source = word_tokenize(" ".join(s.text for s in example.document.sentences), lower=True)
        target = word_tokenize(example.references[0], lower=True)
        pairs.append((source[: SIZES["max_source"]], target[: SIZES["max_target"]]))
        if len(pairs) == limit:
            break
    return pairs


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------------- synopsis workers
def build_model(pairs):
    import torch

    from synopsis.models.pointer_generator import PointerGenerator, config_for_vocab
    from synopsis.models.vocab import Vocab

    vocab = Vocab.build((s + t for s, t in pairs), max_size=SIZES["vocab_max"])
    torch.manual_seed(0)
    config = config_for_vocab(
        vocab,
        embedding_dim=SIZES["embedding_dim"],
        hidden_dim=SIZES["hidden_dim"],
        pointer=True,
        coverage=True,
    )
    return PointerGenerator(config), vocab


def worker_train(args: argparse.Namespace) -> dict:
    import torch

    from synopsis.training.pointer_generator import Pair, collate

    pairs = load_pairs(args.pairs)
    model, vocab = build_model(pairs)
    model.train()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.15, initial_accumulator_value=0.1)
    batches = [
        collate([Pair(s, t) for s, t in pairs[i : i + 16]], vocab, SIZES["max_source"], SIZES["max_target"])
        for i in range(0, len(pairs), 16)
    ]
    tokens, elapsed = 0, 0.0
    for step in range(args.train_steps + 1):
        batch = batches[step % len(batches)]
        start = time.perf_counter()
        out = model(
            batch.input_ids, batch.decoder_input_ids, batch.labels, batch.extended_ids, batch.num_oovs
        )
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        optimizer.step()
        if step > 0:  # the first step pays one-off allocation costs
            elapsed += time.perf_counter() - start
            tokens += out.num_tokens
    return {"target_tokens_per_s": tokens / elapsed, "steps": args.train_steps, "vocab": len(vocab)}


def worker_decode(args: argparse.Namespace, unbatched: bool) -> dict:
    import torch

    from synopsis.generation.config import GenerationConfig
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    pairs = load_pairs(args.pairs)
    model, vocab = build_model(pairs)
    model.eval()
    articles = [s for s, _ in pairs[: args.decode_docs]]
    generation = GenerationConfig(num_beams=4, min_length=args.length, max_length=args.length)
    start = time.perf_counter()
    if unbatched:
        with torch.inference_mode():
            outputs = [unbatched_beam_search(model, vocab, a, args.length) for a in articles]
    else:
        summarizer = PointerGeneratorSummarizer(model, vocab, generation)
        outputs = []
        for i in range(0, len(articles), 16):
            outputs += summarizer.generate(articles[i : i + 16])
    elapsed = time.perf_counter() - start
    assert all(len(o) == args.length for o in outputs), [len(o) for o in outputs]
    return {"summaries_per_s": len(articles) / elapsed, "documents": len(articles)}


def unbatched_beam_search(model, vocab, article: list[str], length: int, beam: int = 4) -> list[str]:
    """The straightforward way: one document, and one decoder call per hypothesis and step."""
    import torch

    source = vocab.encode_source(article)
    ids = torch.tensor([source.ids])
    memory, state = model.encode(ids, torch.tensor([source.extended_ids]), len(source.oovs))
    hypotheses = [([vocab.bos_id], 0.0, state)]
    for _ in range(length):
        candidates = []
        for tokens, score, hyp_state in hypotheses:
            out = model.decode_step(torch.tensor([tokens[-1]]), hyp_state, memory)
            log_probs = out.probs[0].log()
            log_probs[vocab.eos_id] = float("-inf")  # forced length: the same work as the batched runs
            top = log_probs.topk(2 * beam)
            for value, token in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                candidates.append((tokens + [token], score + value, out.state))
        candidates.sort(key=lambda c: c[1], reverse=True)
        hypotheses = candidates[:beam]
    return vocab.decode(hypotheses[0][0][1:], source.oovs)


# ---------------------------------------------------------------------- OpenNMT-py
def opennmt_env(cache: Path) -> tuple[Path | None, str]:
    venv = cache / "opennmt-venv"
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists():
        return venv, "ok"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, text=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *OPENNMT_PACKAGES],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "OpenNMT-py==3.5.1"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        subprocess.run(
            [str(python), "-c", "import onmt.bin.train"], check=True, capture_output=True, text=True
        )
    except subprocess.CalledProcessError as err:
        last = (err.stderr or err.stdout or "").strip().splitlines()[-1:] or ["(no output)"]
        return None, f"install failed: {' '.join(err.cmd[-2:])}: {last[0]}"
    marker.write_text("ok\n")
    return venv, "ok"


def run_timed(cmd: list[str], env: dict, log: Path) -> tuple[str, float, float]:
    """Run a command; returns (its output, wall seconds, peak RSS in MB of that child alone)."""
    start = time.perf_counter()
    with open(log, "w") as handle:
        proc = subprocess.Popen(cmd, env=env, stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    output = log.read_text()
    if proc.returncode != 0:
        tail = output.strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"{Path(cmd[0]).name} failed: {tail[0]} (log: {log})")
    return output, wall, usage.ru_maxrss / 1024.0


def run_opennmt(args: argparse.Namespace, venv: Path, work: Path, hidden: int) -> dict:
    import yaml

    work.mkdir(parents=True, exist_ok=True)
    pairs = load_pairs(args.pairs)
    (work / "train.src").write_text("\n".join(" ".join(s) for s, _ in pairs) + "\n")
    (work / "train.tgt").write_text("\n".join(" ".join(t) for _, t in pairs) + "\n")
    (work / "dev.src").write_text("\n".join(" ".join(s) for s, _ in pairs[: args.decode_docs]) + "\n")
    config = {
        "save_data": str(work / "run"),
        "src_vocab": str(work / "run.vocab"),
        "share_vocab": True,
        "overwrite": True,
        "src_vocab_size": SIZES["vocab_max"],
        "tgt_vocab_size": SIZES["vocab_max"],
        "src_seq_length": 10_000,
        "tgt_seq_length": 10_000,
        "data": {
            "train": {"path_src": str(work / "train.src"), "path_tgt": str(work / "train.tgt")},
        },
        "save_model": str(work / "model"),
        "encoder_type": "brnn",
        "decoder_type": "rnn",
        "rnn_type": "LSTM",
        "layers": 1,
        "word_vec_size": SIZES["embedding_dim"],
        "hidden_size": hidden,  # brnn: split over the two directions; the decoder gets all of it
        "global_attention": "mlp",
        "copy_attn": True,
        "reuse_copy_attn": True,
        "coverage_attn": True,
        "lambda_coverage": 1.0,
        "bridge": True,
        "share_embeddings": True,
        "dropout": 0.0,
        "optim": "adagrad",
        "learning_rate": 0.15,
        "adagrad_accumulator_init": 0.1,
        "max_grad_norm": 2.0,
        "batch_size": 16,
        "batch_type": "sents",
        "train_steps": args.train_steps,
        "save_checkpoint_steps": args.train_steps,
        "report_every": max(1, args.train_steps // 5),
        "bucket_size": 2048,
        "num_workers": 0,
        "seed": 0,
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
        # OpenNMT-py 3.5.1 predates torch.load(weights_only=True) as the default (torch >= 2.6); its own
        # checkpoint holds argparse/vocab objects, so let it load them as it was written to.
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
    }
    bin_dir = venv / "bin"
    run_timed([str(bin_dir / "onmt_build_vocab"), "-config", str(work / "config.yaml"), "-n_sample", "-1"],
              env, work / "build_vocab.log")  # fmt: skip
    output, wall, train_peak = run_timed(
        [str(bin_dir / "onmt_train"), "-config", str(work / "config.yaml")], env, work / "train.log"
    )
    # OpenNMT reports "<src>/<tgt> tok/s" per report interval; skip the first (warm-up) report.
    rates = [float(m.group(2)) for m in re.finditer(r"(\d+)/\s*(\d+) tok/s", output)]
    if not rates:
        raise RuntimeError(f"no throughput lines in {work / 'train.log'}")
    train_rate = sum(rates[1:] or rates) / len(rates[1:] or rates)
    # OpenNMT-py 3.5.1 cannot load its own copy-attention checkpoints for translation: Model.load_state_dict
    # looks up the CopyGenerator's parameters as "weight" in checkpoint["generator"], whose keys are
    # "linear.weight", ... ("Missing key in checkpoint: generator.linear.weight"). Move them under
    # checkpoint["model"] as "generator.linear.weight", ..., where the loader's first branch finds them.
    checkpoint = work / f"model_step_{args.train_steps}.pt"
    fix = (
        "import sys, torch; ck = torch.load(sys.argv[1], weights_only=False); "
        "ck['model'].update({'generator.' + k: v for k, v in ck.pop('generator').items()}); "
        "ck['generator'] = None; torch.save(ck, sys.argv[1])"
    )
    run_timed([str(bin_dir / "python"), "-c", fix, str(checkpoint)], env, work / "fix_checkpoint.log")
    (work / "translate.py").write_text(OPENNMT_TRANSLATE)
    output, wall, decode_peak = run_timed(
        [
            str(bin_dir / "python"), str(work / "translate.py"), "-model", str(checkpoint),
            "-src", str(work / "dev.src"), "-output", str(work / "pred.txt"), "-beam_size", "4",
            "-batch_size", "16", "-min_length", str(args.length), "-max_length", str(args.length),
        ],
        env, work / "translate.log",
    )  # fmt: skip
    decode_seconds = float(re.search(r"DECODE_SECONDS ([\d.]+)", output).group(1))
    lengths = {len(line.split()) for line in (work / "pred.txt").read_text().splitlines()}
    return {
        "train": {"target_tokens_per_s": train_rate, "peak_mb": train_peak},
        "decode": {
            "summaries_per_s": args.decode_docs / decode_seconds,
            "peak_mb": decode_peak,
            "summary_lengths": sorted(lengths),
        },
    }


# ---------------------------------------------------------------------- driver
def run_worker(name: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--worker", name, "--pairs", str(args.pairs),
           "--train-steps", str(args.train_steps), "--decode-docs", str(args.decode_docs),
           "--length", str(args.length)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {name} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=160, help="SciTLDR training pairs used (and cycled).")
    parser.add_argument("--train-steps", type=int, default=10)
    parser.add_argument("--decode-docs", type=int, default=16)
    parser.add_argument("--length", type=int, default=40, help="Generated tokens per summary (forced).")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "synopsis" / "bench")
    parser.add_argument("--skip-opennmt", action="store_true")
    parser.add_argument(
        "--opennmt-hidden",
        type=int,
        nargs="+",
        default=[512, 256],
        help="OpenNMT hidden_size(s): 512 = 256 per encoder direction as ours (its decoder is then 512; "
        "OpenNMT's documented See et al. setting), 256 = our decoder size (its encoder is then 128 + 128).",
    )
    parser.add_argument(
        "--output", type=Path, default=ROOT / "benchmarks" / "results" / "pointer_generator.json"
    )
    parser.add_argument("--worker", choices=["train", "decode", "decode-unbatched"], help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        import torch

        torch.set_num_threads(1)
        result = {
            "train": lambda: worker_train(args),
            "decode": lambda: worker_decode(args, unbatched=False),
            "decode-unbatched": lambda: worker_decode(args, unbatched=True),
        }[args.worker]()
        print(json.dumps({**result, "peak_mb": peak_mb()}))
        return

    if not (SHARED / "scitldr").is_dir():
        sys.exit(f"shared data not found at {SHARED}")
    results: dict = {
        "settings": {
            **SIZES,
            **{k: v for k, v in vars(args).items() if k not in ("cache_dir", "output", "worker")},
        },
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "threads": 1},
    }
    print("synopsis: training ...", flush=True)
    results["synopsis_train"] = run_worker("train", args)
    print("synopsis: batched beam search ...", flush=True)
    results["synopsis_decode"] = run_worker("decode", args)
    print("unbatched beam search ...", flush=True)
    results["unbatched_decode"] = run_worker("decode-unbatched", args)
    if args.skip_opennmt:
        results["opennmt_all"] = {"status": "skipped (--skip-opennmt)"}
    else:
        print("OpenNMT-py: setting up its virtual environment (first run only) ...", flush=True)
        venv, status = opennmt_env(args.cache_dir)
        if venv is None:
            results["opennmt_all"] = {"status": status}
        else:
            for hidden in args.opennmt_hidden:
                print(f"OpenNMT-py (hidden_size {hidden}): training and translating ...", flush=True)
                try:
                    run = run_opennmt(args, venv, args.cache_dir / f"opennmt-work-{hidden}", hidden)
                    results[f"opennmt_{hidden}"] = {"status": "ok", **run}
                except (RuntimeError, FileNotFoundError, AttributeError) as err:
                    results[f"opennmt_{hidden}"] = {"status": f"run failed: {err}"}

    ours_train = results["synopsis_train"]["target_tokens_per_s"]
    ours_decode = results["synopsis_decode"]["summaries_per_s"]
    rows = [
        ("synopsis pointer-generator", f"{ours_train:.0f}", f"{ours_decode:.2f}",
         f"{results['synopsis_train']['peak_mb']:.0f} / {results['synopsis_decode']['peak_mb']:.0f}"),
        ("unbatched beam search (same model)", "-", f"{results['unbatched_decode']['summaries_per_s']:.2f}",
         f"- / {results['unbatched_decode']['peak_mb']:.0f}"),
    ]  # fmt: skip
    ratios = {"decode_vs_unbatched": ours_decode / results["unbatched_decode"]["summaries_per_s"]}
    notes = []
    for key in [k for k in results if k.startswith("opennmt")]:
        onmt = results[key]
        if onmt.get("status") != "ok":
            notes.append(f"{key}: {onmt['status']}")
            continue
        hidden = key.split("_")[1]
        rows.append(
            (f"OpenNMT-py 3.5.1 copy_attn + coverage, hidden_size {hidden}",
             f"{onmt['train']['target_tokens_per_s']:.0f}", f"{onmt['decode']['summaries_per_s']:.2f}",
             f"{onmt['train']['peak_mb']:.0f} / {onmt['decode']['peak_mb']:.0f}")
        )  # fmt: skip
        ratios[f"train_vs_opennmt_{hidden}"] = ours_train / onmt["train"]["target_tokens_per_s"]
        ratios[f"decode_vs_opennmt_{hidden}"] = ours_decode / onmt["decode"]["summaries_per_s"]
    results["ratios"] = ratios

    header = ("system", "train tgt tok/s", "decode summaries/s (beam 4)", "peak MB train / decode")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(4)]
    for row in [header, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    for note in notes:
        print(note)
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}x")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
