"""Sharded inference: one corpus split across the processes of a ``torchrun`` or ``accelerate launch``.

``torchrun --nproc-per-node N --no-python synopsis summarize CORPUS --corpus ... -o out.jsonl`` (and the
same for ``evaluate``) runs N copies of the command; each finds its place with :func:`current_shard`.

* **Who is who.** :func:`current_shard` asks accelerate's ``PartialState`` (it reads the launcher's
  environment: torchrun's, accelerate's, MPI's) for this process's rank, the number of processes and its
  device, and joins the process group: NCCL on GPUs, gloo on CPUs. Started without a launcher (no
  ``WORLD_SIZE``), it is :class:`Shard` ``()``, the one process: no process group, and neither torch nor
  accelerate is imported.
* **The split.** :meth:`Shard.block` gives each process one contiguous block of the work, the blocks in
  rank order (sizes differ by at most one; earlier ranks take the extra). Contiguous blocks keep each
  process's results in input order, so putting them back together is a concatenation in rank order:
  :meth:`Shard.gather` returns every process's items in that order, that is, in input order.
* **Part files** (``summarize``). Process ``r`` of ``n`` writes its predictions, as it makes them, to
  ``OUTPUT.part-r-of-n`` beside the output (:func:`part_path`): one JSON record ``{"index", "id",
  "prediction"}`` per line, ``index`` the example's position in the input. Records carry their position,
  so the parts of any run, whatever its number of processes, can be read back (:func:`read_part`) and put
  in input order (:func:`write_in_order`, atomic); a record whose id is not the input's id at that
  position means the part belongs to another corpus, an :class:`~synopsis.errors.OutputError`.

The device each process computes on is :mod:`synopsis.devices`'s (``--device``).

Library code: it logs, never prints; the CLI decides what the user sees.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from synopsis.errors import OutputError, SynopsisError
from synopsis.io import open_for_atomic_write, output_error, whole_lines_to_resume

T = TypeVar("T")
logger = logging.getLogger(__name__)

#: the variables a launcher sets to the number of processes (torchrun and accelerate; MPI launchers)
WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
#: how long a process waits for the others at a collective (the main process waits at the end of the run
#: for the slowest block); a process that dies is noticed by the launcher, which stops the rest at once
COLLECTIVE_TIMEOUT = datetime.timedelta(hours=24)


class ShardError(SynopsisError):
    """Another process of the launch stopped (or could not be reached) while this one waited for it."""


def launched_processes() -> int:
    """How many processes the launcher started (1 without a launcher); reads the environment only."""
    for name in WORLD_SIZE_VARIABLES:
        try:
            return max(1, int(os.environ[name]))
        except (KeyError, ValueError):
            continue
    return 1


def leave_process_group() -> None:
    """Leave the default process group, if there is one, before the interpreter exits: a gloo group torn
    down at exit can abort the process ("terminate called without an active exception")."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except (RuntimeError, ValueError) as err:  # already torn down by an error; exit all the same
            logger.debug("leaving the process group: %s", err)


@dataclass(frozen=True)
class Shard:
    """This process's place in a launch: ``rank`` of ``world`` processes, and the ``device`` for its model
    (``None``: leave the model where it is, the one-process default)."""

    rank: int = 0
    world: int = 1
    device: Any = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def describe(self) -> str:
        return f"process {self.rank + 1} of {self.world}"

    def block(self, count: int) -> range:
        """This process's contiguous share of ``count`` items (``range(count)`` for one process)."""
        return self.blocks(count)[self.rank]

    def blocks(self, count: int) -> list[range]:
        """Every process's share of ``count`` items, in rank order: contiguous, covering all, sizes equal
        but for the first ``count % world`` processes, which take one more."""
        share, extra = divmod(count, self.world)
        out, start = [], 0
        for rank in range(self.world):
            stop = start + share + (rank < extra)
            out.append(range(start, stop))
            start = stop
        return out

    def gather(self, items: Sequence[T]) -> list[T]:
        """Every process's ``items``, concatenated in rank order, on every process."""
        if not self.distributed:
            return list(items)
        from accelerate.utils import gather_object

        return self._collective(lambda: gather_object(list(items)), "gathering results")

    def broadcast(self, value: T) -> T:
        """The main process's ``value``, on every process (the others pass anything, e.g. ``None``)."""
        if not self.distributed:
            return value
        from accelerate.utils import broadcast_object_list

        box = [value]
        self._collective(lambda: broadcast_object_list(box, from_process=0), "receiving the plan")
        return box[0]

    def barrier(self) -> None:
        """Wait until every process gets here."""
        if self.distributed:
            from accelerate import PartialState

            self._collective(PartialState().wait_for_everyone, "waiting for the other processes")

    def close(self) -> None:
        """Leave the process group (:func:`leave_process_group`). Nothing to do for one process."""
        if self.distributed:
            leave_process_group()

    def _collective(self, call: Any, what: str) -> Any:
        try:
            return call()
        except (RuntimeError, ConnectionError) as err:  # torch.distributed's errors (DistBackendError, ...)
            reason = " ".join(str(err).split())[:200]
            raise ShardError(
                f"{self.describe()}: another process of this launch stopped while {what} ({reason})"
            ) from None


def current_shard() -> Shard:
    """This process's :class:`Shard`: from accelerate's ``PartialState`` under a launcher (joining the
    process group: NCCL on GPUs, gloo on CPUs), else the one-process ``Shard()`` at no cost."""
    if launched_processes() <= 1:
        return Shard()
    import torch
    from accelerate import PartialState

    # Without an accelerator, accelerate needs cpu=True to see torchrun's processes (it would take them
    # for separate one-process runs); a GPU launch keeps the default (NCCL, one GPU per local rank).
    cpu = not torch.accelerator.is_available()
    state = PartialState(cpu=cpu, timeout=COLLECTIVE_TIMEOUT)
    device = state.device if state.device is not None and state.device.type != "cpu" else None
    return Shard(state.process_index, state.num_processes, device)


# ------------------------------------------------------------------------------------------ part files
def part_path(output: Path, rank: int, world: int) -> Path:
    """``out.jsonl.part-0-of-4``: where process ``rank`` of ``world`` writes its predictions."""
    return output.with_name(f"{output.name}.part-{rank}-of-{world}")


def part_files(output: Path) -> list[Path]:
    """The part files of ``output`` on disk, from runs with any number of processes (by size, then rank)."""
    pattern = re.compile(re.escape(output.name) + r"\.part-(\d+)-of-(\d+)")
    try:
        names = os.listdir(output.parent)
    except OSError:
        return []
    found = []
    for name in names:
        match = pattern.fullmatch(name)
        if match:
            found.append(((int(match.group(2)), int(match.group(1))), output.with_name(name)))
    return [path for _, path in sorted(found)]


def part_record(index: int, example_id: str, prediction: str | Mapping[str, Any]) -> str:
    """One line of a part file: a summary's record (or a bare prediction) with its position in the input."""
    record = {"prediction": prediction} if isinstance(prediction, str) else dict(prediction)
    return json.dumps({**record, "index": index, "id": example_id}, ensure_ascii=False) + "\n"


def read_part(path: Path, ids: Sequence[str]) -> dict[int, dict[str, Any]]:
    """``{index: record}`` (without ``index``) from a part file of a run over ``ids``.

    A last line cut short (a kill while it was written) is dropped from the file with a warning, as
    ``--resume`` does with the output itself; a record that is not JSON, or names an id that is not
    ``ids[index]``, is an :class:`OutputError` (the part belongs to another corpus or was edited).
    """
    out: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(whole_lines_to_resume(path), start=1):
        try:
            record = json.loads(line)
            index, example_id, prediction = record.pop("index"), str(record["id"]), record["prediction"]
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise OutputError(
                f"{path}:{number}: not a line of a part file ({{'index', 'id', 'prediction'}})"
            ) from None
        if not isinstance(index, int) or not 0 <= index < len(ids) or ids[index] != example_id:
            raise OutputError(
                f"{path}:{number}: example {index} '{example_id}' is not in this corpus at that position; "
                "the part file belongs to another run (delete it, or run without --resume)"
            )
        if not isinstance(prediction, str):
            raise OutputError(f"{path}:{number}: 'prediction' must be a string")
        out[index] = record
    return out


def count_lines(paths: Iterable[Path]) -> int:
    """Whole lines in these files (for messages; unreadable files count 0)."""
    total = 0
    for path in paths:
        try:
            total += path.read_bytes().count(b"\n")
        except OSError:
            pass
    return total


def write_in_order(output: Path, head: bytes, lines: Iterable[str]) -> None:
    """``output`` := ``head`` (what it held already) followed by ``lines``, replaced atomically: a kill at any
    moment leaves the old file or the new one."""
    with open_for_atomic_write(output, "wb") as handle:
        handle.write(head)
        for line in lines:
            handle.write(line.encode("utf-8"))


def remove_parts(output: Path) -> list[Path]:
    """Delete ``output``'s part files (once merged, or stale before a fresh run); returns those removed."""
    removed = []
    for path in part_files(output):
        try:
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            raise output_error(path, err) from None
    return removed
