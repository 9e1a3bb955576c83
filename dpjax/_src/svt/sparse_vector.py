"""Sparse vector: up to ``c`` above-threshold answers, resampling the threshold after each one.

Dwork and Roth (2014), Algorithm 2 ("Sparse"): ``c`` AboveThreshold runs in a row over one query stream,
each starting where the previous one halted and each with a fresh noisy threshold. With the noise of
Durfee (2023, Algorithm 1) every run costs what one AboveThreshold costs, so by composition the whole
is ``c*(epsilon1 + 2*epsilon2)``-DP (``c*(epsilon1 + epsilon2)`` for monotonic queries) and, for
monotonic queries, ``c/2*(epsilon1/2 + epsilon2)^2``-zCDP (Theorem 1 composed in zCDP, Durfee §3.2).

Vectorization: the ``j``-th run halts at the first query after the previous ⊤ whose noisy value
reaches the ``j``-th noisy threshold; a ``fori_loop`` over the (static, small) ``c`` does one vector
comparison and ``argmax`` per run. ``method="first_passage"`` draws each run as a first-passage time
from one past the previous answer (:mod:`dpjax._src.svt.first_passage`): heaps built once per data, then
O(c log n) work per release with no per-query noise.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src import noise as noise_lib
from dpjax._src import sharded
from dpjax._src.accounting.composition import compose
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.host_checks import check_choice, check_int
from dpjax._src.svt.above_threshold import (
    METHODS,
    AboveThresholdMethod,
    AboveThresholdNoise,
    above_threshold_guarantee,
    center,
    centered_queries,
    check_noise_epsilons,
    checked_queries,
    first_true,
    noise_scales,
)
from dpjax._src.svt.first_passage import halting_indices
from dpjax._src.validation import Checks

__all__ = [
    "SparseVectorResult",
    "sparse_vector",
    "sparse_vector_from_noise",
    "sparse_vector_guarantee",
]


class SparseVectorResult(NamedTuple):
    """Output of :func:`sparse_vector`.

    Attributes:
      indices: int32 ``(c,)``, the 0-based indices of the ⊤ answers in stream order, padded with -1.
      above: bool ``(n,)``, the mask of ⊤ answers.
      num_processed: int32 scalar, the number of queries answered (⊤ or ⊥) before the mechanism
        stopped: one past the ``c``-th ⊤, or ``n``.

    On invalid traced input ``indices`` are all -1, ``above`` is all false and ``num_processed``
    is -1 (the marker: a valid run processes at least one query).
    """

    indices: jax.Array
    above: jax.Array
    num_processed: jax.Array


def _answer_mask(indices: jax.Array, n: int) -> jax.Array:
    """bool ``(n,)`` mask of the non-negative entries of a padded index list."""
    return jnp.zeros(n, jnp.bool_).at[jnp.where(indices >= 0, indices, n)].set(True, mode="drop")


@functools.partial(jax.jit, static_argnames=("c",))
def _sparse_core(centered, threshold_noise, query_noise, *, c):
    n = centered.shape[0]
    noisy = centered + query_noise
    position = jnp.arange(n)

    def run(j, carry):
        start, indices = carry
        hit = first_true((noisy >= threshold_noise[j]) & (position >= start))
        # After a run that finds nothing, start = n + 1 makes every later run empty too.
        return jnp.where(hit >= 0, hit + 1, n + 1), indices.at[j].set(hit)

    start, indices = lax.fori_loop(0, c, run, (jnp.int32(0), jnp.full((c,), -1, jnp.int32)))
    processed = jnp.where(indices[c - 1] >= 0, start, n).astype(jnp.int32)
    return SparseVectorResult(indices, _answer_mask(indices, n), processed)


def _guard(checks: Checks, result: SparseVectorResult) -> SparseVectorResult:
    """The invalid marker of :class:`SparseVectorResult` where a traced check failed."""
    result = checks.guard(result)
    return result._replace(above=result.above & checks.valid()) if checks.traced else result


def sparse_vector_from_noise(
    queries: ArrayLike, threshold: ArrayLike, threshold_noise: ArrayLike, query_noise: ArrayLike, *, c: int
) -> SparseVectorResult:
    """Sparse vector on given (already scaled) noise: the pure core of :func:`sparse_vector`.

    ``threshold_noise`` has shape ``(c,)``; entry ``j`` noises the threshold of the ``j``-th run.
    ``threshold`` may be traced (``c`` is static); invalid traced input gives the marker of
    :class:`SparseVectorResult`.
    """
    c = check_int(c, "c", minimum=1)
    checks = Checks()
    centered = centered_queries(checks, queries, threshold)
    threshold_noise = checks.array(threshold_noise, "threshold_noise", ndim=1).astype(centered.dtype)
    if threshold_noise.shape != (c,):
        raise ValueError(f"threshold_noise must have shape ({c},), got {threshold_noise.shape}.")
    query_noise = jnp.asarray(query_noise, centered.dtype)
    if query_noise.shape != centered.shape:
        raise ValueError(f"query_noise must have shape {centered.shape}, got {query_noise.shape}.")
    return _guard(checks, _sparse_core(centered, threshold_noise, query_noise, c=c))


def sparse_vector(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon1: ArrayLike,
    epsilon2: ArrayLike,
    *,
    c: int,
    noise: AboveThresholdNoise = "laplace",
    sensitivity: ArrayLike = 1.0,
    method: AboveThresholdMethod = "auto",
) -> SparseVectorResult:
    """Sparse vector with threshold resampling (Dwork and Roth 2014, Algorithm 2; Durfee 2023, §3.2).

    Runs AboveThreshold (threshold noise ``sensitivity/epsilon1``, query noise ``sensitivity/epsilon2``,
    Laplace, Gumbel or Exponential) until ``c`` queries are reported above the threshold, drawing a
    fresh threshold noise after each ⊤.

    Neighboring relation: any under which every query changes by at most ``sensitivity``.
    Guarantee (see :func:`sparse_vector_guarantee`): ``c`` compositions of
    :func:`~dpjax.svt.above_threshold_guarantee`.

    Args:
      key: a ``jax.random`` key.
      queries: shape ``(n,)``.
      threshold: the public threshold, a finite scalar (may be traced).
      epsilon1, epsilon2, sensitivity: as in :func:`~dpjax.svt.above_threshold`, per run (may be
        traced).
      c: maximum number of ⊤ answers, >= 1 (static: it fixes the shape of ``indices``).
      noise: as in :func:`~dpjax.svt.above_threshold` (static).
      method: ``"auto"`` (default: ``"literal"`` for one release, ``"first_passage"`` under
        ``vmap`` over keys with the queries and budgets fixed, :mod:`dpjax._src.auto`), ``"literal"``
        (one noise variate per query, ``c`` comparisons and ``argmax``) or ``"first_passage"``:
        the same law, each run a first passage from one past the previous answer with a fresh
        threshold noise (:mod:`dpjax._src.svt.first_passage`: heaps built once per
        data, key independent, so once under ``vmap`` over keys; O(log n) per search, ``c`` runs
        of ``1 + Geometric(1/2)`` searches on average for Laplace and Exponential noise, one for
        Gumbel). Different random stream (static). Under ``vmap`` over keys a release costs
        O(c log n) searches against the literal kernel's O(n) pass; one release on its own is
        ``c`` sequential searches against one vector pass, no cheaper than the literal kernel
        (timings: benchmarks/README.md, "SVT: one release"), hence ``"auto"``'s choice.

    Returns:
      A :class:`SparseVectorResult` (indices ``(c,)`` padded with -1, mask ``(n,)``, count processed).
      On invalid traced input (as for :func:`~dpjax.svt.above_threshold`) ``indices`` are -1,
      ``above`` is false and ``num_processed`` is -1.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> counts = jnp.array([3.0, 80.0, 2.0, 95.0, 70.0])
      >>> res = sparse_vector(jax.random.key(0), counts, 50.0, 0.5, 0.5, c=2)
    """
    check_choice(method, "method", METHODS)
    checks = Checks()
    epsilon1, epsilon2 = check_noise_epsilons(noise, epsilon1, epsilon2, checks)
    sensitivity = checks.positive(sensitivity, "sensitivity")
    c = check_int(c, "c", minimum=1)
    queries, threshold, dtype = checked_queries(checks, queries, threshold)
    paths = {
        "literal": functools.partial(_keyed, noise=noise, c=c, dtype=dtype),
        "first_passage": functools.partial(_first_passage, noise=noise, c=c, dtype=dtype),
    }
    operands = (queries, threshold, epsilon1, epsilon2, sensitivity)
    return _guard(checks, _auto.run(method, paths, key, *operands, fast="first_passage"))


@functools.partial(jax.jit, static_argnames=("noise", "c", "dtype"))
def _keyed(key, queries, threshold, epsilon1, epsilon2, sensitivity, *, noise, c, dtype):
    centered = center(queries, threshold, dtype)
    scale1, scale2 = noise_scales(centered.dtype, epsilon1, epsilon2, sensitivity)
    threshold_key, query_key = jax.random.split(key)
    eta = noise_lib.sample(noise, threshold_key, (c,), scale1, centered.dtype)
    nu = noise_lib.sample(noise, query_key, centered.shape, scale2, centered.dtype)
    return _sparse_core(centered, eta, nu, c=c)


@functools.partial(jax.jit, static_argnames=("noise", "c", "dtype"))
@sharded.auto_axes
def _first_passage(key, queries, threshold, epsilon1, epsilon2, sensitivity, *, noise, c, dtype):
    centered = center(queries, threshold, dtype)
    scale1, scale2 = noise_scales(centered.dtype, epsilon1, epsilon2, sensitivity)
    indices = halting_indices(key, centered / scale2, scale1, scale2, noise=noise, count=c)
    n = centered.shape[0]
    processed = jnp.where(indices[c - 1] >= 0, indices[c - 1] + 1, n).astype(jnp.int32)
    return SparseVectorResult(indices, _answer_mask(indices, n), processed)


@elementwise("epsilon1", "epsilon2", "sensitivity")
def sparse_vector_guarantee(
    epsilon1: float,
    epsilon2: float,
    *,
    c: int,
    noise: AboveThresholdNoise = "laplace",
    sensitivity: float = 1.0,
    monotonic: bool = False,
) -> PureDP:
    """``c`` compositions of :func:`~dpjax.svt.above_threshold_guarantee` (its pure epsilon and, for
    monotonic queries, Theorem 1's zCDP bound, both added ``c`` times).

    Host-side: the budgets must be concrete numbers (or arrays of them for a grid).

    Example:
      >>> sparse_vector_guarantee(0.5, 0.5, c=4, monotonic=True).to_zcdp()
      ZCDP(rho=1.125)
    """
    c = check_int(c, "c", minimum=1)
    options = {"noise": noise, "sensitivity": sensitivity, "monotonic": monotonic}
    one = above_threshold_guarantee(epsilon1, epsilon2, **options)
    return compose([one] * c).to_pure()  # pure parts compose to a PureDP, which to_pure() returns as is
