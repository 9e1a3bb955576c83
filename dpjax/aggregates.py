"""DP sum and mean with a privately chosen clipping bound: Durfee (2023), §6.3 and §6.4.

1. ``bound = UQE(x, q)`` (Algorithm 2, :func:`dpjax.quantiles.unbounded`) with ``clip_fraction * epsilon``;
2. release ``sum_j clip(x_j, lower, bound) + Lap((bound - lower) / ((1 - clip_fraction) * epsilon))``.

Under swap neighbours (n public) one record moves the clipped sum by at most ``bound - lower``, so
step 2 is ``(1 - clip_fraction) epsilon``-DP given the bound, and the composition is ``epsilon``-DP.
Data below ``lower`` are clipped up to it (spec §2.9: clipping only from above would break the
sensitivity for negative values, e.g. jittered zeros). The paper's Table 1 "eps" is per part, i.e.
``epsilon = 2 * eps`` with ``clip_fraction = 0.5`` here.

Kernel design: the released bound is always a grid point ``lower + beta**k - 1``, so the clipped sum
is ``P_k + (n - f_k) * (beta**k - 1 + lower)`` with ``P_k`` the prefix sum of ``max(x, lower)`` over the
geometric bins below k: one O(n) pass bins the data once (key-independent), after which each
release costs O(log bins), also under ``vmap`` over keys. In float32 the prefix sums carry float32
rounding (relative ~1e-7 per bin); enable x64 for exact-to-double sums.
"""

from __future__ import annotations

import contextlib
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpjax import noise as noise_lib
from dpjax.accounting import PureDP, compose
from dpjax.quantiles.unbounded import (
    check_beta,
    check_data,
    check_finite,
    resolve_cap,
    unbounded_guarantee,
    unbounded_result,
)
from dpjax.quantiles.unbounded_bins import (
    bin_index,
    cumulative_counts,
    grid_edges,
    static_size,
    working_dtype,
)
from dpjax.validation import check_epsilon, check_probability, is_traced


class ClippedSum(NamedTuple):
    """A DP sum release: ``value`` (the noisy clipped sum), ``bound`` (the private clipping bound,
    itself a DP release) and ``truncated`` (UQE's truncation flag)."""

    value: jax.Array
    bound: jax.Array
    truncated: jax.Array


@functools.partial(jax.jit, static_argnames=("lower", "size", "beta", "cap", "dtype"))
def _prefix_sums(x, *, lower: float, size: int, beta: float, cap: int, dtype):
    """``P[i] = sum of max(x_j, lower) over z_j = x_j - lower < beta**i - 1`` for i < size."""
    x = x.astype(dtype)
    slot = bin_index(x - jnp.asarray(lower, dtype), beta, cap) + 1
    kept = jnp.where(slot < size, jnp.maximum(x, jnp.asarray(lower, dtype)), 0)
    return jnp.cumsum(jnp.zeros(size, dtype).at[slot].add(kept, mode="drop"))


def _check(x, epsilon, q, clip_fraction, lower, beta):
    x = check_data(x)
    epsilon = check_epsilon(epsilon)
    q = check_probability(q, "q", open_low=True)
    clip_fraction = check_probability(clip_fraction, "clip_fraction", open_low=True, open_high=True)
    return x, epsilon, q, clip_fraction, check_finite(lower, "lower"), check_beta(beta)


def clipped_sum(
    key,
    x,
    epsilon: float,
    *,
    q: float = 0.99,
    beta: float = 1.001,
    clip_fraction: float = 0.5,
    lower: float = 0.0,
    noise: str = "exponential",
    max_queries: int | None = None,
) -> ClippedSum:
    """DP sum with a private clipping bound, with the bound and the truncation flag.

    Same arguments as :func:`sum`; returns a :class:`ClippedSum`.
    """
    x, epsilon, q, clip_fraction, lower, beta = _check(x, epsilon, q, clip_fraction, lower, beta)
    key_bound, key_noise = jax.random.split(key)
    uqe = unbounded_result(
        key_bound, x, q, clip_fraction * epsilon, lower=lower, beta=beta, noise=noise, max_queries=max_queries
    )
    dtype = working_dtype(x)
    cap = resolve_cap(max_queries, beta, dtype)
    size = static_size(x, lower, beta, cap)
    context = contextlib.nullcontext() if is_traced(x) else jax.ensure_compile_time_eval()
    with context:  # key-independent O(n) passes, done once (cached compiled functions)
        table = dict(lower=lower, size=size, beta=beta, cap=cap, dtype=dtype)
        prefix = _prefix_sums(x, **table)
        below = cumulative_counts(x, **table).f
    k = jnp.minimum(uqe.index, size - 1)
    width = grid_edges(uqe.index, beta, dtype)  # bound - lower: the sensitivity under swap
    total = prefix[k] + (x.shape[0] - below[k]).astype(dtype) * uqe.estimate
    scale = width / jnp.asarray((1 - clip_fraction) * epsilon, dtype)
    value = total + noise_lib.laplace(key_noise, (), scale, dtype)
    return ClippedSum(value, uqe.estimate, uqe.truncated)


def sum(
    key,
    x,
    epsilon: float,
    *,
    q: float = 0.99,
    beta: float = 1.001,
    clip_fraction: float = 0.5,
    lower: float = 0.0,
    noise: str = "exponential",
    max_queries: int | None = None,
) -> jax.Array:
    """DP sum of data bounded below only, clipped at a privately estimated quantile.

    Durfee (2023), §6.3: ``bound = UQE(x, q)`` with ``clip_fraction * epsilon`` (Algorithm 2,
    epsilon1 = epsilon2), then ``sum_j clip(x_j, lower, bound) + Lap((bound - lower) / epsilon_rest)``
    with ``epsilon_rest = (1 - clip_fraction) * epsilon``.

    Neighbours and guarantee: swap (one record changed, n public); ``epsilon``-DP in total
    (:func:`sum_guarantee`). The paper's Table 1 row "eps" corresponds to ``epsilon = 2 * eps``.

    Args:
      key: a ``jax.random`` key.
      x: 1-D data (NaN refused; values below ``lower`` are clipped up to it, +inf down to the bound).
      epsilon: total privacy parameter, > 0.
      q: the quantile used as clipping bound, in (0, 1] (the paper: 0.99; q = 1 or a higher
        threshold avoids negative bias but has a heavy overshoot tail, spec §4.4).
      beta: UQE grid ratio > 1 (the paper uses 1.001 and recommends 1.01 for clipping).
      clip_fraction: share of ``epsilon`` spent on the bound, in (0, 1).
      lower: a data-independent lower bound (0 in the paper).
      noise: UQE's noise family ("exponential", "laplace", "gumbel").
      max_queries: optional cap on UQE's halting query.

    Returns:
      A scalar (the data's float dtype, default float for integer data).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.arange(1000.0)
      >>> total = sum(jax.random.key(0), x, 2.0)  # near 499,500 minus a little clipping bias
    """
    return clipped_sum(
        key,
        x,
        epsilon,
        q=q,
        beta=beta,
        clip_fraction=clip_fraction,
        lower=lower,
        noise=noise,
        max_queries=max_queries,
    ).value


def mean(
    key,
    x,
    epsilon: float,
    *,
    q: float = 0.99,
    beta: float = 1.001,
    clip_fraction: float = 0.5,
    lower: float = 0.0,
    noise: str = "exponential",
    max_queries: int | None = None,
) -> jax.Array:
    """DP mean: :func:`sum` divided by the public n (swap neighbours; ``epsilon``-DP in total,
    :func:`mean_guarantee`). Arguments as in :func:`sum`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> m = mean(jax.random.key(0), jnp.arange(1000.0), 2.0)  # near 499.5
    """
    value = sum(
        key,
        x,
        epsilon,
        q=q,
        beta=beta,
        clip_fraction=clip_fraction,
        lower=lower,
        noise=noise,
        max_queries=max_queries,
    )
    return value / jnp.shape(x)[0]


def sum_guarantee(
    epsilon: float, *, clip_fraction: float = 0.5, noise: str = "exponential", notion: str = "pure"
):
    """Guarantee of :func:`sum` (swap): UQE with ``clip_fraction * epsilon`` composed with the
    Laplace step's ``PureDP((1 - clip_fraction) * epsilon)``; ``PureDP(epsilon)`` for notion "pure",
    or zCDP with Theorem 1 for the UQE part (notion "zcdp")."""
    epsilon = check_epsilon(epsilon)
    clip_fraction = check_probability(clip_fraction, "clip_fraction", open_low=True, open_high=True)
    bound = unbounded_guarantee(clip_fraction * epsilon, noise=noise, notion=notion)
    return compose([bound, PureDP((1 - clip_fraction) * epsilon)])


mean_guarantee = sum_guarantee
