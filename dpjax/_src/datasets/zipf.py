"""Zipf-law histograms: the skewed item counts of the selection, top-k and sparse vector studies,
benchmarks and reproductions (one generator for all of them)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "zipf_histogram",
]


def zipf_histogram(rng: np.random.Generator, items: int, records: int, exponent: float) -> np.ndarray:
    """A histogram of ``records`` records over ``items`` items, item ``i`` (from 1) drawn with weight
    ``i ** -exponent`` (one multinomial draw), in a random item order: int64 counts ``[items]``.

    Example:
      >>> counts = zipf_histogram(np.random.default_rng(0), 100, 10_000, 1.1)
      >>> counts.shape, int(counts.sum())
      ((100,), 10000)
    """
    weights = 1.0 / np.arange(1, items + 1) ** exponent
    return rng.permutation(rng.multinomial(records, weights / weights.sum()))
