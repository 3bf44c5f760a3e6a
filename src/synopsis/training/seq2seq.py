"""Fine-tuning Hugging Face seq2seq checkpoints (BART, Hie-BART, T5, LED) on synopsis Examples.

Training runs through Accelerate (device placement, DDP), also under ``torchrun`` / ``accelerate launch``.
One optimizer step takes a global batch of ``batch_size x grad_accum_steps`` examples, whatever the number
of processes: each process takes its share and runs it in micro-batches of at most ``batch_size`` (so the
accumulation steps shrink as processes are added), and the loss is the token mean over the whole global
batch (:mod:`synopsis.training.distributed`). Every ``eval_every`` optimizer steps the main process
summarizes the dev set and scores it with ROUGE; the best model so far is written to ``output_dir/best``
and training stops early (on every process) after ``patience`` evaluations without improvement.

Run directory::

    output_dir/
      config.yaml                 the training configuration
      best/                       Hugging Face model dir (config, model.safetensors, tokenizer): --model best
      checkpoints/step-N/         the same plus optimizer.safetensors and state.json (for --resume)
      checkpoints/latest          name of the newest checkpoint
      history.json, curves.png    training loss and dev ROUGE per step

The model is whatever its ``config.json`` says (BART, Hie-BART, T5, LED, ...); ``convert`` turns the
starting checkpoint into another method's model before training (as ``synopsis convert`` would).

Checkpoints are written to a temporary directory and renamed into place, so a kill at any moment leaves the
previous one intact. ``resume`` continues from ``checkpoints/latest`` with the same data order, optimizer,
scheduler and RNG states.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import yaml

from synopsis.checkpoint import (
    CheckpointManager,
    read_training_state,
    write_training_state,
)
from synopsis.config import (
    AT_LEAST_ONE,
    DROPOUT,
    HARDWARE,
    NON_NEGATIVE,
    POSITIVE,
    DecodingOptions,
    ForHardware,
    Range,
    to_dict,
    use_threads,
)
from synopsis.data.example import Example
from synopsis.errors import CheckpointError, InputError
from synopsis.io import open_for_atomic_write, write_directory_atomically, write_json
from synopsis.models.inputs import Seq2SeqInputs, SourceEncoding
from synopsis.models.lengths import generate_kwargs
from synopsis.models.seq2seq import (
    CONVERTERS,
    convert_seq2seq,
    enable_gradient_checkpointing,
    load_seq2seq,
)
from synopsis.progress import ProgressReporter
from synopsis.training.distributed import Distributed, LoadedStep, check_precision, resolve_precision
from synopsis.training.memory import MemoryPlan, meta_model, seq2seq_plan
from synopsis.training.objectives import (
    LABEL_SMOOTHING_FORMS,
    METRICS,
    label_smoothed_nll,
    rouge_average,
    score_summaries,
)

logger = logging.getLogger(__name__)


@dataclass
class Seq2SeqTrainConfig(ForHardware):
    """Settings of ``synopsis train seq2seq`` (YAML keys; CLI options override them)."""

    model: str  # a Hugging Face model: a local directory or a hub id org/name (weights optional: random_init)
    output_dir: str
    train_path: str
    revision: str | None = None  # with a hub id: its branch, tag or commit (default: main)
    train_corpus: str = "synopsis"  # any synopsis.data.readers corpus name
    train_split: str | None = None
    dev_path: str | None = None  # default: train_path
    dev_corpus: str | None = None  # default: train_corpus
    dev_split: str | None = None
    max_train_examples: int | None = None
    max_dev_examples: int | None = 200
    all_references: bool = True  # one training pair per reference summary (else the first only)
    # the corpus reader's own options (train and dev alike), e.g. {text_column: article,
    # summary_column: highlights, id_column: id} for train_corpus: hf (a Hugging Face dataset)
    corpus_options: dict[str, Any] | None = None
    random_init: bool = False  # build the model from config.json with random weights
    # convert the starting checkpoint first, e.g. {method: hie-bart, word_heads: 14} (see synopsis convert)
    convert: dict[str, Any] | None = None
    source_prefix: str | None = None  # None: the checkpoint's own ("summarize: " for T5)
    max_source_length: int | None = None  # None: the model's maximum
    max_target_length: int = 128
    batch_size: int = 8  # examples per forward pass (at most, on each process)
    grad_accum_steps: int = 1  # global batch = batch_size x grad_accum_steps, on any number of processes
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
    # Label-smoothed cross-entropy (Szegedy et al., 2016; fairseq's label_smoothed_cross_entropy): 0 is plain
    # cross-entropy. The Hie-BART / BART CNN/DM recipe uses 0.1.
    label_smoothing: float = 0.0
    label_smoothing_form: str = "others"  # eps/(V-1) per other word, or "uniform": eps/V (label_smoothed_nll)
    # Test-time decoding written into the trained model's generation settings (best/ and checkpoints), so
    # `synopsis summarize --model RUN/best` decodes this way with no flags, e.g. {num_beams: 4,
    # length_penalty: 2.0, min_length: 55, max_length: 140, no_repeat_ngram_size: 3}. None: the starting
    # checkpoint's. Dev evaluation uses these too, with the eval_* keys above taking precedence.
    generation: dict[str, Any] | None = None
    keep_checkpoints: int = 2
    seed: int = 0
    precision: str | None = None  # fp32 | bf16 | fp16; None: accelerate launch's --mixed_precision
    gradient_checkpointing: bool = False  # recompute activations in the backward: less memory

    RANGES: ClassVar[dict[str, Range]] = {
        "max_train_examples": AT_LEAST_ONE,
        "max_dev_examples": AT_LEAST_ONE,
        "max_source_length": AT_LEAST_ONE,
        "max_target_length": AT_LEAST_ONE,
        "batch_size": AT_LEAST_ONE,
        "grad_accum_steps": AT_LEAST_ONE,
        "learning_rate": POSITIVE,
        "weight_decay": NON_NEGATIVE,
        "warmup_steps": NON_NEGATIVE,
        "max_steps": AT_LEAST_ONE,
        "clip_grad_norm": NON_NEGATIVE,  # 0: no clipping
        "eval_every": AT_LEAST_ONE,
        "patience": NON_NEGATIVE,  # 0: no early stopping
        "eval_batch_size": AT_LEAST_ONE,
        "eval_num_beams": AT_LEAST_ONE,
        "eval_max_length": AT_LEAST_ONE,
        "eval_no_repeat_ngram_size": NON_NEGATIVE,
        "label_smoothing": DROPOUT,  # [0, 1)
        "keep_checkpoints": AT_LEAST_ONE,
        "seed": NON_NEGATIVE,
        **HARDWARE,
    }

    def validate(self) -> None:
        check_precision(self.precision)
        if self.convert is not None and self.convert.get("method") not in CONVERTERS:
            raise ValueError(
                f"convert.method must be one of {', '.join(CONVERTERS)}, got {self.convert.get('method')!r}"
            )
        DecodingOptions.from_mapping(self.generation)  # where a config's decoding enters: the one check
        if (form := self.label_smoothing_form) not in LABEL_SMOOTHING_FORMS:
            raise ValueError(f"label_smoothing_form must be 'others' or 'uniform', got {form!r}")


@dataclass
class Seq2SeqTrainResult:
    best_score: float
    best_step: int
    best_metrics: dict[str, float]
    steps: int
    stopped_early: bool
    output_dir: Path
    history: dict[str, list[Any]] = field(default_factory=dict)


def load_examples(
    corpus: str, path: str | Path, split: str | None, limit: int | None, options: dict[str, Any] | None = None
) -> list[Example]:
    """Examples with a document and a reference from any corpus reader (``options``: the reader's own, e.g.
    the column mapping of ``hf`` / ``jsonl`` / ``csv``)."""
    from synopsis.data.readers import read_corpus

    examples = []
    for example in read_corpus(corpus, path, split=split, **(options or {})):
        if example.references and not example.document.is_empty():
            examples.append(example)
            if limit is not None and len(examples) >= limit:
                break
    if not examples:
        raise InputError(f"{path}: no examples with a document and a reference summary (corpus '{corpus}')")
    return examples


class Seq2SeqData:
    """A run's examples, encoded once: the training pairs (every reference, or the first, of each training
    document), the dev set, and the global batches of an epoch in an order that depends only on (seed,
    epoch), so that a run resumes and shards the same on any number of processes."""

    def __init__(self, config: Seq2SeqTrainConfig, inputs: Seq2SeqInputs) -> None:
        self.config, self.inputs = config, inputs
        cfg = config
        if cfg.dev_path is None and cfg.dev_split is None:
            logger.warning("no dev set given (dev_path / dev_split): validating on the training examples")
        train = load_examples(
            cfg.train_corpus, cfg.train_path, cfg.train_split, cfg.max_train_examples, cfg.corpus_options
        )
        dev = load_examples(
            cfg.dev_corpus or cfg.train_corpus,
            cfg.dev_path or cfg.train_path,
            cfg.dev_split,
            cfg.max_dev_examples,
            cfg.corpus_options,
        )
        pairs = [
            (index, reference)
            for index, example in enumerate(train)
            for reference in (example.references if cfg.all_references else example.references[:1])
        ]
        sources = inputs.encode_sources([e.document for e in train], [e.instruction for e in train])
        self.train_sources = [sources[index] for index, _ in pairs]
        self.train_targets = inputs.encode_targets([reference for _, reference in pairs])
        self.dev_examples = dev
        self.dev_sources = inputs.encode_sources([e.document for e in dev], [e.instruction for e in dev])
        self.dev_targets = inputs.encode_targets([e.references[0] for e in dev])
        logger.info("%d training pairs from %d documents; %d dev documents", len(pairs), len(train), len(dev))

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """The batches of ``batch_size`` training pairs of one epoch, shuffled by (seed, epoch) alone."""
        generator = torch.Generator().manual_seed(self.config.seed * 1_000_003 + epoch)
        indices = torch.randperm(len(self.train_sources), generator=generator).tolist()
        size = self.config.batch_size
        return [indices[start : start + size] for start in range(0, len(indices), size)]

    def collate(self, chosen: list[int]) -> dict[str, torch.Tensor]:
        """The model's inputs for these training pairs."""
        return self.inputs.model_inputs(
            self.inputs.collate(
                [self.train_sources[i] for i in chosen], [self.train_targets[i] for i in chosen]
            )
        )

    def loader(self, distributed: Distributed, epoch: int, batch_in_epoch: int) -> Iterator[LoadedStep]:
        """Endless global batches (``grad_accum_steps`` batches of ``batch_size``) from the saved position:
        this process's micro-batches of each (:class:`~synopsis.training.distributed.LoadedStep` s)."""
        return distributed.batches.loader(
            self.epoch_batches,
            self.collate,
            epoch,
            batch_in_epoch,
            group=self.config.grad_accum_steps,
            micro_batch_size=self.config.batch_size,
        )


class Seq2SeqTrainer:
    """One fine-tuning run; see the module docstring for the run directory layout.

    Methods built on this path override :attr:`inputs_class` (their own input builder) or
    :meth:`load_model` (e.g. to wrap the loaded model) instead of copying the loop.
    """

    inputs_class: type[Seq2SeqInputs] = Seq2SeqInputs

    def __init__(
        self,
        config: Seq2SeqTrainConfig,
        resume: bool = False,
        show_progress: bool = True,
        distributed: Distributed | None = None,
    ) -> None:
        self.config = config
        self.distributed = dist = distributed or Distributed.launch()
        self.show_progress = show_progress and dist.is_main
        self.run_dir = Path(config.output_dir)
        self.checkpoints = CheckpointManager(self.run_dir, keep=config.keep_checkpoints)
        latest = self.checkpoints.latest()
        if latest is not None and not resume:
            raise CheckpointError(
                f"{self.run_dir}: already has checkpoints; pass --resume to continue or choose a new --output"
            )
        if resume and latest is None:
            logger.warning("%s: no checkpoint to resume from; starting from the beginning", self.run_dir)

        dist.batches.require_size(
            config.batch_size * config.grad_accum_steps, "batch_size x grad_accum_steps"
        )
        dist.precision.set(config.precision)
        torch.manual_seed(config.seed)
        # a checkpoint is a complete model dir (its tokenizer has Hie-BART's marker too)
        model, self.tokenizer = self.load_model(latest or config.model, random_init=latest is None)
        self.inputs = self.inputs_class(
            model.config,
            self.tokenizer,
            max_source_length=config.max_source_length,
            max_target_length=config.max_target_length,
            prefix=config.source_prefix,
        )
        self.data = Seq2SeqData(config, self.inputs)
        if config.gradient_checkpointing:
            enable_gradient_checkpointing(model)

        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]  # biases and LayerNorms
        optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": config.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=config.learning_rate,
        )
        self.model, self.optimizer = dist.prepare(model, optimizer)
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
        else:
            dist.rng.seed_ranks(config.seed)
        dist.barrier()  # every process has read the run directory before anyone writes

    def load_model(self, directory: str | Path, random_init: bool) -> tuple[Any, Any]:
        """(model, tokenizer) from the starting model (converted if asked) or a run's checkpoint."""
        # stored weights (a starting model or a run's checkpoint) are checked for NaN/inf by load_seq2seq
        revision = self.config.revision if random_init else None  # a run's checkpoint is a directory
        model, tokenizer = load_seq2seq(
            directory, random_init=random_init and self.config.random_init, revision=revision
        )
        if random_init and self.config.convert is not None:  # a checkpoint is already converted
            options = dict(self.config.convert)
            model = convert_seq2seq(options.pop("method"), model, tokenizer, **options)
        if self.config.generation:  # saved with the model: summarize decodes this way by default
            decoding = DecodingOptions.from_mapping(self.config.generation)  # lengths in summary tokens
            model.generation_config.update(**generate_kwargs(decoding, model.generation_config))
        return model, tokenizer

    def _lr_factor(self, step: int) -> float:
        """Linear warm-up, then linear decay to 0 at max_steps."""
        warmup, total = self.config.warmup_steps, self.config.max_steps
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    # ------------------------------------------------------------------ loop
    def train(self, stop_at_step: int | None = None) -> Seq2SeqTrainResult:
        """Train to ``max_steps`` (or early stopping); ``stop_at_step`` interrupts as a kill would (tests)."""
        cfg, state, dist = self.config, self.state, self.distributed
        stopped_early = False
        running, count = 0.0, 0
        batches = self.data.loader(dist, state["epoch"], state["batch_in_epoch"])
        with ProgressReporter("train", cfg.max_steps, "steps", state["step"], self.show_progress) as progress:
            self.model.train()
            while state["step"] < cfg.max_steps and state["step"] != stop_at_step:
                step_batch = next(batches)
                state["epoch"], state["batch_in_epoch"] = step_batch.epoch, step_batch.batch_in_epoch
                self.optimizer.zero_grad()
                loss = dist.backward(
                    self.model,
                    step_batch.batches,
                    count=lambda batch: int((batch["labels"] != -100).sum()),  # the loss's own mean
                    loss=lambda batch: self.training_loss({k: v.to(dist.device) for k, v in batch.items()}),
                    step=state["step"],
                )
                if cfg.clip_grad_norm > 0:
                    dist.clip_grad_norm_(self.model.parameters(), cfg.clip_grad_norm, self.optimizer)
                dist.precision.step(self.optimizer)
                running, count = running + loss.mean, count + 1
                self.scheduler.step()
                state["step"] += 1
                progress.advance(note=f"loss {running / count:.3f}")
                if state["step"] % cfg.eval_every == 0 or state["step"] == cfg.max_steps:
                    state["history"]["train_loss"].append([state["step"], running / count])
                    running, count = 0.0, 0
                    metrics = dist.main_computes(self.evaluate)  # every process takes the same decision
                    self.model.train()
                    stopped_early = self._after_evaluation(metrics)
                    logger.info(
                        "step %d: dev %s (best %.2f at step %d)",
                        state["step"],
                        " ".join(f"{m} {metrics[m]:.2f}" for m in METRICS),
                        state["best_score"],
                        state["best_step"],
                    )
                    if stopped_early:
                        logger.info("early stop: no improvement in %d evaluations", cfg.patience)
                        break
        return Seq2SeqTrainResult(
            best_score=state["best_score"],
            best_step=state["best_step"],
            best_metrics=state["best_metrics"],
            steps=state["step"],
            stopped_early=stopped_early,
            output_dir=self.run_dir,
            history=state["history"],
        )

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The loss of one micro-batch: the model's cross-entropy, label-smoothed when asked."""
        output = self.model(**batch)
        if self.config.label_smoothing == 0:
            return output.loss
        return label_smoothed_nll(
            output.logits, batch["labels"], self.config.label_smoothing, self.config.label_smoothing_form
        )

    def _eval_decoding(self, model: Any) -> dict[str, Any]:
        """``generate()``'s arguments for dev predictions: ``eval_max_length`` summary tokens, over the
        checkpoint's own maximum (:func:`~synopsis.models.lengths.generate_kwargs`)."""
        cfg = self.config
        options = {"num_beams": cfg.eval_num_beams, "max_length": cfg.eval_max_length}
        kwargs = generate_kwargs(DecodingOptions.from_mapping(options), model.generation_config)
        return {**kwargs, "no_repeat_ngram_size": cfg.eval_no_repeat_ngram_size}

    @torch.inference_mode()
    def predict(self, sources: Sequence[SourceEncoding]) -> list[str]:
        model = self.distributed.unwrap(self.model)
        model.eval()
        predictions: list[str] = []
        size = self.config.eval_batch_size
        for start in range(0, len(sources), size):
            batch = self.inputs.model_inputs(
                self.inputs.collate(sources[start : start + size]), self.distributed.device
            )
            output = model.generate(**batch, **self._eval_decoding(model))
            predictions += self.tokenizer.batch_decode(output, skip_special_tokens=True)
        return [p.strip() for p in predictions]

    @torch.inference_mode()
    def dev_loss(self) -> float:
        """Teacher-forced cross-entropy per target token on the dev set (first reference of each example).

        More sensitive than ROUGE for small models whose greedy summaries barely depend on the input yet.
        """
        model = self.distributed.unwrap(self.model)
        model.eval()
        total, tokens = 0.0, 0
        size = self.config.eval_batch_size
        for start in range(0, len(self.data.dev_sources), size):
            batch = self.inputs.model_inputs(
                self.inputs.collate(
                    self.data.dev_sources[start : start + size], self.data.dev_targets[start : start + size]
                ),
                self.distributed.device,
            )
            count = int((batch["labels"] != -100).sum())
            total += model(**batch).loss.item() * count  # the loss is the mean over non-padding labels
            tokens += count
        return total / max(tokens, 1)

    def evaluate(self) -> dict[str, float]:
        """Dev ROUGE (F1 x 100) of greedy/beam summaries, their average, and the dev loss."""
        predictions = self.predict(self.data.dev_sources)
        metrics = score_summaries(predictions, [e.references for e in self.data.dev_examples])
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
            if self.distributed.is_main:
                write_directory_atomically(self.run_dir / "best", self._write_model)
        else:
            state["bad_evals"] += 1
        self._save_checkpoint()
        if self.distributed.is_main:
            self._write_history()
        return cfg.patience > 0 and state["bad_evals"] >= cfg.patience

    # ------------------------------------------------------------------ checkpoints
    def _write_model(self, directory: Path) -> None:
        self.distributed.unwrap(self.model).save_pretrained(directory, safe_serialization=True)
        self.tokenizer.save_pretrained(directory)

    def _save_checkpoint(self) -> None:
        rng = self.distributed.rng.states()  # every process's RNG states; the main process writes
        if not self.distributed.is_main:
            return

        def write(directory: Path) -> None:
            self._write_model(directory)
            extra = {
                "scheduler": self.scheduler.state_dict(),
                "train_config": to_dict(self.config),
                **rng,
                **self.distributed.precision.state(),
            }
            write_training_state(directory, {**self.state, **extra}, self.optimizer)

        self.checkpoints.save_with(self.state["step"], lambda path: write_directory_atomically(path, write))

    def _restore(self, path: Path) -> None:
        saved, optimizer_state = read_training_state(path)
        if optimizer_state is None:
            raise CheckpointError(f"{path}: no optimizer state; cannot resume from it")
        self.optimizer.load_state_dict(optimizer_state)
        self.scheduler.load_state_dict(saved.pop("scheduler"))
        self.distributed.rng.restore(saved, self.config.seed, saved["step"])
        self.distributed.precision.restore(saved)
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

    def save_config(self) -> None:
        """``config.yaml`` in the run directory (main process)."""
        if self.distributed.is_main:
            with open_for_atomic_write(self.run_dir / "config.yaml") as handle:
                yaml.safe_dump(to_dict(self.config), handle, sort_keys=False)


def memory_plan(config: Seq2SeqTrainConfig) -> MemoryPlan:
    """The plan of one training step per device (``train seq2seq --dry-run``), from the model's
    ``config.json`` alone: the model (converted as ``convert`` says) is built on the meta device."""
    from transformers import AutoConfig

    from synopsis.models.inputs import model_max_source_length
    from synopsis.models.seq2seq import load_tokenizer, read_model_config, resolve_seq2seq

    directory = resolve_seq2seq(config.model, config.revision)
    read_model_config(directory)  # one-line errors for a missing or broken config.json
    model_config = AutoConfig.from_pretrained(directory, local_files_only=True)
    model = meta_model(model_config)
    tokenizer = load_tokenizer(directory)
    if config.convert is not None:
        options = dict(config.convert)
        with torch.device("meta"):  # the converted model's new parameters are shapes only too
            model = convert_seq2seq(options.pop("method"), model, tokenizer, **options)
    # InstructSum's instruction part is inside max_source_length too (the whole prompt fits it).
    source = config.max_source_length or model_max_source_length(model.config, tokenizer)
    return seq2seq_plan(
        model.config,
        model=f"{model.config.model_type} ({config.model})",
        source=source,
        target=config.max_target_length,
        global_batch=config.batch_size * config.grad_accum_steps,
        largest_pass=config.batch_size,
        devices=config.devices,
        precision=resolve_precision(config.precision),
        checkpointing=config.gradient_checkpointing,
        device_memory_gb=config.device_memory_gb,
        parameters=sum(p.numel() for p in model.parameters()),
        device_type=config.device_type,
    )


def train_seq2seq(
    config: Seq2SeqTrainConfig, resume: bool = False, show_progress: bool = True, threads: int | None = None
) -> Seq2SeqTrainResult:
    """Fine-tune per ``config``; see :class:`Seq2SeqTrainer`. ``threads``: torch's CPU threads (default: the
    CLI's, unless the caller set torch's; :func:`~synopsis.config.use_threads`)."""
    use_threads(threads)
    trainer = Seq2SeqTrainer(config, resume=resume, show_progress=show_progress)
    trainer.save_config()
    return trainer.train()
