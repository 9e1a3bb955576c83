"""Aggregates family: the DP sum with a privately estimated clipping bound (Durfee 2023, §6.3).

n = 10^6 lognormal(3, 1.5) float32 points, epsilon = 2 (half on the UQE bound at q = 0.99, half on
the Laplace noise). A single release is the public eager call on NumPy data (one O(n) pass for the
bins and prefix sums per call); the Monte Carlo batch does that pass once. Floor: the literal
UQE's Exponential draws (halting index + 1) plus the Laplace draw. Peers are bounded sums with the
bound *given* (the true 0.99 quantile), i.e. less work than a sum that estimates its bound; the fair
row beside them is dpjax given the same bound: the Laplace mechanism (Dwork and Roth 2014, Thm. 3.6)
on the sum clipped to [0, bound], one ``jax.jit`` call on the NumPy data (floor: one Laplace draw).
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from dpjax._src import aggregates
from dpjax._src.additive import laplace_mechanism
from dpjax._src.tools.bench import peers
from dpjax._src.tools.bench.case import Case, power_label, scaled

__all__ = [
    "BETA",
    "EPSILON",
    "Q",
    "cases",
]

EPSILON, Q, BETA = 2.0, 0.99, 1.001


def _variates(result) -> float:
    """Mean UQE halting index (from the clipping bound ``beta**k - 1``) + threshold + Laplace."""
    k = np.round(np.log1p(np.asarray(result.bound, np.float64)) / math.log(BETA))
    return float(k.mean()) + 2.0


def cases(scale: float) -> list[Case]:
    n = scaled(10**6, scale, 1_000)
    x = np.random.default_rng(0).lognormal(3.0, 1.5, n).astype(np.float32)
    bound = float(np.quantile(x, Q))
    data = f"n={power_label(n)} lognormal(3, 1.5) float32"
    given = (
        peers.opendp_sum(x, bound, EPSILON / 2),
        peers.diffprivlib_sum(x, bound, EPSILON / 2),
        peers.pydp_bounded_sum(x, bound, EPSILON / 2),
    )
    return [
        Case(
            family="aggregates",
            mechanism="aggregates: laplace_mechanism of a clipped sum (bound given)",
            setting=f"{data}, epsilon={EPSILON / 2:g} (the sum's share), bound given: q={Q:g} ({bound:.4g})",
            release=lambda key, data: laplace_mechanism(
                key, jnp.sum(jnp.clip(data, 0.0, bound)), EPSILON / 2, sensitivity=bound
            ),
            args=(x,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=64,
            noise="laplace",
            variates=1.0,
            variates_note="one Laplace",
            peers=tuple(dataclasses.replace(peer, note="float64 ndarray; the same bound") for peer in given),
        ),
        Case(
            family="aggregates",
            mechanism="aggregates.clipped_sum",
            setting=f"{data}, epsilon={EPSILON:g}, bound: UQE q={Q:g}",
            release=lambda key: aggregates.clipped_sum(key, x, epsilon=EPSILON, q=Q, beta=BETA),
            eager_single=True,
            method="auto",
            methods=("literal", "fast"),
            host_data=(x,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=64,
            noise="exponential",
            variates=_variates,
            variates_note="literal UQE draws (halting index + 1) and one Laplace",
            peers=given,
        ),
    ]
