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

First passage (``method="first_passage"`` of both functions, :mod:`dpjax.svt.gap_passage`). Given
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
:mod:`dpjax.svt.first_passage`), the acceptance and branch tests are exact to a few ulp (log space)
and the overshoot is tail-exact to about 44 scales.

Parameters: ``epsilon``, ``theta``, ``sigma``, ``sensitivity`` and the threshold may be traced (a
``vmap`` over any of them equals separate calls for the same key); the budget split and the noise
scales are computed in the working dtype the same way for concrete and traced values. ``c`` fixes
the output sizes and ``monotonic`` the noise scales: both are static.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src import noise as noise_lib
from dpjax._src import sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.svt.above_threshold import (
    METHODS,
    AboveThresholdMethod,
    center,
    centered_queries,
    checked_queries,
    first_true,
)
from dpjax._src.svt.gap_passage import gap_passages
from dpjax._src.validation import Checks, check_choice, check_epsilon, check_int, float_dtype, is_traced

__all__ = [
    "BRANCH_BOTTOM",
    "BRANCH_MIDDLE",
    "BRANCH_TOP",
    "BRANCH_UNPROCESSED",
    "GapBudget",
    "GapResult",
    "adaptive_sparse_vector_with_gap",
    "adaptive_sparse_vector_with_gap_from_noise",
    "adaptive_sparse_vector_with_gap_guarantee",
    "default_theta",
    "gap_budget",
    "sparse_vector_with_gap",
    "sparse_vector_with_gap_from_noise",
    "sparse_vector_with_gap_guarantee",
]

BRANCH_UNPROCESSED = -1
"""``GapResult.branch`` of a query the run stopped before (and the padding of ``answer_branches``)."""
BRANCH_BOTTOM = 0
"""``GapResult.branch`` of a processed query answered ⊥ (below the threshold; free)."""
BRANCH_TOP = 1
"""The branch of a ⊤ whose top-noised gap reached ``sigma`` (Algorithm 2's top branch; costs eps2)."""
BRANCH_MIDDLE = 2
"""The branch of a ⊤ from the middle branch (its middle-noised gap >= 0; costs eps1 = 2 eps2)."""


class GapResult(NamedTuple):
    """Output of :func:`sparse_vector_with_gap` and :func:`adaptive_sparse_vector_with_gap`.

    Attributes:
      indices: int32 ``(m,)``, the ⊤ queries in stream order, padded with -1; ``m = c`` for
        sparse vector with gap and ``2c - 1`` for the adaptive version.
      gaps: float ``(m,)``, the released noisy gap ``q_i + noise_i - T~`` of each ⊤, NaN padded
        (>= 0 in the middle branch, >= sigma in the top branch).
      answer_branches: int8 ``(m,)``, the branch of each ⊤ (1 top, 2 middle), -1 padded.
      branch: int8 ``(n,)``: -1 not processed, 0 ⊥, 1 top branch ⊤, 2 middle branch ⊤.
      units_used: int32, the budget used by the queries in units of ``eps2 = eps1/2`` (<= 2c).
      epsilon_spent: ``eps0 + units_used*eps2`` (<= epsilon).
      epsilon_left: ``epsilon - epsilon_spent = (2c - units_used)*eps2`` (>= 0).
      num_processed: int32, the number of queries answered before the run stopped.

    On invalid traced input (a parameter out of range, NaN queries) every integer field is -1
    (``units_used = -1`` and ``num_processed = -1`` cannot come from a run) and every float field
    is NaN.
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
    """The budget split of Algorithm 2, line 2, and the noise scales it implies.

    Python floats for concrete parameters; scalars of the parameters' dtype when any is traced.
    """

    epsilon: float
    c: int
    eps0: float
    eps1: float
    eps2: float
    threshold_scale: float
    middle_scale: float
    top_scale: float
    sigma: float


class _GapParameters(NamedTuple):
    """Algorithm 2's privacy parameters as given (``c`` and ``monotonic``, static, travel apart):
    checked by :func:`_check_parameters`, then split by :func:`_split` into a :class:`GapBudget`.

    Attributes:
      epsilon: the total budget, > 0.
      theta: the threshold share in (0, 1) (``None`` before the check: :func:`default_theta`).
      sigma: the top-branch margin, >= 0 or ``math.inf``; ``None`` for the default,
        ``4 sqrt(2) / eps2`` times the sensitivity (:func:`sparse_vector_with_gap`, which has no top
        branch, passes ``None`` and never reads it).
      sensitivity: the per-query sensitivity, > 0.

    Python numbers when concrete; any of them may be traced.
    """

    epsilon: float
    theta: float | None
    sigma: float | None
    sensitivity: float


def default_theta(c: int, *, monotonic: bool) -> float:
    """The threshold share of Lyu, Su and Li (2017): ``1/(1 + (2c)^(2/3))``, or ``1/(1 + c^(2/3))``
    for monotonic queries (Ding, Wang, Zhang, Kifer 2019, Sec. 6.1; it minimizes the variance of the gap)."""
    c = check_int(c, "c", minimum=1)
    return 1.0 / (1.0 + float(c if monotonic else 2 * c) ** (2.0 / 3.0))


def _check_sigma(checks: Checks, sigma):
    """``sigma`` of Algorithm 2: ``None`` (the default), a real >= 0, or +inf (no top branch)."""
    if sigma is None:
        return None
    if is_traced(sigma):
        sigma = jnp.asarray(sigma)
        if sigma.ndim != 0:
            raise ValueError(f"sigma must be a scalar, got shape {sigma.shape}.")
        if not jnp.issubdtype(sigma.dtype, jnp.floating):
            sigma = sigma.astype(float_dtype())
        checks.record(sigma >= 0, "sigma must be >= 0 (math.inf disables the top branch).")
        return sigma
    scalar = isinstance(sigma, numbers.Real | np.ndarray | jax.Array) and np.shape(sigma) == ()
    if scalar and sigma == math.inf:
        return math.inf
    return check_epsilon(sigma, "sigma", allow_zero=True)


def _check_parameters(
    checks: Checks, params: _GapParameters, c, monotonic: bool
) -> tuple[_GapParameters, int]:
    """Validates Algorithm 2's parameters (eagerly when concrete, in ``checks`` when traced) and
    ``c``; fills in the default ``theta``."""
    epsilon = checks.epsilon(params.epsilon)
    c = check_int(c, "c", minimum=1)
    theta = default_theta(c, monotonic=monotonic) if params.theta is None else params.theta
    theta = checks.probability(theta, "theta", open_low=True, open_high=True)
    sensitivity = checks.positive(params.sensitivity, "sensitivity")
    return _GapParameters(epsilon, theta, _check_sigma(checks, params.sigma), sensitivity), c


def _split(params: _GapParameters, c: int, monotonic: bool) -> GapBudget:
    """Algorithm 2, line 2, in the arithmetic of the checked parameters (Python floats, or jnp
    scalars of one dtype): the one formula behind :func:`gap_budget` and the kernels."""
    epsilon, theta, sigma, sensitivity = params
    eps0 = theta * epsilon
    eps1 = (1.0 - theta) * epsilon / c
    eps2 = eps1 / 2.0
    if sigma is None:
        sigma = 4.0 * math.sqrt(2.0) / eps2 * sensitivity
    width = (1.0 if monotonic else 2.0) * sensitivity
    return GapBudget(epsilon, c, eps0, eps1, eps2, sensitivity / eps0, width / eps1, width / eps2, sigma)


def _working_budget(dtype, params: _GapParameters, c: int, monotonic: bool) -> GapBudget:
    """The budget of the checked ``params`` in the kernel's dtype."""
    params = _GapParameters(*(None if v is None else jnp.asarray(v, dtype) for v in params))
    return _split(params, c, monotonic)


def gap_budget(
    epsilon: float,
    c: int,
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

    ``epsilon``, ``theta``, ``sigma`` and ``sensitivity`` may be traced: the budget is then computed
    with jnp in their dtype by the same formula (in float64 the same numbers to 1 ulp), and its
    float fields are NaN where a traced value is invalid. With concrete values it is computed in
    Python floats (float64), as the accountant wants; ``c`` and ``monotonic`` are static.
    """
    checks = Checks()
    params, c = _check_parameters(checks, _GapParameters(epsilon, theta, sigma, sensitivity), c, monotonic)
    budget = _split(params, c, monotonic)
    if not checks.traced:
        return budget._replace(sigma=float(budget.sigma))
    return checks.guard(budget._replace(c=None))._replace(c=c)


def _gap_core(centered, threshold_noise, top_noise, middle_noise, budget: GapBudget, *, adaptive):
    """Algorithm 2 on given noise and a budget in ``centered.dtype`` (traced inside a jitted caller)."""
    c, sigma = budget.c, budget.sigma
    size = 2 * c - 1 if adaptive else c
    n = centered.shape[0]
    middle_gap = (centered + middle_noise) - threshold_noise
    if adaptive:
        top_gap = (centered + top_noise) - threshold_noise
        top = top_gap >= sigma
    else:
        top_gap, top = middle_gap, jnp.zeros(n, jnp.bool_)
    middle = ~top & (middle_gap >= 0)
    units = jnp.where(top, 1, jnp.where(middle, 2, 0)).astype(jnp.int32)
    stop = first_true(jnp.cumsum(units) > 2 * c - 2)  # line 16 in integer units of eps2
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
    spent = budget.eps0 + units_used.astype(centered.dtype) * budget.eps2
    left = (2 * c - units_used).astype(centered.dtype) * budget.eps2
    return GapResult(
        indices, gaps, answer_branches, branch, units_used, spent, left, processed.sum().astype(jnp.int32)
    )


def _noise_like(noise, centered, name):
    noise = jnp.asarray(noise, centered.dtype)
    if noise.shape != centered.shape:
        raise ValueError(f"{name} must have shape {centered.shape}, got {noise.shape}.")
    return noise


@functools.partial(jax.jit, static_argnames=("c", "adaptive", "monotonic"))
def _from_noise(centered, threshold_noise, top_noise, middle_noise, params, *, c, adaptive, monotonic):
    budget = _working_budget(centered.dtype, params, c, monotonic)
    threshold_noise = jnp.asarray(threshold_noise, centered.dtype)
    return _gap_core(centered, threshold_noise, top_noise, middle_noise, budget, adaptive=adaptive)


def _run_from_noise(queries, threshold, threshold_noise, noises, params: _GapParameters, c, monotonic):
    """Validates, then runs the core on given noise (``noises``: (name, array) for top and middle)."""
    checks = Checks()
    params, c = _check_parameters(checks, params, c, monotonic)
    centered = centered_queries(checks, queries, threshold)
    top, middle = (None if noise is None else _noise_like(noise, centered, name) for name, noise in noises)
    result = _from_noise(
        centered,
        threshold_noise,
        top,
        middle,
        params,
        c=c,
        adaptive=top is not None,
        monotonic=monotonic,
    )
    return checks.guard(result)


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
    params = _GapParameters(epsilon, theta, None, sensitivity)
    return _run_from_noise(queries, threshold, threshold_noise, noises, params, c, monotonic)


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
    params = _GapParameters(epsilon, theta, sigma, sensitivity)
    return _run_from_noise(queries, threshold, threshold_noise, noises, params, c, monotonic)


@functools.partial(jax.jit, static_argnames=("c", "adaptive", "monotonic", "dtype"))
@sharded.auto_axes
def _keyed(key, queries, threshold, params, *, c, adaptive, monotonic, dtype):
    centered = center(queries, threshold, dtype)
    budget = _working_budget(centered.dtype, params, c, monotonic)
    threshold_key, top_key, middle_key = jax.random.split(key, 3)
    eta = noise_lib.laplace(threshold_key, (), budget.threshold_scale, centered.dtype)
    xi = noise_lib.laplace(top_key, centered.shape, budget.top_scale, centered.dtype) if adaptive else None
    nu = noise_lib.laplace(middle_key, centered.shape, budget.middle_scale, centered.dtype)
    return _gap_core(centered, eta, xi, nu, budget, adaptive=adaptive)


@functools.partial(jax.jit, static_argnames=("c", "adaptive", "monotonic", "dtype"))
@sharded.auto_axes
def _first_passage(key, queries, threshold, params, *, c, adaptive, monotonic, dtype):
    centered = center(queries, threshold, dtype)
    budget = _working_budget(centered.dtype, params, c, monotonic)
    found = gap_passages(key, centered, budget, adaptive=adaptive)
    n = centered.shape[0]
    valid = found.indices >= 0
    answer_branches = jnp.where(found.top, BRANCH_TOP, BRANCH_MIDDLE)
    answer_branches = jnp.where(valid, answer_branches, BRANCH_UNPROCESSED).astype(jnp.int8)
    branch = jnp.where(jnp.arange(n) < found.processed, BRANCH_BOTTOM, BRANCH_UNPROCESSED).astype(jnp.int8)
    branch = branch.at[jnp.where(valid, found.indices, n)].set(answer_branches, mode="drop")
    spent = budget.eps0 + found.units.astype(centered.dtype) * budget.eps2
    left = (2 * c - found.units).astype(centered.dtype) * budget.eps2
    return GapResult(
        found.indices, found.gaps, answer_branches, branch, found.units, spent, left, found.processed
    )


def _run_keyed(key, queries, threshold, params: _GapParameters, c, monotonic, adaptive, method="auto"):
    checks = Checks()
    params, c = _check_parameters(checks, params, c, monotonic)
    queries, threshold, dtype = checked_queries(checks, queries, threshold)
    static = dict(c=c, adaptive=adaptive, monotonic=monotonic, dtype=dtype)
    paths = {
        "literal": functools.partial(_keyed, **static),
        "first_passage": functools.partial(_first_passage, **static),
    }
    return checks.guard(_auto.run(method, paths, key, queries, threshold, params, fast="first_passage"))


def sparse_vector_with_gap(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon: float,
    *,
    c: int,
    theta: float | None = None,
    monotonic: bool = False,
    sensitivity: float = 1.0,
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
        ``vmap`` over keys with the queries and parameters fixed, :mod:`dpjax._auto`),
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
    params = _GapParameters(epsilon, theta, None, sensitivity)
    return _run_keyed(key, queries, threshold, params, c, monotonic, adaptive=False, method=method)


def adaptive_sparse_vector_with_gap(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon: float,
    *,
    c: int,
    theta: float | None = None,
    sigma: float | None = None,
    monotonic: bool = False,
    sensitivity: float = 1.0,
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
    params = _GapParameters(epsilon, theta, sigma, sensitivity)
    return _run_keyed(key, queries, threshold, params, c, monotonic, adaptive=True, method=method)


@elementwise("epsilon", "theta", "sensitivity")
def sparse_vector_with_gap_guarantee(
    epsilon: float, *, c: int, theta: float | None = None, monotonic: bool = False, sensitivity: float = 1.0
) -> PureDP:
    """Sparse-Vector-with-Gap is ``epsilon``-DP whatever ``c``, ``theta``, ``monotonic`` and
    ``sensitivity`` (Ding et al. 2019, Theorem 4 with sigma = inf): they only split and calibrate the
    budget. Takes the mechanism's privacy arguments (validated as the mechanism does). Host-side:
    concrete numbers (or arrays of them for a grid)."""
    params, _ = _check_parameters(Checks(), _GapParameters(epsilon, theta, None, sensitivity), c, monotonic)
    return PureDP(float(params.epsilon))


@elementwise("epsilon", "theta", "sigma", "sensitivity")
def adaptive_sparse_vector_with_gap_guarantee(
    epsilon: float, *, c: int, theta: float | None = None, sigma: float | None = None,
    monotonic: bool = False, sensitivity: float = 1.0,
) -> PureDP:
    """Adaptive-Sparse-Vector-with-Gap is ``epsilon``-DP (Ding et al. 2019, Theorem 4) whatever the
    other arguments: the worst case to reserve before the run; ``GapResult.epsilon_spent`` is the
    cost it actually used. Host-side: concrete numbers (or arrays of them for a grid)."""
    params, _ = _check_parameters(Checks(), _GapParameters(epsilon, theta, sigma, sensitivity), c, monotonic)
    return PureDP(float(params.epsilon))
