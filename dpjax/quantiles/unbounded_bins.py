"""Exact geometric binning for the unbounded quantile mechanism (Durfee 2023, §4.2).

The counting queries of Algorithm 2 are ``f_i = #{j : x_j - lower < beta**i - 1}`` for i = 0, 1, ...
(Algorithm 2 starts at i = 1, Algorithm 4 at i = 0). One O(n) pass puts every point in the bin
``b = floor(log_beta(x - lower + 1))`` and corrects it by +-1 against the exact edges, so that

    ``f_i == #{z_j < edge(i)}`` exactly, with ``z = x - lower`` and ``edge(i) = expm1(i * log1p(beta - 1))``

both computed in the working dtype (:func:`grid_edges` is the one definition of the edges; the
released candidate ``beta**k + lower - 1`` is ``lower + grid_edges(k)``). Counts are int32, exact
for n < 2**31. Points below ``lower`` (including -inf) are counted by every query; +inf is never
counted, so the cumulative counts end at ``n_counted <= n``. NaN cannot be inspected under ``jit``:
there it is treated like +inf (eagerly it is rejected by the mechanisms).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.validation import is_traced

# Largest query index ever used: int32 room for the block loop and float32-exact integers.
INDEX_LIMIT = 2**24


class Counts(NamedTuple):
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


def working_dtype(x) -> jnp.dtype:
    """The float dtype the mechanism computes in: the data's float dtype, else JAX's default float."""
    dtype = jnp.result_type(x)
    if jnp.issubdtype(dtype, jnp.floating):
        return dtype
    return jnp.dtype(jax.dtypes.canonicalize_dtype(float))


def log_beta(beta: float) -> float:
    """``log(beta)`` computed accurately for beta near 1."""
    return math.log1p(beta - 1.0)


def max_index(beta: float, dtype) -> int:
    """The largest query index k whose candidate ``beta**k - 1`` is finite (with room) in ``dtype``."""
    ln_max = math.log(float(jnp.finfo(dtype).max)) - math.log(4.0)
    return int(min(math.floor(ln_max / log_beta(beta)), INDEX_LIMIT))


def grid_edges(index, beta: float, dtype) -> jax.Array:
    """``beta**index - 1`` in ``dtype``: the bin edges, and the candidates relative to ``lower``."""
    return jnp.expm1(jnp.asarray(index).astype(dtype) * jnp.asarray(log_beta(beta), dtype))


def bin_index(z, beta: float, cap: int) -> jax.Array:
    """Exact bin of each ``z = x - lower`` as int32: -1 below 0, ``b`` with
    ``edge(b) <= z < edge(b+1)``, clipped to ``cap`` (``cap`` = never counted up to query ``cap``)."""
    dtype = z.dtype
    z = jnp.where(jnp.isnan(z), jnp.inf, z)
    zc = jnp.maximum(z, jnp.zeros((), dtype))
    guess = jnp.floor(jnp.log1p(zc) / jnp.asarray(log_beta(beta), dtype))
    guess = jnp.clip(guess, 0, cap).astype(jnp.int32)
    guess = guess - (zc < grid_edges(guess, beta, dtype)).astype(jnp.int32)
    guess = guess + (zc >= grid_edges(guess + 1, beta, dtype)).astype(jnp.int32)
    return jnp.where(z < 0, -1, jnp.clip(guess, 0, cap))


def static_size(x, lower: float, beta: float, cap: int, *, negate: bool = False) -> int:
    """How many query indices to tabulate: past the data maximum for concrete data (a cheap NumPy
    upper bound, so the histogram is small), ``cap + 1`` for traced data."""
    if is_traced(x):
        return cap + 1
    z = (-1.0 if negate else 1.0) * np.asarray(x, dtype=np.float64) - lower
    z = z[np.isfinite(z) & (z > 0)]
    top = float(np.log1p(z.max()) / log_beta(beta)) if z.size else 0.0
    # Rounded up to a power of two (at least 64) so that kernels compiled for one dataset are reused.
    return int(min(cap + 1, max(64, 1 << (math.floor(top) + 2).bit_length())))


@functools.partial(jax.jit, static_argnames=("lower", "size", "beta", "cap", "dtype", "negate"))
def cumulative_counts(x, *, lower: float, size: int, beta: float, cap: int, dtype, negate: bool = False):
    """The cumulative counts ``f_0..f_{size-1}`` of ``z = x - lower`` (or ``-x - lower`` with ``negate``),
    computed in ``dtype``; one compiled O(n) pass.

    ``size`` must exceed every finite point's bin + 1 or equal ``cap + 1`` (see :func:`static_size`).
    """
    z = x.astype(dtype)
    z = (-z if negate else z) - jnp.asarray(lower, dtype)
    slot = bin_index(z, beta, cap) + 1  # slot 0 = below lower, slot b+1 = bin b
    hist = jnp.zeros(size, jnp.int32).at[slot].add(1, mode="drop")
    f = jnp.cumsum(hist, dtype=jnp.int32)
    n_counted = f[-1]
    tail_start = jnp.searchsorted(f, n_counted, side="left").astype(jnp.int32)
    return Counts(f, n_counted, tail_start)
