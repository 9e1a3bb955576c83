"""Sparse vector family beyond the headline rows: the blocked AboveThreshold and the adaptive sparse
vector with gap (speed, same harness as ``dpjax bench``). The adaptivity claims of Ding, Wang, Zhang,
Kifer (PVLDB 2019, §7.3) are reproduced by ``dpjax reproduce freegap``.

``dpjax bench svt`` times the headline rows (``above_threshold`` and ``sparse_vector`` over 10^4
queries, with the literal NumPy loops). Run from the repository root:

    python -m benchmarks.bench_svt [--size 1] [--out DIR]

Cases: ``above_threshold_blocked(block_size=1024)`` on the headline queries, Gumbel
``above_threshold(method="first_passage")`` on them (10^4 releases per batch; two variates and one
search per release against the literal kernel's n + 1), and ``adaptive_sparse_vector_with_gap`` on
a 10^5-item Zipf(1.1) histogram (k = 10, eps = 0.7, monotonic) against the floor of its 2*10^5
Laplace variates and a NumPy loop of Alg. 2.
"""

from __future__ import annotations

import numpy as np

from dpjax import svt
from dpjax._src.datasets.zipf import zipf_histogram
from dpjax._src.tools.bench.case import Case, Peer, power_label, scaled
from dpjax._src.tools.bench.cli import script

K, EPSILON = 10, 0.7


# ----------------------------------------------------------------------------- NumPy references


def numpy_adaptive_svt(rng, queries, threshold, budget):
    """Algorithm 2 literally (integer cost units), noise drawn per query as it is processed."""
    noisy_threshold = threshold + rng.laplace(0, budget.threshold_scale)
    units, answers = 0, []
    for i, q in enumerate(queries):
        top = q + rng.laplace(0, budget.top_scale) - noisy_threshold
        if top >= budget.sigma:
            units += 1
            answers.append((i, top))
        else:
            middle = q + rng.laplace(0, budget.middle_scale) - noisy_threshold
            if middle >= 0:
                units += 2
                answers.append((i, middle))
        if units > 2 * budget.c - 2:
            break
    return answers


def speed_cases(scale: float) -> list[Case]:
    n = scaled(10**4, scale, 1_000)
    queries = np.linspace(0.0, 100.0, n).astype(np.float32)
    items = scaled(10**5, scale, 1_000)
    counts = zipf_histogram(np.random.default_rng(1), items, 10 * items, 1.1).astype(np.float64)
    threshold = float(np.sort(counts)[::-1][8 * K])
    budget = svt.gap_budget(EPSILON, K, monotonic=True)

    def numpy_adaptive():
        rng = np.random.default_rng(0)
        return lambda: numpy_adaptive_svt(rng, counts, threshold, budget)

    return [
        Case(
            family="svt",
            mechanism="svt.above_threshold_blocked (block_size=1024)",
            setting=f"{power_label(n)} queries linspace(0, 100), T=50, eps1=eps2=0.5, Laplace",
            release=lambda key, q: svt.above_threshold_blocked(
                key, q, threshold=50.0, epsilon1=0.5, epsilon2=0.5, block_size=1024
            ),
            args=(queries,),
            releases=scaled(1_000, scale, 32),
            bytes_per_release=16 * n,
            noise="laplace",
            variates=float(n + 1),
            variates_note="one Laplace per query and one for the threshold",
        ),
        Case(
            family="svt",
            mechanism="svt.above_threshold (noise='gumbel', method='first_passage')",
            setting=f"{power_label(n)} queries linspace(0, 100), T=50, eps1=eps2=0.5, Gumbel",
            release=lambda key, q: svt.above_threshold(
                key, q, threshold=50.0, epsilon1=0.5, epsilon2=0.5, noise="gumbel", method="first_passage"
            ),
            args=(queries,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=64,
            noise="gumbel",
            variates=float(n + 1),
            variates_note="floor: one Gumbel per query and one for the threshold (the literal kernel's draw)",
        ),
        Case(
            family="svt",
            mechanism="svt.adaptive_sparse_vector_with_gap",
            setting=f"{power_label(items)}-item Zipf(1.1) histogram, c={K}, eps={EPSILON}, monotonic",
            release=lambda key, c: svt.adaptive_sparse_vector_with_gap(
                key, c, threshold=threshold, epsilon=EPSILON, c=K, monotonic=True
            ),
            args=(counts.astype(np.float32),),
            releases=scaled(100, scale, 8),
            bytes_per_release=32 * items,
            noise="laplace",
            variates=float(2 * items + 1),
            variates_note="two Laplace per query (top and middle branch) and one for the threshold",
            peers=(
                Peer(
                    "NumPy loop (Alg. 2)", "numpy", numpy_adaptive, note="float64, stops at the k-th answer"
                ),
            ),
        ),
    ]


def main(argv=None):
    script("benchmarks.bench_svt", speed_cases, "speed of the non-headline SVT kernels", argv)


if __name__ == "__main__":
    main()
