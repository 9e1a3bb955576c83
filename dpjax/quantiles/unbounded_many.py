"""Multiple unbounded quantiles by recursive splitting: Durfee (2023), §4.3 and Appendix B.3, with the
framework of Kaplan, Schnapp and Stemmer (2022).

The middle quantile of the (sorted) levels is released with UQE; the data are split at the release v
into ``{x < v}`` and ``{x >= v}``; the left levels recurse on the left part (same lower bound), the
right levels on the right part with lower bound v. Following App. B.3 the thresholds are fixed in
advance from the public n: a node covering the rank window that starts at level ``q_lo`` searches
level ``q_j`` with ``T = (q_j - q_lo) * n``. A release is clipped to its node's interval
(post-processing), so the output is sorted.

Privacy (swap, n public): at each of the ``L = ceil(log2(m + 1))`` levels of the recursion one changed
record either stays in one node (a swap neighbour: ``epsilon1 + epsilon2``, Lemma 4.1) or leaves one
node and enters another (two add/remove neighbours with a fixed threshold: ``max{epsilon1, epsilon2}``
each, Lemma B.2). A level therefore costs ``2 max{epsilon1, epsilon2}`` (= ``epsilon1 + epsilon2`` when
they are equal, the paper's "log(m+1) compositions of (epsilon1 + epsilon2)-DP"), and the budget is
split so that the L levels spend ``epsilon`` in total.
"""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax.accounting import PureDP
from dpjax.quantiles.unbounded import (
    check_beta,
    check_data,
    check_finite,
    resolve_cap,
    split_epsilon,
)
from dpjax.quantiles.unbounded_bins import bin_index, grid_edges, working_dtype
from dpjax.quantiles.unbounded_halting import halting_index, split_threshold
from dpjax.validation import check_epsilon, check_int, check_probability


def _levels(m: int) -> int:
    return max(1, math.ceil(math.log2(m + 1)))


def _per_call(epsilon: float, m: int, split: float, noise: str) -> tuple[float, float]:
    """(epsilon1, epsilon2) of each UQE call, so that each level costs ``epsilon / L``."""
    level = epsilon / _levels(m)
    scale = level / (2 * max(split, 1 - split))
    return split_epsilon(scale, split, noise)


def _check_levels(qs) -> tuple[float, ...]:
    qs = tuple(check_probability(q, "qs", open_low=True) for q in np.ravel(np.asarray(qs, dtype=np.float64)))
    if not qs:
        raise ValueError("qs must not be empty.")
    if any(b <= a for a, b in itertools.pairwise(qs)):
        raise ValueError("qs must be strictly increasing.")
    return qs


def _count_below(xs, lo, hi, lower, edge):
    """``#{j in [lo, hi) : xs[j] - lower < edge}`` for sorted ``xs`` (bisection; vectorized in edge)."""
    steps = max(1, math.ceil(math.log2(xs.shape[0] + 1)))

    def body(_, bounds):
        a, b = bounds  # answer in [a, b]
        mid = (a + b) // 2
        below = xs[jnp.clip(mid, 0, xs.shape[0] - 1)] - lower < edge
        go_right = (mid < b) & below
        return jnp.where(go_right, mid + 1, a), jnp.where(go_right, b, mid)

    a, _ = lax.fori_loop(
        0, steps + 1, body, (jnp.full_like(edge, lo, jnp.int32), jnp.full_like(edge, hi, jnp.int32))
    )
    return a - lo


@functools.partial(jax.jit, static_argnames=("qs", "lower", "beta", "noise", "epsilon1", "epsilon2", "cap"))
def _many(key, x, *, qs, lower, beta, noise, epsilon1, epsilon2, cap):
    dtype = working_dtype(x)
    xs = jnp.sort(x.astype(dtype))
    n = xs.shape[0]
    lower_value = jnp.asarray(lower, dtype)
    out = [None] * len(qs)

    def node(levels, q_lo, a, b, origin):
        if not levels:
            return
        mid = levels[len(levels) // 2]
        lo = jnp.searchsorted(xs, a, side="left").astype(jnp.int32)
        hi = jnp.searchsorted(xs, b, side="left").astype(jnp.int32)
        size = hi - lo
        top = xs[jnp.maximum(hi - 1, 0)]
        tail_start = jnp.where(size > 0, bin_index(top - origin, beta, cap) + 1, 0).astype(jnp.int32)

        def count_at(idx):
            return _count_below(xs, lo, hi, origin, grid_edges(idx, beta, dtype))

        k, _ = halting_index(
            jax.random.fold_in(key, mid),
            None,
            split_threshold((qs[mid] - q_lo) * n),
            1.0 / epsilon1,
            1.0 / epsilon2,
            noise=noise,
            dtype=dtype,
            first=1,
            cap=cap,
            method="blocks",
            count_at=count_at,
            n_counted=size,
            tail_start=jnp.maximum(tail_start, 1),
        )
        v = jnp.clip(origin + grid_edges(k, beta, dtype), a, b)
        out[mid] = v
        half = len(levels) // 2
        node(levels[:half], q_lo, a, v, origin)
        node(levels[half + 1 :], qs[mid], v, b, v)

    node(tuple(range(len(qs))), 0.0, jnp.asarray(-jnp.inf, dtype), jnp.asarray(jnp.inf, dtype), lower_value)
    return jnp.stack(out)


def unbounded_many(
    key,
    x,
    qs,
    epsilon: float,
    *,
    lower: float = 0.0,
    beta: float = 1.001,
    noise: str = "exponential",
    split: float = 0.5,
    max_queries: int | None = None,
) -> jax.Array:
    """m differentially private quantiles of data bounded below only (recursive splitting of UQE).

    Durfee (2023), §4.3 / App. B.3, with Kaplan, Schnapp and Stemmer (2022): the middle level is
    released by UQE (Algorithm 2), the data are split at it, and both halves recurse with thresholds
    fixed from the public n (see the module docstring).

    Neighbours and guarantee: swap; ``epsilon``-DP in total over the ``ceil(log2(m+1))`` levels
    (:func:`unbounded_many_guarantee`); each UQE call gets ``epsilon1 = split * c`` and
    ``epsilon2 = (1 - split) * c`` with ``c = epsilon / (L * 2 max(split, 1 - split))``.

    Args:
      key: a ``jax.random`` key.
      x: 1-D data (NaN refused; below ``lower`` counts below every candidate).
      qs: m strictly increasing levels in (0, 1] (concrete).
      epsilon: total privacy parameter, > 0.
      lower, beta, noise, split, max_queries: as in :func:`dpjax.quantiles.unbounded`.

    Returns:
      Shape ``(m,)``, non-decreasing, in the data's float dtype.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.arange(10_000.0)
      >>> qs = unbounded_many(jax.random.key(0), x, [0.25, 0.5, 0.75], 3.0)  # near 2500, 5000, 7500
    """
    x = check_data(x)
    qs = _check_levels(qs)
    epsilon = check_epsilon(epsilon)
    epsilon1, epsilon2 = _per_call(epsilon, len(qs), split, noise)
    lower = check_finite(lower, "lower")
    beta = check_beta(beta)
    cap = resolve_cap(max_queries, beta, working_dtype(x))
    return _many(
        key, x, qs=qs, lower=lower, beta=beta, noise=noise, epsilon1=epsilon1, epsilon2=epsilon2, cap=cap
    )


def unbounded_many_guarantee(
    m: int, epsilon: float, *, split: float = 0.5, noise: str = "exponential"
) -> PureDP:
    """Guarantee of :func:`unbounded_many` (swap): ``ceil(log2(m+1))`` levels, each
    ``2 max{epsilon1, epsilon2}``-DP (Lemmas 4.1 and B.2), which the budget split makes ``epsilon``."""
    m = check_int(m, "m", minimum=1)
    epsilon1, epsilon2 = _per_call(check_epsilon(epsilon), m, split, noise)
    return PureDP(_levels(m) * 2 * max(epsilon1, epsilon2))
