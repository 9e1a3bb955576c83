"""Exact geometric binning for the unbounded quantile mechanism (Durfee 2023, §4.2).

The counting queries of Algorithm 2 are ``f_i = #{j : x_j - lower < beta**i - 1}`` for i = 0, 1, ...
(Algorithm 2 starts at i = 1, Algorithm 4 at i = 0). One O(n) pass puts every point in the bin
``b = floor(log_beta(x - lower + 1))`` and corrects it by +-1 against the exact edges, so that

    ``f_i == #{z_j < edge(i)}`` exactly, with ``z = x - lower`` and ``edge(i) = expm1(i * log_beta)``

both computed in the working dtype, with ``log_beta = log1p(beta - 1)`` of ``beta`` rounded to that
dtype (:func:`log_beta` and :func:`grid_edges` are the one definition of the grid; the released
candidate ``beta**k + lower - 1`` is ``lower + grid_edges(k)``). Counts are int32, exact for
n < 2**31. Points below ``lower`` (including -inf) are counted by every query; +inf and points
beyond the query cap are never counted, so the cumulative counts end at ``n_counted <= n``. NaN
is treated like +inf here (the mechanisms refuse it eagerly and mark the output under ``jit``).

``lower``, ``log_beta`` and the cap are values (they may be traced); only the table length
``size`` is static. For concrete data and parameters :func:`static_size` makes it just long enough
for the data; otherwise it is the static cap + 1.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax._src import sharded

__all__: list[str] = []

# Largest query index ever used: int32 room for the block loop and float32-exact integers.
INDEX_LIMIT = 2**24


class _Counts(NamedTuple):
    """Cumulative counts of the geometric grid (a pytree; key-independent data work).

    Attributes:
      f: int32 ``[S]``, ``f[i] = #{z_j < edge(i)}`` for query indices i = 0..S-1; ``f[0]`` counts the
        points below ``lower``. For i >= S every count equals ``n_counted``.
      n_counted: int32 scalar, the number of points counted by some query (finite, below the cap).
      tail_start: int32 scalar, the first query index i with ``f_i == n_counted`` (the constant
        stretch beyond the data maximum starts there).
    """

    f: jax.Array
    n_counted: jax.Array
    tail_start: jax.Array


def log_beta(beta, dtype) -> jax.Array:
    """``log(beta)`` in ``dtype``, accurate for beta near 1: ``log1p(beta - 1)`` of ``beta`` in ``dtype``."""
    beta = jnp.asarray(beta, dtype)
    return jnp.log1p(beta - jnp.ones((), dtype))


def query_cap(log_b, max_queries: int, dtype) -> jax.Array:
    """The largest query index, int32: ``max_queries`` (<= ``INDEX_LIMIT``), or less where
    ``beta**k - 1`` would overflow.

    The finite limit is ``floor(log(max float / 8) / log(beta))``, computed in ``dtype``, so that
    ``4 * (beta**k - 1)`` stays finite (room to add ``lower``); e.g. 86,6xx in float32 at beta = 1.001.
    """
    ln_max = jnp.asarray(math.log(float(jnp.finfo(dtype).max)) - math.log(8.0), dtype)
    return jnp.minimum(jnp.floor(ln_max / log_b), jnp.asarray(max_queries, dtype)).astype(jnp.int32)


def grid_edges(index, log_b) -> jax.Array:
    """``beta**index - 1`` in the dtype of ``log_b``: the bin edges, and the candidates minus ``lower``."""
    log_b = jnp.asarray(log_b)
    return jnp.expm1(jnp.asarray(index).astype(log_b.dtype) * log_b)


def bin_index(z, log_b, cap) -> jax.Array:
    """Exact bin of each ``z = x - lower`` as int32: -1 below 0, ``b`` with
    ``edge(b) <= z < edge(b+1)``, clipped to ``cap`` (``cap`` = never counted up to query ``cap``).

    The guess ``g = floor(log1p(z) / log_beta)`` is off by at most one; ``b = g + [z >= edge(g+1)]
    - [z < edge(g)]`` corrects it (at most one term holds, the edges increase). The guess and the
    two comparisons are computed in separate loops (``optimization_barrier``): fused into one, with
    integer conversions, XLA's CPU loop is not vectorised (benchmarks/README.md); the indices
    are exact floats below 2**24 (``INDEX_LIMIT``).
    """
    dtype = z.dtype
    z = jnp.where(jnp.isnan(z), jnp.inf, z)
    zc = jnp.maximum(z, jnp.zeros((), dtype))
    guess = jnp.clip(jnp.floor(jnp.log1p(zc) / log_b), 0, jnp.asarray(cap).astype(dtype))
    guess = lax.optimization_barrier(guess)
    above = zc >= grid_edges(guess + jnp.ones((), dtype), log_b)
    below = zc < grid_edges(guess, log_b)
    above, below = lax.optimization_barrier((above, below))
    b = guess.astype(jnp.int32) + above.astype(jnp.int32) - below.astype(jnp.int32)
    return jnp.where(z < 0, -1, jnp.clip(b, 0, cap))


@functools.partial(jax.jit, static_argnames=("negate",))
def _largest_finite(x, *, negate: bool) -> jax.Array:
    """The largest finite value of ``x`` (of ``-x`` with ``negate``), ``-inf`` when none: one
    compiled reduction."""
    x = -x.astype(jnp.promote_types(x.dtype, jnp.float32)) if negate else x
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.max(x)
    return jnp.max(jnp.where(jnp.isfinite(x), x, -jnp.inf), initial=-jnp.inf)


def static_size(x, lower: float, beta: float, cap: int, dtype, *, negate: bool = False) -> int:
    """How many query indices to tabulate for concrete data and parameters: past the bin of the
    data maximum (an upper bound on the grid of ``beta`` rounded to ``dtype``, from one compiled
    reduction of the data), at most ``cap + 1``; rounded up to a power of two (at least 64) so
    compiled kernels are reused."""
    with jax.ensure_compile_time_eval():
        largest = float(_largest_finite(jnp.asarray(x), negate=negate))
    z = largest - float(lower)
    log_b = math.log1p(float(np.asarray(beta, dtype)) - 1.0)
    top = math.log1p(z) / log_b if math.isfinite(z) and z > 0 else 0.0
    top *= 1.0 + 8 * float(jnp.finfo(dtype).eps)  # the dtype's grid may bin a point a little higher
    return int(min(cap + 1, max(64, 1 << (math.floor(top) + 2).bit_length())))


def _slots(x, lower, log_b, cap, size: int, dtype, negate: bool):
    """Histogram slot of each point: 0 below ``lower``, ``b + 1`` for bin b < cap, ``size`` (dropped)
    for the points no query up to ``cap`` counts."""
    z = x.astype(dtype)
    z = (-z if negate else z) - jnp.asarray(lower, dtype)
    b = bin_index(z, log_b, cap)
    return jnp.where(b >= cap, size, b + 1)


def _histogram(x, lower, log_b, cap, *, size: int, dtype, negate: bool) -> jax.Array:
    """int32 ``[size]``: the number of points in each histogram slot (see :func:`_slots`)."""
    slot = _slots(x, lower, log_b, cap, size, dtype, negate)
    return jnp.zeros(size, jnp.int32).at[slot].add(1, mode="drop")


@functools.partial(jax.jit, static_argnames=("size", "dtype", "negate", "layout"))
def cumulative_counts(
    x, lower, log_b, cap, *, size: int, dtype, negate: bool = False, layout=None
) -> _Counts:
    """The cumulative counts ``f_0..f_{size-1}`` of ``z = x - lower`` (or ``-x - lower`` with ``negate``),
    computed in ``dtype``; one compiled O(n) pass.

    ``size`` must exceed every counted point's bin + 1 or equal ``cap + 1`` (see :func:`static_size`).
    Points sharded evenly over mesh axes (``layout``, :func:`dpjax._src.sharded.leading_axes` of ``x``,
    also read from explicit-axis types under ``jit``) are binned by their device into a local
    histogram, and the histograms are summed (``psum``, exact in int32); otherwise XLA partitions
    the binning.
    """
    histogram = functools.partial(_histogram, size=size, dtype=dtype, negate=negate)
    layout = layout or sharded.leading_axes(x)
    if layout is None:
        hist = sharded.auto_axes(histogram)(x, lower, log_b, cap)
    else:
        hist = sharded.sum_over_shards(histogram, layout, x, lower, log_b, cap)
    f = jnp.cumsum(hist, dtype=jnp.int32)
    n_counted = f[-1]
    tail_start = jnp.searchsorted(f, n_counted, side="left").astype(jnp.int32)
    return _Counts(f, n_counted, tail_start)


@functools.partial(jax.jit, static_argnames=("size", "dtype"))
@sharded.auto_axes
def prefix_sums(x, lower, log_b, cap, *, size: int, dtype) -> jax.Array:
    """``P[i]`` = the sum of ``max(x_j, lower)`` over the points counted by query i (i < size)."""
    slot = _slots(x, lower, log_b, cap, size, dtype, False)
    kept = jnp.maximum(x.astype(dtype), jnp.asarray(lower, dtype))  # slot == size: dropped
    return jnp.cumsum(jnp.zeros(size, dtype).at[slot].add(kept, mode="drop"))
