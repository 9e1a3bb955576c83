"""Quantile family: the unbounded quantile mechanism (UQE) and JointExp.

UQE (Durfee 2023, Alg. 2): n = 10^6 lognormal(3, 1.5) float32 points, q = 0.99, epsilon = 1,
beta = 1.001. A single release is the public eager call on NumPy data, so it includes the O(n)
binning pass it does per call; the Monte Carlo batch bins once (concrete data under ``vmap``) and
only samples per key. The floor counts the Exponential variates a literal AboveThreshold draws:
one per query up to the halting index, plus the threshold's (dpjax samples the halting index in
O(log bins) draws, so it can beat this floor). Peers (bounded, so they need a range [0, 10^4]):
OpenDP's ``make_private_quantile`` (1,000 candidates), diffprivlib's ``tools.quantile`` and
python-dp's ``Percentile``.

JointExp (Gillenwater et al. 2021, Alg. 1): m = 29 quantiles of n = 10^6 N(0, 5) points on
[-100, 100], epsilon = 1; a single release builds the forward tables (jitted, data as argument),
the Monte Carlo batch builds them once. Floor: the m (n + 1) Gumbel variates of a literal
Gumbel-max backward pass over the n + 1 gaps per quantile. No peer library implements it.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from dpjax._src.quantiles.joint_exp import joint_exp
from dpjax._src.quantiles.unbounded import unbounded
from dpjax._src.tools.bench import peers
from dpjax._src.tools.bench.case import Case, power_label, scaled

__all__ = [
    "BETA",
    "BOUNDS",
    "EPSILON",
    "JOINT_BOUNDS",
    "M",
    "Q",
    "cases",
]

Q, EPSILON, BETA, BOUNDS = 0.99, 1.0, 1.001, (0.0, 1e4)
M, JOINT_BOUNDS = 29, (-100.0, 100.0)


def _halting_variates(estimates) -> float:
    """Mean halting index k of the releases (``estimate = beta**k - 1``) plus the threshold's draw."""
    k = np.round(np.log1p(np.asarray(estimates, np.float64)) / math.log(BETA))
    return float(k.mean()) + 1.0


def cases(scale: float) -> list[Case]:
    rng = np.random.default_rng(0)
    n = scaled(10**6, scale, 1_000)
    x = rng.lognormal(3.0, 1.5, n).astype(np.float32)
    n_joint = scaled(10**6, scale, 1_000)
    y = rng.normal(0.0, 5.0, n_joint).astype(np.float32)
    levels = tuple(np.arange(1, M + 1) / (M + 1))
    return [
        Case(
            family="quantiles",
            mechanism="quantiles.unbounded",
            setting=f"n={power_label(n)} lognormal(3, 1.5) float32, q={Q:g}, epsilon={EPSILON:g}, "
            f"beta={BETA:g}",
            release=lambda key: unbounded(key, x, q=Q, epsilon=EPSILON, beta=BETA),
            eager_single=True,
            method="auto",
            methods=("literal", "fast"),
            host_data=(x,),
            releases=scaled(10_000, scale, 100),
            bytes_per_release=64,
            noise="exponential",
            variates=_halting_variates,
            variates_note="literal AboveThreshold: one Exponential per query up to the halt, plus one",
            peers=(
                peers.opendp_quantile(x, Q, EPSILON, np.linspace(*BOUNDS, 1000)),
                peers.diffprivlib_quantile(x, Q, EPSILON, BOUNDS),
                peers.pydp_percentile(x, Q, EPSILON, BOUNDS),
            ),
        ),
        Case(
            family="quantiles",
            mechanism="quantiles.joint_exp",
            setting=f"n={power_label(n_joint)} N(0, 5) float32, m={M} quantiles, bounds {JOINT_BOUNDS}, "
            "epsilon=1",
            release=lambda key, data: joint_exp(key, data, levels, epsilon=1.0, bounds=JOINT_BOUNDS),
            args=(jnp.asarray(y),),
            method="linear",
            methods=("linear", "linear"),
            releases=scaled(1_000, scale, 16),
            bytes_per_release=64 * M * math.isqrt(n_joint) + 4096,
            noise="gumbel",
            variates=float(M * (n_joint + 1)),
            variates_note="literal backward pass: one Gumbel per gap per quantile",
        ),
    ]
