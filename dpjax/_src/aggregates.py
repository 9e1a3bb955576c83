"""The implementation behind :mod:`dpjax.aggregates` (its docstring states the mechanisms, their papers and
guarantees; this module's functions carry theirs)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src import noise as noise_lib
from dpjax._src.accounting.composition import compose
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import Guarantee, PureDP
from dpjax._src.host_checks import check_choice, check_epsilon, check_probability, float_dtype
from dpjax._src.quantiles.unbounded import (
    DEFAULT_MAX_QUERIES,
    NOISES,
    UnboundedNoise,
    check_beta,
    check_max_queries,
    halting,
    query_grid,
    tabulate,
    unbounded_guarantee,
    usable,
)
from dpjax._src.quantiles.unbounded_bins import grid_edges
from dpjax._src.signatures import arguments_of
from dpjax._src.validation import Checks

__all__ = [
    "ClippedSum",
    "clipped_sum",
    "mean",
    "mean_guarantee",
    "sum",
    "sum_guarantee",
]


class ClippedSum(NamedTuple):
    """A DP sum release: ``value`` (the noisy clipped sum), ``bound`` (the private clipping bound,
    itself a DP release) and ``truncated`` (UQE's truncation flag). On invalid traced input
    ``value`` and ``bound`` are NaN."""

    value: jax.Array
    bound: jax.Array
    truncated: jax.Array


def clipped_sum(
    key: jax.Array,
    x: ArrayLike,
    epsilon: ArrayLike,
    *,
    q: ArrayLike = 0.99,
    beta: ArrayLike = 1.001,
    clip_fraction: ArrayLike = 0.5,
    lower: ArrayLike = 0.0,
    noise: UnboundedNoise = "exponential",
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> ClippedSum:
    """DP sum with a private clipping bound, with the bound and the truncation flag.

    Same arguments as :func:`sum`; returns a :class:`ClippedSum`.
    """
    checks = Checks()
    x = checks.data(x, allow_infinite=True)
    dtype = float_dtype(x)
    epsilon = checks.epsilon(epsilon)
    q = checks.probability(q, "q", open_low=True)
    clip_fraction = checks.probability(clip_fraction, "clip_fraction", open_low=True, open_high=True)
    lower = checks.real(lower, "lower")
    beta = check_beta(checks, beta, dtype)
    check_choice(noise, "noise", NOISES)
    max_queries = check_max_queries(max_queries)
    epsilon, q = usable(checks, epsilon, 1.0), usable(checks, q, 0.5)
    clip_fraction = usable(checks, clip_fraction, 0.5)
    lower, beta = usable(checks, lower, 0.0), usable(checks, beta, 2.0)
    g = query_grid(beta, max_queries, dtype)
    counts, prefix = tabulate(x, lower, beta, g, dtype, sums=True)
    value, bound, truncated = _release(
        key, counts, prefix, x.shape[0], epsilon, q, clip_fraction, lower, g.log_b, g.cap,
        noise=noise, dtype=dtype,
    )
    return checks.guard(ClippedSum(value, bound, truncated))


@functools.partial(jax.jit, static_argnames=("noise", "dtype"))
def _release(key, counts, prefix, n, epsilon, q, clip_fraction, lower, log_b, cap, *, noise, dtype):
    """The key-dependent part of :func:`clipped_sum` on the tabulated data: the UQE bound (with
    ``clip_fraction * epsilon``), the clipped sum read from the prefix sums, and its Laplace noise.
    One compiled call, so that an eager release pays no per-operation dispatch."""
    key_bound, key_noise = jax.random.split(key)
    epsilon, clip_fraction = jnp.asarray(epsilon, dtype), jnp.asarray(clip_fraction, dtype)
    half = clip_fraction * epsilon * jnp.asarray(0.5, dtype)  # UQE with epsilon1 = epsilon2
    k, truncated = halting(key_bound, counts, q, n, half, half, cap, noise=noise, dtype=dtype, first=1)
    width = grid_edges(k, log_b)  # bound - lower: the sensitivity under swap
    bound = jnp.asarray(lower, dtype) + width
    j = jnp.minimum(k, counts.f.shape[0] - 1)
    total = prefix[j] + (n - counts.f[j]).astype(dtype) * bound
    # A product with a reciprocal: the same bits whether epsilon is a constant or traced under jit.
    scale = width * (jnp.ones((), dtype) / ((jnp.ones((), dtype) - clip_fraction) * epsilon))
    return total + noise_lib.laplace(key_noise, (), scale, dtype), bound, truncated


@arguments_of(clipped_sum)
def sum(key: jax.Array, x: ArrayLike, epsilon: ArrayLike, **options: Any) -> jax.Array:
    """DP sum of data bounded below only, clipped at a privately estimated quantile.

    Durfee (2023), §6.3: ``bound = UQE(x, q)`` with ``clip_fraction * epsilon`` (Algorithm 2,
    epsilon1 = epsilon2), then ``sum_j clip(x_j, lower, bound) + Lap((bound - lower) / epsilon_rest)``
    with ``epsilon_rest = (1 - clip_fraction) * epsilon``.

    Neighbors and guarantee: swap (one record changed, n public); ``epsilon``-DP in total
    (:func:`sum_guarantee`). The paper's Table 1 row "eps" corresponds to ``epsilon = 2 * eps``.

    Traced parameters: ``epsilon``, ``q``, ``beta``, ``clip_fraction`` and ``lower`` may be traced
    (for the same key a traced call gives what the concrete call gives); ``noise`` and
    ``max_queries`` are static. Concrete invalid values raise ``ValueError`` before any randomness;
    a traced invalid value or NaN in traced data makes the output NaN.

    Args:
      key: a ``jax.random`` key.
      x: 1-D data (may be traced; NaN refused; values below ``lower`` are clipped up to it, +inf down
        to the bound).
      epsilon: total privacy parameter, > 0 (may be traced).
      q: the quantile used as clipping bound, in (0, 1] (may be traced; the paper: 0.99; q = 1 or a
        higher threshold avoids negative bias but has a heavy overshoot tail: with the equal split
        the halting query's overshoot has infinite mean, see :mod:`dpjax._src.svt.monotone_halting`).
      beta: UQE grid ratio > 1 (may be traced; the paper uses 1.001 and recommends 1.01 for clipping).
      clip_fraction: share of ``epsilon`` spent on the bound, in (0, 1) (may be traced).
      lower: a data-independent lower bound (may be traced; 0 in the paper).
      noise: UQE's noise family ("exponential", "laplace", "gumbel") (static); the default is the
        quantile family's (:func:`~dpjax.quantiles.unbounded`: the paper's exponential noise).
      max_queries: the cap on UQE's halting query (static; see :func:`dpjax.quantiles.unbounded`).

    Returns:
      A scalar (the data's float dtype, default float for integer data); NaN on invalid traced input.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.arange(1000.0)
      >>> total = sum(jax.random.key(0), x, 2.0)  # near 499,500 minus a little clipping bias
    """
    return clipped_sum(key, x, epsilon, **options).value


@arguments_of(clipped_sum)
def mean(key: jax.Array, x: ArrayLike, epsilon: ArrayLike, **options: Any) -> jax.Array:
    """DP mean: :func:`sum` divided by the public n (swap neighbors; ``epsilon``-DP in total,
    :func:`mean_guarantee`). Arguments as in :func:`sum` (the same may be traced).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> m = mean(jax.random.key(0), jnp.arange(1000.0), 2.0)  # near 499.5
    """
    return sum(key, x, epsilon, **options) / jnp.shape(x)[0]


@elementwise("epsilon", "q", "clip_fraction")
def sum_guarantee(
    epsilon: float, *, q: float = 0.99, clip_fraction: float = 0.5, noise: UnboundedNoise = "exponential"
) -> Guarantee:
    """Guarantee of :func:`sum` (swap): UQE with ``clip_fraction * epsilon``
    (:func:`~dpjax.quantiles.unbounded_guarantee`, which carries Theorem 1's zCDP bound) composed
    with the Laplace step's ``PureDP((1 - clip_fraction) * epsilon)``: ``PureDP(epsilon)`` with the
    sum of the parts' zCDP bounds. Host side: concrete numbers, or arrays of ``epsilon``, ``q``,
    ``clip_fraction`` for a grid (an object array of guarantees)."""
    epsilon = check_epsilon(epsilon)
    clip_fraction = check_probability(clip_fraction, "clip_fraction", open_low=True, open_high=True)
    bound = unbounded_guarantee(q, clip_fraction * epsilon, noise=noise)
    return compose([bound, PureDP((1 - clip_fraction) * epsilon)])


mean_guarantee = sum_guarantee
