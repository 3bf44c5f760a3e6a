"""Training and evaluation of :class:`~synopsis.models.domain_lm.DomainLM` with truncated BPTT.

Recipe (the domain-attribute LM paper, after the RNNLM toolkit of Mikolov et al.): plain SGD; the loss is
the cross-entropy summed over the BPTT window and averaged over the batch rows (the convention of the RNNLM
/ Chainer / TF-PTB recipes that a learning rate like the paper's 0.1 refers to); dropout on the LSTM's input
and output; L2 as weight decay; gradient-norm clipping. After every epoch the dev log-likelihood ratio r =
LL(prev) / LL(now) (= the dev NLL ratio) decides: once r < 1.003 the learning rate is halved, and from then
on halved every epoch, until r < 1.003 a second time, which stops training (early stopping); an epoch that
makes dev worse is undone (the best weights are restored) first. The best model by dev perplexity is kept. A
checkpoint is written atomically after every epoch and ``resume`` continues from the latest one exactly
(weights, optimizer, RNG, schedule).

Several processes (``distributed=Distributed.launch(...)``, what ``synopsis lm train`` passes): the
``batch_size`` rows of the batchified stream are the global batch; each process runs its share of the rows
(with their own LSTM states), the loss is normalised by the global number of rows, the main process
evaluates dev (the result is broadcast, so every process applies the same learning-rate rule) and writes
the checkpoints (:mod:`synopsis.training.distributed`). Row order does not depend on the number of
processes, so an epoch's losses, and a resume from an epoch's checkpoint, are the same on 1 or N."""

from __future__ import annotations

import copy
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch.nn import functional as F

from synopsis.checkpoint import CheckpointManager, load_checkpoint
from synopsis.config import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, Checked, Range, use_threads
from synopsis.data.lm_corpus import TokenStream, batchify, bptt_windows, num_windows
from synopsis.errors import CheckpointError
from synopsis.models.domain_lm import CHECKPOINT_TYPE, DomainLM, DomainLMConfig
from synopsis.progress import ProgressReporter
from synopsis.training.distributed import Distributed, check_precision, resolve_precision
from synopsis.training.memory import MemoryPlan, lstm_lm_activation_bytes, micro_batch, recurrent_plan


@dataclass
class LMTrainConfig(Checked):
    batch_size: int = 20  # rows of the stream: the global batch, shared by all processes
    bptt: int = 16
    learning_rate: float = 0.1
    halving_threshold: float = 1.003
    max_epochs: int | None = None  # None: the paper's schedule, until the halving rule stops training
    weight_decay: float = 1e-6
    clip_norm: float = 5.0
    eval_batch_size: int = 1
    eval_bptt: int = 64
    seed: int = 1
    precision: str | None = None  # fp32 | bf16 | fp16; None: accelerate launch's --mixed_precision

    RANGES: ClassVar[dict[str, Range]] = {
        **dict.fromkeys(("batch_size", "bptt", "max_epochs", "eval_batch_size", "eval_bptt"), AT_LEAST_ONE),
        **dict.fromkeys(("learning_rate", "clip_norm"), POSITIVE),
        **dict.fromkeys(("weight_decay", "seed"), NON_NEGATIVE),
        "halving_threshold": Range(1.0),
    }

    def validate(self) -> None:
        check_precision(self.precision, "training.precision")


def memory_plan(
    model_config: DomainLMConfig,
    training: LMTrainConfig,
    *,
    devices: int,
    device_memory_gb: float | None,
    groups: int,
    notes: str | None = None,
    device_type: str = "cuda",
) -> MemoryPlan:
    """The plan of one truncated-BPTT step per device (``lm train --dry-run``): the model built on the meta
    device from ``model_config`` (shapes only), plain SGD (no optimizer state), one window of
    ``training.bptt`` tokens over this device's share of the ``training.batch_size`` rows; ``groups`` is the
    number of distinct attribute combinations a batch can hold (the input the fused LSTM reads per row);
    ``device_type`` (cuda, cpu): the hardware planned for (cuda adds the context and workspaces)."""
    with torch.device("meta"):
        parameters = sum(p.numel() for p in DomainLM(model_config).parameters())
    batch = micro_batch(training.batch_size, devices)
    precision = resolve_precision(training.precision, "training.precision")
    activations = lstm_lm_activation_bytes(
        vocab=model_config.vocab_size, embedding=model_config.embedding_dim, hidden=model_config.hidden_dim,
        layers=model_config.num_layers, bptt=training.bptt, batch=batch, precision=precision,
        groups=max(1, min(batch, groups)), augment_input=model_config.augment_input,
        augment_output=model_config.augment_output,
    )  # fmt: skip
    return recurrent_plan(
        model=f"domain LM {model_config.variant} (vocabulary {model_config.vocab_size:,})",
        parameters=parameters, optimizer="sgd", activations=activations, source=0, target=training.bptt,
        batch=batch, devices=devices, precision=precision, device_memory_gb=device_memory_gb, notes=notes,
        device_type=device_type,
    )  # fmt: skip


@dataclass
class ScheduleState:
    """What the learning-rate rule needs between epochs (JSON-able, saved in every checkpoint)."""

    learning_rate: float
    halving: bool = False
    previous_dev_nll: float | None = None
    best_dev_nll: float = math.inf
    stopped: bool = False


def update_schedule(state: ScheduleState, dev_nll: float, threshold: float) -> ScheduleState:
    """Apply the paper's rule after an epoch with per-token dev NLL ``dev_nll``; returns the new state."""
    new = copy.copy(state)
    if state.previous_dev_nll is not None:
        ratio = state.previous_dev_nll / dev_nll  # = LL(prev) / LL(now); > 1 means dev improved
        if ratio < threshold:
            if state.halving:
                new.stopped = True
            new.halving = True
    if new.halving and not new.stopped:
        new.learning_rate = state.learning_rate / 2
    new.previous_dev_nll = dev_nll
    new.best_dev_nll = min(state.best_dev_nll, dev_nll)
    return new


@dataclass
class LMTrainResult:
    best_dev_perplexity: float
    epochs: int
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    train_tokens_per_second: float = 0.0


@torch.no_grad()
def evaluate(
    model: DomainLM, stream: TokenStream, batch_size: int = 1, bptt: int = 64, skip_target: int | None = None
) -> tuple[float, int]:
    """Summed NLL (nats) and number of predicted tokens; the hidden state is carried across windows.

    ``skip_target`` (e.g. the ``<unk>`` id) leaves the predictions of that target out of both sums (the
    model still reads it as input): the perplexity over known words only."""
    was_training = model.training
    model.eval()
    device = model.output_weight.device
    table = stream.mask_table(model.attribute_mask).to(device)
    ids, groups = batchify(stream, batch_size)
    total, count, state = 0.0, 0, None
    for inputs, targets, window_groups in bptt_windows(ids.to(device), groups.to(device), bptt):
        logits, state = model(inputs, table[window_groups], state)
        flat = targets.flatten()
        if skip_target is not None:
            flat = flat.masked_fill(flat == skip_target, -100)  # cross_entropy's ignore_index
        total += F.cross_entropy(logits.flatten(0, 1), flat, reduction="sum").item()
        count += int((flat != -100).sum())
    model.train(was_training)
    return total, count


def perplexity(
    model: DomainLM, stream: TokenStream, batch_size: int = 1, bptt: int = 64, skip_target: int | None = None
) -> float:
    """exp(mean NLL per predicted token); ``skip_target``: see :func:`evaluate`."""
    total, count = evaluate(model, stream, batch_size, bptt, skip_target)
    return math.exp(total / max(count, 1))


def train_language_model(
    model: DomainLM,
    train: TokenStream,
    dev: TokenStream,
    config: LMTrainConfig,
    run_dir: str | Path | None = None,
    resume: bool = False,
    show_progress: bool = True,
    description: str = "train",
    on_batch: Callable[[int, int, float], None] | None = None,
    extra_state: dict[str, Any] | None = None,
    distributed: Distributed | None = None,
    threads: int | None = None,
) -> LMTrainResult:
    """Train in place; the model ends with the best dev weights. ``run_dir`` enables checkpoints and resume.

    ``on_batch(epoch, batch, loss)`` is called after every update with the (global) per-token loss (tests
    use it to compare runs). ``distributed``: one process (the default) or :meth:`Distributed.launch`.
    ``threads``: torch's CPU threads (default: the CLI's, unless the caller set torch's;
    :func:`~synopsis.config.use_threads`).
    """
    use_threads(threads)
    dist = distributed or Distributed.single()
    dist.batches.require_size(config.batch_size, "training.batch_size")
    dist.precision.set(config.precision, "training.precision")
    torch.manual_seed(config.seed)
    model.to(dist.device)  # before the optimizer is built on its parameters
    # fused: one kernel per parameter for decay + update; the attribute blocks multiply the parameters, so
    # the plain per-tensor loop would cost the augmented models more than their forward/backward does.
    optimizer = torch.optim.SGD(
        model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay, fused=True
    )
    # ``model`` keeps the weights (evaluation, checkpoints); ``train_model`` runs the steps (DDP on N). The
    # variants without input blocks keep an empty ``input_weight`` that no step uses.
    unused = any(parameter.numel() == 0 for parameter in model.parameters())
    train_model, optimizer = dist.prepare(model, optimizer, find_unused_parameters=unused)
    manager = CheckpointManager(run_dir) if run_dir is not None else None
    run = _start(model, optimizer, dist, config, manager if resume else None)

    table = train.mask_table(model.attribute_mask).to(dist.device)
    ids, groups = batchify(train, config.batch_size)
    steps = num_windows(ids, config.bptt)
    (rows,) = dist.batches.shard(range(config.batch_size))  # this process's rows of the global batch
    ids, groups = ids[rows.indices].to(dist.device), groups[rows.indices].to(dist.device)
    started = time.perf_counter()
    trained_tokens, train_seconds = 0, 0.0
    with ProgressReporter(description, steps, "batches", enabled=show_progress and dist.is_main) as progress:
        for epoch in itertools.count(run.start_epoch):
            if run.schedule.stopped or (config.max_epochs is not None and epoch > config.max_epochs):
                break
            for group in optimizer.param_groups:
                group["lr"] = run.schedule.learning_rate
            progress.update(f"{description} epoch {epoch}", steps, completed=0, note="")
            epoch_start = time.perf_counter()
            epoch_loss, epoch_tokens = _train_epoch(
                (model, train_model), optimizer, dist, (ids, groups, table), config, epoch, on_batch, progress
            )
            train_seconds += time.perf_counter() - epoch_start
            trained_tokens += epoch_tokens
            dev_total, dev_count = dist.main_computes(  # every process applies the same rule
                lambda: evaluate(model, dev, config.eval_batch_size, config.eval_bptt)
            )
            train_perplexity = math.exp(epoch_loss / epoch_tokens)
            improved = run.end_epoch(model, epoch, config, train_perplexity, dev_total / dev_count)
            rng = dist.rng.states() if manager is not None else {}  # every process's; the main one writes
            if manager is not None and dist.is_main:
                run_state = {**rng, **dist.precision.state()}
                run.save(manager, model, optimizer, config, epoch, improved, run_state, extra_state or {})
    model.load_state_dict(run.best_weights)
    return LMTrainResult(
        best_dev_perplexity=math.exp(run.schedule.best_dev_nll),
        epochs=len(run.history),
        history=run.history,
        seconds=time.perf_counter() - started,
        train_tokens_per_second=trained_tokens / train_seconds if train_seconds else 0.0,
    )


@dataclass
class _Run:
    """What a training run carries between epochs: the schedule, the history and the best weights."""

    schedule: ScheduleState
    history: list[dict[str, float]]
    best_weights: dict[str, torch.Tensor]
    start_epoch: int = 1

    def end_epoch(
        self, model: DomainLM, epoch: int, config: LMTrainConfig, train_perplexity: float, dev_nll: float
    ) -> bool:
        """Keep or undo the epoch by its dev NLL, record it and apply the learning-rate rule; improved?"""
        improved = dev_nll < self.schedule.best_dev_nll
        if improved:
            self.best_weights = copy.deepcopy(model.state_dict())
        elif self.schedule.previous_dev_nll is not None and dev_nll > self.schedule.previous_dev_nll:
            model.load_state_dict(self.best_weights)  # RNNLM toolkit: a worse epoch is undone
        self.history.append(
            {
                "epoch": epoch,
                "learning_rate": self.schedule.learning_rate,
                "train_perplexity": train_perplexity,
                "dev_perplexity": math.exp(dev_nll),
            }
        )
        self.schedule = update_schedule(self.schedule, dev_nll, config.halving_threshold)
        return improved

    def save(
        self,
        manager: CheckpointManager,
        model: DomainLM,
        optimizer: torch.optim.Optimizer,
        config: LMTrainConfig,
        epoch: int,
        improved: bool,
        run_state: dict[str, Any],
        extra_state: dict[str, Any],
    ) -> None:
        """Write the epoch's checkpoint: weights, optimizer, schedule, history, ``run_state`` (every
        process's RNG, the precision's scaler) and the caller's ``extra_state``."""
        manager.save(
            epoch,
            is_best=improved,
            model_state=model.state_dict(),
            config=asdict(model.config),
            state={
                "epoch": epoch,
                "schedule": asdict(self.schedule),
                "history": self.history,
                **run_state,
                "train_config": asdict(config),
                **extra_state,
            },
            optimizer=optimizer,
            checkpoint_type=CHECKPOINT_TYPE,
        )


def _start(
    model: DomainLM,
    optimizer: torch.optim.Optimizer,
    dist: Distributed,
    config: LMTrainConfig,
    manager: CheckpointManager | None,
) -> _Run:
    """A fresh run, or the latest checkpoint of ``manager``'s run directory restored exactly."""
    if manager is None or (latest := manager.latest()) is None:
        run = _Run(ScheduleState(config.learning_rate), [], copy.deepcopy(model.state_dict()))
        dist.rng.seed_ranks(config.seed)
        return run
    checkpoint = load_checkpoint(latest, checkpoint_type=CHECKPOINT_TYPE)
    if checkpoint.optimizer_state is None:
        raise CheckpointError(f"{latest}: no optimizer state; cannot resume")
    try:
        model.load_state_dict(checkpoint.model_state)
        optimizer.load_state_dict(checkpoint.optimizer_state)
    except (RuntimeError, ValueError) as err:
        raise CheckpointError(f"{latest}: does not match this model ({str(err).splitlines()[0]})") from None
    best = load_checkpoint(
        Path(manager.run_dir) / "best", with_optimizer=False, checkpoint_type=CHECKPOINT_TYPE
    )
    dist.rng.restore(checkpoint.state, config.seed, checkpoint.state["epoch"])
    dist.precision.restore(checkpoint.state)
    return _Run(
        ScheduleState(**checkpoint.state["schedule"]),
        checkpoint.state["history"],
        best.model_state,
        checkpoint.state["epoch"] + 1,
    )


def _train_epoch(
    models: tuple[DomainLM, torch.nn.Module],
    optimizer: torch.optim.Optimizer,
    dist: Distributed,
    data: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    config: LMTrainConfig,
    epoch: int,
    on_batch: Callable[[int, int, float], None] | None,
    progress: ProgressReporter,
) -> tuple[float, int]:
    """One pass of truncated BPTT over this process's rows; the (global) summed loss and token count.

    ``models``: the model that keeps the weights and the one that runs the steps (DDP on N processes)."""
    model, train_model = models
    ids, groups, table = data
    model.train()
    state = None
    epoch_loss, epoch_tokens = 0.0, 0
    for batch, window in enumerate(bptt_windows(ids, groups, config.bptt)):

        def row_loss(window: tuple[torch.Tensor, ...]) -> torch.Tensor:
            """Sum over the window, mean over rows: the convention the paper's lr 0.1 refers to."""
            nonlocal state
            inputs, targets, window_groups = window
            if state is not None:  # truncated BPTT: keep the state, cut the graph
                state = (state[0].detach(), state[1].detach())
            logits, state = train_model(inputs, table[window_groups], state)
            return F.cross_entropy(logits.flatten(0, 1), targets.flatten()) * targets.shape[1]

        optimizer.zero_grad(set_to_none=True)
        loss = dist.backward(train_model, [(window, False)], lambda w: w[1].shape[0], row_loss, step=epoch)
        dist.clip_grad_norm_(model.parameters(), config.clip_norm, optimizer)
        dist.precision.step(optimizer)
        window_tokens = loss.count * window[1].shape[1]  # all rows, all processes
        epoch_loss += loss.total
        epoch_tokens += window_tokens
        if on_batch is not None:
            on_batch(epoch, batch, loss.total / window_tokens)
        progress.advance(note=f"ppl {math.exp(epoch_loss / epoch_tokens):8.1f}")
    return epoch_loss, epoch_tokens
