"""Print an evaluation report (from ``evaluate_corpus``) as tables, with the settings beside the scores."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _interval(values: list[float] | None) -> str:
    return "" if not values else f"[{100 * values[0]:.2f}, {100 * values[1]:.2f}]"


def render_report(report: dict[str, Any]) -> Group:
    """Tables of scores (as percentages) followed by the settings they were computed with."""
    parts: list[Any] = []
    ci_key = next((k for k in report.get("meteor", {}) if k.startswith("ci")), None)
    if "rouge" in report:
        table = Table(title=f"ROUGE ({report['num_examples']} examples, x100)")
        for column in ("type", "P", "R", "F", "F 95% CI"):
            table.add_column(column, justify="left" if column == "type" else "right")
        for rouge_type, score in report["rouge"].items():
            ci = next((v for k, v in score.items() if k.startswith("fmeasure_ci")), None)
            table.add_row(
                rouge_type,
                _pct(score["precision"]),
                _pct(score["recall"]),
                _pct(score["fmeasure"]),
                _interval(ci),
            )
        parts.append(table)
    other = Table(title="Other metrics")
    other.add_column("metric")
    other.add_column("value", justify="right")
    other.add_column("note")
    if "bleu" in report:
        bleu = report["bleu"]
        other.add_row("BLEU-4", f"{bleu['score']:.2f}", f"BP {bleu['brevity_penalty']:.3f}")
    if "meteor" in report:
        other.add_row("METEOR x100", _pct(report["meteor"]["score"]), _interval(report["meteor"].get(ci_key)))
    for n, rate in report.get("novel_ngrams", {}).items():
        other.add_row(f"novel {n}-grams %", _pct(rate), "")
    reference_rates = report.get("reference_repeated_ngrams", {})
    for n, rate in report.get("repeated_ngrams", {}).items():
        reference = reference_rates.get(n)
        note = "" if reference is None else f"refs {_pct(reference)}"
        other.add_row(f"repeated {n}-grams %", _pct(rate), note)
    if "doubled_words" in report:
        doubled = report["doubled_words"]
        note = f"refs {_pct(doubled['references'])}"
        other.add_row("summaries with a doubled word %", _pct(doubled["predictions"]), note)
    if "length" in report:
        length = report["length"]
        other.add_row(
            "words (pred / ref)", f"{length['prediction_words']:.1f} / {length['reference_words']:.1f}", ""
        )
        other.add_row(
            "sentences (pred / ref)",
            f"{length['prediction_sentences']:.2f} / {length['reference_sentences']:.2f}",
            "",
        )
        other.add_row("length ratio", f"{length['length_ratio']:.3f}", f"{length['empty_predictions']} empty")
    if "qs" in report:
        qs = report["qs"]
        scores = " / ".join(_pct(qs["hierarchy"][k]) for k in ("precision", "recall", "f1"))
        other.add_row("hierarchy P / R / F1 x100", scores, f"{qs['pairs']['prediction_mean']:.2f} pairs/pred")
        bleu = qs["question_bleu4"]
        other.add_row(
            "question BLEU-4", f"{bleu['score']:.2f}", f"sentence mean {_pct(bleu['sentence_mean'])}"
        )
        rouge = " / ".join(_pct(v) for v in qs["summary_rouge"].values())
        other.add_row("QS summaries R-1 / R-2 / R-Lsum F x100", rouge, "")
        if "lenient" in qs:
            lenient = qs["lenient"]
            other.add_row(
                "malformed predictions",
                str(lenient["malformed"]),
                f"{lenient['dropped_pairs']} pairs dropped",
            )
    if other.row_count:
        parts.append(other)
    settings = Text("settings:\n", style="bold")
    for name, description in report["settings"].items():
        settings.append(f"  {name}: ", style="bold")
        settings.append(f"{description}\n")
    settings.rstrip()  # no blank line after the report
    parts.append(settings)
    return Group(*parts)
