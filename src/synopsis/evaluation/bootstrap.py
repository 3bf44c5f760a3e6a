"""Bootstrap confidence intervals over examples (percentile method, seeded)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

# Resample this many bootstrap replicates at a time so memory stays O(chunk * examples).
_CHUNK = 100


def bootstrap_cis(
    columns: Mapping[str, Sequence[float]],
    n_samples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Percentile CI of the mean of each column; all columns share the same resampled example sets.

    Sharing the resamples keeps the intervals of different metrics comparable (one bootstrap of the test
    set), and makes the result depend only on ``seed``, the number of examples and ``n_samples``.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_samples < 1 or not columns:
        return {}
    names = list(columns)
    table = np.asarray([columns[name] for name in names], dtype=np.float64)  # (metrics, examples)
    if table.ndim != 2 or table.shape[1] == 0:
        raise ValueError("bootstrap needs at least one example per column, all columns the same length")
    count = table.shape[1]
    rng = np.random.default_rng(seed)
    means = np.empty((len(names), n_samples))
    for start in range(0, n_samples, _CHUNK):
        stop = min(start + _CHUNK, n_samples)
        index = rng.integers(0, count, size=(stop - start, count))
        means[:, start:stop] = table[:, index].mean(axis=2)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], axis=1)
    return {name: (float(lo), float(hi)) for name, lo, hi in zip(names, low, high, strict=True)}
