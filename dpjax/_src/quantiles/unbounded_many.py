"""Multiple unbounded quantiles by recursive splitting: Durfee (2023), §4.3 and Appendix B.3, with the
framework of Kaplan, Schnapp and Stemmer (2022).

The middle quantile of the (sorted) levels is released with UQE; the data are split at the release v
into ``{x < v}`` and ``{x >= v}``; the left levels recurse on the left part (same lower bound), the
right levels on the right part with lower bound v. Following App. B.3 the thresholds are fixed in
advance from the public n: a node covering the rank window that starts at level ``q_lo`` searches
level ``q_j`` with ``T = (q_j - q_lo) * n``. A release is clipped to its node's interval
(post-processing), so the output is sorted.

Privacy (swap, n public): at each of the ``L = ceil(log2(m + 1))`` levels of the recursion one changed
record either stays in one node (a swap neighbor: ``epsilon1 + epsilon2``, Lemma 4.1) or leaves one
node and enters another (two add/remove neighbors with a fixed threshold: ``max{epsilon1, epsilon2}``
each, Lemma B.2). A level therefore costs ``2 max{epsilon1, epsilon2}`` (= ``epsilon1 + epsilon2`` when
they are equal, the paper's "log(m+1) compositions of (epsilon1 + epsilon2)-DP"), and the budget is
split so that the L levels spend ``epsilon`` in total.

Traced parameters: the level values ``qs`` (their number m is static: it fixes the output shape and
the recursion), epsilon, split, lower and beta may be traced; counts are found by bisection of the
sorted data, so the query cap ``max_queries`` (static) bounds the halting index but sizes no table.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.host_checks import check_epsilon, check_int, check_probability, float_dtype, is_traced
from dpjax._src.quantiles.unbounded import (
    DEFAULT_MAX_QUERIES,
    UnboundedNoise,
    check_beta,
    check_max_queries,
    check_split,
    query_grid,
    split_epsilon,
    usable,
)
from dpjax._src.quantiles.unbounded_bins import bin_index, grid_edges
from dpjax._src.svt.monotone_halting import halting_index, split_threshold
from dpjax._src.validation import Checks

__all__ = [
    "unbounded_many",
    "unbounded_many_guarantee",
]


def _levels(m: int) -> int:
    return max(1, math.ceil(math.log2(m + 1)))


def _per_call(epsilon: float, m: int, split: float, noise: str) -> tuple[float, float]:
    """Host side: (epsilon1, epsilon2) of each UQE call, so that each level costs ``epsilon / L``."""
    level = epsilon / _levels(m)
    scale = level / (2 * max(split, 1 - split))
    return split_epsilon(scale, split, noise)


def _check_levels(checks: Checks, qs, dtype) -> jax.Array:
    """m >= 1 strictly increasing levels in (0, 1], as a 1-D array in ``dtype`` (m is static)."""
    if is_traced(qs):
        qs = jnp.atleast_1d(jnp.asarray(qs))
        if qs.ndim != 1:
            raise ValueError(f"qs must be a 1-D sequence, got shape {qs.shape}.")
        checks.record((qs > 0) & (qs <= 1), "qs must be in (0, 1].")
        checks.record(jnp.diff(qs) > 0, "qs must be strictly increasing.")
        return qs.astype(dtype)
    levels = [check_probability(q, "qs", open_low=True) for q in np.ravel(np.asarray(qs, dtype=np.float64))]
    if not levels:
        raise ValueError("qs must not be empty.")
    if any(b <= a for a, b in itertools.pairwise(levels)):
        raise ValueError("qs must be strictly increasing.")
    return jnp.asarray(np.asarray(qs), dtype).ravel()


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


@functools.partial(jax.jit, static_argnames=("dtype",))
@sharded.auto_axes
def _sorted(x, *, dtype):
    """``x`` sorted in ``dtype`` (replicated when ``x`` is sharded over explicit mesh axes)."""
    return jnp.sort(x.astype(dtype))


@functools.partial(jax.jit, static_argnames=("noise",))
def _many(key, xs, qs, epsilon, split, lower, log_b, cap, *, noise):
    """The recursion over the sorted data ``xs`` (working dtype); ``qs`` has the static length m."""
    dtype = xs.dtype
    n, m = xs.shape[0], qs.shape[0]
    # Each UQE call: epsilon1 = split*c, epsilon2 = (1-split)*c, c = epsilon / (L * 2 max(split, 1-split)).
    split = jnp.asarray(split, dtype)
    rest = jnp.ones((), dtype) - split
    # A product with a reciprocal: the same bits whether epsilon or split is a constant under jit.
    c = jnp.asarray(epsilon, dtype) * (jnp.ones((), dtype) / (2 * _levels(m) * jnp.maximum(split, rest)))
    epsilon1, epsilon2 = split * c, rest * c
    out = [None] * m

    def node(levels, q_lo, a, b, origin):
        if not levels:
            return
        mid = levels[len(levels) // 2]
        lo = jnp.searchsorted(xs, a, side="left").astype(jnp.int32)
        hi = jnp.searchsorted(xs, b, side="left").astype(jnp.int32)
        size = hi - lo
        top = xs[jnp.maximum(hi - 1, 0)]
        tail_start = jnp.where(size > 0, bin_index(top - origin, log_b, cap) + 1, 0).astype(jnp.int32)

        def count_at(idx):
            return _count_below(xs, lo, hi, origin, grid_edges(idx, log_b))

        k, _ = halting_index(
            jax.random.fold_in(key, mid),
            None,
            split_threshold((qs[mid] - q_lo) * jnp.asarray(n, dtype)),
            epsilon1,
            epsilon2,
            noise=noise,
            dtype=dtype,
            first=1,
            cap=cap,
            method="blocks",
            count_at=count_at,
            n_counted=size,
            tail_start=jnp.maximum(tail_start, 1),
        )
        v = jnp.clip(origin + grid_edges(k, log_b), a, b)
        out[mid] = v
        half = len(levels) // 2
        node(levels[:half], q_lo, a, v, origin)
        node(levels[half + 1 :], qs[mid], v, b, v)

    inf = jnp.asarray(jnp.inf, dtype)
    node(tuple(range(m)), jnp.zeros((), dtype), -inf, inf, jnp.asarray(lower, dtype))
    return jnp.stack(out)


def unbounded_many(
    key: jax.Array,
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    epsilon: ArrayLike,
    *,
    lower: ArrayLike = 0.0,
    beta: ArrayLike = 1.001,
    noise: UnboundedNoise = "exponential",
    split: ArrayLike = 0.5,
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> jax.Array:
    """m differentially private quantiles of data bounded below only (recursive splitting of UQE).

    Durfee (2023), §4.3 / App. B.3, with Kaplan, Schnapp and Stemmer (2022): the middle level is
    released by UQE (Algorithm 2), the data are split at it, and both halves recurse with thresholds
    fixed from the public n (see the module docstring).

    Neighbors and guarantee: swap; ``epsilon``-DP in total over the ``ceil(log2(m+1))`` levels
    (:func:`unbounded_many_guarantee`); each UQE call gets ``epsilon1 = split * c`` and
    ``epsilon2 = (1 - split) * c`` with ``c = epsilon / (L * 2 max(split, 1 - split))``.

    Args:
      key: a ``jax.random`` key.
      x: 1-D data (may be traced; NaN refused, NaN output when traced; below ``lower`` counts below
        every candidate). Concrete data are sorted once, eagerly.
      qs: m strictly increasing levels in (0, 1] (values may be traced; their number m is static).
      epsilon: total privacy parameter, > 0 (may be traced).
      lower, beta, split: as in :func:`dpjax.quantiles.unbounded` (may be traced).
      noise, max_queries: as in :func:`dpjax.quantiles.unbounded` (static); the counts are found
        by bisection of the sorted data, so the cap sizes no table here.

    Returns:
      Shape ``(m,)``, non-decreasing, in the data's float dtype; all NaN when a traced input is
      invalid (or the traced data contain NaN).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.arange(10_000.0)
      >>> qs = unbounded_many(jax.random.key(0), x, [0.25, 0.5, 0.75], 3.0)  # near 2500, 5000, 7500
    """
    checks = Checks()
    x = checks.data(x, allow_infinite=True)
    dtype = float_dtype(x)
    qs = _check_levels(checks, qs, dtype)
    epsilon = checks.epsilon(epsilon)
    split = check_split(checks, split, noise)
    lower = checks.real(lower, "lower")
    beta = check_beta(checks, beta, dtype)
    max_queries = check_max_queries(max_queries)
    qs = usable(checks, qs, jnp.arange(1, qs.shape[0] + 1, dtype=dtype) / (qs.shape[0] + 1))
    epsilon, split = usable(checks, epsilon, 1.0), usable(checks, split, 0.5)
    lower, beta = usable(checks, lower, 0.0), usable(checks, beta, 2.0)
    g = query_grid(beta, max_queries, dtype)
    context = contextlib.nullcontext() if is_traced(x) else jax.ensure_compile_time_eval()
    with context:  # concrete data: sorted once, now (not per key, and not constant-folded under jit)
        xs = _sorted(x, dtype=dtype)
    return checks.guard(_many(key, xs, qs, epsilon, split, lower, g.log_b, g.cap, noise=noise))


@elementwise("epsilon", "split")
def unbounded_many_guarantee(
    qs: ArrayLike | Sequence[float],
    epsilon: float,
    *,
    noise: UnboundedNoise = "exponential",
    split: float = 0.5,
) -> PureDP:
    """Guarantee of :func:`unbounded_many` (swap; no ``neighbors`` argument: Lemma 4.1's swap
    monotonicity is what it uses): for ``m = len(qs)`` levels, ``ceil(log2(m+1))`` levels of the
    tree, each ``2 max{epsilon1, epsilon2}``-DP (Lemmas 4.1 and B.2), which the budget split makes
    ``epsilon``. Only the number of levels matters. Host side: concrete numbers, or arrays of
    ``epsilon``/``split`` for a grid."""
    m = check_int(np.size(qs), "len(qs)", minimum=1)
    epsilon1, epsilon2 = _per_call(check_epsilon(epsilon), m, split, noise)
    return PureDP(_levels(m) * 2 * max(epsilon1, epsilon2))
