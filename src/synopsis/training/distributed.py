"""What every trainer needs to run on several processes (``torchrun``, ``accelerate launch``), in one place.

Accelerate is the one distributed layer: :meth:`Distributed.launch` builds an ``Accelerator`` from the
launcher's environment (on a machine without GPUs it asks for gloo on CPU, which plain ``torchrun`` does not
do by itself), wraps the model in DDP and gives the device. On top of it, the rules that make a run
independent of the number of processes:

* **Same data order for any world size.** A trainer describes its epoch as a list of *global* batches whose
  order is a pure function of (seed, epoch). :class:`GlobalBatchSampler` walks them from a saved position
  (epoch, batch in epoch); every rank reads the same global batch at every step and takes its share of it
  (:meth:`GlobalBatches.shard`: examples ``rank, rank + W, rank + 2W, ...``, so ranks get a similar mix of
  lengths when a batch is sorted by length). Resuming = starting the walk at the saved position, which is
  the same on 1 or N processes, so a resume on another world size is exact by construction.
* **Loading.** :meth:`GlobalBatches.loader` is a DataLoader over :class:`GlobalBatchSampler` (one item per
  optimizer step: this rank's micro-batches, collated), with its own generator so that it never draws from
  the RNG streams a resume restores. It is not ``accelerator.prepare(dataloader)``: Accelerate's sharded
  samplers deal whole batches to the ranks in turn (the global batch would change with the world size) or,
  with ``split_batches``, skip batches shorter than the batch size and pad the last one with repeated
  examples, which would change the gradient.
* **A global batch not divisible by the world size** is split as evenly as possible (shares differ by at
  most one example). A rank whose share is empty (an epoch's last, short batch with fewer examples than
  processes) runs a *filler*: one real example of the batch whose loss is multiplied by 0, so every rank
  runs the same forward/backward passes and DDP's all-reduce lines up. Only a configured batch smaller than
  the world size is an error (:meth:`GlobalBatches.require_size`, naming the field).
* **Gradient accumulation per world size.** A trainer may cap the examples of one forward pass
  (``micro_batch_size``); each rank then splits its share into the same number of micro-batches,
  ``ceil(ceil(global / W) / micro)``, so the accumulation steps shrink as processes are added while the
  global batch stays the configured one.
* **Same gradient.** Losses that are means over a batch (tokens for the summarizers, rows for the LM) are
  re-weighted by :meth:`Distributed.backward`: a micro-batch's mean loss is multiplied by
  ``W * its count / global count`` (the global count is all-reduced before the backward), so DDP's average
  over ranks is the gradient of the mean over the whole global batch, as on one process. With one process
  and one micro-batch the factor is exactly 1, so single-process training is unchanged. The returned loss is
  the global mean (all-reduced), what every rank logs and checks for NaN, so all ranks stop together.
* **Writes and decisions.** Only the main process writes (checkpoints, logs, plots, metrics); a value that
  decides what happens next (a validation score, early stopping) is computed on the main process and
  broadcast (:meth:`Distributed.main_computes`), so every rank takes the same decision and none waits
  forever. Checkpoints stay our atomic safetensors + JSON format (never pickle).
* **RNG per rank.** :meth:`RankRNG.states` gathers every rank's Python / NumPy / torch CPU / CUDA
  states; ``rng`` is rank 0's (as in a single-process checkpoint) and ``rng_ranks`` all of them when there
  is more than one. :meth:`RankRNG.restore` gives each rank its own saved state; a rank without one
  (a resume on more processes than the run had) gets states derived from (seed, rank, step). Rank 0 keeps
  the run's seed stream, ranks > 0 start from a derived seed (:meth:`RankRNG.seed_ranks`): dropout masks
  differ per rank, and data order never depends on RNG state.

**Precision** (:meth:`MixedPrecision.set`, every trainer's ``precision: fp32|bf16|fp16``; unset, the
launcher's ``ACCELERATE_MIXED_PRECISION``, which ``accelerate launch --mixed_precision`` sets): the loss is
computed under ``torch.autocast`` (matrix products in the low precision, reductions and losses in fp32); the
parameters, their gradients and the optimizer state stay fp32, so checkpoints are fp32 (Micikevicius et al.,
2018, "Mixed Precision Training": fp32 master weights). fp16 adds dynamic loss scaling
(``torch.amp.GradScaler``: a step whose gradients overflow is skipped and the scale halved), whose state is
saved with the checkpoint.
The Accelerator is built with ``mixed_precision="no"`` so that autocast is applied once, by us, around the
training loss only (validation and generation stay fp32) and the same code runs without Accelerate.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from synopsis.checkpoint import check_finite, rng_state, set_rng_state
from synopsis.devices import resolve_device
from synopsis.errors import ConfigError
from synopsis.sharding import COLLECTIVE_TIMEOUT, launched_processes, leave_process_group

logger = logging.getLogger(__name__)

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# accelerate launch --mixed_precision {no,fp16,bf16,fp8} sets this variable in every process it starts.
_LAUNCHER_PRECISION = "ACCELERATE_MIXED_PRECISION"


#: the precision of runs whose config leaves it unset, inside :func:`default_precision` (``--dtype``)
_CHOSEN_PRECISION: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "synopsis_precision", default=None
)


@contextlib.contextmanager
def default_precision(precision: str | None) -> Iterator[None]:
    """Inside the block, a run whose config leaves ``precision`` unset trains in ``precision`` (before the
    launcher's ``--mixed_precision``): ``experiment --dtype``. ``None`` changes nothing."""
    if precision is not None and precision not in PRECISIONS:
        raise ConfigError(f"--dtype must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    token = _CHOSEN_PRECISION.set(precision or _CHOSEN_PRECISION.get())
    try:
        yield
    finally:
        _CHOSEN_PRECISION.reset(token)


def resolve_precision(configured: str | None, field: str = "precision") -> str:
    """``configured`` if set, else the one chosen by :func:`default_precision` (``--dtype``), else the
    launcher's (``accelerate launch --mixed_precision``), else fp32."""
    configured = configured if configured is not None else _CHOSEN_PRECISION.get()
    if configured is not None:
        if configured not in PRECISIONS:
            raise ConfigError(f"{field} must be one of {', '.join(PRECISIONS)}, got {configured!r}")
        return configured
    launcher = os.environ.get(_LAUNCHER_PRECISION, "no").lower()
    if launcher == "no":
        return "fp32"
    if launcher not in PRECISIONS:
        raise ConfigError(
            f"{_LAUNCHER_PRECISION}={launcher} (accelerate launch --mixed_precision) is not supported: "
            f"use one of no, bf16, fp16, or set {field}"
        )
    return launcher


def check_precision(value: str | None, field: str = "precision") -> None:
    """For a config's ``__post_init__``: None (the launcher's) or one of :data:`PRECISIONS`."""
    if value is not None and value not in PRECISIONS:
        raise ValueError(f"{field} must be one of {', '.join(PRECISIONS)}, got {value!r}")


@dataclass
class Part:
    """One micro-batch of a rank: example indices, or a filler (a stand-in whose loss counts 0)."""

    indices: list[int]
    filler: bool = False


@dataclass
class StepPlan:
    """This rank's micro-batches for one optimizer step and the data position after it."""

    parts: list[Part]
    epoch: int
    batch_in_epoch: int


@dataclass
class LoadedStep:
    """A :class:`StepPlan` with its micro-batches collated: ``[(batch, filler), ...]``."""

    batches: list[tuple[Any, bool]]
    epoch: int
    batch_in_epoch: int


@dataclass
class StepLoss:
    """The global loss of one step: sum of per-count means over all ranks, and the global count."""

    total: float
    count: float

    @property
    def mean(self) -> float:
        return self.total / max(self.count, 1.0)


def _derived_seed(seed: int, rank: int, step: int) -> int:
    digest = hashlib.sha256(f"synopsis:{seed}:{rank}:{step}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % (2**63)


class MixedPrecision:
    """The training precision of one process (see the module docstring): ``torch.autocast`` around the loss,
    fp32 weights and optimizer state, and in fp16 the dynamic loss scaler whose state a checkpoint keeps."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.name = "fp32"
        self.scaler: torch.amp.GradScaler | None = None

    def set(self, configured: str | None, field: str = "precision") -> str:
        """Train in ``configured`` precision (None: the launcher's); returns the one chosen."""
        self.name = resolve_precision(configured, field)
        self.scaler = None
        if self.name == "fp16":
            self.scaler = torch.amp.GradScaler(self.device.type)
        if self.name != "fp32":
            logger.info("mixed precision: %s autocast, fp32 weights and optimizer state", self.name)
        return self.name

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context of a training forward pass (a no-op in fp32)."""
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=PRECISIONS[self.name])

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss to back-propagate: times the fp16 loss scale (unchanged otherwise)."""
        return loss if self.scaler is None else self.scaler.scale(loss)

    def unscale_(self, optimizer: torch.optim.Optimizer | None) -> None:
        """In fp16, divide ``optimizer``'s gradients by the loss scale (before they are clipped)."""
        if self.scaler is None:
            return
        if optimizer is None:
            raise ValueError("clip_grad_norm_ in fp16 needs the optimizer (to unscale its gradients)")
        self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``; in fp16 through the loss scaler (skipped when the gradients overflowed)."""
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the precision: the fp16 loss scaler's state (JSON-able)."""
        return {} if self.scaler is None else {"grad_scaler": self.scaler.state_dict()}

    def restore(self, state: dict[str, Any]) -> None:
        """Pop the loss scaler's state from a checkpoint's state (absent: a run saved in fp32 or bf16)."""
        saved = state.pop("grad_scaler", None)
        if self.scaler is not None and saved is not None:
            self.scaler.load_state_dict(saved)


class RankRNG:
    """Every rank's random streams (see "RNG per rank" in the module docstring): saved from all ranks,
    restored per rank, derived from (seed, rank, step) for a rank that has none."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size

    def states(self) -> dict[str, Any]:
        """``{"rng": rank 0's states}`` plus ``"rng_ranks"`` (every rank's) on several processes; a
        collective: every rank calls it, the main process writes the result."""
        own = rng_state()
        if self.world_size == 1:
            return {"rng": own}
        from accelerate.utils import gather_object

        everyone = gather_object([own])
        return {"rng": everyone[0], "rng_ranks": everyone}

    def restore(self, state: dict[str, Any], seed: int, step: int) -> None:
        """Pop ``rng`` / ``rng_ranks`` from a checkpoint's state and restore this rank's RNG states."""
        ranks = state.pop("rng_ranks", None)
        first = state.pop("rng", None)
        saved = len(ranks) if ranks is not None else int(first is not None)
        if saved != self.world_size:
            what = (
                f"processes {saved}..{self.world_size - 1} derive theirs from seed {seed}, rank, step {step}"
                if saved < self.world_size
                else f"those of processes {self.world_size}..{saved - 1} go unused"
            )
            logger.info(
                "the checkpoint holds the RNG states of %d process(es), this run has %d: %s (dropout masks "
                "differ from an uninterrupted run; the data order does not)",
                saved,
                self.world_size,
                what,
            )
        if ranks is not None and self.rank < len(ranks):
            set_rng_state(ranks[self.rank])
        elif self.rank == 0 and first is not None:
            set_rng_state(first)
        else:
            self._seed_derived(seed, step)

    def seed_ranks(self, seed: int) -> None:
        """At the start of a run, after the model is built: ranks > 0 move to their own RNG streams."""
        if self.rank > 0:
            self._seed_derived(seed, 0)

    def _seed_derived(self, seed: int, step: int) -> None:
        value = _derived_seed(seed, self.rank, step)
        random.seed(value)
        np.random.seed(value % 2**32)
        torch.manual_seed(value)  # every CUDA device too


class GlobalBatches:
    """This rank's share of every global batch (see "Same data order", "Loading" and "A global batch not
    divisible" in the module docstring): the split, the loader over it, and the one configuration error."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank, self.world_size = rank, world_size

    def require_size(self, size: int, field: str) -> None:
        """A global batch must give every process at least one example (or LM row)."""
        if size < self.world_size:
            raise ConfigError(
                f"{field} ({size}) is smaller than the number of processes ({self.world_size}); "
                f"{field} is the global batch, shared by all processes: raise it or launch fewer processes"
            )

    def shard(self, indices: Sequence[int], micro_batch_size: int | None = None) -> list[Part]:
        """This rank's micro-batches of one global batch (see the module docstring)."""
        indices = list(indices)
        largest = -(-len(indices) // self.world_size)
        count = 1 if micro_batch_size is None else max(1, -(-largest // micro_batch_size))
        mine = indices[self.rank :: self.world_size]
        parts = []
        for k in range(count):
            chunk = mine[k * len(mine) // count : (k + 1) * len(mine) // count]
            parts.append(Part(chunk) if chunk else Part(indices[:1], filler=True))
        return parts

    def loader(
        self,
        epoch_batches: Callable[[int], list[list[int]]],
        collate: Callable[[list[int]], Any],
        epoch: int,
        batch_in_epoch: int,
        group: int = 1,
        micro_batch_size: int | None = None,
    ) -> Iterator[LoadedStep]:
        """Endless :class:`LoadedStep` s from a DataLoader over :class:`GlobalBatchSampler`."""
        sampler = GlobalBatchSampler(self, epoch_batches, epoch, batch_in_epoch, group, micro_batch_size)
        loader = torch.utils.data.DataLoader(  # its own generator: the global RNG streams stay untouched
            _Collating(collate),
            sampler=sampler,
            batch_size=None,
            collate_fn=_identity,
            generator=torch.Generator().manual_seed(0),
        )
        return iter(loader)


class Distributed:
    """This process's place in a run (rank, world size, device), its launch, and the collectives the
    trainers use; its concerns that hold state of their own are collaborators: :attr:`precision`
    (:class:`MixedPrecision`), :attr:`rng` (:class:`RankRNG`) and :attr:`batches` (:class:`GlobalBatches`).

    :meth:`single` is one process without Accelerate (what library calls get by default);
    :meth:`launch` reads the launcher's environment through Accelerate. With one process every collective is
    a no-op, so the trainers have a single code path.
    """

    def __init__(
        self,
        accelerator: Any = None,
        *,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | None = None,
    ) -> None:
        """``accelerator``: a launched run's; without one, ``rank`` of ``world_size`` on ``device`` (default:
        the device --device chose; auto: a GPU when torch sees one) — one process, or a stand-in in tests."""
        self.accelerator = accelerator
        if accelerator is None:
            self.rank, self.world_size = rank, world_size
            self.device = device if device is not None else resolve_device(None)
        else:
            self.rank, self.world_size = accelerator.process_index, accelerator.num_processes
            self.device = accelerator.device
        self.precision = MixedPrecision(self.device)
        self.rng = RankRNG(self.rank, self.world_size)
        self.batches = GlobalBatches(self.rank, self.world_size)

    @classmethod
    def single(cls, device: torch.device | None = None) -> Distributed:
        """One process without Accelerate, on ``device`` (default: the device --device chose)."""
        return cls(None, device=device)

    @classmethod
    def launch(cls) -> Distributed:
        """From ``torchrun`` / ``accelerate launch`` / no launcher (then one process)."""
        from accelerate import Accelerator
        from accelerate.utils import InitProcessGroupKwargs

        # torchrun sets no ACCELERATE_USE_CPU: without a GPU, Accelerate would run every process alone; with
        # one, --device cpu (devices.compute_device) keeps the run on the CPU.
        device = resolve_device(None)
        seen = torch.accelerator.is_available()
        cpu = (launched_processes() > 1 and not seen) or (device.type == "cpu" and seen)
        if device.type == "cuda" and launched_processes() <= 1:
            torch.cuda.set_device(device)  # --device cuda:N: Accelerate takes the current GPU
        # The others wait while the main process validates (beam search over a dev set can take long); a
        # process that dies is noticed by the launcher, which stops the rest at once.
        timeout = InitProcessGroupKwargs(timeout=COLLECTIVE_TIMEOUT)
        _refuse_unsupported_launcher_flags()
        # Mixed precision is ours (see the module docstring): Accelerate must not wrap the forward again.
        accelerator = Accelerator(cpu=cpu, mixed_precision="no", kwargs_handlers=[timeout])
        distributed = cls(accelerator)
        if not distributed.is_main:  # only the main process logs (the others: errors only)
            logging.getLogger("synopsis").setLevel(max(logging.ERROR, logging.getLogger("synopsis").level))
        if distributed.world_size > 1:
            logger.info(
                "distributed run: %d processes (%s), this is rank %d on %s",
                distributed.world_size,
                accelerator.distributed_type.value,
                distributed.rank,
                distributed.device,
            )
        return distributed

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # ------------------------------------------------------------------ model and optimizer
    def prepare(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, find_unused_parameters: bool = False
    ) -> tuple[Any, Any]:
        """(model for training steps — DDP-wrapped on several processes, optimizer) on :attr:`device`.

        ``find_unused_parameters``: for a model that leaves some parameters out of every step (DDP would
        wait for their gradients forever); it costs a graph traversal per step, so the others leave it off.
        """
        if self.accelerator is None:
            # CPU -> CUDA moves parameters in place, so an optimizer built before keeps them (a trainer
            # moves its model before building the optimizer all the same)
            return model.to(self.device), optimizer
        from accelerate.utils import DistributedDataParallelKwargs

        handler = DistributedDataParallelKwargs(find_unused_parameters=find_unused_parameters)
        self.accelerator.ddp_handler = handler  # read by prepare() when it wraps the model in DDP
        return self.accelerator.prepare(model, optimizer)

    def unwrap(self, model: Any) -> Any:
        return model if self.accelerator is None else self.accelerator.unwrap_model(model)

    def clip_grad_norm_(
        self, parameters: Any, max_norm: float, optimizer: torch.optim.Optimizer | None = None
    ) -> None:
        """Clip the gradients' global norm; in fp16 ``optimizer``'s gradients are unscaled first."""
        self.precision.unscale_(optimizer)
        if self.accelerator is None:
            torch.nn.utils.clip_grad_norm_(parameters, max_norm)
        else:
            self.accelerator.clip_grad_norm_(parameters, max_norm)

    # ------------------------------------------------------------------ one step
    def backward(
        self,
        model: Any,
        batches: Sequence[tuple[Any, bool]],
        count: Callable[[Any], int],
        loss: Callable[[Any], torch.Tensor],
        step: int,
    ) -> StepLoss:
        """Back-propagate one global batch: ``loss(batch)`` is a mean over ``count(batch)`` items (tokens,
        rows). Returns the global loss (identical on every rank); raises on NaN/inf on every rank alike,
        before the optimizer steps."""
        counts = [0 if filler else int(count(batch)) for batch, filler in batches]
        (global_count,) = self.sum(float(sum(counts)))
        denominator = max(global_count, 1.0)
        total = 0.0
        for index, ((batch, filler), local) in enumerate(zip(batches, counts, strict=True)):
            # DDP all-reduces the gradients in the last backward of the step only.
            accumulating = index < len(batches) - 1 and self.accelerator is not None
            with self.accelerator.no_sync(model) if accumulating else contextlib.nullcontext():
                with self.precision.autocast():
                    value = loss(batch)
                scaled = self.precision.scale(
                    value * (0.0 if filler else self.world_size * local / denominator)
                )
                if self.accelerator is None:
                    scaled.backward()
                else:
                    self.accelerator.backward(scaled)
            if not filler:
                total += float(value.detach()) * local
        (global_total,) = self.sum(total)
        result = StepLoss(global_total, global_count)
        check_finite(result.mean, step)
        return result

    # ------------------------------------------------------------------ collectives
    def sum(self, *values: float) -> list[float]:
        """Element-wise sums over all ranks (float64)."""
        if self.world_size == 1:
            return [float(v) for v in values]
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        return [float(v) for v in self.accelerator.reduce(tensor, reduction="sum").cpu()]

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on at least one (a decision all ranks must share)."""
        if self.world_size == 1:
            return bool(flag)
        tensor = torch.tensor([1 if flag else 0], dtype=torch.int64, device=self.device)
        torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.MAX)
        return bool(tensor.item())

    def broadcast(self, value: Any) -> Any:
        """The main process's ``value`` on every rank (any picklable object, sent between processes only)."""
        if self.world_size == 1:
            return value
        from accelerate.utils import broadcast_object_list

        box = [value if self.is_main else None]
        broadcast_object_list(box, from_process=0)
        return box[0]

    def main_computes(self, compute: Callable[[], Any]) -> Any:
        """``compute()`` on the main process only; its result on every rank."""
        return self.broadcast(compute() if self.is_main else None)

    def barrier(self) -> None:
        if self.world_size > 1:
            self.accelerator.wait_for_everyone()

    def finish(self) -> None:
        """The end of a run, on every process: wait until the main process has written everything, then leave
        the process group (:func:`~synopsis.sharding.leave_process_group`). A process that exits first can
        abort, and the launcher then kills the main process mid-write."""
        if self.world_size > 1:
            self.accelerator.wait_for_everyone()
            leave_process_group()


def _refuse_unsupported_launcher_flags() -> None:
    """``accelerate launch`` flags that would change training behind our back, refused in one line."""
    # FSDP and DeepSpeed: Accelerate (1.15) applies them on GPUs and other accelerators only; on CPU it
    # trains with DDP under --use_fsdp and leaves every process alone under --use_deepspeed, so neither could
    # be built and tested here (docs/distributed.md), although torch's FSDP2 and DeepSpeed ZeRO-3 themselves
    # run on CPU/gloo.
    for variable, flag, why in (
        (
            "ACCELERATE_USE_FSDP",
            "--use_fsdp",
            "FSDP shards the weights and optimizer state that checkpoints hold whole, and Accelerate runs it "
            "on GPUs only, so it is untested",
        ),
        (
            "ACCELERATE_USE_DEEPSPEED",
            "--use_deepspeed",
            "DeepSpeed owns the optimizer and its checkpoints, and Accelerate runs it on GPUs only, so it is "
            "untested",
        ),
        ("ACCELERATE_USE_MEGATRON_LM", "--use_megatron_lm", "not supported"),
    ):
        if os.environ.get(variable, "false").lower() == "true":
            raise ConfigError(
                f"accelerate launch {flag} is not supported by synopsis's trainers ({why}); use DDP with "
                "precision: bf16 and gradient_checkpointing: true (docs/distributed.md: the memory plans)"
            )
    steps = os.environ.get("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "1")
    if steps != "1":
        raise ConfigError(
            f"accelerate launch --gradient_accumulation_steps {steps} is not used by synopsis's trainers: "
            "set the config's accumulation (seq2seq: grad_accum_steps; the others: the global batch size)"
        )


class GlobalBatchSampler(torch.utils.data.Sampler):
    """Endless :class:`StepPlan` s: ``group`` consecutive batches of ``epoch_batches(epoch)`` (a pure function
    of the epoch) form one global batch; epochs follow each other from the saved position."""

    def __init__(
        self,
        batches: GlobalBatches,
        epoch_batches: Callable[[int], list[list[int]]],
        epoch: int,
        batch_in_epoch: int,
        group: int = 1,
        micro_batch_size: int | None = None,
    ) -> None:
        self.batches, self.epoch_batches = batches, epoch_batches
        self.epoch, self.batch_in_epoch = epoch, batch_in_epoch
        self.group, self.micro_batch_size = group, micro_batch_size

    def __iter__(self) -> Iterator[StepPlan]:
        epoch, position = self.epoch, self.batch_in_epoch
        order = self.epoch_batches(epoch)
        while True:
            chosen: list[int] = []
            for _ in range(self.group):
                while position >= len(order):
                    epoch, position = epoch + 1, 0
                    order = self.epoch_batches(epoch)
                chosen += order[position]
                position += 1
            yield StepPlan(self.batches.shard(chosen, self.micro_batch_size), epoch, position)


class _Collating(torch.utils.data.Dataset):
    """Map-style dataset whose keys are :class:`StepPlan` s: collates this rank's micro-batches."""

    def __init__(self, collate: Callable[[list[int]], Any]) -> None:
        self.collate = collate

    def __getitem__(self, plan: StepPlan) -> LoadedStep:  # type: ignore[override]
        batches = [(self.collate(part.indices), part.filler) for part in plan.parts]
        return LoadedStep(batches, plan.epoch, plan.batch_in_epoch)


def _identity(item: Any) -> Any:
    return item
