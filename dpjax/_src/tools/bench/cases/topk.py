"""Top-k over an unknown domain: the limited-domain mechanism (Durfee and Rogers 2019, Alg. 1).

One histogram of d = 10^6 items (a Zipf(1.1) histogram of 10 d records, int32 counts), k = 10,
kbar = 100, epsilon = 0.1 per step, delta = 10^-6. A single release extracts the exact
top-(kbar+1) of the histogram (the dominant cost) and draws kbar + 1 Gumbel variates (the floor);
the Monte Carlo batch (``vmap`` over keys on the same histogram) extracts it once. Peer: a NumPy
loop with ``argpartition`` (introselect, O(d)) and the one-shot Gumbel formulation.
"""

from __future__ import annotations

import math

import numpy as np

from dpjax._src.datasets.zipf import zipf_histogram
from dpjax._src.tools.bench.case import Case, Peer, power_label, scaled
from dpjax._src.topk.limited_domain import limited_domain

__all__ = [
    "DELTA",
    "EPSILON",
    "KBAR",
    "K",
    "cases",
]

K, KBAR, EPSILON, DELTA = 10, 100, 0.1, 1e-6


def _numpy_one_shot(counts: np.ndarray) -> Peer:
    """Algorithm 1 in NumPy (float64): top-(kbar+1) by argpartition, Gumbel scores, noisy ⊥ threshold."""

    def single():
        rng = np.random.default_rng(1)

        def release():
            top = np.argpartition(counts, -(KBAR + 1))[-(KBAR + 1) :]
            top = top[np.lexsort((top, -counts[top]))]
            scores = EPSILON * (counts[top[:KBAR]] - counts[top[KBAR]]) + rng.gumbel(size=KBAR)
            threshold = EPSILON + math.log(KBAR / DELTA) + rng.gumbel()
            best = np.argpartition(scores, -K)[-K:]
            best = best[np.argsort(-scores[best])]
            return top[best[scores[best] > threshold]]

        return release

    return Peer("NumPy argpartition + one-shot Gumbel", "numpy", single, note="float64")


def cases(scale: float) -> list[Case]:
    d = scaled(10**6, scale, 1_000)
    counts = zipf_histogram(np.random.default_rng(0), d, 10 * d, 1.1).astype(np.int32)
    return [
        Case(
            family="topk",
            mechanism="topk.limited_domain",
            setting=f"d={power_label(d)} Zipf(1.1) int32 counts, k={K}, kbar={KBAR}, epsilon={EPSILON:g}, "
            f"delta={DELTA:g}",
            release=lambda key, c: limited_domain(key, c, k=K, kbar=KBAR, epsilon=EPSILON, delta=DELTA),
            args=(counts,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=64 * KBAR,
            noise="gumbel",
            variates=float(KBAR + 1),
            variates_note="kbar Gumbel scores and one for the threshold",
            peers=(_numpy_one_shot(counts),),
        )
    ]
