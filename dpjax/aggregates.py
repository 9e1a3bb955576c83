"""DP sum and mean with a privately chosen clipping bound: Durfee (2023), §6.3 and §6.4.

1. ``bound = UQE(x, q)`` (Algorithm 2, :func:`dpjax.quantiles.unbounded`) with ``clip_fraction * epsilon``;
2. release ``sum_j clip(x_j, lower, bound) + Lap((bound - lower) / ((1 - clip_fraction) * epsilon))``.

Under swap neighbors (n public) one record moves the clipped sum by at most ``bound - lower``, so
step 2 is ``(1 - clip_fraction) epsilon``-DP given the bound, and the composition is ``epsilon``-DP.
Data below ``lower`` are clipped up to it (clipping only from above would break the
sensitivity for negative values, e.g. jittered zeros). The paper's Table 1 "eps" is per part, i.e.
``epsilon = 2 * eps`` with ``clip_fraction = 0.5`` here.

Traced parameters: epsilon, q, beta, clip_fraction and lower may be traced; the query
cap ``max_queries`` is static (see :func:`dpjax.quantiles.unbounded`).

Kernel design: the released bound is always a grid point ``lower + beta**k - 1``, so the clipped sum
is ``P_k + (n - f_k) * (beta**k - 1 + lower)`` with ``P_k`` the prefix sum of ``max(x, lower)`` over the
geometric bins below k: one O(n) pass bins the data once (key-independent), after which each
release costs O(log bins), also under ``vmap`` over keys. In float32 the prefix sums carry float32
rounding (relative ~1e-7 per bin); enable x64 for exact-to-double sums.
"""

from dpjax._src.aggregates import (
    ClippedSum,
    clipped_sum,
    mean,
    mean_guarantee,
    sum,
    sum_guarantee,
)

__all__ = [
    "ClippedSum",
    "clipped_sum",
    "mean",
    "mean_guarantee",
    "sum",
    "sum_guarantee",
]
