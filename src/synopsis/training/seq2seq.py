"""Fine-tuning Hugging Face seq2seq checkpoints (BART, Hie-BART, T5, LED) on synopsis Examples.

Training runs through Accelerate (device placement, gradient accumulation). Every ``eval_every`` optimizer
steps the model summarizes the dev set and is scored with ROUGE; the best model so far is written to
``output_dir/best`` and training stops early after ``patience`` evaluations without improvement.

Run directory::

    output_dir/
      config.yaml                 the training configuration
      best/                       Hugging Face model dir (config, model.safetensors, tokenizer): --model best
      checkpoints/step-N/         the same plus optimizer.safetensors and trainer_state.json (for --resume)
      checkpoints/latest          name of the newest checkpoint
      history.json, curves.png    training loss and dev ROUGE per step

Checkpoints are written to a temporary directory and renamed into place, so a kill at any moment leaves the
previous one intact. ``resume`` continues from ``checkpoints/latest`` with the same data order, optimizer,
scheduler and RNG states.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from synopsis.checkpoint import (
    check_finite,
    flatten_optimizer_state,
    load_tensors,
    rng_state,
    set_rng_state,
    unflatten_optimizer_state,
)
from synopsis.config import to_dict
from synopsis.data.example import Example
from synopsis.errors import CheckpointError, InputError
from synopsis.io import open_for_atomic_write, write_json
from synopsis.models.seq2seq import Seq2SeqInputs, load_seq2seq

logger = logging.getLogger(__name__)

OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
METRICS = ("rouge1", "rouge2", "rougeL")


@dataclass
class Seq2SeqTrainConfig:
    """Settings of ``synopsis train seq2seq`` (YAML keys; CLI options override them)."""

    model: str  # local Hugging Face model directory (weights optional with random_init)
    output_dir: str
    train_path: str
    train_corpus: str = "synopsis"  # any synopsis.data.readers corpus name
    train_split: str | None = None
    dev_path: str | None = None  # default: train_path
    dev_corpus: str | None = None  # default: train_corpus
    dev_split: str | None = None
    max_train_examples: int | None = None
    max_dev_examples: int | None = 200
    all_references: bool = True  # one training pair per reference summary (else the first only)
    random_init: bool = False  # build the model from config.json with random weights
    hie_bart_word_heads: int | None = None
    source_prefix: str | None = None  # None: the checkpoint's own ("summarize: " for T5)
    max_source_length: int | None = None  # None: the model's maximum
    max_target_length: int = 128
    batch_size: int = 8
    grad_accum_steps: int = 1
    learning_rate: float = 5e-5
    weight_decay: float = 0.01
    warmup_steps: int = 0
    max_steps: int = 1000  # optimizer steps
    clip_grad_norm: float = 1.0
    eval_every: int = 200
    patience: int = 3  # evaluations without improvement before stopping; 0 disables early stopping
    eval_batch_size: int = 16
    eval_num_beams: int = 1
    eval_max_length: int = 64
    eval_no_repeat_ngram_size: int = 3  # as in BART's CNN/DM decoding; stops "<s> <s> <s>" loops early on
    keep_checkpoints: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch_size", "grad_accum_steps", "max_steps", "eval_every", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.patience < 0 or self.warmup_steps < 0:
            raise ValueError("patience and warmup_steps must be >= 0")


@dataclass
class TrainResult:
    best_score: float
    best_step: int
    best_metrics: dict[str, float]
    steps: int
    stopped_early: bool
    output_dir: Path
    history: dict[str, list[Any]] = field(default_factory=dict)


def rouge_average(scores: dict[str, float]) -> float:
    """The model-selection score: mean of ROUGE-1/2/L F1 (the papers' "average")."""
    return sum(scores[m] for m in METRICS) / len(METRICS)


def score_summaries(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, float]:
    """Corpus-mean ROUGE-1/2/L F1 x 100 (rouge-score tokenisation, Porter stemming, max over references)."""
    from synopsis.evaluation.rouge import RougeScorer

    scorer = RougeScorer(rouge_types=METRICS, use_stemmer=True)
    totals = dict.fromkeys(METRICS, 0.0)
    for prediction, refs in zip(predictions, references, strict=True):
        scores = scorer.score_multi(list(refs), prediction, aggregate="max")
        for metric in METRICS:
            totals[metric] += scores[metric].fmeasure
    return {m: 100 * totals[m] / max(len(predictions), 1) for m in METRICS}


def load_examples(corpus: str, path: str | Path, split: str | None, limit: int | None) -> list[Example]:
    from synopsis.data.readers import read_corpus

    examples = []
    for example in read_corpus(corpus, path, split=split):
        if example.references and not example.document.is_empty():
            examples.append(example)
            if limit is not None and len(examples) >= limit:
                break
    if not examples:
        raise InputError(f"{path}: no examples with a document and a reference summary (corpus '{corpus}')")
    return examples


def _save_dir_atomically(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
    try:
        write(tmp)
        old = path.with_name(f".{path.name}.old")
        if path.exists():
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
        tmp.rename(path)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


class Seq2SeqTrainer:
    """One fine-tuning run; see the module docstring for the run directory layout.

    Methods built on this path override :attr:`inputs_class` (their own input builder) or
    :meth:`load_model` (e.g. to wrap the loaded model) instead of copying the loop.
    """

    inputs_class: type[Seq2SeqInputs] = Seq2SeqInputs

    def __init__(self, config: Seq2SeqTrainConfig, resume: bool = False, show_progress: bool = True) -> None:
        from accelerate import Accelerator

        self.config = config
        self.show_progress = show_progress
        self.run_dir = Path(config.output_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        latest = self._latest_checkpoint()
        if latest is not None and not resume:
            raise CheckpointError(
                f"{self.run_dir}: already has checkpoints; pass --resume to continue or choose a new --output"
            )
        if resume and latest is None:
            logger.warning("%s: no checkpoint to resume from; starting from the beginning", self.run_dir)

        torch.manual_seed(config.seed)
        self.accelerator = Accelerator(gradient_accumulation_steps=config.grad_accum_steps)
        # a checkpoint is a complete model dir (its tokenizer has Hie-BART's marker too)
        model, self.tokenizer = self.load_model(latest or Path(config.model), random_init=latest is None)
        self.inputs = self.inputs_class(
            model.config,
            self.tokenizer,
            max_source_length=config.max_source_length,
            max_target_length=config.max_target_length,
            prefix=config.source_prefix,
        )
        self._load_data()

        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]  # biases and LayerNorms
        optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": config.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=config.learning_rate,
        )
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.state: dict[str, Any] = {
            "step": 0,
            "epoch": 0,
            "batch_in_epoch": 0,
            "best_score": -math.inf,
            "best_step": 0,
            "best_metrics": {},
            "bad_evals": 0,
            "history": {"train_loss": [], "dev": []},
        }
        if latest is not None:
            self._restore(latest)

    def load_model(self, directory: Path, random_init: bool) -> tuple[Any, Any]:
        """(model, tokenizer) from a model directory or a checkpoint."""
        return load_seq2seq(
            directory,
            hie_bart_word_heads=self.config.hie_bart_word_heads,
            random_init=random_init and self.config.random_init,
        )

    # ------------------------------------------------------------------ data
    def _load_data(self) -> None:
        cfg = self.config
        if cfg.dev_path is None and cfg.dev_split is None:
            logger.warning("no dev set given (dev_path / dev_split): validating on the training examples")
        train = load_examples(cfg.train_corpus, cfg.train_path, cfg.train_split, cfg.max_train_examples)
        dev = load_examples(
            cfg.dev_corpus or cfg.train_corpus,
            cfg.dev_path or cfg.train_path,
            cfg.dev_split,
            cfg.max_dev_examples,
        )
        pairs = [
            (index, reference)
            for index, example in enumerate(train)
            for reference in (example.references if cfg.all_references else example.references[:1])
        ]
        sources = self.inputs.encode_sources([e.document for e in train], [e.instruction for e in train])
        self.train_sources = [sources[index] for index, _ in pairs]
        self.train_targets = self.inputs.encode_targets([reference for _, reference in pairs])
        self.dev_examples = dev
        self.dev_sources = self.inputs.encode_sources([e.document for e in dev], [e.instruction for e in dev])
        self.dev_targets = self.inputs.encode_targets([e.references[0] for e in dev])
        logger.info("%d training pairs from %d documents; %d dev documents", len(pairs), len(train), len(dev))

    def _epoch_order(self, epoch: int) -> list[int]:
        generator = torch.Generator().manual_seed(self.config.seed * 1_000_003 + epoch)
        return torch.randperm(len(self.train_sources), generator=generator).tolist()

    def _batches(self):
        """Micro-batches in a per-epoch order that depends only on (seed, epoch): resumable exactly."""
        size = self.config.batch_size
        while True:
            order = self._epoch_order(self.state["epoch"])
            starts = range(0, len(order), size)
            for index in range(self.state["batch_in_epoch"], len(starts)):
                chosen = order[starts[index] : starts[index] + size]
                self.state["batch_in_epoch"] = index + 1
                yield self.inputs.collate(
                    [self.train_sources[i] for i in chosen], [self.train_targets[i] for i in chosen]
                )
            self.state["epoch"] += 1
            self.state["batch_in_epoch"] = 0

    def _lr_factor(self, step: int) -> float:
        """Linear warm-up, then linear decay to 0 at max_steps."""
        warmup, total = self.config.warmup_steps, self.config.max_steps
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    # ------------------------------------------------------------------ loop
    def train(self, stop_at_step: int | None = None) -> TrainResult:
        """Train to ``max_steps`` (or early stopping); ``stop_at_step`` interrupts as a kill would (tests)."""
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        cfg, state = self.config, self.state
        stopped_early = False
        running, count = 0.0, 0
        batches = self._batches()
        progress = Progress(
            TextColumn("[bold]train[/]"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} steps {task.fields[info]}"),
            TimeRemainingColumn(),
            disable=not self.show_progress,
            transient=True,
        )
        with progress:
            task = progress.add_task("train", total=cfg.max_steps, completed=state["step"], info="")
            self.model.train()
            while state["step"] < cfg.max_steps and state["step"] != stop_at_step:
                for _ in range(cfg.grad_accum_steps):
                    batch = {k: v.to(self.accelerator.device) for k, v in next(batches).items()}
                    with self.accelerator.accumulate(self.model):
                        loss = self.model(**batch).loss
                        check_finite(loss.detach(), state["step"])
                        self.accelerator.backward(loss)
                        if self.accelerator.sync_gradients and cfg.clip_grad_norm > 0:
                            self.accelerator.clip_grad_norm_(self.model.parameters(), cfg.clip_grad_norm)
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                    running, count = running + loss.item(), count + 1
                self.scheduler.step()
                state["step"] += 1
                progress.update(task, advance=1, info=f"loss {running / count:.3f}")
                if state["step"] % cfg.eval_every == 0 or state["step"] == cfg.max_steps:
                    state["history"]["train_loss"].append([state["step"], running / count])
                    running, count = 0.0, 0
                    metrics = self.evaluate()
                    self.model.train()
                    stopped_early = self._after_evaluation(metrics)
                    progress.console.print(
                        f"step {state['step']}: dev "
                        + " ".join(f"{m} {metrics[m]:.2f}" for m in METRICS)
                        + f" (best {state['best_score']:.2f} at step {state['best_step']})"
                    )
                    if stopped_early:
                        progress.console.print(f"early stop: no improvement in {cfg.patience} evaluations")
                        break
        return TrainResult(
            best_score=state["best_score"],
            best_step=state["best_step"],
            best_metrics=state["best_metrics"],
            steps=state["step"],
            stopped_early=stopped_early,
            output_dir=self.run_dir,
            history=state["history"],
        )

    @torch.inference_mode()
    def predict(self, sources: Sequence[Sequence[int]]) -> list[str]:
        model = self.accelerator.unwrap_model(self.model)
        model.eval()
        predictions: list[str] = []
        size = self.config.eval_batch_size
        for start in range(0, len(sources), size):
            batch = self.inputs.collate(sources[start : start + size])
            batch = {k: v.to(self.accelerator.device) for k, v in batch.items()}
            output = model.generate(
                **batch,
                num_beams=self.config.eval_num_beams,
                max_length=self.config.eval_max_length,
                no_repeat_ngram_size=self.config.eval_no_repeat_ngram_size,
            )
            predictions += self.tokenizer.batch_decode(output, skip_special_tokens=True)
        return [p.strip() for p in predictions]

    @torch.inference_mode()
    def dev_loss(self) -> float:
        """Teacher-forced cross-entropy per target token on the dev set (first reference of each example).

        More sensitive than ROUGE for small models whose greedy summaries barely depend on the input yet.
        """
        model = self.accelerator.unwrap_model(self.model)
        model.eval()
        total, tokens = 0.0, 0
        size = self.config.eval_batch_size
        for start in range(0, len(self.dev_sources), size):
            batch = self.inputs.collate(
                self.dev_sources[start : start + size], self.dev_targets[start : start + size]
            )
            batch = {k: v.to(self.accelerator.device) for k, v in batch.items()}
            count = int((batch["labels"] != -100).sum())
            total += model(**batch).loss.item() * count  # the loss is the mean over non-padding labels
            tokens += count
        return total / max(tokens, 1)

    def evaluate(self) -> dict[str, float]:
        """Dev ROUGE (F1 x 100) of greedy/beam summaries, their average, and the dev loss."""
        predictions = self.predict(self.dev_sources)
        metrics = score_summaries(predictions, [e.references for e in self.dev_examples])
        metrics["average"] = rouge_average(metrics)
        metrics["loss"] = self.dev_loss()
        return metrics

    def _after_evaluation(self, metrics: dict[str, float]) -> bool:
        """Record, save best/latest checkpoints; True when early stopping triggers."""
        state, cfg = self.state, self.config
        state["history"]["dev"].append([state["step"], metrics])
        improved = metrics["average"] > state["best_score"]
        if improved:
            state.update(
                best_score=metrics["average"], best_step=state["step"], best_metrics=metrics, bad_evals=0
            )
            _save_dir_atomically(self.run_dir / "best", self._write_model)
        else:
            state["bad_evals"] += 1
        self._save_checkpoint()
        self._write_history()
        return cfg.patience > 0 and state["bad_evals"] >= cfg.patience

    # ------------------------------------------------------------------ checkpoints
    def _write_model(self, directory: Path) -> None:
        self.accelerator.unwrap_model(self.model).save_pretrained(directory, safe_serialization=True)
        self.tokenizer.save_pretrained(directory)

    def _save_checkpoint(self) -> None:
        from safetensors.torch import save_file

        def write(directory: Path) -> None:
            self._write_model(directory)
            tensors, rest = flatten_optimizer_state(self.optimizer.state_dict())
            save_file({k: v.contiguous() for k, v in tensors.items()}, str(directory / OPTIMIZER_FILE))
            write_json(
                directory / STATE_FILE,
                {
                    **self.state,
                    "optimizer": rest,
                    "scheduler": self.scheduler.state_dict(),
                    "rng": rng_state(),
                    "train_config": to_dict(self.config),
                },
            )

        name = f"step-{self.state['step']:08d}"
        _save_dir_atomically(self.ckpt_dir / name, write)
        with open_for_atomic_write(self.ckpt_dir / "latest") as handle:
            handle.write(name + "\n")
        for old in sorted(self.ckpt_dir.glob("step-*"))[: -self.config.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)

    def _latest_checkpoint(self) -> Path | None:
        pointer = self.ckpt_dir / "latest"
        if not pointer.is_file():
            return None
        path = self.ckpt_dir / pointer.read_text(encoding="utf-8").strip()
        if not (path / STATE_FILE).is_file():
            raise CheckpointError(f"{pointer}: points to {path.name}, which is missing or incomplete")
        return path

    def _restore(self, path: Path) -> None:
        try:
            saved = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise CheckpointError(f"{path / STATE_FILE}: corrupt JSON ({err})") from None
        optimizer_state = unflatten_optimizer_state(
            load_tensors(path / OPTIMIZER_FILE), saved.pop("optimizer")
        )
        self.optimizer.load_state_dict(optimizer_state)
        self.scheduler.load_state_dict(saved.pop("scheduler"))
        set_rng_state(saved.pop("rng"))
        saved.pop("train_config", None)
        self.state.update(saved)
        logger.info("resumed from %s at step %d", path, self.state["step"])

    def _write_history(self) -> None:
        from synopsis.training.plots import plot_curves

        write_json(self.run_dir / "history.json", self.state["history"])
        history = self.state["history"]
        curves = {
            "train loss": [tuple(p) for p in history["train_loss"]],
            "dev loss": [(step, d["loss"]) for step, d in history["dev"]],
        }
        curves.update({f"dev {m}": [(s, d[m] / 100) for s, d in history["dev"]] for m in METRICS})
        plot_curves(curves, self.run_dir / "curves.png", title="seq2seq training", ylabel="loss / ROUGE F1")


def save_config(config: Seq2SeqTrainConfig, path: Path) -> None:
    with open_for_atomic_write(path) as handle:
        yaml.safe_dump(to_dict(config), handle, sort_keys=False)


def train_seq2seq(
    config: Seq2SeqTrainConfig, resume: bool = False, show_progress: bool = True
) -> TrainResult:
    """Fine-tune per ``config``; see :class:`Seq2SeqTrainer`."""
    trainer = Seq2SeqTrainer(config, resume=resume, show_progress=show_progress)
    save_config(config, trainer.run_dir / "config.yaml")
    return trainer.train()


# ---------------------------------------------------------------------------------------------------------
# Hie-BART head-ratio sweep (the paper's Table 2, at CPU scale)

PAPER_TABLE_2 = {  # word:sentence heads of 16 -> dev ROUGE-1/2/L (CNN/DailyMail, BART-large), seed 001
    "16:0": (44.72, 21.73, 41.43),
    "15:1": (44.95, 21.92, 41.68),
    "14:2": (45.01, 21.92, 41.75),
    "13:3": (44.91, 21.87, 41.64),
    "12:4": (44.74, 21.66, 41.49),
    "11:5": (44.88, 21.81, 41.62),
    "10:6": (44.78, 21.75, 41.51),
    "9:7": (44.70, 21.71, 41.46),
    "8:8": (44.79, 21.77, 41.58),
}


@dataclass
class HeadSweepConfig:
    """Small BARTs trained from scratch on SciTLDR (abstract -> TLDR), one per word:sentence head split."""

    ratios: list[str] = field(default_factory=lambda: ["8:0", "6:2", "4:4"])
    tokenizer: str = "corpus-bpe"  # "corpus-bpe": byte-level BPE trained on the train split; "gpt2": 50k
    vocab_size: int = 8000  # corpus-bpe only
    d_model: int = 64
    ffn_dim: int = 256
    layers: int = 2  # encoder and decoder layers each
    dropout: float = 0.1
    train_examples: int | None = None  # None: all 1,992 SciTLDR train papers
    dev_examples: int = 100
    max_source_length: int = 256
    max_target_length: int = 48
    batch_size: int = 16
    learning_rate: float = 3e-3
    warmup_steps: int = 50
    max_steps: int = 200
    eval_every: int = 100
    eval_max_length: int = 48
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.ratios:
            raise ValueError("ratios: give at least one word:sentence split")
        totals = set()
        for ratio in self.ratios:
            word, sep, sentence = ratio.partition(":")
            if not (sep and word.isdigit() and sentence.isdigit()) or int(word) < 1:
                raise ValueError(
                    f"ratio {ratio!r}: expected word:sentence head counts with word >= 1, e.g. 6:2"
                )
            totals.add(int(word) + int(sentence))
        if len(totals) != 1:
            raise ValueError(f"ratios {self.ratios}: every split must have the same number of heads")
        if self.d_model % totals.pop():
            raise ValueError(f"d_model {self.d_model} is not divisible by the number of heads")
        if self.tokenizer not in ("corpus-bpe", "gpt2"):
            raise ValueError(f"tokenizer must be corpus-bpe or gpt2, got {self.tokenizer!r}")

    @property
    def heads(self) -> int:
        word, _, sentence = self.ratios[0].partition(":")
        return int(word) + int(sentence)


def _sweep_tokenizer(cfg: HeadSweepConfig, data_dir: Path, out_dir: Path) -> Any:
    from synopsis.models.seq2seq import bart_tokenizer_from_files

    if cfg.tokenizer == "gpt2":
        gpt2 = data_dir / "tokenizers" / "gpt2"
        return bart_tokenizer_from_files(gpt2 / "vocab.json", gpt2 / "merges.txt")
    from tokenizers import ByteLevelBPETokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    if not (out_dir / "vocab.json").is_file():
        texts = []
        for example in load_examples("scitldr", data_dir / "scitldr", "train", cfg.train_examples):
            texts += [s.text for s in example.document.sentences] + example.references
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(
            texts,
            vocab_size=cfg.vocab_size,
            min_frequency=2,
            show_progress=False,
            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],  # BART's ids 0..4
        )
        bpe.save_model(str(out_dir))
    return bart_tokenizer_from_files(out_dir / "vocab.json", out_dir / "merges.txt")


def _sweep_base_model(cfg: HeadSweepConfig, tokenizer: Any, directory: Path) -> Path:
    """A BART config + tokenizer directory (no weights: every run starts from random_init)."""
    from transformers import BartConfig

    config = BartConfig(
        vocab_size=len(tokenizer),
        d_model=cfg.d_model,
        encoder_layers=cfg.layers,
        decoder_layers=cfg.layers,
        encoder_attention_heads=cfg.heads,
        decoder_attention_heads=cfg.heads,
        encoder_ffn_dim=cfg.ffn_dim,
        decoder_ffn_dim=cfg.ffn_dim,
        max_position_embeddings=max(cfg.max_source_length, cfg.max_target_length) + 2,
        dropout=cfg.dropout,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
        forced_eos_token_id=tokenizer.eos_token_id,
    )
    directory.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def run_head_sweep(cfg: HeadSweepConfig, output: str | Path, data_dir: str | Path) -> str:
    """Train one model per ratio; write ``table.md``, ``results.json`` and ``heads.png``; return the table.

    Runs that already exist in ``output`` are resumed (a finished run is only re-read).
    """
    import time

    output, data_dir = Path(output), Path(data_dir)
    if not (data_dir / "scitldr").is_dir():
        raise InputError(f"{data_dir / 'scitldr'}: SciTLDR not found (pass --data ../shared/data)")
    tokenizer = _sweep_tokenizer(cfg, data_dir, output / "tokenizer")
    base = _sweep_base_model(cfg, tokenizer, output / "base_model")
    rows = []
    for ratio in cfg.ratios:
        word, _, sentence = ratio.partition(":")
        run_config = Seq2SeqTrainConfig(
            model=str(base),
            output_dir=str(output / f"w{word}_s{sentence}"),
            train_path=str(data_dir / "scitldr"),
            train_corpus="scitldr",
            train_split="train",
            dev_split="dev",
            max_train_examples=cfg.train_examples,
            max_dev_examples=cfg.dev_examples,
            random_init=True,
            hie_bart_word_heads=int(word),
            max_source_length=cfg.max_source_length,
            max_target_length=cfg.max_target_length,
            batch_size=cfg.batch_size,
            learning_rate=cfg.learning_rate,
            warmup_steps=cfg.warmup_steps,
            max_steps=cfg.max_steps,
            eval_every=cfg.eval_every,
            patience=0,
            eval_max_length=cfg.eval_max_length,
            keep_checkpoints=1,
            seed=cfg.seed,
        )
        logger.warning("hie-bart-heads: training %s (word:sentence heads)", ratio)
        start = time.perf_counter()
        resume = (Path(run_config.output_dir) / "checkpoints" / "latest").is_file()
        result = train_seq2seq(run_config, resume=resume)
        rows.append(
            {
                "ratio": ratio,
                "word_heads": int(word),
                "sentence_heads": int(sentence),
                **{m: result.best_metrics[m] for m in METRICS},
                "average": result.best_score,
                "dev_loss": min(d["loss"] for _, d in result.history["dev"]),
                "final_dev_loss": result.history["dev"][-1][1]["loss"],
                "best_step": result.best_step,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    table = _sweep_table(cfg, rows)
    write_json(
        output / "results.json", {"config": to_dict(cfg), "rows": rows, "paper_table_2": PAPER_TABLE_2}
    )
    with open_for_atomic_write(output / "table.md") as handle:
        handle.write(table)
    _plot_sweep(rows, output / "heads.png")
    return table


def _sweep_table(cfg: HeadSweepConfig, rows: list[dict[str, Any]]) -> str:
    lines = [
        f"# Hie-BART word:sentence heads, small models ({cfg.heads} heads, d_model {cfg.d_model}, "
        f"{cfg.layers}+{cfg.layers} layers, {cfg.max_steps} steps from random init)",
        "",
        "Dev ROUGE F1 x 100 on the first "
        f"{cfg.dev_examples} SciTLDR-A dev papers (abstract -> TLDR; max over references; rouge-score "
        "tokenisation with Porter stemming; rougeL = sentence-level LCS); best evaluation of each run; "
        f"greedy decoding, no repeated trigrams, at most {cfg.eval_max_length} tokens. Dev loss: "
        "teacher-forced cross-entropy per target token (first reference), lowest over the evaluations.",
        "",
        "| word:sentence | ROUGE-1 | ROUGE-2 | ROUGE-L | average | best step | dev loss | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['ratio']} | {row['rouge1']:.2f} | {row['rouge2']:.2f} | {row['rougeL']:.2f} | "
            f"{row['average']:.2f} | {row['best_step']} | {row['dev_loss']:.4f} | {row['seconds']:.0f} |"
        )
    lines += [
        "",
        "These small models trained for minutes on 2k abstracts do NOT reproduce the paper's numbers; they "
        "show that the sweep runs end to end. At this budget the greedy summaries hardly depend on the "
        "input (equal ROUGE across ratios means equal generic summaries), so the dev loss is the more "
        "telling column; differences of this size are within run-to-run noise unless repeated over seeds. "
        "The paper's Table 2 (BART-large fine-tuned on CNN/DailyMail, 16 heads, dev set) for reference:",
        "",
        "| word:sentence | ROUGE-1 | ROUGE-2 | ROUGE-L | average |",
        "|---|---|---|---|---|",
    ]
    for ratio, (r1, r2, rl) in PAPER_TABLE_2.items():
        lines.append(f"| {ratio} | {r1:.2f} | {r2:.2f} | {rl:.2f} | {(r1 + r2 + rl) / 3:.2f} |")
    return "\n".join(lines) + "\n"


def _plot_sweep(rows: list[dict[str, Any]], path: Path) -> None:
    """Two panels per ratio: dev ROUGE bars, and the dev loss."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [row["ratio"] for row in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=110)
    width = 0.2
    for offset, metric in enumerate((*METRICS, "average")):
        xs = [i + (offset - 1.5) * width for i in range(len(rows))]
        left.bar(xs, [row[metric] for row in rows], width, label=metric)
    left.set_xticks(range(len(rows)), labels)
    left.set_xlabel("word:sentence heads")
    left.set_ylabel("dev ROUGE F1 x 100")
    left.legend(fontsize=8)
    left.grid(axis="y", alpha=0.3)
    right.plot(labels, [row["dev_loss"] for row in rows], marker="o")
    right.set_xlabel("word:sentence heads")
    right.set_ylabel("dev loss (cross-entropy per token)")
    right.grid(alpha=0.3)
    fig.suptitle("Hie-BART head split, small models (not the paper's scale)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
