"""Training throughput of the attribute-augmented LSTM LM vs a plain ``torch.nn.LSTM`` LM of the same sizes.

The plain LM here is written independently of :mod:`synopsis.models.domain_lm` (embedding -> dropout ->
nn.LSTM -> dropout -> Linear), so the ratio measures the full cost of the attribute augmentation. Every
variant trains with the experiment's recipe (SGD, truncated BPTT, gradient clipping) on random tokens with
a batch-constant attribute mask (two of N slots on, as for a style + topic domain); rounds alternate between
models so that load from other processes hits all of them alike. Reported: the median tokens/s over rounds,
the time ratio to the plain LM (ratio of medians) and its spread (min-max of the per-round ratios), by the
wall clock and by the thread's CPU time (which load from other processes disturbs much less), and the
machine's load average at the start and the end.

    python benchmarks/domain_lm.py                # prints a table, writes benchmarks/results/domain_lm.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from synopsis.models.domain_lm import DomainLM, DomainLMConfig


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


def domain_mask(batch: int, slots: int, domains: int) -> torch.Tensor:
    """(B, N) masks: the rows split into ``domains`` groups, each with one style and one topic slot on."""
    mask = torch.zeros(batch, slots)
    half = slots // 2
    for row in range(batch):
        domain = row * domains // batch
        mask[row, domain % half] = mask[row, half + (domain // half) % (slots - half)] = 1.0
    return mask


def tokens_per_second(
    model: nn.Module, mask: torch.Tensor, args: argparse.Namespace, seconds: float
) -> tuple[float, float]:
    """(tokens per wall-clock second, tokens per CPU second of this thread) over ``seconds`` of training."""
    torch.manual_seed(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=1e-6, fused=True)  # as the trainer
    data = torch.randint(0, args.vocab, (args.batch, 64 * args.bptt + 1))
    model.train()
    state, tokens, position = None, 0, 0
    start, cpu_start = time.perf_counter(), time.thread_time()
    while time.perf_counter() - start < seconds:
        if position + args.bptt + 1 > data.shape[1]:
            position, state = 0, None
        inputs = data[:, position : position + args.bptt]
        targets = data[:, position + 1 : position + args.bptt + 1]
        if state is not None:
            state = (state[0].detach(), state[1].detach())
        logits, state = model(inputs, mask, state)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten()) * args.bptt
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        tokens += inputs.numel()
        position += args.bptt
    return tokens / (time.perf_counter() - start), tokens / (time.thread_time() - cpu_start)


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
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "domain_lm.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    slots = [f"a{i}=v" for i in range(args.slots)]
    mixed = domain_mask(args.batch, args.slots, args.mix)
    plain_lm = PlainLSTMLM(args.vocab, args.embedding, args.hidden, 0.5)
    runs: dict[str, tuple[nn.Module, torch.Tensor]] = {"nn.LSTM LM": (plain_lm, mixed)}
    for variant in ("baseline", "in", "out", "in_out"):
        config = DomainLMConfig(
            args.vocab, args.embedding, args.hidden, variant=variant, attribute_slots=slots
        )
        runs[f"DomainLM {variant}"] = (DomainLM(config), mixed)
    runs["DomainLM in, 1 domain"] = (runs["DomainLM in"][0], domain_mask(args.batch, args.slots, 1))
    load_start = os.getloadavg()
    for model, mask in runs.values():  # warm-up
        tokens_per_second(model, mask, args, 0.3)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    cpu_samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (model, mask) in runs.items():
            wall, cpu = tokens_per_second(model, mask, args, args.seconds)
            samples[name].append(wall)
            cpu_samples[name].append(cpu)

    load_end = os.getloadavg()

    def ratio(rates: dict[str, list[float]], name: str) -> tuple[float, list[float]]:
        plain_rounds = rates["nn.LSTM LM"]
        per_round = [p / s for p, s in zip(plain_rounds, rates[name], strict=True)]
        return statistics.median(plain_rounds) / statistics.median(rates[name]), per_round

    rows = []
    print(f"{'':22s} {'':>9s} {'wall clock':^44s} {'CPU time of the thread':^44s}")
    columns = f" {'tokens/s':>10s} {'time vs nn.LSTM [round min-max]':>33s}"
    print(f"{'model':22s} {'params':>9s}" + columns * 2)
    for name, (model, _) in runs.items():
        params = sum(p.numel() for p in model.parameters())
        row: dict = {"model": name, "parameters": params}
        line = f"{name:22s} {params:9d}"
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
        rows.append(row)
        print(line)
    load = f"load average {load_start[0]:.2f} -> {load_end[0]:.2f}"
    print(f"median of {args.rounds} alternating rounds; {load}")
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
