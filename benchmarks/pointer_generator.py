"""Pointer-generator speed on CPU, side by side with OpenNMT-py 3.5.1's copy-attention + coverage model at the
same sizes.

Both models: embedding 128, bidirectional encoder 2 x H, decoder H, attention 2H wide, the same word
vocabulary (every word of the benchmark's documents), Adagrad 0.15 / 0.1, gradient clipping 2, coverage loss
1.0, no dropout; ``--hidden`` sets H (256 is See et al.'s size). OpenNMT-py cannot express that shape by its
options (its encoder and decoder must be equally wide, its attention as wide as the decoder), so
``opennmt_pg/patch.py`` widens its attention to the encoder's 2H and reduces the encoder's final states to H
(linear + ReLU, as See et al.'s code does), from outside; nothing else of it changes.

Measured, on the first ``--documents`` SciTLDR training pairs (lowercased words, source <= 400 / target <= 99
tokens + EOS), in batches of 16 formed by sorting the documents by length (the same batches on both sides up
to OpenNMT's own length bucketing):

* training: ``--train-steps`` optimizer steps (after one untimed warm-up step), cycling over the batches
  (default: 100 steps = 10 epochs of 160 documents, so both sides see every document equally often); the
  batches are built before the clock starts on both sides (OpenNMT's by its own data pipeline);
* decoding: ``--decode-docs`` documents in batches of 16, beam 4, every system forced to exactly
  ``--length`` tokens (same work); each side's id encoding / data pipeline is timed, model loading is not.

Every measurement runs in a fresh process with one thread; the systems alternate within each of ``--rounds``
rounds (the first system alternates too), and the table gives the median over rounds with the min-max of the
per-round ratios, by the wall clock and by the CPU time of the measuring thread (the process's CPU time is
recorded too). The load average of the machine is recorded at every measurement. OpenNMT-py lives in its
own virtual environment, created on first use under ``--cache-dir`` (``pip install --no-deps
OpenNMT-py==3.5.1`` plus the packages it needs, torch pinned to 2.13.0 CPU). Two bugs of 3.5.1 are worked
around from outside (its code is not changed): its copy-attention checkpoints do not load for translation
(the generator's keys are looked up wrongly), and onmt_translate does not build the copy inputs (src_map).

    python benchmarks/pointer_generator.py --hidden 256   # -> benchmarks/results/pointer_generator_256.json
    python benchmarks/pointer_generator.py --hidden 512

Each finished round is appended to ``<output>.rounds.jsonl`` and its ratios are printed at once; a run that
was stopped continues from its finished rounds with ``--resume`` (same settings; each round is a paired
measurement, so rounds measured on different days stay comparable, and the load of each is recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside the repository, or $SYNOPSIS_SHARED_DATA (as in the tests).
SHARED = Path(os.environ.get("SYNOPSIS_SHARED_DATA", ROOT.parent / "shared" / "data"))
DRIVERS = Path(__file__).resolve().parent / "opennmt_pg"
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
EMBEDDING, MAX_SOURCE, MAX_TARGET, BATCH, BEAM = 128, 400, 100, 16, 4
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


# ---------------------------------------------------------------------- shared data
def load_pairs(limit: int) -> list[tuple[list[str], list[str]]]:
    """The first ``limit`` SciTLDR training pairs, word-tokenised as the model's trainer does, sorted by
    length (the batches are consecutive runs of 16, as OpenNMT's length bucketing forms them)."""
    from synopsis.data.readers import read_corpus
    from synopsis.models.pointer_generator import document_words, summary_words

    pairs = []
    for example in read_corpus("scitldr", SHARED / "scitldr", split="train"):
        source = document_words(example.document)[:MAX_SOURCE]
        target = summary_words(example.references[0])[: MAX_TARGET - 1]  # + EOS = at most 100
        if source and target:
            pairs.append((source, target))
        if len(pairs) == limit:
            break
    return sorted(pairs, key=lambda p: (len(p[0]), len(p[1])))


def peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------------- synopsis workers
def build_model(pairs, hidden: int):
    import torch

    from synopsis.models.pointer_generator import PointerGenerator, config_for_vocab
    from synopsis.vocab import Vocab

    vocab = Vocab.build((s + t for s, t in pairs), max_size=1_000_000)
    torch.manual_seed(0)
    config = config_for_vocab(vocab, embedding_dim=EMBEDDING, hidden_dim=hidden, pointer=True, coverage=True)
    return PointerGenerator(config), vocab


def worker_train(args: argparse.Namespace) -> dict:
    import torch

    from synopsis.models.pointer_generator import encode_batch

    pairs = load_pairs(args.documents)
    model, vocab = build_model(pairs, args.hidden)
    model.train()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.15, initial_accumulator_value=0.1)
    batches = [
        encode_batch(vocab, [s for s, _ in chunk], [t for _, t in chunk], MAX_SOURCE, MAX_TARGET)
        for chunk in (pairs[i : i + BATCH] for i in range(0, len(pairs), BATCH))
    ]

    def step(batch) -> int:
        out = model(
            batch.input_ids, batch.decoder_input_ids, batch.labels, batch.extended_ids, batch.num_oovs
        )
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        optimizer.step()
        return out.num_tokens

    step(batches[0])  # warm-up, as on OpenNMT's side
    start, cpu_start, process_start = time.perf_counter(), time.thread_time(), time.process_time()
    tokens = sum(step(batches[i % len(batches)]) for i in range(args.train_steps))
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_seconds": time.thread_time() - cpu_start,
        "process_cpu_seconds": time.process_time() - process_start,
        "steps": args.train_steps,
        "target_tokens": tokens,
        "batches_per_epoch": len(batches),
        "vocab": len(vocab),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def worker_decode(args: argparse.Namespace) -> dict:
    from synopsis.generation.config import GenerationConfig
    from synopsis.summarizers.pointer_generator import PointerGeneratorSummarizer

    pairs = load_pairs(args.documents)
    model, vocab = build_model(pairs, args.hidden)
    articles = [s for s, _ in pairs[: args.decode_docs]]
    generation = GenerationConfig(
        num_beams=BEAM, min_length=args.length, max_length=args.length, max_source_tokens=MAX_SOURCE
    )
    summarizer = PointerGeneratorSummarizer(model, vocab, generation)
    start, cpu_start, process_start = time.perf_counter(), time.thread_time(), time.process_time()
    outputs = []
    for i in range(0, len(articles), BATCH):
        outputs += summarizer.generate(articles[i : i + BATCH])
    seconds = time.perf_counter() - start
    assert all(len(o) == args.length for o in outputs), [len(o) for o in outputs]
    return {
        "seconds": seconds,
        "cpu_seconds": time.thread_time() - cpu_start,
        "process_cpu_seconds": time.process_time() - process_start,
        "documents": len(articles),
    }


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


def opennmt_env_vars(hidden: int) -> dict[str, str]:
    return {
        **os.environ,
        **ONE_THREAD,
        "PYTHONPATH": str(DRIVERS),
        "SYNOPSIS_BENCH_MEMORY_DIM": str(2 * hidden),
        # OpenNMT-py 3.5.1 predates torch.load(weights_only=True) as the default (torch >= 2.6); its own
        # checkpoint holds argparse/vocab objects, so let it load them as it was written to.
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",
    }


def prepare_opennmt(args: argparse.Namespace, work: Path) -> Path:
    """Data files, the shared vocabulary (every word, as ours) and the training config."""
    import yaml

    work.mkdir(parents=True, exist_ok=True)
    pairs = load_pairs(args.documents)
    (work / "train.src").write_text("\n".join(" ".join(s) for s, _ in pairs) + "\n")
    (work / "train.tgt").write_text("\n".join(" ".join(t) for _, t in pairs) + "\n")
    (work / "decode.src").write_text("\n".join(" ".join(s) for s, _ in pairs[: args.decode_docs]) + "\n")
    counts = Counter(w for s, t in pairs for w in s + t)
    (work / "vocab.txt").write_text("".join(f"{w}\t{c}\n" for w, c in counts.most_common()))
    config = {
        "save_data": str(work / "run"),
        "src_vocab": str(work / "vocab.txt"),
        "share_vocab": True,
        "overwrite": True,
        "src_vocab_size": 1_000_000,
        "tgt_vocab_size": 1_000_000,
        "src_seq_length": 10_000,
        "tgt_seq_length": 10_000,
        "data": {"train": {"path_src": str(work / "train.src"), "path_tgt": str(work / "train.tgt")}},
        "save_model": str(work / "model"),
        "encoder_type": "brnn",
        "decoder_type": "rnn",
        "rnn_type": "LSTM",
        "layers": 1,
        "word_vec_size": EMBEDDING,
        "enc_hid_size": 2 * args.hidden,  # brnn: H per direction
        "dec_hid_size": args.hidden,
        "global_attention": "mlp",
        "copy_attn": True,
        "reuse_copy_attn": True,
        "coverage_attn": True,
        "lambda_coverage": 1.0,
        "bridge": False,  # replaced by the reduction in opennmt_pg/patch.py
        "share_embeddings": True,
        "dropout": 0.0,
        "optim": "adagrad",
        "learning_rate": 0.15,
        "adagrad_accumulator_init": 0.1,
        "max_grad_norm": 2.0,
        "batch_size": BATCH,
        "batch_type": "sents",
        "bucket_size": 4 * args.documents,  # all documents in one bucket: sorted by length, as ours
        "num_workers": 0,
        "report_every": 1_000_000,
        "seed": 0,
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    return work / "config.yaml"


def run_json(cmd: list[str], env: dict[str, str], log: Path) -> dict:
    with open(log, "w") as handle:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=handle, text=True, check=False)
    if proc.returncode != 0:
        tail = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"{Path(cmd[1]).name} failed: {tail[0]} (log: {log})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def opennmt_train(args: argparse.Namespace, venv: Path, config: Path) -> dict:
    work = config.parent
    python = str(venv / "bin" / "python")
    env = opennmt_env_vars(args.hidden)
    result = run_json(
        [python, str(DRIVERS / "train_driver.py"), str(args.train_steps), str(args.documents),
         "-config", str(config)],
        env, work / "train.log",
    )  # fmt: skip
    # OpenNMT-py 3.5.1 cannot load its own copy-attention checkpoints for translation: Model.load_state_dict
    # looks up the CopyGenerator's parameters as "weight" in checkpoint["generator"], whose keys are
    # "linear.weight", ... Move them under checkpoint["model"] as "generator.linear.weight", ...
    checkpoint = work / f"model_step_{args.train_steps + 1}.pt"
    fix = (
        "import sys, torch; ck = torch.load(sys.argv[1], weights_only=False); "
        "ck['model'].update({'generator.' + k: v for k, v in ck.pop('generator').items()}); "
        "ck['generator'] = None; torch.save(ck, sys.argv[1])"
    )
    subprocess.run([python, "-c", fix, str(checkpoint)], env=env, check=True, capture_output=True)
    result["checkpoint"] = str(checkpoint)
    return result


def opennmt_decode(args: argparse.Namespace, venv: Path, checkpoint: str, work: Path) -> dict:
    result = run_json(
        [
            str(venv / "bin" / "python"), str(DRIVERS / "translate_driver.py"), "-model", checkpoint,
            "-src", str(work / "decode.src"), "-output", str(work / "pred.txt"), "-beam_size", str(BEAM),
            "-batch_size", str(BATCH), "-min_length", str(args.length), "-max_length", str(args.length),
        ],
        opennmt_env_vars(args.hidden), work / "translate.log",
    )  # fmt: skip
    lengths = {len(line.split()) for line in (work / "pred.txt").read_text().splitlines()}
    return {**result, "documents": args.decode_docs, "summary_lengths": sorted(lengths)}


# ---------------------------------------------------------------------- driver
def run_worker(name: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--worker", name, "--hidden", str(args.hidden),
           "--documents", str(args.documents), "--train-steps", str(args.train_steps),
           "--decode-docs", str(args.decode_docs), "--length", str(args.length)]  # fmt: skip
    proc = subprocess.run(cmd, env={**os.environ, **ONE_THREAD}, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {name} failed: {proc.stderr.strip().splitlines()[-3:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measured(fn, *fn_args) -> dict:
    load = os.getloadavg()[0]
    result = fn(*fn_args)
    return {**result, "load_average_1min": [load, os.getloadavg()[0]]}


def summarize(samples: list[dict], ours: str, theirs: str, work: str) -> dict:
    """Median rates (``work`` per second) over rounds, ratio of medians, and the min-max of the per-round
    ratios; by the wall clock and by the CPU time of the measuring thread (``cpu_`` keys), which load from
    other processes disturbs much less."""
    result: dict = {}
    for prefix, clock in (("", "seconds"), ("cpu_", "cpu_seconds")):
        ours_rates = [s[ours][work] / s[ours][clock] for s in samples]
        theirs_rates = [s[theirs][work] / s[theirs][clock] for s in samples]
        per_round = [o / t for o, t in zip(ours_rates, theirs_rates, strict=True)]
        result.update(
            {
                f"{prefix}synopsis": statistics.median(ours_rates),
                f"{prefix}opennmt": statistics.median(theirs_rates),
                f"{prefix}ratio": statistics.median(ours_rates) / statistics.median(theirs_rates),
                f"{prefix}ratio_min": min(per_round),
                f"{prefix}ratio_max": max(per_round),
                f"{prefix}round_ratios": per_round,
                f"{prefix}synopsis_rounds": ours_rates,
                f"{prefix}opennmt_rounds": theirs_rates,
            }
        )
    return result


WORK = {"train": "target_tokens", "decode": "documents"}  # what each measurement counts per second


def round_settings(args: argparse.Namespace) -> dict:
    """What must be equal for rounds to be pooled."""
    return {k: getattr(args, k) for k in ("hidden", "documents", "train_steps", "decode_docs", "length")}


def finished_rounds(partial: Path, settings: dict) -> tuple[list[dict], float]:
    """The rounds a stopped run finished (``--resume``) and the minutes they took."""
    if not partial.is_file():
        return [], 0.0
    samples, minutes = [], 0.0
    for number, line in enumerate(partial.read_text().splitlines(), 1):
        record = json.loads(line)
        if record.pop("settings") != settings:
            sys.exit(
                f"{partial}:{number}: measured with other settings than {settings}; run without --resume"
            )
        minutes += record.pop("minutes")
        samples.append(record)
    return samples, minutes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--hidden", type=int, default=256, help="H: encoder 2 x H, decoder H, attention 2H.")
    parser.add_argument("--documents", type=int, default=160, help="SciTLDR training pairs (batches of 16).")
    parser.add_argument("--train-steps", type=int, default=100)
    parser.add_argument("--decode-docs", type=int, default=16)
    parser.add_argument("--length", type=int, default=40, help="Generated tokens per summary (forced).")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "synopsis" / "bench")
    parser.add_argument("--output", type=Path, help="default: benchmarks/results/pointer_generator_<H>.json")
    parser.add_argument("--resume", action="store_true", help="Continue from <output>.rounds.jsonl.")
    parser.add_argument("--worker", choices=["train", "decode"], help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        import torch

        torch.set_num_threads(1)
        result = worker_train(args) if args.worker == "train" else worker_decode(args)
        print(json.dumps({**result, "peak_mb": peak_mb()}))
        return

    if not (SHARED / "scitldr").is_dir():
        sys.exit(f"shared data not found at {SHARED} (set SYNOPSIS_SHARED_DATA)")
    output = args.output or ROOT / "benchmarks" / "results" / f"pointer_generator_{args.hidden}.json"
    venv, status = opennmt_env(args.cache_dir)
    if venv is None:
        sys.exit(f"OpenNMT-py: {status}")
    config = prepare_opennmt(args, args.cache_dir / f"opennmt-work-{args.hidden}")
    partial = output.with_suffix(".rounds.jsonl")
    partial.parent.mkdir(parents=True, exist_ok=True)
    samples, minutes = finished_rounds(partial, round_settings(args)) if args.resume else ([], 0.0)
    if not args.resume:
        partial.unlink(missing_ok=True)
    if samples:
        print(f"resuming after {len(samples)} finished round(s) from {partial}", flush=True)
    started = time.time()
    for round_ in range(len(samples), args.rounds):
        round_started = time.time()
        sample: dict = {}
        order = ["synopsis", "opennmt"] if round_ % 2 == 0 else ["opennmt", "synopsis"]
        for system in order:  # training
            print(f"round {round_ + 1}/{args.rounds}: {system} training ...", flush=True)
            if system == "synopsis":
                sample["synopsis_train"] = measured(run_worker, "train", args)
            else:
                sample["opennmt_train"] = measured(opennmt_train, args, venv, config)
        for system in order:  # decoding (OpenNMT's model: the one it just trained)
            print(f"round {round_ + 1}/{args.rounds}: {system} decoding ...", flush=True)
            if system == "synopsis":
                sample["synopsis_decode"] = measured(run_worker, "decode", args)
            else:
                checkpoint = sample["opennmt_train"]["checkpoint"]
                sample["opennmt_decode"] = measured(opennmt_decode, args, venv, checkpoint, config.parent)
        samples.append(sample)
        record = {"settings": round_settings(args), "minutes": (time.time() - round_started) / 60, **sample}
        with partial.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        now = [summarize([sample], f"synopsis_{k}", f"opennmt_{k}", w)["ratio"] for k, w in WORK.items()]
        print(f"round {round_ + 1}/{args.rounds}: training {now[0]:.2f}x, decoding {now[1]:.2f}x "
              f"(saved to {partial})", flush=True)  # fmt: skip

    train, decode = (summarize(samples, f"synopsis_{k}", f"opennmt_{k}", w) for k, w in WORK.items())
    loads = [x for s in samples for r in s.values() for x in r["load_average_1min"]]
    first = samples[0]
    command_args = [a for a in sys.argv[1:] if a != "--resume"]
    results = {
        "command": " ".join(["python", "benchmarks/pointer_generator.py", *command_args]),
        "settings": {
            "hidden": args.hidden, "embedding": EMBEDDING, "encoder": f"2 x {args.hidden}",
            "decoder": args.hidden, "attention": 2 * args.hidden, "batch": BATCH, "beam": BEAM,
            "max_source": MAX_SOURCE, "max_target": MAX_TARGET, "documents": args.documents,
            "train_steps": args.train_steps, "decode_docs": args.decode_docs, "length": args.length,
            "rounds": args.rounds, "threads": 1,
            "vocab": {
                "synopsis": first["synopsis_train"]["vocab"], "opennmt": first["opennmt_train"]["vocab"]
            },
            "parameters": {
                "synopsis": first["synopsis_train"]["parameters"],
                "opennmt": first["opennmt_train"]["parameters"],
            },
        },
        "machine": {
            "platform": platform.platform(), "python": platform.python_version(),
            "load_average_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
        },
        "minutes": minutes + (time.time() - started) / 60,
        "train_target_tokens_per_s": train,
        "decode_summaries_per_s": decode,
        "rounds": samples,
    }  # fmt: skip
    rows = [
        ("training, target tokens/s", train),
        (f"decoding, summaries/s (beam {BEAM}, {args.length} tokens)", decode),
    ]
    print(f"H = {args.hidden} (embedding {EMBEDDING}, encoder 2 x {args.hidden}, decoder {args.hidden}); "
          f"median of {args.rounds} alternating rounds; 1 thread")  # fmt: skip
    print(f"{'':45s} {'synopsis':>9s} {'OpenNMT-py':>11s}  synopsis / OpenNMT-py [round min-max]"
          "  by CPU time of the thread")  # fmt: skip
    for name, r in rows:
        wall = f"{r['ratio']:.2f}x [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]"
        cpu = f"{r['cpu_ratio']:.2f}x [{r['cpu_ratio_min']:.2f}-{r['cpu_ratio_max']:.2f}]"
        print(f"{name:45s} {r['synopsis']:9.2f} {r['opennmt']:11.2f}  {wall:37s}{cpu}")
    load = results["machine"]["load_average_1min"]
    spread = f"{load['min']:.2f}-{load['max']:.2f} (median {load['median']:.2f})"
    print(f"load average (1 min) during the runs: {spread}")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2) + "\n")
    partial.unlink(missing_ok=True)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
