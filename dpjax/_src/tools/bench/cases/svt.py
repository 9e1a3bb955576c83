"""Sparse vector family: AboveThreshold and sparse vector over 10^4 queries.

Data: queries ``linspace(0, 100, n)``, threshold 50, epsilon1 = epsilon2 = 0.5, Laplace noise, so a
release halts near the middle of the stream. The kernels draw noise for the whole stream at once
(floor: n + 1 Laplace for AboveThreshold, n + c for sparse vector); the NumPy loops are the literal
algorithms (one draw and one comparison per query, stopping at the halt), so they pay only for the
queries they process. No peer library implements AboveThreshold.

First-passage rows (``method="first_passage"``, same laws, heaps built once per batch under ``vmap``
over keys, O(log n) per search): AboveThreshold over 10^4 queries with each noise (floor: n + 1 draws
of that noise), sparse vector with c = 10 over 10^5 queries (floor: n + c Laplace) and the adaptive
sparse vector with gap, c = 10, over 10^5 queries (floor: the literal kernel's 2n + 1 Laplace), 10^4
releases per batch.
"""

from __future__ import annotations

import functools

import numpy as np

from dpjax._src.svt.above_threshold import above_threshold
from dpjax._src.svt.gap import adaptive_sparse_vector_with_gap
from dpjax._src.svt.sparse_vector import sparse_vector
from dpjax._src.tools.bench.case import Case, Peer, power_label, scaled

__all__ = [
    "EPSILON1",
    "EPSILON2",
    "THRESHOLD",
    "C",
    "cases",
]

THRESHOLD, EPSILON1, EPSILON2, C = 50.0, 0.5, 0.5, 10


def _numpy_sparse_vector(queries: np.ndarray, c: int) -> Peer:
    """Dwork and Roth, Algorithm 2 (threshold noise redrawn after each answer), one query at a time;
    c = 1 is AboveThreshold."""

    def single():
        rng = np.random.default_rng(1)

        def release():
            answers = []
            noisy_threshold = THRESHOLD + rng.laplace(0.0, 1.0 / EPSILON1)
            for i, q in enumerate(queries):
                if q + rng.laplace(0.0, 1.0 / EPSILON2) >= noisy_threshold:
                    answers.append(i)
                    if len(answers) == c:
                        break
                    noisy_threshold = THRESHOLD + rng.laplace(0.0, 1.0 / EPSILON1)
            return answers

        return release

    return Peer("NumPy loop (literal algorithm)", "numpy", single, note="float64, stops at the halt")


def _queries(scale: float) -> tuple[int, np.ndarray, str]:
    """The headline queries: their number, the float32 values and the setting in words."""
    n = scaled(10**4, scale, 1_000)
    queries = np.linspace(0.0, 100.0, n).astype(np.float32)
    setting = f"{power_label(n)} queries linspace(0, 100), T={THRESHOLD:g}, eps1=eps2={EPSILON1:g}, Laplace"
    return n, queries, setting


def _first_passage_cases(scale: float) -> list[Case]:
    """The first-passage kernels: AboveThreshold with each noise, the sparse vectors on 10x the queries."""
    n, queries, setting = _queries(scale)
    long_n = scaled(10**5, scale, 1_000)
    long_queries = np.linspace(0.0, 100.0, long_n).astype(np.float32)
    fast = functools.partial(Case, family="svt", releases=scaled(10_000, scale, 100), bytes_per_release=4096)
    return [
        *(
            fast(
                mechanism=f"svt.above_threshold (method='first_passage', noise='{noise}')",
                setting=setting.replace("Laplace", noise.capitalize()),
                method="first_passage",
                methods=("first_passage", "first_passage"),
                release=lambda key, q, noise=noise: above_threshold(
                    key,
                    q,
                    threshold=THRESHOLD,
                    epsilon1=EPSILON1,
                    epsilon2=EPSILON2,
                    noise=noise,
                    method="first_passage",
                ),
                args=(queries,),
                noise=noise,
                variates=float(n + 1),
                variates_note="floor: the literal kernel's n + 1 draws",
            )
            for noise in ("laplace", "gumbel", "exponential")
        ),
        fast(
            mechanism="svt.sparse_vector (method='first_passage')",
            method="first_passage",
            methods=("first_passage", "first_passage"),
            setting=f"{power_label(long_n)} queries linspace(0, 100), T={THRESHOLD:g}, "
            f"eps1=eps2={EPSILON1:g}, Laplace, c={C}",
            release=lambda key, q: sparse_vector(
                key, q, threshold=THRESHOLD, epsilon1=EPSILON1, epsilon2=EPSILON2, c=C, method="first_passage"
            ),
            args=(long_queries,),
            noise="laplace",
            variates=float(long_n + C),
            variates_note="floor: the literal kernel's n + c draws",
        ),
        fast(
            mechanism="svt.adaptive_sparse_vector_with_gap (method='first_passage')",
            method="first_passage",
            methods=("first_passage", "first_passage"),
            setting=f"{power_label(long_n)} queries linspace(0, 100), T={THRESHOLD:g}, epsilon=1, c={C}",
            release=lambda key, q: adaptive_sparse_vector_with_gap(
                key, q, threshold=THRESHOLD, epsilon=1.0, c=C, method="first_passage"
            ),
            args=(long_queries,),
            noise="laplace",
            variates=float(2 * long_n + 1),
            variates_note="floor: the literal kernel's 2n + 1 draws",
        ),
    ]


def _literal_cases(scale: float) -> list[Case]:
    """The literal kernels (one noise per query), beside the NumPy loop of the algorithm."""
    n, queries, setting = _queries(scale)
    common = functools.partial(  # a Case with the literal rows' shared fields
        Case,
        family="svt",
        args=(queries,),
        releases=scaled(1_000, scale, 32),
        bytes_per_release=16 * n,
        noise="laplace",
        method="auto",
        methods=("literal", "first_passage"),
    )
    return [
        common(
            mechanism="svt.above_threshold",
            setting=setting,
            release=lambda key, q: above_threshold(
                key, q, threshold=THRESHOLD, epsilon1=EPSILON1, epsilon2=EPSILON2
            ),
            variates=float(n + 1),
            variates_note="one Laplace per query and one for the threshold",
            peers=(_numpy_sparse_vector(queries, 1),),
        ),
        common(
            mechanism="svt.sparse_vector",
            setting=f"{setting}, c={C}",
            release=lambda key, q: sparse_vector(
                key, q, threshold=THRESHOLD, epsilon1=EPSILON1, epsilon2=EPSILON2, c=C
            ),
            variates=float(n + C),
            variates_note="one Laplace per query and c for the thresholds",
            peers=(_numpy_sparse_vector(queries, C),),
        ),
    ]


def cases(scale: float) -> list[Case]:
    """The headline rows of the sparse vector family."""
    return [*_first_passage_cases(scale), *_literal_cases(scale)]
