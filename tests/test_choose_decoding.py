"""The decoding-selection rule of scripts/choose_decoding.py (the bundled model's generation_config.json)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    spec = importlib.util.spec_from_file_location("choose_decoding", ROOT / "scripts" / "choose_decoding.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def row(name: str, r1: float, rl: float, repeated: float = 0.2, doubled: float = 0.5) -> dict:
    return {
        "setting": {"name": name},
        "rouge1": r1,
        "rougeL": rl,
        "repeated_bigrams": repeated,
        "reference_repeated_bigrams": 0.7,
        "doubled_words": doubled,
    }


def test_targets_first_then_the_best_sum_within_the_repetition_limits() -> None:
    choose = load_script().choose
    rows = [
        row("long", 38.27, 31.29),  # the best sum
        row("short", 37.75, 31.53),  # the only one on target
        row("repeats", 39.0, 32.0, repeated=1.5),  # over twice the references' rate
        row("doubles", 39.0, 32.0, doubled=2.5),  # doubled words in over 2% of summaries
    ]
    assert choose(rows)["setting"]["name"] == "long"
    assert choose(rows, 37.0, 31.5)["setting"]["name"] == "short"
    assert choose(rows, 37.0, 31.6)["setting"]["name"] == "long"  # none on target: the best sum
    assert choose(rows[2:])["setting"]["name"] in ("repeats", "doubles")  # none within limits: all rows
