"""Headline rows of the state of the art beside the seeds (issue 47): ApproxQuantiles (Kaplan, Schnapp
and Stemmer 2022) at the JointExp row's sizes (m = 29, N(0, 5) data, bounds (-100, 100)), and the
joint exponential mechanism for top-k (Gillenwater et al. 2022) at d = 10^5, k = 10 on Zipf counts.

ApproxQuantiles' node EM is the literal kernel: one Gumbel per gap of the node's range, so a release
draws ``m (n + 1)`` variates at most (each level's nodes cover the data once, but each node's draw
runs over the masked global gaps). The joint top-k (the threshold sampler) ranks a head of
``w = max(64, 8 k)`` items by one partial top-k, then draws one of its ``k w`` intervals (and the tail
bound) by Gumbel-max and one uniform per row.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax._src.quantiles.approx_quantiles import approx_quantiles
from dpjax._src.selection import joint_top_k
from dpjax._src.tools.bench.case import Case, power_label, scaled
from dpjax._src.topk.joint_head import default_width

__all__ = [
    "cases",
]

_M, _BOUNDS, _K, _EPSILON = 29, (-100.0, 100.0), 10, 1.0


def cases(scale: float) -> list[Case]:
    rng = np.random.default_rng(0)
    n = scaled(10**5, scale, 1_000)
    x = rng.normal(0.0, 5.0, n).astype(np.float32)
    levels = tuple(np.arange(1, _M + 1) / (_M + 1))
    d = scaled(10**5, scale, 1_000)
    counts = np.floor(1e6 / np.arange(1, d + 1) ** 1.1).astype(np.int32)
    head = default_width(d, _K)
    return [
        Case(
            family="sota",
            mechanism="quantiles.approx_quantiles",
            setting=f"n={power_label(n)} N(0, 5) float32, m={_M} quantiles, bounds {_BOUNDS}, epsilon=1",
            release=lambda key, data: approx_quantiles(key, data, levels, _EPSILON, bounds=_BOUNDS),
            args=(jnp.asarray(x),),
            releases=scaled(64, scale, 4),
            bytes_per_release=16 * _M * (n + 2),
            noise="gumbel",
            variates=float(_M * (n + 1)),
            variates_note="literal node EM: one Gumbel per gap per node",
        ),
        Case(
            family="sota",
            mechanism="selection.joint_top_k",
            setting=f"d={power_label(d)} Zipf(1.1) int32 counts, k={_K}, epsilon=1 (total)",
            release=lambda key, c: joint_top_k(key, c, _K, _EPSILON, monotonic=True),
            args=(jnp.asarray(counts),),
            releases=scaled(10_000, scale, 16),
            bytes_per_release=4 * d + 4 * _K * head * (_K + 2) + 64 * _K * _K,
            noise="gumbel",
            variates=float(_K * head + 1 + _K),
            variates_note="Gumbel-max over the head's k w intervals and the tail, one uniform per row",
        ),
    ]
