"""Issue 27 item 11(b): aggregate the 3 seeds of ``configs/hibrids_scisummnet_1024.yaml`` and test whether the
dev summaries depend on the input.

    python docs/results/hibrids_scisummnet_1024/analyze.py runs/hibrids_1024 \
        docs/results/hibrids_scisummnet_1024

Reads ``<runs>/seed<N>/results.json`` and each run's ``history.json``; re-decodes the 50 dev papers with each
run's final checkpoint (step 1,500) through the trainer's own input builder and decoding settings, then writes
``summary.json`` (all numbers below) and ``table.md``. Per variant: mean +- sd over seeds (sample sd, n-1) of
dev ROUGE F1 x 100 and dev loss at the final step, and the dev loss minus base's on the same seed (the
variants of one seed share base weights and data order, so that difference is paired). Input dependence per
run: distinct summaries among the 50 dev papers; ROUGE-1 of each summary against its own reference and
against the next paper's reference (a shuffled-reference control: if summaries ignored the input, both
would be equal); ROUGE-1 between the summaries of neighbouring dev papers (100 = the same text).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from pathlib import Path

import torch

from synopsis.config import load_config
from synopsis.io import open_for_atomic_write, write_json
from synopsis.training.objectives import score_summaries
from synopsis.training.seq2seq import Seq2SeqTrainConfig, Seq2SeqTrainer

torch.set_num_threads(1)
runs, out = Path(sys.argv[1]), Path(sys.argv[2])
seeds = sorted(int(p.name[4:]) for p in runs.glob("seed*") if (p / "results.json").is_file())
METRICS = ("rouge1", "rouge2", "rougeL", "average", "loss")


def mean_sd(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.mean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


per_run: dict[str, dict[int, dict]] = {}
outputs: dict[str, dict[int, list[str]]] = {}
for seed in seeds:
    results = json.loads((runs / f"seed{seed}" / "results.json").read_text())
    for row in results["rows"]:
        variant = row["variant"]
        run_dir = runs / f"seed{seed}" / "runs" / variant
        history = json.loads((run_dir / "history.json").read_text())
        step, final = history["dev"][-1]
        # one training example: the trainer encodes its train set on start, which decoding does not need
        cfg = dataclasses.replace(
            load_config(Seq2SeqTrainConfig, run_dir / "config.yaml"), max_train_examples=1
        )
        trainer = Seq2SeqTrainer(cfg, resume=True, show_progress=False)  # the final (step 1,500) checkpoint
        predictions = trainer.predict(trainer.dev_sources)
        references = [e.references for e in trainer.dev_examples]
        shuffled = references[1:] + references[:1]
        neighbours = [[p] for p in predictions[1:] + predictions[:1]]
        per_run.setdefault(variant, {})[seed] = {
            "final_step": step,
            **{m: final[m] for m in METRICS},
            "best_average": row["average"],
            "best_step": row["best_step"],
            "seconds": row["seconds"],
            "distinct_summaries": len(set(predictions)),
            "dev_papers": len(predictions),
            "rouge1_own_reference": score_summaries(predictions, references)["rouge1"],
            "rouge1_next_paper_reference": score_summaries(predictions, shuffled)["rouge1"],
            "rouge1_between_neighbouring_summaries": score_summaries(predictions, neighbours)["rouge1"],
        }
        outputs.setdefault(variant, {})[seed] = predictions

variants = list(per_run)
summary: dict = {"seeds": seeds, "runs": per_run, "aggregate": {}, "examples": {}}
for variant in variants:
    rows = [per_run[variant][s] for s in seeds]
    keys = [*METRICS, "seconds", "distinct_summaries", "rouge1_own_reference", "rouge1_next_paper_reference",
            "rouge1_between_neighbouring_summaries"]  # fmt: skip
    agg = {k: mean_sd([r[k] for r in rows]) for k in keys}
    agg["loss_minus_base"] = mean_sd(
        [per_run[variant][s]["loss"] - per_run["base"][s]["loss"] for s in seeds]
    )
    summary["aggregate"][variant] = agg
# identical summaries across variants of one seed (the 40-step run's symptom)
summary["same_as_base"] = {
    v: [sum(a == b for a, b in zip(outputs[v][s], outputs["base"][s], strict=True)) for s in seeds]
    for v in variants
}
# the first three dev papers' summaries, seed 0, every variant, with the reference
summary["examples"] = [
    {"id": e.id, "reference": e.references[0][:400], **{v: outputs[v][seeds[0]][i] for v in variants}}
    for i, e in enumerate(trainer.dev_examples[:3])
]
write_json(out / "summary.json", summary)

lines = [
    f"Mean +- sd over seeds {', '.join(map(str, seeds))}, dev ROUGE F1 x 100 and dev loss at the final step "
    f"({len(trainer.dev_examples)} dev papers):",
    "",
    "| variant | ROUGE-1 | ROUGE-2 | ROUGE-L | average | dev loss | dev loss - base (paired) | s / run |",
    "|---|---|---|---|---|---|---|---|",
]
for variant in variants:
    a = summary["aggregate"][variant]
    cells = [f"{a[m]['mean']:.2f} +- {a[m]['sd']:.2f}" for m in ("rouge1", "rouge2", "rougeL", "average")]
    lines.append(
        f"| {variant} | " + " | ".join(cells) + f" | {a['loss']['mean']:.4f} +- {a['loss']['sd']:.4f} | "
        f"{a['loss_minus_base']['mean']:+.4f} +- {a['loss_minus_base']['sd']:.4f} | "
        f"{a['seconds']['mean']:.0f} |"
    )
lines += [
    "",
    "Input dependence (mean +- sd over seeds): distinct summaries of "
    f"{len(trainer.dev_examples)} dev papers; ROUGE-1 against the "
    "paper's own reference vs the next paper's; ROUGE-1 between neighbouring papers' summaries; summaries "
    "identical to base's (per seed).",
    "",
    f"| variant | distinct / {len(trainer.dev_examples)} | R-1 own ref | R-1 next paper's ref "
    "| R-1 between summaries | same as base |",
    "|---|---|---|---|---|---|",
]
for variant in variants:
    a = summary["aggregate"][variant]
    cells = [
        f"{a[k]['mean']:.1f} +- {a[k]['sd']:.1f}"
        for k in ("distinct_summaries", "rouge1_own_reference", "rouge1_next_paper_reference",
                  "rouge1_between_neighbouring_summaries")
    ]  # fmt: skip
    lines.append(f"| {variant} | " + " | ".join(cells) + f" | {summary['same_as_base'][variant]} |")
with open_for_atomic_write(out / "table.md") as handle:
    handle.write("\n".join(lines) + "\n")
print("\n".join(lines))
