"""Training-curve plots (PNG) for every trainer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

from synopsis.io import open_for_atomic_write

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_curves(
    curves: Mapping[str, Sequence[tuple[float, float]]],
    path: str | Path,
    title: str = "",
    ylabel: str = "loss",
    events: Mapping[str, float] | None = None,
) -> Path:
    """Plot named (step, value) series on one axis and save a PNG; ``events`` are labelled vertical lines."""
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for name, points in curves.items():
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, label=name, marker="o" if len(points) < 30 else None, markersize=3)
    for label, step in (events or {}).items():
        ax.axvline(step, color="grey", linestyle="--", linewidth=1, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, path)


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Lay ``fig`` out, write it to ``path`` as a PNG (its folder made; an interrupt never leaves half a
    PNG) and close it."""
    fig.tight_layout()
    path = Path(path)
    try:
        with open_for_atomic_write(path, "wb") as handle:
            fig.savefig(handle, format="png")
    finally:
        plt.close(fig)
    return path
