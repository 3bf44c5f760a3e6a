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


# ROUGE-1.5.5 seeds Perl's rand with srand(i) for resample i; Perl (>= 5.20) implements rand with its own
# drand48: a 48-bit linear congruential generator, the same on every platform.
_DRAND48_A, _DRAND48_C, _DRAND48_SEED_LOW = 0x5DEECE66D, 0xB, 0x330E
_MASK48 = (1 << 48) - 1


def rouge155_bootstrap(
    values: Sequence[float], n_samples: int = 1000, confidence: float = 95.0
) -> tuple[float, float, float]:
    """The (average, lower, upper) that ROUGE-1.5.5 prints for per-summary ``values`` (``computeAverages``).

    ``values[i]`` is the score of evaluation ID ``i + 1``. The script sorts the IDs as strings, draws resample
    ``s`` after ``srand(s)``, prints the mean of the resample means as the average, and interpolates the
    confidence bounds between sorted resample means; all three are rounded to 5 decimals.
    """
    count = len(values)
    if count == 0 or n_samples < 1:
        raise ValueError("rouge155_bootstrap needs at least one value and one resample")
    # The script's instance keys are "<evalID>.<peerID>", sorted as strings: "1.P" < "10.P" < "2.P".
    order = sorted(range(count), key=lambda i: f"{i + 1}.P")
    table = np.asarray(values, dtype=np.float64)[order]
    # One generator per resample, stepped together; uint64 arithmetic wraps mod 2**64, a multiple of 2**48.
    state = (np.arange(n_samples, dtype=np.uint64) << np.uint64(16)) + np.uint64(_DRAND48_SEED_LOW)
    sums = np.zeros(n_samples)
    a, c, mask = np.uint64(_DRAND48_A), np.uint64(_DRAND48_C), np.uint64(_MASK48)
    for _ in range(count):
        state = (state * a + c) & mask
        index = (state.astype(np.float64) / 2.0**48 * count).astype(np.int64)  # int(rand(N))
        sums += table[index]
    means = np.sort(sums / count).tolist()
    total = 0.0
    for mean in means:  # the script's order of summation (ascending), for bit-identical rounding
        total += mean
    average = float(f"{total / n_samples:.5f}")
    delta = n_samples * ((100 - confidence) / 2.0) / 100.0
    upper_a = int(n_samples - delta - 1)
    lower_a = int(delta)
    ratio = n_samples - delta - 1 - upper_a

    def bound(k: int) -> float:
        following = means[k + 1] if k + 1 < n_samples else 0.0  # Perl reads past the end as undef = 0
        return float(f"{means[k] + (following - means[k]) * ratio:.5f}")

    return average, bound(lower_a), bound(upper_a)
