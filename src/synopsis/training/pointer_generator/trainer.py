"""Trainer for the pointer-generator network (See et al., 2017), with exact resume.

Schedule, as in the paper: train without coverage until the validation loss stops improving (early
stopping), go back to the best weights, then switch coverage on and train a short coverage phase
(``schedule.coverage_steps``). Adagrad (lr 0.15, initial accumulator 0.1), gradient-norm clipping at 2. The
coverage phase starts with fresh Adagrad accumulators (0.1), as the authors' ``convert_to_coverage_model``
does; ``schedule.coverage_optimizer: carry`` keeps the main phase's instead.

The final weights can be averaged (neither is in the paper): ``schedule.average_last`` takes the mean of a
coverage phase's last checkpoints, and ``schedule.coverage_runs`` trains several coverage phases one after the
other, each from the same best main-phase weights and optimizer state but on the next batches of the stream,
and takes the mean of their means (a uniform "model soup" of fine-tunings from one start; Wortsman et al.,
2022) or, with ``schedule.combine_runs: ensemble``, keeps their means as the members of one
:class:`~synopsis.models.pointer_generator.PointerGeneratorEnsemble`.

Resume is exact: a checkpoint holds the weights, the Adagrad accumulators, the step, the position in the
epoch's batch order (which is a pure function of ``seed`` and the epoch number) and all RNG states, so the
batch after a resume, and its loss, are the same as without the interruption.

Several processes (``torchrun``, ``accelerate launch``): ``optim.batch_size`` is the global batch; every
process takes its share of each global batch, the loss is the summary mean over the whole global batch, and
only the main process validates, writes and logs (:mod:`synopsis.training.distributed`). The same config
gives the same losses on any number of processes, and a run resumes on another number exactly.

Run layout (``--output-dir``)::

    train_config.json      the full training configuration (a resume reuses it)
    vocab.txt              the vocabulary built from the training split
    checkpoints/step-N/    for --resume (weights, optimizer, state, RNG)
    best/                  best checkpoint of the current phase (by validation loss)
    model/                 the best model so far, loadable with PointerGenerator.from_pretrained
                           (at the end: the model after the coverage phase, if there is one, or the
                           ensemble of the coverage runs)
    model_no_coverage/     the best model of the main phase (written when the coverage phase starts)
    coverage_start/        where every coverage run starts (coverage_runs > 1; best/ then tracks coverage)
    coverage_runs/run-K/   the mean weights of coverage run K (coverage_runs > 1)
    training_curve.png     training and validation loss per step
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from synopsis.checkpoint import MODEL_FILE, CheckpointManager, load_checkpoint, load_tensors, save_checkpoint
from synopsis.config import (
    from_dict,
    to_dict,
    use_threads,
)
from synopsis.errors import ConfigError, InputError
from synopsis.generation.config import GENERATION_CONFIG_FILE
from synopsis.io import read_json, write_json
from synopsis.models.pointer_generator import (
    CHECKPOINT_TYPE,
    Batch,
    PointerGenerator,
    PointerGeneratorEnsemble,
    config_for_vocab,
    document_words,
    init_weights,
    source_profile,
)
from synopsis.progress import ProgressReporter
from synopsis.training.distributed import Distributed, LoadedStep
from synopsis.training.plots import plot_curves
from synopsis.training.pointer_generator.batches import (
    batch_to,
    collate,
    epoch_batches,
    make_pairs,
    read_split,
)
from synopsis.training.pointer_generator.config import (
    TRAIN_CONFIG_FILE,
    VOCAB_FILE,
    OptimConfig,
    PointerGeneratorTrainConfig,
)
from synopsis.vocab import Vocab

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------- trainer
def _make_optimizer(model: torch.nn.Module, optim: OptimConfig) -> torch.optim.Adagrad:
    return torch.optim.Adagrad(
        model.parameters(), lr=optim.learning_rate, initial_accumulator_value=optim.initial_accumulator
    )


@torch.no_grad()
def evaluate_loss(model: PointerGenerator, batches: Sequence[Batch]) -> dict[str, float]:
    """NLL and coverage loss over a list of batches, averaged as the training loss: per summary, then over
    all the summaries."""
    was_training = model.training
    model.eval()
    nll = cov = 0.0
    summaries = 0
    for b in batches:
        out = model(b.input_ids, b.decoder_input_ids, b.labels, b.extended_ids, b.num_oovs)
        nll += float(out.nll) * out.num_summaries
        cov += float(out.coverage_loss) * out.num_summaries
        summaries += out.num_summaries
    model.train(was_training)
    summaries = max(summaries, 1)
    coverage_weight = model.config.coverage_loss_weight if model.config.coverage else 0.0
    return {
        "nll": nll / summaries,
        "coverage": cov / summaries,
        "loss": (nll + coverage_weight * cov) / summaries,
    }


def mean_weights(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of state dicts with the same names (checkpoint averaging)."""
    return {name: sum(state[name] for state in states) / len(states) for name in states[0]}


class Trainer:
    """Runs the two-phase schedule; see the module docstring for files and resume semantics."""

    def __init__(
        self,
        config: PointerGeneratorTrainConfig,
        output_dir: str | Path,
        resume: bool = False,
        progress: bool = True,
        distributed: Distributed | None = None,
    ) -> None:
        self.output_dir = Path(output_dir)
        self.distributed = distributed or Distributed.launch()
        self.progress = progress and self.distributed.is_main
        config_path = self.output_dir / TRAIN_CONFIG_FILE
        # A run that stopped before its first checkpoint left only its config and vocabulary: start afresh.
        unfinished = config_path.is_file() and CheckpointManager(self.output_dir).latest() is None
        if unfinished:
            logger.warning(
                f"{self.output_dir}: the earlier run stopped before its first checkpoint; starting afresh"
            )
            resume = False
        elif resume:
            if not config_path.is_file():
                raise InputError(f"{self.output_dir}: nothing to resume (no {TRAIN_CONFIG_FILE})")
            saved_data = read_json(config_path, "a pointer-generator run", ConfigError, dict)
            saved = from_dict(PointerGeneratorTrainConfig, saved_data, str(config_path))
            if to_dict(saved) != to_dict(config):
                raise ConfigError(
                    f"{config_path}: the given config differs from the run's saved config; "
                    "resume without --config (or with the same one), or use a new --output-dir"
                )
        elif self.output_dir.is_dir() and any(self.output_dir.iterdir()):
            raise InputError(
                f"{self.output_dir}: directory exists and is not empty; use --resume or a new --output-dir"
            )
        self.config = config
        self.resume = resume
        self.distributed.batches.require_size(config.optim.batch_size, "optim.batch_size")
        self.distributed.precision.set(config.precision)
        self.distributed.barrier()  # every process has looked at the run directory before anyone writes

    # -------------------------------------------------------------- setup
    def _prepare(self) -> None:
        cfg = self.config
        train_examples = read_split(cfg.data, cfg.data.train_split)
        dev_examples = read_split(cfg.data, cfg.data.dev_split, cfg.data.dev_path)
        self.train_pairs = make_pairs(train_examples, cfg.data.all_references, cfg.data.max_train_examples)
        dev_pairs = make_pairs(dev_examples, True, cfg.data.max_dev_examples)
        if not self.train_pairs:
            raise InputError(f"{cfg.data.path}: no usable training pairs in split '{cfg.data.train_split}'")
        if not dev_pairs:
            raise InputError(f"{cfg.data.path}: no usable validation pairs in split '{cfg.data.dev_split}'")
        vocab_path = self.output_dir / VOCAB_FILE
        dist = self.distributed
        if self.resume:
            self.vocab = Vocab.load(vocab_path)
        else:  # every process builds the same vocabulary; the main process writes it
            self.vocab = Vocab.build(
                (p.source + p.target for p in self.train_pairs), cfg.vocab.max_size, cfg.vocab.min_count
            )
            if dist.is_main:
                self.output_dir.mkdir(parents=True, exist_ok=True)
                self.vocab.save(vocab_path)
                write_json(self.output_dir / TRAIN_CONFIG_FILE, to_dict(cfg))
        m = cfg.model
        model_config = config_for_vocab(
            self.vocab,
            embedding_dim=m.embedding_dim,
            hidden_dim=m.hidden_dim,
            pointer=m.pointer,
            coverage=False,  # phase 1 never uses coverage; it is switched on for phase 2
            coverage_loss_weight=m.coverage_loss_weight,
            dropout=m.dropout,
            # What the held-out inputs look like, for summarize's out-of-scope note.
            source_profile=source_profile(
                cfg.data.corpus, [document_words(e.document) for e in dev_examples], self.vocab
            ),
        )
        torch.manual_seed(cfg.seed)
        self.model = init_weights(PointerGenerator(model_config), m.init)
        self.final_model: PointerGeneratorEnsemble | None = None  # set at the end by combine_runs: ensemble
        # self.model is the module (weights, validation, export); self.train_model runs the training steps.
        # Without the pointer, p_gen's weights take no part in a step: DDP must not wait for them.
        self.train_model, self.optimizer = dist.prepare(
            self.model, _make_optimizer(self.model, cfg.optim), find_unused_parameters=not m.pointer
        )
        d = cfg.data
        self.dev_batches = [
            batch_to(
                collate(
                    dev_pairs[i : i + cfg.optim.batch_size],
                    self.vocab,
                    d.max_source_tokens,
                    d.max_target_tokens,
                ),
                dist.device,
            )
            for i in range(0, len(dev_pairs), cfg.optim.batch_size)
        ]
        self.lengths = [min(len(p.source), d.max_source_tokens) for p in self.train_pairs]
        self.manager = CheckpointManager(self.output_dir, keep=max(2, cfg.schedule.average_last))
        self.state: dict[str, Any] = {
            "step": 0,
            "epoch": 0,
            "batch_in_epoch": 0,
            "phase": "main",
            "phase_start_step": 0,
            "coverage_run": 0,  # 1, 2, ...: which coverage run is under way
            "best_loss": math.inf,
            "bad_evals": 0,
            "minutes": 0.0,
            "curves": {"train": [], "validation": [], "validation_nll": [], "validation_coverage": []},
        }
        if self.resume:
            self._load(self.manager.latest())
        else:
            dist.rng.seed_ranks(cfg.seed)

    def _load(self, path: Path | None) -> None:
        if path is None:
            raise InputError(f"{self.output_dir}: no checkpoint to resume from")
        checkpoint = load_checkpoint(path, checkpoint_type=CHECKPOINT_TYPE)
        self.model.config.coverage = checkpoint.config["coverage"]
        self.model.load_state_dict(checkpoint.model_state)
        if checkpoint.optimizer_state is not None:
            self.optimizer.load_state_dict(checkpoint.optimizer_state)
        self.distributed.rng.restore(checkpoint.state, self.config.seed, checkpoint.state["step"])
        self.distributed.precision.restore(checkpoint.state)
        self.state.update(checkpoint.state)
        if self.state["phase"] == "coverage":  # a run saved before coverage_runs existed was in its run 1
            self.state["coverage_run"] = max(1, self.state["coverage_run"])
        logger.info(f"resumed from {path} at step {self.state['step']} ({self.state['phase']} phase)")

    def _save(self, is_best: bool) -> None:
        rng = self.distributed.rng.states()  # every process's RNG states; the main process writes
        if not self.distributed.is_main:
            return
        self.manager.save(
            self.state["step"],
            is_best=is_best,
            model_state=self.model.state_dict(),
            config=dataclasses.asdict(self.model.config),
            state={**self.state, **rng, **self.distributed.precision.state()},
            optimizer=self.optimizer,
            checkpoint_type=CHECKPOINT_TYPE,
        )
        if is_best:
            self._export("model")

    def _coverage_run_mean(self, count: int) -> dict[str, torch.Tensor]:
        """The mean of the weights of this coverage run's last ``count`` checkpoints (fewer if the run wrote
        fewer); the checkpoints themselves keep the weights training reached, for an exact resume."""
        start = self.state["phase_start_step"]
        steps = sorted(self.manager.ckpt_dir.glob("step-*"))
        chosen = [d for d in steps if int(d.name.split("-")[1]) > start][-count:]
        states = [load_tensors(d / MODEL_FILE) for d in chosen]
        names = ", ".join(d.name for d in chosen)
        run = self.state["coverage_run"]
        logger.info(f"coverage run {run}: the mean of the weights of {len(chosen)} checkpoints ({names})")
        return mean_weights(states)

    def _finish_coverage_run(self) -> bool:
        """Close the coverage run that just ended; ``True`` when another one follows. After the last run the
        model holds the final weights: the last ones, or the mean of the runs' checkpoint means."""
        s = self.config.schedule
        if s.average_last == 1 and s.coverage_runs == 1:
            return False  # the paper's model: the weights at the end of its one coverage phase
        mean = self._coverage_run_mean(s.average_last)
        run = self.state["coverage_run"]
        if run < s.coverage_runs:
            self._save_weights(self.output_dir / "coverage_runs" / f"run-{run}", mean)
            self._start_coverage_phase()
            return True
        if s.combine_runs == "ensemble" and not self.distributed.is_main:
            return False  # the ensemble is only exported, by the main process
        saved = self.output_dir / "coverage_runs"
        runs = [*(load_tensors(saved / f"run-{k}" / MODEL_FILE) for k in range(1, run)), mean]
        if s.combine_runs == "ensemble":
            self.final_model = PointerGeneratorEnsemble.of(self.model.config, runs)
            logger.info(f"final model: the ensemble of the {run} coverage runs' means")
        else:
            self.model.load_state_dict(mean_weights(runs))
            if run > 1:
                logger.info(f"final model: the mean of the {run} coverage runs' means")
        return False

    def _save_weights(
        self,
        directory: Path,
        weights: dict[str, torch.Tensor],
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        """A checkpoint of ``weights`` (and ``optimizer``) with the model's config (main process)."""
        if self.distributed.is_main:
            config = dataclasses.asdict(self.model.config)
            save_checkpoint(directory, weights, config, optimizer=optimizer, checkpoint_type=CHECKPOINT_TYPE)

    def _export(self, name: str, model: PointerGenerator | PointerGeneratorEnsemble | None = None) -> None:
        """A loadable model directory (``model``, default the trained one): weights, config, vocabulary and
        decoding defaults (main process)."""
        if not self.distributed.is_main:
            return
        (self.model if model is None else model).save_pretrained(self.output_dir / name, self.vocab)
        write_json(self.output_dir / name / GENERATION_CONFIG_FILE, to_dict(self.config.generation))

    # -------------------------------------------------------------- loop
    def _batches(self):  # noqa: ANN202 - an endless iterator of LoadedStep
        """Endless steps from the saved position: this process's share of each global batch, collated."""
        cfg = self.config

        def order(epoch: int) -> list[list[int]]:
            return epoch_batches(len(self.train_pairs), self.lengths, cfg.optim.batch_size, cfg.seed, epoch)

        def make(indices: list[int]) -> Batch:
            pairs = [self.train_pairs[i] for i in indices]
            return collate(pairs, self.vocab, cfg.data.max_source_tokens, cfg.data.max_target_tokens)

        return self.distributed.batches.loader(order, make, self.state["epoch"], self.state["batch_in_epoch"])

    def train_step(self, batch: LoadedStep) -> float:
        """One optimizer step on this process's share of a global batch; the global mean loss."""
        dist, pad_id = self.distributed, self.model.config.pad_id
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)

        def loss(part: Batch) -> torch.Tensor:
            part = batch_to(part, dist.device)
            return self.train_model(
                part.input_ids, part.decoder_input_ids, part.labels, part.extended_ids, part.num_oovs
            ).loss

        result = dist.backward(
            self.train_model,
            batch.batches,
            count=lambda part: int(part.labels.ne(pad_id).any(-1).sum()),  # summaries: the loss's own mean
            loss=loss,
            step=self.state["step"],
        )
        dist.clip_grad_norm_(self.model.parameters(), self.config.optim.max_grad_norm, self.optimizer)
        dist.precision.step(self.optimizer)
        return result.mean

    def _phase_limit(self) -> int:
        s = self.config.schedule
        if self.state["phase"] == "main":
            return s.max_steps
        return self.state["phase_start_step"] + s.coverage_steps

    def _start_coverage_phase(self) -> None:
        """Back to the best no-coverage weights, then switch coverage on. Every coverage run starts there: the
        first from best/, which then tracks the coverage phase, so with more runs to come that start is kept
        in coverage_start/. The Adagrad accumulators start fresh, as in the authors' convert_to_coverage_model
        (which restores the weights only), or with ``schedule.coverage_optimizer: carry`` as saved there."""
        first = self.state["phase"] == "main"
        run = self.state["coverage_run"] + 1
        logger.info(f"step {self.state['step']}: coverage run {run} starts from the best main-phase model")
        self.distributed.barrier()  # the main process has finished writing best/ (and coverage_start/)
        start = load_checkpoint(
            self.output_dir / ("best" if first else "coverage_start"), checkpoint_type=CHECKPOINT_TYPE
        )
        self.model.load_state_dict(start.model_state)
        if self.config.schedule.coverage_optimizer == "fresh":
            self.optimizer.load_state_dict(_make_optimizer(self.model, self.config.optim).state_dict())
        elif start.optimizer_state is not None:
            self.optimizer.load_state_dict(start.optimizer_state)
        if first:
            self._export("model_no_coverage")
            if self.config.schedule.coverage_runs > 1:
                self._save_weights(self.output_dir / "coverage_start", start.model_state, self.optimizer)
        self.model.config.coverage = True
        self.state.update(
            phase="coverage",
            phase_start_step=self.state["step"],
            coverage_run=run,
            best_loss=math.inf,
            bad_evals=0,
        )

    def run(self, stop_at_step: int | None = None) -> dict[str, Any]:
        """Train to the end of the schedule. ``stop_at_step`` stops abruptly (no final save), like a kill."""
        import time

        self._prepare()
        cfg, s = self.config, self.config.schedule
        batches = self._batches()
        running: list[float] = []
        started = time.monotonic() - 60.0 * self.state["minutes"]
        phase, limit = self.state["phase"], self._phase_limit()
        with ProgressReporter(phase, limit, "steps", self.state["step"], self.progress) as bar:
            while True:
                if stop_at_step is not None and self.state["step"] >= stop_at_step:
                    return self.state
                phase_over = self.state["step"] >= self._phase_limit() or (
                    self.state["phase"] == "main" and self.state["bad_evals"] >= s.patience
                )
                if self.state["phase"] == "main" and s.max_minutes is not None:  # clocks differ: agree
                    phase_over = phase_over or self.distributed.any(self.state["minutes"] >= s.max_minutes)
                if phase_over:
                    if self.state["phase"] == "main" and cfg.model.coverage:
                        self._start_coverage_phase()
                        bar.update("coverage", self._phase_limit(), self.state["step"])
                        continue
                    if self.state["phase"] == "coverage":
                        # The paper keeps the model at the end of its short coverage phase.
                        self._save(is_best=False)
                        if self._finish_coverage_run():
                            bar.update("coverage", self._phase_limit(), self.state["step"])
                            continue
                        self._export("model", self.final_model)
                    break
                step_batch = next(batches)
                self.state.update(epoch=step_batch.epoch, batch_in_epoch=step_batch.batch_in_epoch)
                loss = self.train_step(step_batch)
                self.state["step"] += 1
                self.state["minutes"] = (time.monotonic() - started) / 60.0
                running.append(loss)
                step = self.state["step"]
                if step % s.log_every == 0:
                    avg = sum(running) / len(running)
                    self.state["curves"]["train"].append((step, avg))
                    running.clear()
                    bar.note = f"loss {avg:.3f}"
                is_best = False
                if step % s.eval_every == 0:  # on the main process; every process gets the result
                    metrics = self.distributed.main_computes(
                        lambda: evaluate_loss(self.model, self.dev_batches)
                    )
                    curves = self.state["curves"]
                    curves["validation"].append((step, metrics["loss"]))
                    # Apart as well: the total jumps when the coverage loss is switched on.
                    curves.setdefault("validation_nll", []).append((step, metrics["nll"]))
                    curves.setdefault("validation_coverage", []).append((step, metrics["coverage"]))
                    is_best = metrics["loss"] < self.state["best_loss"]
                    if is_best:
                        self.state["best_loss"], self.state["bad_evals"] = metrics["loss"], 0
                    else:
                        self.state["bad_evals"] += 1
                    logger.info(
                        f"step {step} [{self.state['phase']}] validation nll {metrics['nll']:.4f} "
                        f"coverage {metrics['coverage']:.4f}{' (best)' if is_best else ''}"
                    )
                    self._plot()
                if is_best or step % s.save_every == 0:
                    self._save(is_best)
                bar.advance(step - bar.completed)
        self._plot()
        best = self.state["best_loss"]
        logger.info(
            f"done at step {self.state['step']}; "
            + (f"best validation loss {best:.4f}" if math.isfinite(best) else "no validation loss computed")
        )
        return self.state

    def _plot(self) -> None:
        if not self.distributed.is_main:
            return
        labels = {
            "train": "train loss",
            "validation": "validation loss (selects the model)",
            "validation_nll": "validation NLL",
            "validation_coverage": "validation coverage loss",
        }
        curves = {labels.get(k, k): [tuple(p) for p in v] for k, v in self.state["curves"].items()}
        events = {}
        if self.state["phase"] == "coverage":
            events["coverage phase starts"] = self.state["phase_start_step"]
        plot_curves(curves, self.output_dir / "training_curve.png", title="pointer-generator", events=events)


def train(
    config: PointerGeneratorTrainConfig,
    output_dir: str | Path,
    resume: bool = False,
    progress: bool = True,
    threads: int | None = None,
) -> dict[str, Any]:
    """Train (or resume) a pointer-generator run; returns the final trainer state. ``threads``: torch's CPU
    threads (default: the CLI's, unless the caller set torch's; :func:`~synopsis.config.use_threads`)."""
    use_threads(threads)
    return Trainer(config, output_dir, resume=resume, progress=progress).run()
