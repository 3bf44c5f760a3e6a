"""Training throughput of the attribute-augmented LSTM LM vs a plain ``torch.nn.LSTM`` LM of the same sizes.

The plain LM here is written independently of :mod:`synopsis.models.domain_lm` (embedding -> dropout ->
nn.LSTM -> dropout -> Linear), so the ratio measures the full cost of the attribute augmentation. Every
variant trains with the experiment's recipe (fused SGD with weight decay, truncated BPTT, gradient clipping)
on random tokens. The batch's rows come from ``--mix`` domains (two of N slots on per domain, as for a
style + topic domain), and the mask is given per token, (B, T, N), as the trainer gives it; an extra row
trains (in) with one domain per batch. The "floor" rows are plain LMs with only the work that any exact
implementation of the variant in one LSTM call must add (``FloorLM``): their ratios bound the variants' from
below. "out: 1 matrix, K matmuls" (``OneMatrixOutputLM``) is (out) with one output matrix for every
combination, still in K grouped products: it splits (out)'s excess over its floor into the K products and the
K matrices.

Rounds alternate between models, and within a round the models take turns every 0.1 s (``--slice``), so that
the machine's slow phases (seconds long on a shared machine) hit all of them alike. Each model trains in its
own process, one at a time, and the processes are fresh every round: no model's memory allocations change
another's (as in a real run), and where a process's memory lands, which changes its speed by up to ~10% here,
is sampled by the rounds too. Reported: the median tokens/s over rounds, the time ratio to the plain LM (ratio
of medians) and its spread (min-max of the per-round ratios), by the wall clock and by the thread's CPU time
(which load from other processes disturbs much less), and the machine's load average at the start and the end.

    python benchmarks/domain_lm.py                # prints a table, writes benchmarks/results/domain_lm.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import statistics
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from synopsis.models.domain_lm import DomainLM, DomainLMConfig, MaskGroups


class PlainLSTMLM(nn.Module):
    def __init__(self, vocab_size: int, embedding_dim: int, hidden_dim: int, dropout: float) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, batch_first=True)
        self.output = nn.Linear(hidden_dim, vocab_size)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None, state=None):
        hidden, state = self.lstm(self.dropout(self.embedding(ids)), state)
        return self.output(self.dropout(hidden)), state


class FloorLM(nn.Module):
    """The plain LM plus only what any exact, one-LSTM-call implementation of a variant must also do: a lower
    bound for the variant's ratio.

    (in): with K attribute combinations in a batch, the call's one input weight W must give W x = U_c p(t) for
    every combination c, so its input x is at least rank [U_c1 ... U_cK] = min(4H, K*E) wide ((N+1)E, the
    paper's p'(t), always suffices); here the LSTM reads copies of p(t), cut to ``width``. (out): the output
    weight is built from ``blocks`` = N+1 V x H parameter blocks, each with its gradient, clipping, decay and
    update; here it is their sum. No masks, no grouping, no per-combination weights.
    """

    def __init__(self, args: argparse.Namespace, width: int, blocks: int) -> None:
        super().__init__()
        self.width, self.copies = width, -(-width // args.embedding)
        self.embedding = nn.Embedding(args.vocab, args.embedding)
        self.dropout = nn.Dropout(0.5)
        self.lstm = nn.LSTM(width, args.hidden, batch_first=True)
        self.output_blocks = nn.Parameter(torch.empty(blocks, args.vocab, args.hidden).uniform_(-0.1, 0.1))
        self.output_bias = nn.Parameter(torch.zeros(args.vocab))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None, state=None):
        embedded = self.dropout(self.embedding(ids))
        inputs = embedded.repeat(1, 1, self.copies)[..., : self.width] if self.copies > 1 else embedded
        hidden, state = self.lstm(inputs, state)
        weight = self.output_blocks.sum(0) if len(self.output_blocks) > 1 else self.output_blocks[0]
        return F.linear(self.dropout(hidden), weight, self.output_bias), state


class OneMatrixOutputLM(DomainLM):
    """DomainLM (out) with the tokens of every combination through one matrix, the sum of the N+1 blocks,
    still in K grouped products (so inexact when K > 1). Between ``floor out`` (one matrix, one product) and
    ``DomainLM out`` (K effective matrices, K products) it prices the two costs of a mixed batch apart."""

    def _effective_output_weights(self, groups: MaskGroups) -> torch.Tensor:
        return self.output_weight.sum(0).expand(len(groups.sizes), -1, -1)


def domain_mask(batch: int, slots: int, domains: int) -> torch.Tensor:
    """(B, N) masks: the rows split into ``domains`` groups, each with one style and one topic slot on."""
    mask = torch.zeros(batch, slots)
    half = slots // 2
    for row in range(batch):
        domain = row * domains // batch
        mask[row, domain % half] = mask[row, half + (domain // half) % (slots - half)] = 1.0
    return mask


class Trainer:
    """One model in training with the experiment's recipe, resumable: ``run`` trains for a slice of time."""

    def __init__(self, model: nn.Module, mask: torch.Tensor, args: argparse.Namespace) -> None:
        torch.manual_seed(0)
        self.model, self.mask, self.bptt = model.train(), mask, args.bptt
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=1e-6, fused=True)  # as ours
        self.data = torch.randint(0, args.vocab, (args.batch, 64 * args.bptt + 1))
        self.state: tuple[torch.Tensor, torch.Tensor] | None = None
        self.position = 0

    def run(self, seconds: float) -> tuple[int, float, float, int]:
        """Train for ``seconds``: (tokens, wall-clock s, thread CPU s, page faults) of the slice."""
        start, cpu_start = time.perf_counter(), time.thread_time()
        faults_start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        tokens = 0
        while time.perf_counter() - start < seconds:
            tokens += self.step()
        return (
            tokens,
            time.perf_counter() - start,
            time.thread_time() - cpu_start,
            resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_start,
        )

    def step(self) -> int:
        """One truncated-BPTT step; the number of tokens it trained on."""
        if self.position + self.bptt + 1 > self.data.shape[1]:
            self.position, self.state = 0, None
        inputs = self.data[:, self.position : self.position + self.bptt]
        targets = self.data[:, self.position + 1 : self.position + self.bptt + 1]
        if self.state is not None:  # truncated BPTT
            self.state = (self.state[0].detach(), self.state[1].detach())
        logits, self.state = self.model(inputs, self.mask, self.state)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten()) * self.bptt
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
        self.optimizer.step()
        self.position += self.bptt
        return inputs.numel()


# glibc returns the top of its heap to the kernel when more than M_TRIM_THRESHOLD is free there, and serves
# requests above M_MMAP_THRESHOLD by mmap; both thresholds adapt to the sizes freed so far. So whether every
# training step faults megabytes of fresh pages in again depends on the order of a process's allocations: in
# fresh processes here, ~400 page faults per step for the plain LM (1.3 ms of system time) and ~2700 for
# DomainLM (in) (9 ms), and other counts when the same models share a process. Fixed high thresholds
# (environment variables read by glibc at start) remove that for every model alike.
FIXED_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(256 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}

# name -> (variant, None: the plain LM, "floor ...": FloorLM; domains per batch, None: --mix)
MODELS: dict[str, tuple[str | None, int | None]] = {
    "nn.LSTM LM": (None, None),
    "DomainLM baseline": ("baseline", None),
    "DomainLM in": ("in", None),
    "DomainLM out": ("out", None),
    "DomainLM in_out": ("in_out", None),
    "DomainLM in, 1 domain": ("in", 1),
    "floor in": ("floor in", None),
    "floor out": ("floor out", None),
    "floor in_out": ("floor in_out", None),
    "out: 1 matrix, K matmuls": ("out one-matrix", None),
}


def build(name: str, args: argparse.Namespace) -> tuple[nn.Module, torch.Tensor]:
    """The model and its (B, T, N) mask, given per token as the trainer's ``table[window_groups]`` is."""
    variant, mix = MODELS[name]
    torch.manual_seed(0)
    mask = domain_mask(args.batch, args.slots, mix or args.mix)
    mask = mask.unsqueeze(1).expand(-1, args.bptt, -1).contiguous()
    if variant is None:
        return PlainLSTMLM(args.vocab, args.embedding, args.hidden, 0.5), mask
    if variant.startswith("floor "):
        sides = variant.removeprefix("floor ").split("_")
        combinations = min(mix or args.mix, args.slots + 1)
        width = min(4 * args.hidden, combinations * args.embedding) if "in" in sides else args.embedding
        return FloorLM(args, width, args.slots + 1 if "out" in sides else 1), mask
    slots = [f"a{i}=v" for i in range(args.slots)]
    model_class = OneMatrixOutputLM if variant == "out one-matrix" else DomainLM
    variant = variant.removesuffix(" one-matrix")
    config = DomainLMConfig(args.vocab, args.embedding, args.hidden, variant=variant, attribute_slots=slots)
    return model_class(config), mask


def worker(conn, name: str, args: argparse.Namespace) -> None:
    """One model in its own process (its own heap, as in a real run): trains for the slices it is sent
    (seconds; ``None`` ends) and answers each with ``Trainer.run``'s counts for the slice."""
    torch.set_num_threads(args.threads)
    model, mask = build(name, args)
    trainer = Trainer(model, mask, args)
    conn.send(sum(p.numel() for p in model.parameters()))
    while (seconds := conn.recv()) is not None:
        conn.send(trainer.run(seconds))


def one_round(workers: dict, seconds: float, slice_seconds: float, first: int, step_tokens: int = 1) -> dict:
    """``seconds`` of training per model, the models taking turns every ``slice_seconds`` (one at a time,
    starting with model ``first``), so that a slow phase of the machine hits all of them alike. Per model:
    (tokens per wall-clock second, tokens per CPU second of the thread, page faults per training step)."""
    names = list(workers)
    names = names[first:] + names[:first]
    totals = {name: [0, 0.0, 0.0, 0] for name in names}
    for _ in range(max(1, round(seconds / slice_seconds))):
        for name in names:
            workers[name].send(slice_seconds)
            for i, value in enumerate(workers[name].recv()):
                totals[name][i] += value
    return {
        name: (tokens / wall, tokens / cpu, faults * step_tokens / tokens)
        for name, (tokens, wall, cpu, faults) in totals.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=2600, help="~ the MASC experiment's vocabulary")
    parser.add_argument("--embedding", type=int, default=100)
    parser.add_argument("--hidden", type=int, default=100)
    parser.add_argument("--slots", type=int, default=4, help="N attribute values (2 styles + 2 topics)")
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--bptt", type=int, default=16)
    parser.add_argument("--mix", type=int, default=3, help="domains per batch (the experiment trains on 3)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=3.0, help="per model per round")
    parser.add_argument("--slice", type=float, default=0.1, help="models take turns every SLICE seconds")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--malloc",
        choices=["fixed", "default"],
        default="fixed",
        help="fixed: glibc's mmap and trim thresholds set high for every model (no page faults from heap "
        "trimming); default: glibc's own dynamic thresholds",
    )
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "domain_lm.json")
    args = parser.parse_args()

    if args.malloc == "fixed":  # read by glibc when each worker process starts
        os.environ.update(FIXED_MALLOC)
    context = multiprocessing.get_context("spawn")
    samples: dict[str, list[float]] = {name: [] for name in MODELS}
    cpu_samples: dict[str, list[float]] = {name: [] for name in MODELS}
    faults: dict[str, list[float]] = {name: [] for name in MODELS}
    parameters: dict[str, int] = {}
    load_start = os.getloadavg()
    for round_ in range(args.rounds):
        # Fresh processes every round: where a process's memory lands changes its speed by up to ~10% here
        # (identical models in two processes differ that much), so the rounds sample that too.
        workers, processes = {}, []
        for name in MODELS:
            conn, child = context.Pipe()
            process = context.Process(target=worker, args=(child, name, args), daemon=True)
            process.start()
            workers[name], parameters[name] = conn, conn.recv()
            processes.append(process)
        one_round(workers, 0.5, 0.5, 0)  # warm-up
        print(f"round {round_ + 1}/{args.rounds} (load average {os.getloadavg()[0]:.2f})", flush=True)
        rates = one_round(workers, args.seconds, args.slice, round_ % len(MODELS), args.batch * args.bptt)
        for name, (wall, cpu, step_faults) in rates.items():
            samples[name].append(wall)
            cpu_samples[name].append(cpu)
            faults[name].append(step_faults)
        for conn, process in zip(workers.values(), processes, strict=True):
            conn.send(None)
            process.join()
    load_end = os.getloadavg()

    def ratio(rates: dict[str, list[float]], name: str) -> tuple[float, list[float]]:
        plain_rounds = rates["nn.LSTM LM"]
        per_round = [p / s for p, s in zip(plain_rounds, rates[name], strict=True)]
        return statistics.median(plain_rounds) / statistics.median(rates[name]), per_round

    rows = []
    print(f"{'':24s} {'':>9s} {'wall clock':^44s} {'CPU time of the thread':^44s}")
    columns = f" {'tokens/s':>10s} {'time vs nn.LSTM [round min-max]':>33s}"
    print(f"{'model':24s} {'params':>9s}" + columns * 2 + f" {'faults/step':>11s}")
    for name in MODELS:
        params = parameters[name]
        row: dict = {"model": name, "parameters": params}
        line = f"{name:24s} {params:9d}"
        for clock, rates in (("", samples), ("cpu_", cpu_samples)):
            value, per_round = ratio(rates, name)
            row.update(
                {
                    f"{clock}tokens_per_second": statistics.median(rates[name]),
                    f"{clock}time_ratio": value,
                    f"{clock}time_ratio_min": min(per_round),
                    f"{clock}time_ratio_max": max(per_round),
                    f"{clock}round_time_ratios": per_round,
                    f"{clock}rounds": rates[name],
                }
            )
            spread = f"{value:.2f}x [{min(per_round):.2f}-{max(per_round):.2f}]"
            line += f" {statistics.median(rates[name]):10.0f} {spread:>33s}"
        row["page_faults_per_step"] = faults[name]
        rows.append(row)
        print(line + f" {statistics.median(faults[name]):8.0f}")
    load = f"load average {load_start[0]:.2f} -> {load_end[0]:.2f}"
    print(f"median of {args.rounds} alternating rounds; {load}; malloc {args.malloc}")
    result = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "torch": torch.__version__,
        "machine": platform.processor() or platform.machine(),
        "command": " ".join(["python", "benchmarks/domain_lm.py", *__import__("sys").argv[1:]]),
        "load_average": {"start": list(load_start), "end": list(load_end)},
        "results": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
