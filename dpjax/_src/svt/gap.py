"""Sparse-Vector-with-Gap and Adaptive-Sparse-Vector-with-Gap (Ding, Wang, Zhang, Kifer, PVLDB 2019).

Algorithm 2 of "Free Gap Information from the Differentially Private Sparse Vector and Noisy Max
Mechanisms". ``c`` is the number of answers above the threshold (the paper's ``k``; ``c`` in every SVT
of this package, as in Lyu, Su and Li 2017). Budgets: ``eps0 = theta*epsilon`` (threshold,
``Lap(1/eps0)``), ``eps1 = (1-theta)*epsilon/c`` (middle branch) and ``eps2 = eps1/2`` (top branch); the
query noise is ``Lap(2/eps1)`` / ``Lap(2/eps2)`` for general queries and ``Lap(1/eps1)`` /
``Lap(1/eps2)`` for monotonic ones (all times the sensitivity). A query whose top-noised gap reaches
``sigma`` is a top ⊤ (costs eps2), else one whose middle-noised gap is >= 0 is a middle ⊤ (costs eps1),
else ⊥ (free); every ⊤ releases its noisy gap ``q_i + noise - T~``. The run stops once the cost exceeds
``epsilon - eps1`` (line 16).

Integer accounting (Ding, Wang, Zhang, Kifer 2019, Alg. 2, line 16, in exact arithmetic): costs are
counted in units of ``eps2`` (top 1, middle 2, ⊥ 0) and line 16 is exactly "units > 2c - 2". Adding
floats instead stops one answer early in a large
share of settings. Since the branch of query ``i`` depends only on its own noise and the noisy
threshold, the sequential loop is a cumsum of units cut at the first index past ``2c - 2``.

With ``sigma = inf`` the top branch never fires and Algorithm 2 is Sparse-Vector-with-Gap (Wang et
al. 2019): exactly the ``c``-answer sparse vector of Lyu, Su and Li (2017, Alg. 1), plus the gaps.
Privacy (Theorem 4): ``epsilon``-DP for any data-independent ``sigma``; the cost actually used,
``eps0 + units*eps2 <= epsilon``, is returned for data-dependent accounting.

Only Laplace noise is covered by the paper's proofs (Lemma 1 needs admissible noise), so only Laplace
is offered. Neighboring relation: any under which each query changes by at most ``sensitivity``;
``monotonic=True`` additionally needs all queries to move in the same direction (counting queries
under add/remove; *not* item counts under substitution).

First passage (``method="first_passage"`` of both functions, :mod:`dpjax._src.svt.gap_passage`). Given
the one threshold noise the queries are independent, so the next ⊤ is a first passage with firing
probability ``p_i = 1 - P(top misses) P(middle misses)``: a two-rate envelope (one log-mass heap
per noise scale, built once per data, so once under ``vmap`` over keys) and thinning give its
index exactly in O(log n), ``1 + Geometric(1/2)`` searches on average; the branch is then drawn
given the firing (top with probability ``P(top fires) / p_i``) and the gap as the exact overshoot of
that branch's Laplace noise over its threshold. The unit accounting is a loop over the ⊤s. Same law
as the literal kernel (answers, branches, gaps, units), different random stream; with
``sigma = inf`` the adaptive version draws exactly what :func:`sparse_vector_with_gap` draws for the
same key. Float precision: the sums from the search's start are off by a relative
``(4 L + 2) eps (M + 1)`` (``D = 2^L`` leaves, ``M`` the largest log-sum compared, as in
:mod:`dpjax._src.svt.first_passage`), the acceptance and branch tests are exact to a few ulp (log space)
and the overshoot is tail-exact to about 44 scales.

Parameters: ``epsilon``, ``theta``, ``sigma``, ``sensitivity`` and the threshold may be traced (a
``vmap`` over any of them equals separate calls for the same key); the budget split and the noise
scales are computed in the working dtype the same way for concrete and traced values. ``c`` fixes
the output sizes and ``monotonic`` the noise scales: both are static.
"""

from __future__ import annotations

import jax
from jax.typing import ArrayLike

from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.host_checks import check_choice
from dpjax._src.svt.above_threshold import METHODS, AboveThresholdMethod
from dpjax._src.svt.gap_core import GapResult, run_from_noise, run_keyed
from dpjax._src.svt.gap_parameters import GapParameters, check_parameters
from dpjax._src.validation import Checks

__all__ = [
    "adaptive_sparse_vector_with_gap",
    "adaptive_sparse_vector_with_gap_from_noise",
    "adaptive_sparse_vector_with_gap_guarantee",
    "sparse_vector_with_gap",
    "sparse_vector_with_gap_from_noise",
    "sparse_vector_with_gap_guarantee",
]


def sparse_vector_with_gap_from_noise(
    queries: ArrayLike,
    threshold: ArrayLike,
    threshold_noise: ArrayLike,
    middle_noise: ArrayLike,
    *,
    epsilon: ArrayLike,
    c: int,
    theta: ArrayLike | None = None,
    monotonic: bool = False,
    sensitivity: ArrayLike = 1.0,
) -> GapResult:
    """:func:`sparse_vector_with_gap` on given (already scaled) noise: ``threshold_noise`` (scalar,
    ``Lap(1/eps0)``) and ``middle_noise`` (shape ``(n,)``). For exact tests against a reference.
    Parameters may be traced as in :func:`sparse_vector_with_gap` (``c``, ``monotonic`` static)."""
    noises = (("top_noise", None), ("middle_noise", middle_noise))
    params = GapParameters(epsilon, theta, None, sensitivity)
    return run_from_noise(queries, threshold, threshold_noise, noises, params, c, monotonic)


def adaptive_sparse_vector_with_gap_from_noise(
    queries: ArrayLike,
    threshold: ArrayLike,
    threshold_noise: ArrayLike,
    top_noise: ArrayLike,
    middle_noise: ArrayLike,
    *,
    epsilon: ArrayLike,
    c: int,
    theta: ArrayLike | None = None,
    sigma: ArrayLike | None = None,
    monotonic: bool = False,
    sensitivity: ArrayLike = 1.0,
) -> GapResult:
    """:func:`adaptive_sparse_vector_with_gap` on given (already scaled) noise: ``threshold_noise``
    (scalar), ``top_noise`` (the xi_i of line 7) and ``middle_noise`` (the eta_i), shape ``(n,)``.
    Parameters may be traced as in :func:`adaptive_sparse_vector_with_gap` (``c``, ``monotonic``
    static)."""
    noises = (("top_noise", top_noise), ("middle_noise", middle_noise))
    params = GapParameters(epsilon, theta, sigma, sensitivity)
    return run_from_noise(queries, threshold, threshold_noise, noises, params, c, monotonic)


def sparse_vector_with_gap(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon: ArrayLike,
    *,
    c: int,
    theta: ArrayLike | None = None,
    monotonic: bool = False,
    sensitivity: ArrayLike = 1.0,
    method: AboveThresholdMethod = "auto",
) -> GapResult:
    """Sparse-Vector-with-Gap (Wang et al. 2019; Ding et al. 2019, Algorithm 2 with ``sigma = inf``).

    Reports up to ``c`` queries above the noisy threshold ``T + Lap(1/eps0)`` (noise ``Lap(2/eps1)``,
    or ``Lap(1/eps1)`` when monotonic; ``eps0 = theta*epsilon``, ``eps1 = (1-theta)*epsilon/c``) and
    releases each one's noisy gap. Same answers as the classical sparse vector of Lyu, Su and Li
    (2017, Alg. 1) on the same noise; the gaps are free.

    Neighboring relation: each query has sensitivity ``sensitivity``; ``monotonic`` additionally
    needs all queries to move in the same direction between neighbors.
    Guarantee: ``epsilon``-DP (Ding et al., Theorem 4; :func:`sparse_vector_with_gap_guarantee`).

    Args:
      key: a ``jax.random`` key.
      queries: shape ``(n,)``.
      threshold: the public threshold, a finite scalar (may be traced).
      epsilon: total budget, > 0 (may be traced).
      c: number of ⊤ answers, >= 1 (static: it fixes the output sizes).
      theta: threshold share in (0, 1) (may be traced); default :func:`default_theta`.
      monotonic: use the monotonic noise scales (static).
      sensitivity: per-query sensitivity, > 0, multiplies every noise scale (may be traced).
      method: ``"auto"`` (default: ``"literal"`` for one release, ``"first_passage"`` under
        ``vmap`` over keys with the queries and parameters fixed, :mod:`dpjax._src.auto`),
        ``"literal"`` (one Laplace variate per query) or ``"first_passage"``: the same law
        (answers and gaps) by ``c`` first passages with the one threshold noise and an exact draw of
        each gap given its answer (module docstring; heaps built once per data under ``vmap`` over
        keys, O(c log n) per release). Different random stream (static).

    Returns:
      A :class:`GapResult` with ``indices``/``gaps`` of size ``c``. On invalid traced input
      (``epsilon``, ``theta`` or ``sensitivity`` out of range, a non-finite threshold, NaN
      queries) its integer fields are -1 and its float fields NaN.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> counts = jnp.array([3.0, 800.0, 2.0, 950.0, 700.0])
      >>> res = sparse_vector_with_gap(jax.random.key(0), counts, 500.0, 1.0, c=2, monotonic=True)
      >>> estimate = res.gaps + 500.0          # unbiased-noise estimates of the reported counts
    """
    check_choice(method, "method", METHODS)
    params = GapParameters(epsilon, theta, None, sensitivity)
    return run_keyed(key, queries, threshold, params, c, monotonic, adaptive=False, method=method)


def adaptive_sparse_vector_with_gap(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon: ArrayLike,
    *,
    c: int,
    theta: ArrayLike | None = None,
    sigma: ArrayLike | None = None,
    monotonic: bool = False,
    sensitivity: ArrayLike = 1.0,
    method: AboveThresholdMethod = "auto",
) -> GapResult:
    """Adaptive-Sparse-Vector-with-Gap (Ding, Wang, Zhang, Kifer, PVLDB 2019, Algorithm 2).

    Each query is first tested with the cheap top-branch noise (``Lap(2/eps2)``, ``eps2 = eps1/2``)
    against ``T~ + sigma``; failing that, with the middle-branch noise (``Lap(2/eps1)``) against ``T~``.
    A top ⊤ costs ``eps2``, a middle ⊤ ``eps1``, a ⊥ nothing; the run stops when the cost exceeds
    ``epsilon - eps1``. It answers between ``c`` (all middle) and ``2c - 1`` (all top) queries when the
    stream is long enough, and leaves the unused budget for later use.

    Neighboring relation: as :func:`sparse_vector_with_gap`.
    Guarantee: ``epsilon``-DP for every data-independent ``sigma`` (Theorem 4); the cost actually
    used, ``eps0 + units_used*eps2``, is returned in ``epsilon_spent``.

    The other arguments are as in :func:`sparse_vector_with_gap` (``c`` and ``monotonic`` static, the
    rest may be traced).

    Args:
      sigma: top-branch margin, >= 0 (may be traced); default ``4*sqrt(2)/eps2`` (times the
        sensitivity, computed in the working dtype); ``math.inf`` gives exactly
        :func:`sparse_vector_with_gap` for the same key.
      method: ``"auto"`` (default, as in :func:`sparse_vector_with_gap`), ``"literal"`` (two
        Laplace variates per query) or ``"first_passage"`` (module
        docstring: the same law by a two-rate first passage per ⊤, O(log n) each, heaps built once
        per data under ``vmap`` over keys). Different random stream (static).

    Returns:
      A :class:`GapResult` with ``indices``/``gaps`` of size ``2c - 1``. On invalid traced input
      (as for :func:`sparse_vector_with_gap`, or ``sigma`` NaN or negative) its integer fields are
      -1 and its float fields NaN.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> counts = jnp.array([3.0, 8000.0, 2.0, 9500.0, 7000.0])
      >>> res = adaptive_sparse_vector_with_gap(jax.random.key(0), counts, 500.0, 1.0, c=2, monotonic=True)
      >>> int(res.units_used) <= 4
      True
    """
    check_choice(method, "method", METHODS)
    params = GapParameters(epsilon, theta, sigma, sensitivity)
    return run_keyed(key, queries, threshold, params, c, monotonic, adaptive=True, method=method)


@elementwise("epsilon", "theta", "sensitivity")
def sparse_vector_with_gap_guarantee(
    epsilon: float, *, c: int, theta: float | None = None, monotonic: bool = False, sensitivity: float = 1.0
) -> PureDP:
    """Sparse-Vector-with-Gap is ``epsilon``-DP whatever ``c``, ``theta``, ``monotonic`` and
    ``sensitivity`` (Ding et al. 2019, Theorem 4 with sigma = inf): they only split and calibrate the
    budget. Takes the mechanism's privacy arguments (validated as the mechanism does). Host-side:
    concrete numbers (or arrays of them for a grid)."""
    params, _ = check_parameters(Checks(), GapParameters(epsilon, theta, None, sensitivity), c, monotonic)
    return PureDP(float(params.epsilon))


@elementwise("epsilon", "theta", "sigma", "sensitivity")
def adaptive_sparse_vector_with_gap_guarantee(
    epsilon: float, *, c: int, theta: float | None = None, sigma: float | None = None,
    monotonic: bool = False, sensitivity: float = 1.0,
) -> PureDP:
    """Adaptive-Sparse-Vector-with-Gap is ``epsilon``-DP (Ding et al. 2019, Theorem 4) whatever the
    other arguments: the worst case to reserve before the run; ``GapResult.epsilon_spent`` is the
    cost it actually used. Host-side: concrete numbers (or arrays of them for a grid)."""
    params, _ = check_parameters(Checks(), GapParameters(epsilon, theta, sigma, sensitivity), c, monotonic)
    return PureDP(float(params.epsilon))
