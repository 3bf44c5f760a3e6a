"""The domain-attribute LM experiment's results as the paper's tables 4-6 (perplexity per held-out domain and
model, and its three findings counted per domain), their Markdown, the table-5 figure, and the files written
after every held-out domain (``results.json``, ``tables.md``, ``table5.png``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synopsis.io import open_for_atomic_write, write_json


def restrict(attributes: dict[str, str], names: Sequence[str]) -> dict[str, str]:
    """``attributes`` without the names a model does not use."""
    return {k: v for k, v in attributes.items() if k in names}


@dataclass
class LMVariant:
    """One model of the experiment: its variant and the attribute names it sees."""

    variant: str
    attribute_names: list[str]

    @property
    def name(self) -> str:
        if self.variant == "baseline":
            return "baseline"
        return f"{self.variant}[{'+'.join(self.attribute_names)}]"


def _combo_name(attributes: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in attributes.items())


def build_tables(
    results: dict[str, Any], names: Sequence[str], combinations: list[dict[str, str]], specs: list[LMVariant]
) -> dict[str, Any]:
    """Tables 4-6 as {row: {target: perplexity}} plus the paper's three findings, counted per domain."""
    held = results["held_out"]
    targets = list(held)
    full = [s for s in specs if len(s.attribute_names) == len(names)]
    single = [s for s in specs if s.variant == "in" and len(s.attribute_names) == 1]
    in_name = LMVariant("in", list(names)).name
    table4 = {s.name: {t: held[t]["models"][s.name]["test_perplexity"] for t in targets} for s in full}
    table4_known = {
        s.name: {t: held[t]["models"][s.name].get("test_perplexity_known_words", math.nan) for t in targets}
        for s in full
    }
    table5 = {
        _combo_name(c): {
            t: held[t]["models"][in_name]["given_attribute_perplexity"][i]["perplexity"] for t in targets
        }
        for i, c in enumerate(combinations)
    }
    table6 = {
        s.name: {t: held[t]["models"][s.name]["test_perplexity"] for t in targets}
        for s in [
            *(x for x in full if x.variant == "baseline"),
            *single,
            *(x for x in full if x.name == in_name),
        ]
    }
    findings: dict[str, Any] = {}
    if "baseline" in table4:
        wins = [t for t in targets if table4[in_name][t] < table4["baseline"][t]]
        findings["in_beats_baseline"] = {"domains": wins, "count": len(wins), "of": len(targets)}
        for other in ("out", "in_out"):
            other_name = LMVariant(other, list(names)).name
            if other_name in table4:
                worse = [t for t in targets if table4[other_name][t] > table4["baseline"][t]]
                findings[f"{other}_worse_than_baseline"] = {
                    "domains": worse,
                    "count": len(worse),
                    "of": len(targets),
                }
    if single:
        wins = [t for t in targets if all(table6[in_name][t] < table6[s.name][t] for s in single)]
        findings["all_attributes_beat_each_single"] = {
            "domains": wins,
            "count": len(wins),
            "of": len(targets),
        }
    correct = [
        t
        for t in targets
        if min(table5, key=lambda row: table5[row][t])
        == _combo_name(restrict(results["domains"][t]["attributes"], names))
    ]
    findings["correct_attributes_best"] = {"domains": correct, "count": len(correct), "of": len(targets)}
    return {
        "table4": table4,
        "table4_known_words": table4_known,
        "table5": table5,
        "table6": table6,
        "findings": findings,
    }


def _markdown_table(
    rows: dict[str, dict[str, float]], targets: list[str], first: str, mark: str = "min"
) -> str:
    lines = [f"| {first} | " + " | ".join(targets) + " |", "|---|" + "---:|" * len(targets)]
    best = {t: min(rows[r][t] for r in rows) for t in targets}
    for row, cells in rows.items():
        formatted = [
            f"**{cells[t]:.2f}**" if mark == "min" and math.isclose(cells[t], best[t]) else f"{cells[t]:.2f}"
            for t in targets
        ]
        lines.append(f"| {row} | " + " | ".join(formatted) + " |")
    return "\n".join(lines)


def render_markdown(results: dict[str, Any]) -> str:
    tables, held = results["tables"], results["held_out"]
    targets = list(held)
    out = ["# Domain-attribute LSTM LM: leave-one-domain-out test perplexity", ""]
    out += ["Columns are the held-out (unseen) target domains; the best value per column is bold.", ""]
    out += [
        "| domain | documents | tokens | vocab (train) | test OOV | train / dev tokens |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for t in targets:
        d, h = results["domains"][t], held[t]
        out.append(
            f"| {t} | {d['documents']} | {d['tokens']} | {h['vocab_size']} | {h['test_oov_rate']:.1%} "
            f"| {h['train_tokens']} / {h['dev_tokens']} |"
        )
    out += ["", "## Table 4: baseline vs attribute-augmented models (given the target's attributes)", ""]
    out += [_markdown_table(tables["table4"], targets, "model"), ""]
    out += [
        "Every table counts every target token, `<unk>` included (its test OOV rate is in the first table).",
        "",
    ]
    if "table4_known_words" in tables:
        out += ["## Table 4, known words only: perplexity over the targets that are not `<unk>`", ""]
        out += [_markdown_table(tables["table4_known_words"], targets, "model"), ""]
    out += ["## Table 5: the (in) model given each attribute combination (rows) on each target (columns)", ""]
    out += [_markdown_table(tables["table5"], targets, "given attributes"), ""]
    out += ["## Table 6: (in) models with one attribute name vs all", ""]
    out += [_markdown_table(tables["table6"], targets, "model"), ""]
    out += ["## The paper's findings, counted here", ""]
    for key, value in tables["findings"].items():
        where = "; ".join(value["domains"]) or "none"
        out.append(f"- {key.replace('_', ' ')}: {value['count']} of {value['of']} ({where})")
    chosen = {
        t: {m: r["chosen_setting"] for m, r in held[t]["models"].items() if "chosen_setting" in r}
        for t in targets
    }
    if any(chosen.values()):
        out += ["", "Sizes chosen on dev per model (E, H, BPTT):", ""]
        for t in targets:
            cells = [f"{m} {c['embedding_dim']}/{c['hidden_dim']}/{c['bptt']}" for m, c in chosen[t].items()]
            out.append(f"- {t}: " + "; ".join(cells))
    out += ["", "Epochs per model (best dev perplexity):", ""]
    for t in targets:
        cells = [f"{m} {r['epochs']} ({r['best_dev_perplexity']:.1f})" for m, r in held[t]["models"].items()]
        out.append(f"- {t}: " + "; ".join(cells))
    return "\n".join(out) + "\n"


def plot_table5(table5: dict[str, dict[str, float]], path: str | Path) -> Path:
    """Heatmap of Table 5; a red box marks the best given attributes per target, a dashed one the correct."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from synopsis.training.plots import save_figure  # selects the Agg backend, before any figure

    rows = list(table5)
    cols = list(next(iter(table5.values())))
    grid = [[table5[r][c] for c in cols] for r in rows]
    fig, ax = plt.subplots(figsize=(1.6 * len(cols) + 3.5, 0.75 * len(rows) + 2), dpi=110)
    image = ax.imshow(grid, cmap="viridis_r")
    low, high = image.get_clim()
    ax.set_xticks(range(len(cols)), [c.replace(", ", "\n") for c in cols], fontsize=8)
    ax.set_yticks(range(len(rows)), [r.replace(", ", "\n") for r in rows], fontsize=8)
    ax.set_xlabel("target (held-out) domain")
    ax.set_ylabel("given attributes")
    for j, col in enumerate(cols):
        values = [grid[i][j] for i in range(len(rows))]
        best = values.index(min(values))
        for i, value in enumerate(values):
            dark = (value - low) / max(high - low, 1e-9) > 0.55  # dark end of viridis_r: white text
            ax.text(
                j,
                i,
                f"{value:.1f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if dark else "black",
                fontweight="bold" if i == best else "normal",
            )
            if rows[i] == col:
                ax.add_patch(
                    Rectangle((j - 0.45, i - 0.45), 0.9, 0.9, fill=False, ls="--", lw=1.2, ec="black")
                )
        ax.add_patch(Rectangle((j - 0.5, best - 0.5), 1, 1, fill=False, lw=2.2, ec="red"))
    ax.set_title("(in) model test perplexity; red = best per target, dashed = correct attributes", fontsize=9)
    fig.colorbar(image, ax=ax, label="perplexity (lower is better)")
    return save_figure(fig, path)


def write_outputs(results: dict[str, Any], output_dir: str | Path, plot: bool = True) -> None:
    output_dir = Path(output_dir)
    write_json(output_dir / "results.json", results)
    with open_for_atomic_write(output_dir / "tables.md") as handle:
        handle.write(render_markdown(results))
    if plot:
        plot_table5(results["tables"]["table5"], output_dir / "table5_heatmap.png")
