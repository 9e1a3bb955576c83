"""The unbounded quantile mechanism (UQE): Durfee (2023), "Unbounded Differentially Private Quantile
and Maximum Estimation", Algorithm 2, and its fully unbounded version, Algorithm 4 (Appendix B.1).

UQE runs AboveThreshold with threshold ``T = q*n`` over the counting queries
``f_i = #{j : x_j - lower + 1 < beta**i}``, i = 1, 2, ..., and releases ``beta**k + lower - 1`` where k
is the first query whose noisy count reaches the noisy threshold. No upper bound is needed.

Kernel design (spec §4.2): one O(n) pass bins the data on the geometric grid exactly
(:mod:`dpjax.quantiles.unbounded_bins`); each trial then samples the halting query exactly in
O(log bins) expected time (thinning far below the threshold, literal draws near it, and the constant
stretch beyond the data maximum in closed form; :mod:`dpjax.quantiles.unbounded_halting`), so no
trial runs long. Under ``vmap`` over keys the binning is done once.

Privacy (swap neighbours, Def. 2.1, the paper's default): the counts are monotonic with
sensitivity 1 (Lemma 4.1), so UQE is ``(epsilon1 + epsilon2)``-DP (Lemma 3.1, Cor. 3.1, Lemma 3.2)
and ``(epsilon1/2 + epsilon2)**2 / 2``-zCDP (Theorem 1), with ``epsilon1 = split*epsilon`` and
``epsilon2 = (1-split)*epsilon``. Add/remove neighbours (Def. B.1): ``max{(1-q) epsilon1,
q epsilon1 + epsilon2}``-DP (Lemma B.1; Cor. B.1 with epsilon1 = epsilon2). See
:func:`unbounded_guarantee`.

UQE is not scale invariant: the grid resolution near ``lower`` is about ``beta - 1`` in the data's
units, and small n or epsilon make early halting likely (paper §6.4). Float noise is not hardened
against floating-point side channels.
"""

from __future__ import annotations

import contextlib
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.accounting import PureDP, compose
from dpjax.quantiles.unbounded_bins import (
    cumulative_counts,
    grid_edges,
    max_index,
    static_size,
    working_dtype,
)
from dpjax.quantiles.unbounded_halting import halting_index, split_threshold
from dpjax.svt import above_threshold_guarantee
from dpjax.validation import (
    check_array,
    check_choice,
    check_epsilon,
    check_int,
    check_probability,
    is_traced,
)

NOISES = ("exponential", "laplace", "gumbel")
NEIGHBORS = ("swap", "add_remove")
NOTIONS = ("pure", "zcdp")


class UnboundedResult(NamedTuple):
    """A UQE release with its diagnostics.

    Attributes:
      estimate: the released value ``beta**index + lower - 1`` (working float dtype, scalar).
      index: int32 halting query k (1-based for Algorithm 2).
      truncated: bool, True when the halting query lay beyond the largest finite candidate
        (``max_queries``): ``index`` is then that cap (truncation is post-processing).
    """

    estimate: jax.Array
    index: jax.Array
    truncated: jax.Array


def check_beta(beta) -> float:
    """The grid ratio: a finite real number > 1."""
    value = check_epsilon(beta, "beta")
    if value <= 1.0:
        raise ValueError(f"beta must be > 1, got {value}.")
    return value


def check_finite(value, name: str) -> float:
    """A concrete finite real number (a data-independent bound)."""
    if is_traced(value):
        raise TypeError(f"{name} must be a concrete number, not a traced value.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}.")
    return value


def check_data(x, name: str = "x") -> jax.Array:
    """1-D non-empty real data; NaN is refused, +-inf allowed (-inf is below every candidate, +inf
    above every candidate). Value checks are skipped under ``jit`` (NaN then counts as +inf)."""
    if is_traced(x):
        return check_array(x, name, ndim=1, finite=False)
    with jax.ensure_compile_time_eval():  # NumPy data inside jit stays concrete (binned once, eagerly)
        x = check_array(x, name, ndim=1, finite=False)
    if np.isnan(np.asarray(x, dtype=np.float64)).any():
        raise ValueError(f"{name} contains NaN.")
    return x


def split_epsilon(epsilon, split, noise: str) -> tuple[float, float]:
    """``(epsilon1, epsilon2) = (split*epsilon, (1-split)*epsilon)``; Gumbel noise needs them equal."""
    epsilon = check_epsilon(epsilon)
    split = check_probability(split, "split", open_low=True, open_high=True)
    check_choice(noise, "noise", NOISES)
    if noise == "gumbel" and split != 0.5:
        raise ValueError("noise='gumbel' requires epsilon1 == epsilon2 (split=0.5), Lemma 3.2.")
    return split * epsilon, (1.0 - split) * epsilon


_halting_kernel = jax.jit(
    halting_index,
    static_argnames=("noise", "dtype", "first", "cap", "method"),
)


def uqe_index(
    key,
    x,
    q: float,
    epsilon1: float,
    epsilon2: float,
    *,
    lower,
    beta,
    noise,
    cap,
    first,
    negate=False,
    method="fast",
):
    """Halting index of AboveThreshold over the geometric grid of ``x - lower`` (or ``-x - lower``).

    ``first`` is 1 for Algorithm 2 and 0 for Algorithm 4; ``method`` selects an (equal-in-law)
    sampler of :func:`~dpjax.quantiles.unbounded_halting.halting_index`. Returns ``(k, truncated)``.
    """
    dtype = working_dtype(x)
    size = static_size(x, lower, beta, cap, negate=negate)
    # Concrete data (e.g. closed over by jit(vmap(...))) is binned now, once, instead of staging an
    # O(n) scatter into the compiled kernel; traced data is binned inside it.
    context = contextlib.nullcontext() if is_traced(x) else jax.ensure_compile_time_eval()
    with context:
        counts = cumulative_counts(x, lower=lower, size=size, beta=beta, cap=cap, dtype=dtype, negate=negate)
    return _halting_kernel(
        key,
        counts,
        threshold=split_threshold(q * x.shape[0]),
        scale1=1.0 / epsilon1,
        scale2=1.0 / epsilon2,
        noise=noise,
        dtype=dtype,
        first=first,
        cap=cap,
        method=method,
    )


def resolve_cap(max_queries, beta: float, dtype) -> int:
    """The largest query index: ``max_queries`` if given (validated), else the largest finite one."""
    limit = max_index(beta, dtype)
    if max_queries is None:
        return limit
    return check_int(max_queries, "max_queries", minimum=1, maximum=limit)


def unbounded_result(
    key,
    x,
    q: float,
    epsilon: float,
    *,
    lower: float = 0.0,
    beta: float = 1.001,
    noise: str = "exponential",
    split: float = 0.5,
    neighbors: str = "swap",
    max_queries: int | None = None,
) -> UnboundedResult:
    """UQE (Durfee 2023, Algorithm 2) with its halting index and truncation flag.

    Same arguments as :func:`unbounded`; returns an :class:`UnboundedResult`.
    """
    x = check_data(x)
    q = check_probability(q, "q", open_low=True)
    epsilon1, epsilon2 = split_epsilon(epsilon, split, noise)
    lower = check_finite(lower, "lower")
    beta = check_beta(beta)
    check_choice(neighbors, "neighbors", NEIGHBORS)
    dtype = working_dtype(x)
    cap = resolve_cap(max_queries, beta, dtype)
    k, truncated = uqe_index(
        key, x, q, epsilon1, epsilon2, lower=lower, beta=beta, noise=noise, cap=cap, first=1
    )
    estimate = jnp.asarray(lower, dtype) + grid_edges(k, beta, dtype)
    return UnboundedResult(estimate, k, truncated)


def unbounded(
    key,
    x,
    q: float,
    epsilon: float,
    *,
    lower: float = 0.0,
    beta: float = 1.001,
    noise: str = "exponential",
    split: float = 0.5,
    neighbors: str = "swap",
    max_queries: int | None = None,
) -> jax.Array:
    """Differentially private q-quantile of data bounded below only (UQE).

    Durfee (2023), Algorithm 2: AboveThreshold (Alg. 1) with ``T = q*n`` over
    ``f_i = #{x_j - lower + 1 < beta**i}``, i = 1, 2, ...; the release is ``beta**k + lower - 1``.

    Neighbours and guarantee: ``epsilon``-DP under swap (one record changed, n public), i.e.
    ``epsilon1 + epsilon2`` with ``epsilon1 = split*epsilon`` on the threshold and
    ``epsilon2 = (1-split)*epsilon`` on each query, and ``(epsilon1/2 + epsilon2)**2/2``-zCDP
    (Theorem 1). Under add/remove the same release is ``max{(1-q) epsilon1, q epsilon1 + epsilon2}``-DP
    (Lemma B.1); ``neighbors`` only selects which of these the caller means (it does not change the
    computation). See :func:`unbounded_guarantee`.

    Args:
      key: a ``jax.random`` key.
      x: 1-D data, n >= 1. Points below ``lower`` (and -inf) count below every candidate; +inf
        counts above every candidate. NaN is refused (under ``jit`` it is treated like +inf).
      q: the quantile, in (0, 1].
      epsilon: total privacy parameter, > 0.
      lower: a data-independent lower bound (points below it are allowed, see above).
      beta: grid ratio > 1 (the paper uses 1.001; 1.01 for clipping).
      noise: "exponential" (the paper's experiments), "laplace" or "gumbel" (requires split=0.5).
      split: fraction of ``epsilon`` spent on the threshold, in (0, 1).
      neighbors: "swap" or "add_remove"; documents the intended relation (the computation is the same).
      max_queries: optional cap K on the halting query (default: the largest k with a finite
        candidate in the working dtype, e.g. 88,7xx for float32 at beta=1.001).

    Returns:
      A scalar in the data's float dtype (the default float for integer data), on the grid
      ``{beta**k + lower - 1 : 1 <= k <= K}``. Use :func:`unbounded_result` for k and the truncation flag.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.arange(1000.0)
      >>> est = unbounded(jax.random.key(0), x, 0.9, 1.0)  # close to 900
    """
    return unbounded_result(
        key,
        x,
        q,
        epsilon,
        lower=lower,
        beta=beta,
        noise=noise,
        split=split,
        neighbors=neighbors,
        max_queries=max_queries,
    ).estimate


def unbounded_guarantee(
    epsilon: float,
    *,
    q: float | None = None,
    split: float = 0.5,
    noise: str = "exponential",
    neighbors: str = "swap",
    notion: str = "pure",
):
    """The guarantee of :func:`unbounded` (also of each call inside :func:`fully_unbounded`).

    * swap: the counts are monotonic with sensitivity 1 (Lemma 4.1), so this is AboveThreshold's
      monotonic guarantee (:func:`dpjax.svt.above_threshold_guarantee`): ``PureDP(epsilon1 + epsilon2)``
      (notion "pure") or ``ZCDP((epsilon1/2 + epsilon2)**2/2)`` (notion "zcdp", Theorem 1).
    * add_remove (needs ``q``): ``PureDP(max{(1-q) epsilon1, q epsilon1 + epsilon2})`` (Lemma B.1 with
      Cor. A.1; Cor. B.1 when epsilon1 = epsilon2); notion "zcdp" converts it with Prop. 1 (these
      queries are not monotonic, so Theorem 1 does not apply).

    Example:
      >>> unbounded_guarantee(1.0)
      PureDP(epsilon=1.0)
      >>> unbounded_guarantee(1.0, q=0.99, neighbors="add_remove")
      PureDP(epsilon=0.995)
    """
    epsilon1, epsilon2 = split_epsilon(epsilon, split, noise)
    check_choice(neighbors, "neighbors", NEIGHBORS)
    check_choice(notion, "notion", NOTIONS)
    if neighbors == "swap":
        return above_threshold_guarantee(epsilon1, epsilon2, monotonic=True, notion=notion, noise=noise)
    if q is None:
        raise ValueError("q is required for the add_remove guarantee (Lemma B.1).")
    q = check_probability(q, "q", open_low=True)
    pure = PureDP(max((1 - q) * epsilon1, q * epsilon1 + epsilon2))
    return pure if notion == "pure" else pure.to_zcdp()


def fully_unbounded(
    key,
    x,
    q: float,
    epsilon: float,
    *,
    beta: float = 1.001,
    noise: str = "exponential",
    split: float = 0.5,
    max_queries: int | None = None,
) -> jax.Array:
    """Differentially private q-quantile of data with no bounds at all.

    Durfee (2023), Algorithm 4 (Appendix B.1): two AboveThreshold calls with queries from i = 0, the
    first with ``T = q*n`` over ``f_i = #{x_j + 1 < beta**i}`` (the positives), the second with
    ``T = (1-q)*n`` over ``g_i = #{x_j - 1 > -beta**i}`` (the negatives, i.e. the first call on -x).
    If the first halts at k > 0 the release is ``beta**k - 1``; else if the second halts at k > 0 it is
    ``1 - beta**k``; else 0. Both calls always run (the first takes precedence).

    Neighbours and guarantee: swap; each call gets ``epsilon/2`` split as in :func:`unbounded`, so the
    total is ``epsilon``-DP and ``2 (epsilon1/2 + epsilon2)**2/2``-zCDP with per-call epsilon1,
    epsilon2 (see :func:`fully_unbounded_guarantee`).

    Args:
      key, x, q, beta, noise, split, max_queries: as in :func:`unbounded` (``q`` in (0, 1]).
      epsilon: total privacy parameter over both calls, > 0.

    Returns:
      A scalar on the grid ``{beta**k - 1} U {1 - beta**k} U {0}``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.linspace(-50.0, 50.0, 1001)
      >>> est = fully_unbounded(jax.random.key(0), x, 0.25, 1.0)  # close to -25
    """
    x = check_data(x)
    q = check_probability(q, "q", open_low=True)
    epsilon1, epsilon2 = split_epsilon(check_epsilon(epsilon) / 2, split, noise)
    beta = check_beta(beta)
    dtype = working_dtype(x)
    cap = resolve_cap(max_queries, beta, dtype)
    key_up, key_down = jax.random.split(key)
    common = dict(lower=0.0, beta=beta, noise=noise, cap=cap, first=0)
    k_up, _ = uqe_index(key_up, x, q, epsilon1, epsilon2, **common)
    k_down, _ = uqe_index(key_down, x, 1.0 - q, epsilon1, epsilon2, negate=True, **common)
    up = grid_edges(k_up, beta, dtype)
    down = -grid_edges(k_down, beta, dtype)
    return jnp.where(k_up > 0, up, jnp.where(k_down > 0, down, jnp.zeros((), dtype)))


def fully_unbounded_guarantee(
    epsilon: float, *, split: float = 0.5, noise: str = "exponential", notion: str = "pure"
):
    """The guarantee of :func:`fully_unbounded` under swap: the composition of two calls of
    :func:`unbounded_guarantee` at ``epsilon/2`` each (pure: ``epsilon``; zCDP: twice Theorem 1's rho)."""
    part = unbounded_guarantee(check_epsilon(epsilon) / 2, split=split, noise=noise, notion=notion)
    return compose([part, part])
