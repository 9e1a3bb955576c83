"""Sparse-Vector-with-Gap and Adaptive-Sparse-Vector-with-Gap (Ding, Wang, Zhang, Kifer, PVLDB 2019).

Algorithm 2 of "Free Gap Information from the Differentially Private Sparse Vector and Noisy Max
Mechanisms". Budgets: ``eps0 = theta*epsilon`` (threshold, ``Lap(1/eps0)``), ``eps1 = (1-theta)*epsilon/k``
(middle branch) and ``eps2 = eps1/2`` (top branch); the query noise is ``Lap(2/eps1)`` / ``Lap(2/eps2)``
for general queries and ``Lap(1/eps1)`` / ``Lap(1/eps2)`` for monotonic ones (all times the
sensitivity). A query whose top-noised gap reaches ``sigma`` is a top ⊤ (costs eps2), else one whose
middle-noised gap is >= 0 is a middle ⊤ (costs eps1), else ⊥ (free); every ⊤ releases its noisy gap
``q_i + noise - T~``. The run stops once the cost exceeds ``epsilon - eps1`` (line 16).

Integer accounting (spec seed-002 §2.3.4): costs are counted in units of ``eps2`` (top 1, middle 2,
⊥ 0) and line 16 is exactly "units > 2k - 2". Adding floats instead stops one answer early in a large
share of settings. Since the branch of query ``i`` depends only on its own noise and the noisy
threshold, the sequential loop is a cumsum of units cut at the first index past ``2k - 2``.

With ``sigma = inf`` the top branch never fires and Algorithm 2 is Sparse-Vector-with-Gap (Wang et
al. 2019): exactly the ``k``-answer sparse vector of Lyu, Su and Li (2017, Alg. 1), plus the gaps.
Privacy (Theorem 4): ``epsilon``-DP for any data-independent ``sigma``; the cost actually used,
``eps0 + units*eps2 <= epsilon``, is returned for data-dependent accounting.

Only Laplace noise is covered by the paper's proofs (Lemma 1 needs admissible noise), so only Laplace
is offered. Neighbouring relation: any under which each query changes by at most ``sensitivity``;
``monotonic=True`` additionally needs all queries to move in the same direction (counting queries
under add/remove; *not* item counts under substitution).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpjax import noise as noise_lib
from dpjax.accounting import PureDP
from dpjax.svt.above_threshold import centered_queries, first_true
from dpjax.validation import check_epsilon, check_int, check_positive, check_probability

BRANCH_UNPROCESSED, BRANCH_BOTTOM, BRANCH_TOP, BRANCH_MIDDLE = -1, 0, 1, 2


class GapResult(NamedTuple):
    """Output of :func:`sparse_vector_with_gap` and :func:`adaptive_sparse_vector_with_gap`.

    Attributes:
      indices: int32 ``(m,)``, the ⊤ queries in stream order, padded with -1; ``m = k`` for
        sparse vector with gap and ``2k - 1`` for the adaptive version.
      gaps: float ``(m,)``, the released noisy gap ``q_i + noise_i - T~`` of each ⊤, NaN padded
        (>= 0 in the middle branch, >= sigma in the top branch).
      answer_branches: int8 ``(m,)``, the branch of each ⊤ (1 top, 2 middle), -1 padded.
      branch: int8 ``(n,)``: -1 not processed, 0 ⊥, 1 top branch ⊤, 2 middle branch ⊤.
      units_used: int32, the budget used by the queries in units of ``eps2 = eps1/2`` (<= 2k).
      epsilon_spent: ``eps0 + units_used*eps2`` (<= epsilon).
      epsilon_left: ``epsilon - epsilon_spent = (2k - units_used)*eps2`` (>= 0).
      num_processed: int32, the number of queries answered before the run stopped.
    """

    indices: jax.Array
    gaps: jax.Array
    answer_branches: jax.Array
    branch: jax.Array
    units_used: jax.Array
    epsilon_spent: jax.Array
    epsilon_left: jax.Array
    num_processed: jax.Array


class GapBudget(NamedTuple):
    """The budget split of Algorithm 2, line 2, and the noise scales it implies."""

    epsilon: float
    k: int
    eps0: float
    eps1: float
    eps2: float
    threshold_scale: float
    middle_scale: float
    top_scale: float
    sigma: float


def default_theta(k: int, *, monotonic: bool) -> float:
    """The threshold share of Lyu, Su and Li (2017): ``1/(1 + (2k)^(2/3))``, or ``1/(1 + k^(2/3))``
    for monotonic queries (free-gap paper §6.1; it minimizes the variance of the gap)."""
    k = check_int(k, "k", minimum=1)
    return 1.0 / (1.0 + float(k if monotonic else 2 * k) ** (2.0 / 3.0))


def gap_budget(
    epsilon: float,
    k: int,
    *,
    theta: float | None = None,
    monotonic: bool = False,
    sigma: float | None = None,
    sensitivity: float = 1.0,
) -> GapBudget:
    """Validates the parameters of Algorithm 2 and returns its budgets, noise scales and ``sigma``.

    ``sigma`` defaults to ``4*sqrt(2)/eps2`` times the sensitivity (two standard deviations of
    ``Lap(2/eps2)``, footnote 5, kept for the monotonic variant as in the paper); ``math.inf``
    disables the top branch.
    """
    epsilon = check_epsilon(epsilon)
    k = check_int(k, "k", minimum=1)
    theta = default_theta(k, monotonic=monotonic) if theta is None else theta
    theta = check_probability(theta, "theta", open_low=True, open_high=True)
    sensitivity = check_positive(sensitivity, "sensitivity")
    eps0 = theta * epsilon
    eps1 = (1.0 - theta) * epsilon / k
    eps2 = eps1 / 2.0
    if sigma is None:
        sigma = 4.0 * math.sqrt(2.0) / eps2 * sensitivity
    elif not (isinstance(sigma, float | int) and sigma == math.inf):
        sigma = check_epsilon(sigma, "sigma", allow_zero=True)
    width = (1.0 if monotonic else 2.0) * sensitivity
    return GapBudget(
        epsilon, k, eps0, eps1, eps2, sensitivity / eps0, width / eps1, width / eps2, float(sigma)
    )


@functools.partial(jax.jit, static_argnames=("k", "size", "adaptive"))
def _gap_core(centered, threshold_noise, top_noise, middle_noise, sigma, eps0, eps2, *, k, size, adaptive):
    n = centered.shape[0]
    middle_gap = (centered + middle_noise) - threshold_noise
    if adaptive:
        top_gap = (centered + top_noise) - threshold_noise
        top = top_gap >= sigma
    else:
        top_gap, top = middle_gap, jnp.zeros(n, jnp.bool_)
    middle = ~top & (middle_gap >= 0)
    units = jnp.where(top, 1, jnp.where(middle, 2, 0)).astype(jnp.int32)
    stop = first_true(jnp.cumsum(units) > 2 * k - 2)  # line 16 in integer units of eps2
    processed = jnp.arange(n) <= jnp.where(stop >= 0, stop, n - 1)
    branch = jnp.where(top, BRANCH_TOP, jnp.where(middle, BRANCH_MIDDLE, BRANCH_BOTTOM))
    branch = jnp.where(processed, branch, BRANCH_UNPROCESSED).astype(jnp.int8)
    (indices,) = jnp.nonzero(processed & (top | middle), size=size, fill_value=-1)
    indices = indices.astype(jnp.int32)
    gap = jnp.where(top, top_gap, middle_gap)
    valid = indices >= 0
    gaps = jnp.where(valid, gap[jnp.maximum(indices, 0)], jnp.nan)
    answer_branches = jnp.where(valid, branch[jnp.maximum(indices, 0)], BRANCH_UNPROCESSED).astype(jnp.int8)
    units_used = jnp.where(processed, units, 0).sum().astype(jnp.int32)
    eps2 = jnp.asarray(eps2, centered.dtype)
    spent = jnp.asarray(eps0, centered.dtype) + units_used.astype(centered.dtype) * eps2
    left = (2 * k - units_used).astype(centered.dtype) * eps2
    return GapResult(
        indices, gaps, answer_branches, branch, units_used, spent, left, processed.sum().astype(jnp.int32)
    )


def _noise_like(noise, centered, name):
    noise = jnp.asarray(noise, centered.dtype)
    if noise.shape != centered.shape:
        raise ValueError(f"{name} must have shape {centered.shape}, got {noise.shape}.")
    return noise


def _run(budget, centered, threshold_noise, top_noise, middle_noise, adaptive):
    return _gap_core(
        centered,
        jnp.asarray(threshold_noise, centered.dtype),
        top_noise,
        middle_noise,
        budget.sigma,
        budget.eps0,
        budget.eps2,
        k=budget.k,
        size=2 * budget.k - 1 if adaptive else budget.k,
        adaptive=adaptive,
    )


def sparse_vector_with_gap_from_noise(
    queries,
    threshold,
    threshold_noise,
    middle_noise,
    *,
    epsilon,
    k,
    theta=None,
    monotonic=False,
    sensitivity=1.0,
) -> GapResult:
    """:func:`sparse_vector_with_gap` on given (already scaled) noise: ``threshold_noise`` (scalar,
    ``Lap(1/eps0)``) and ``middle_noise`` (shape ``(n,)``). For exact tests against a reference."""
    budget = gap_budget(epsilon, k, theta=theta, monotonic=monotonic, sensitivity=sensitivity)
    centered = centered_queries(queries, threshold)
    middle = _noise_like(middle_noise, centered, "middle_noise")
    return _run(budget, centered, threshold_noise, None, middle, False)


def adaptive_sparse_vector_with_gap_from_noise(
    queries,
    threshold,
    threshold_noise,
    top_noise,
    middle_noise,
    *,
    epsilon,
    k,
    theta=None,
    sigma=None,
    monotonic=False,
    sensitivity=1.0,
) -> GapResult:
    """:func:`adaptive_sparse_vector_with_gap` on given (already scaled) noise: ``threshold_noise``
    (scalar), ``top_noise`` (the xi_i of line 7) and ``middle_noise`` (the eta_i), shape ``(n,)``."""
    budget = gap_budget(epsilon, k, theta=theta, monotonic=monotonic, sigma=sigma, sensitivity=sensitivity)
    centered = centered_queries(queries, threshold)
    top = _noise_like(top_noise, centered, "top_noise")
    middle = _noise_like(middle_noise, centered, "middle_noise")
    return _run(budget, centered, threshold_noise, top, middle, True)


@functools.partial(jax.jit, static_argnames=("k", "size", "adaptive"))
def _keyed(key, centered, scales, sigma, eps0, eps2, *, k, size, adaptive):
    threshold_scale, top_scale, middle_scale = scales
    threshold_key, top_key, middle_key = jax.random.split(key, 3)
    eta = noise_lib.laplace(threshold_key, (), threshold_scale, centered.dtype)
    xi = noise_lib.laplace(top_key, centered.shape, top_scale, centered.dtype) if adaptive else None
    nu = noise_lib.laplace(middle_key, centered.shape, middle_scale, centered.dtype)
    return _gap_core(centered, eta, xi, nu, sigma, eps0, eps2, k=k, size=size, adaptive=adaptive)


def _run_keyed(key, budget, centered, adaptive):
    scales = (budget.threshold_scale, budget.top_scale, budget.middle_scale)
    size = 2 * budget.k - 1 if adaptive else budget.k
    return _keyed(
        key,
        centered,
        scales,
        budget.sigma,
        budget.eps0,
        budget.eps2,
        k=budget.k,
        size=size,
        adaptive=adaptive,
    )


def sparse_vector_with_gap(
    key,
    queries,
    threshold,
    epsilon: float,
    *,
    k: int,
    theta: float | None = None,
    monotonic: bool = False,
    sensitivity: float = 1.0,
) -> GapResult:
    """Sparse-Vector-with-Gap (Wang et al. 2019; Ding et al. 2019, Algorithm 2 with ``sigma = inf``).

    Reports up to ``k`` queries above the noisy threshold ``T + Lap(1/eps0)`` (noise ``Lap(2/eps1)``,
    or ``Lap(1/eps1)`` when monotonic; ``eps0 = theta*epsilon``, ``eps1 = (1-theta)*epsilon/k``) and
    releases each one's noisy gap. Same answers as the classical sparse vector of Lyu, Su and Li
    (2017, Alg. 1) on the same noise; the gaps are free.

    Neighbouring relation: each query has sensitivity ``sensitivity``; ``monotonic`` additionally
    needs all queries to move in the same direction between neighbours.
    Guarantee: ``epsilon``-DP (Ding et al., Theorem 4; :func:`sparse_vector_with_gap_guarantee`).

    Args:
      key: a ``jax.random`` key.
      queries: shape ``(n,)``; threshold: the public threshold (scalar).
      epsilon: total budget; k: number of ⊤ answers, >= 1.
      theta: threshold share in (0, 1); default :func:`default_theta`.
      monotonic: use the monotonic noise scales.
      sensitivity: per-query sensitivity (multiplies every noise scale).

    Returns:
      A :class:`GapResult` with ``indices``/``gaps`` of size ``k``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> counts = jnp.array([3.0, 800.0, 2.0, 950.0, 700.0])
      >>> res = sparse_vector_with_gap(jax.random.key(0), counts, 500.0, 1.0, k=2, monotonic=True)
      >>> estimate = res.gaps + 500.0          # unbiased-noise estimates of the reported counts
    """
    budget = gap_budget(epsilon, k, theta=theta, monotonic=monotonic, sensitivity=sensitivity)
    centered = centered_queries(queries, threshold)
    return _run_keyed(key, budget, centered, adaptive=False)


def adaptive_sparse_vector_with_gap(
    key,
    queries,
    threshold,
    epsilon: float,
    *,
    k: int,
    theta: float | None = None,
    sigma: float | None = None,
    monotonic: bool = False,
    sensitivity: float = 1.0,
) -> GapResult:
    """Adaptive-Sparse-Vector-with-Gap (Ding, Wang, Zhang, Kifer, PVLDB 2019, Algorithm 2).

    Each query is first tested with the cheap top-branch noise (``Lap(2/eps2)``, ``eps2 = eps1/2``)
    against ``T~ + sigma``; failing that, with the middle-branch noise (``Lap(2/eps1)``) against ``T~``.
    A top ⊤ costs ``eps2``, a middle ⊤ ``eps1``, a ⊥ nothing; the run stops when the cost exceeds
    ``epsilon - eps1``. It answers between ``k`` (all middle) and ``2k - 1`` (all top) queries when the
    stream is long enough, and leaves the unused budget for later use.

    Neighbouring relation: as :func:`sparse_vector_with_gap`.
    Guarantee: ``epsilon``-DP for every data-independent ``sigma`` (Theorem 4); the cost actually
    used, ``eps0 + units_used*eps2``, is returned in ``epsilon_spent``.

    Args:
      sigma: top-branch margin; default ``4*sqrt(2)/eps2`` (times the sensitivity); ``math.inf``
        gives exactly :func:`sparse_vector_with_gap` for the same key.
      Other arguments as in :func:`sparse_vector_with_gap`.

    Returns:
      A :class:`GapResult` with ``indices``/``gaps`` of size ``2k - 1``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> counts = jnp.array([3.0, 8000.0, 2.0, 9500.0, 7000.0])
      >>> res = adaptive_sparse_vector_with_gap(jax.random.key(0), counts, 500.0, 1.0, k=2, monotonic=True)
      >>> int(res.units_used) <= 4
      True
    """
    budget = gap_budget(epsilon, k, theta=theta, monotonic=monotonic, sigma=sigma, sensitivity=sensitivity)
    centered = centered_queries(queries, threshold)
    return _run_keyed(key, budget, centered, adaptive=True)


def sparse_vector_with_gap_guarantee(epsilon: float, *, k: int = 1) -> PureDP:
    """Sparse-Vector-with-Gap is ``epsilon``-DP whatever ``k`` and ``theta`` (Theorem 4, sigma = inf)."""
    check_int(k, "k", minimum=1)
    return PureDP(check_epsilon(epsilon))


def adaptive_sparse_vector_with_gap_guarantee(epsilon: float, *, k: int = 1) -> PureDP:
    """Adaptive-Sparse-Vector-with-Gap is ``epsilon``-DP (Theorem 4): the worst case to reserve
    before the run; ``GapResult.epsilon_spent`` is the cost it actually used."""
    check_int(k, "k", minimum=1)
    return PureDP(check_epsilon(epsilon))
