"""Neighboring inputs for audits: the library's relations and the papers' worst-case pairs.

Relations:

* **swap** (bounded DP): one record is replaced by another; the dataset size is public.
* **add/remove** (unbounded DP): one record is added or removed.
* **histograms** under add/remove of a user who contributes to at most ``l0`` cells (ℓ∞ = 1):
  ``h' = h + 1_U`` with ``|U| <= l0``.
* **query vectors** of sensitivity 1 (SVT, report-noisy-max): every query moves by at most 1.

An audit is only as strong as its neighbors: the ``*_worst_case`` pairs are those that stress the
papers' privacy proofs (they attain or nearly attain the claimed loss).
"""

from __future__ import annotations

import numpy as np

from dpjax._src.host_checks import check_array, check_int

__all__ = [
    "add",
    "histogram_add",
    "histogram_worst_case",
    "noisy_max_worst_case",
    "quantile_worst_case",
    "remove",
    "scalar_worst_case",
    "svt_worst_case",
    "swap",
]


def _host(x, name: str) -> np.ndarray:
    """``x`` as a 1-D NumPy array of its own dtype (validated like any data array)."""
    check_array(x, name, ndim=1, allow_empty=True)
    return np.asarray(x)


def swap(x, index: int, value) -> np.ndarray:
    """Swap neighbor: ``x`` with record ``index`` replaced by ``value`` (same size)."""
    x = _host(x, "x").copy()
    index = check_int(index, "index", minimum=-x.size, maximum=x.size - 1)
    x[index] = value
    return x


def add(x, value) -> np.ndarray:
    """Add/remove neighbor: ``x`` with one more record ``value`` (appended)."""
    x = _host(x, "x")
    return np.concatenate([x, np.asarray([value], dtype=x.dtype)])


def remove(x, index: int = -1) -> np.ndarray:
    """Add/remove neighbor: ``x`` without record ``index``."""
    x = _host(x, "x")
    if x.size == 0:
        raise ValueError("x must not be empty to remove a record.")
    index = check_int(index, "index", minimum=-x.size, maximum=x.size - 1)
    return np.delete(x, index)


def histogram_add(counts, cells) -> np.ndarray:
    """Histogram neighbor ``h + 1_U``: one more user contributing once to each cell in ``cells``."""
    counts = _host(counts, "counts").copy()
    cells = np.unique(np.asarray(cells, dtype=int))
    if cells.size and (cells.min() < 0 or cells.max() >= counts.size):
        raise ValueError(f"cells must be indices in [0, {counts.size}), got {cells}.")
    counts[cells] += 1
    return counts


def scalar_worst_case(sensitivity: float = 1.0) -> tuple[float, float]:
    """Laplace / Gaussian mechanism on a statistic of sensitivity ``sensitivity``: (0, sensitivity)."""
    return 0.0, float(sensitivity)


def noisy_max_worst_case(monotonic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Report-noisy-max (with gap; Ding, Wang, Zhang, Kifer 2019): q = (0, 0) vs (1, -1), or (1, 0) if
    monotonic.

    The non-monotone pair moves the two queries in opposite directions, which is what the general
    noise scale 2/eps pays for; the monotone pair is the worst case for counting queries.
    """
    return np.zeros(2), np.array([1.0, 0.0]) if monotonic else np.array([1.0, -1.0])


def svt_worst_case(num_queries: int, monotonic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Sparse vector / AboveThreshold: q = 0 vs q' = (1, ..., 1, -1) (or all ones if monotonic).

    Lyu, Su, Li (2017), proof of Theorem 2: the queries answered ⊥ move up (the threshold noise pays
    once for all of them) and the query answered ⊤ moves down (its own noise pays twice); with
    threshold 0 the most likely outputs are exactly those paths.
    """
    num_queries = check_int(num_queries, "num_queries", minimum=1)
    queries = np.ones(num_queries)
    if not monotonic:
        queries[-1] = -1.0
    return np.zeros(num_queries), queries


def quantile_worst_case(n: int, low: float = 0.0, high: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Quantile mechanisms under swap: n points spread on [low, high] and the smallest moved to ``high``.

    Moving one point across the whole range changes every rank below it by one, the largest change
    a swap can make (it attains the rank utility's sensitivity 1, Gillenwater, Joseph, Kulesza 2021,
    Lemma 7).
    """
    n = check_int(n, "n", minimum=2)
    x = np.linspace(low, high, n + 2)[1:-1]
    return x, swap(x, 0, high)


def histogram_worst_case(d: int, kbar: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k over unknown domains (Durfee and Rogers 2019, Lemma 5.2's bad event): an item just below
    the top-k̄ cut-off gains a count.

    ``h`` is flat (all counts 0, so the top-k̄ are items ``0..kbar-1`` by the data-independent tie-break
    on the id) and ``h'`` adds a user to item ``kbar``, which enters the candidate set: outputs
    containing it have probability 0 under ``h``, so only delta covers them.
    """
    d = check_int(d, "d", minimum=2)
    kbar = check_int(kbar, "kbar", minimum=1, maximum=d - 1)
    counts = np.zeros(d)
    return counts, histogram_add(counts, [kbar])
