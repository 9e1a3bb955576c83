"""Estimators from the free gaps of (adaptive) sparse vector with gap (Ding, Wang, Zhang, Kifer 2019).

A ⊤ of :func:`dpjax.svt.sparse_vector_with_gap` or :func:`dpjax.svt.adaptive_sparse_vector_with_gap`
releases the gap ``gamma_i = q_i + nu_i - (T + eta)``, so ``gamma_i + T`` estimates ``q_i`` with noise
``nu_i - eta`` of variance ``2*b_T^2 + 2*b_q^2`` (threshold scale ``b_T``, branch query scale ``b_q``).

* :func:`combine_gap_and_measurement` (§6.2, "Sparse-Vector-with-Gap with Measures"): the
  inverse-variance weighted average of ``gamma_i + T`` and an independent measurement ``alpha_i``.
  With the paper's protocol (half the budget for the sparse vector at the optimal ``theta``, half for
  ``Lap(k/(epsilon/2))`` measurements) the MSE drops by :func:`svt_measure_reduction`, e.g. 35.77% for
  monotonic queries at ``k = 10``, tending to 50% (monotonic) or 20% (general).
* :func:`gap_lower_confidence_bound` (Lemma 5): ``q_i >= gamma_i + T - t`` with the given probability,
  where ``t`` solves ``P(nu_i - eta >= -t) = confidence`` for the difference of two Laplace variables.

Caveats (spec seed-002 §3.2): queries close to the threshold are selected with upward-biased noise,
and gaps of one run share ``eta`` (covariance ``2*b_T^2``), so sums of the estimates need care.
Post-processing of released values costs no privacy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.svt.gap import BRANCH_MIDDLE, BRANCH_TOP, GapBudget
from dpjax.validation import check_int, check_probability


def gap_variance(budget: GapBudget, branch) -> jax.Array:
    """Variance of ``gamma_i + T`` as an estimate of ``q_i``, per query: ``2*b_T^2 + 2*b_q^2`` with the
    top or middle branch scale ``b_q``; NaN for queries that were not reported above the threshold.

    ``budget`` is :func:`dpjax.svt.gap_budget` with the run's parameters; ``branch`` the run's
    ``GapResult.branch`` or ``GapResult.answer_branches``.
    """
    branch = jnp.asarray(branch)
    threshold_part = 2 * budget.threshold_scale**2
    top = threshold_part + 2 * budget.top_scale**2
    middle = threshold_part + 2 * budget.middle_scale**2
    return jnp.where(branch == BRANCH_TOP, top, jnp.where(branch == BRANCH_MIDDLE, middle, jnp.nan))


def combine_gap_and_measurement(gaps, threshold, measurements, gap_variance, measurement_variance):
    """Inverse-variance weighted estimate of the reported queries (Ding et al. 2019, §6.2).

    ``beta_i = (alpha_i/Var(alpha_i) + (gamma_i + T)/Var(gamma_i)) / (1/Var(alpha_i) + 1/Var(gamma_i))``.

    Args:
      gaps: released gaps ``gamma_i`` (NaN entries stay NaN).
      threshold: the public threshold ``T``.
      measurements: independent noisy measurements ``alpha_i`` of the same queries.
      gap_variance: ``Var(gamma_i)`` (see :func:`gap_variance`), broadcastable.
      measurement_variance: ``Var(alpha_i)``, e.g. ``2*(m/epsilon_meas)^2`` for ``Lap(m/epsilon_meas)``.

    Returns:
      The combined estimates, shaped like ``gaps``; variance ``1/(1/Var(alpha) + 1/Var(gamma))``.

    Example:
      >>> import jax.numpy as jnp
      >>> combine_gap_and_measurement(jnp.array([10.0]), 100.0, jnp.array([108.0]), 4.0, 4.0)
      Array([109.], dtype=float32)
    """
    weight_gap = 1.0 / jnp.asarray(gap_variance)
    weight_measure = 1.0 / jnp.asarray(measurement_variance)
    gap_estimate = jnp.asarray(gaps) + threshold
    return (weight_measure * jnp.asarray(measurements) + weight_gap * gap_estimate) / (
        weight_measure + weight_gap
    )


def svt_measure_reduction(k: int, *, monotonic: bool) -> float:
    """The MSE reduction of §6.2 at the optimal split: ``k^2/(k^2 + (1 + c)^3)``, ``c = k^(2/3)``
    (monotonic) or ``(2k)^(2/3)`` (general). 0.3577 for monotonic queries at ``k = 10``."""
    k = check_int(k, "k", minimum=1)
    c = float(k if monotonic else 2 * k) ** (2.0 / 3.0)
    return k**2 / (k**2 + (1.0 + c) ** 3)


def gap_tail_probability(t, threshold_rate, query_rate):
    """``P(nu - eta >= -t)`` for ``t >= 0``, ``eta ~ Lap(1/threshold_rate)``, ``nu ~ Lap(1/query_rate)``
    (Ding et al. 2019, Lemma 5); the rates are the inverse Laplace scales. NumPy, float64."""
    t = np.asarray(t, np.float64)
    a = np.asarray(threshold_rate, np.float64)
    b = np.asarray(query_rate, np.float64)
    equal = np.abs(a - b) <= 1e-6 * np.maximum(a, b)
    safe_b = np.where(equal, 2 * a, b)  # any value != a; the equal-rate formula is used there
    lower = (a**2 * np.exp(-safe_b * t) - safe_b**2 * np.exp(-a * t)) / (2 * (a**2 - safe_b**2))
    lower_equal = (2 + a * t) / 4 * np.exp(-a * t)
    return 1.0 - np.where(equal, lower_equal, lower)


def gap_confidence_margin(threshold_rate, query_rate, confidence: float = 0.95, *, iterations: int = 200):
    """The ``t`` of Lemma 5 with ``P(nu - eta >= -t) = confidence``, by bisection on
    ``[0, sqrt(Var/(2*(1 - confidence)))]`` (Chebyshev plus symmetry). E.g. ``t = 16.359`` for rates
    0.2 and 0.2 at 95%."""
    confidence = check_probability(confidence, "confidence", open_low=True, open_high=True)
    if confidence <= 0.5:
        raise ValueError(f"confidence must be > 0.5 for a lower bound below the estimate, got {confidence}.")
    a = np.asarray(threshold_rate, np.float64)
    b = np.asarray(query_rate, np.float64)
    lo = np.zeros(np.broadcast(a, b).shape)
    hi = np.sqrt((2 / a**2 + 2 / b**2) / (2 * (1 - confidence))) + lo
    for _ in range(iterations):
        mid = (lo + hi) / 2
        below = gap_tail_probability(mid, a, b) < confidence
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


def gap_lower_confidence_bound(gaps, threshold, budget: GapBudget, branch, confidence: float = 0.95):
    """Lower confidence bounds ``gamma_i + T - t_conf`` on the reported queries (Lemma 5).

    ``branch`` gives each gap's branch (top or middle), which sets the query-noise rate; with the
    monotonic scales the rates are ``eps1``/``eps2``, with the general ones ``eps1/2``/``eps2/2``.
    Each bound holds with probability ``confidence`` (marginally, per query; away from the threshold,
    where the selection does not bias the noise). NaN where ``branch`` is not a ⊤.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from dpjax import svt
      >>> counts = jnp.array([3.0, 800.0, 2.0, 950.0])
      >>> res = svt.sparse_vector_with_gap(jax.random.key(0), counts, 500.0, 1.0, k=2, monotonic=True)
      >>> budget = svt.gap_budget(1.0, 2, monotonic=True)
      >>> lcb = gap_lower_confidence_bound(res.gaps, 500.0, budget, res.answer_branches)
    """
    rate = 1.0 / budget.threshold_scale
    t_top = float(gap_confidence_margin(rate, 1.0 / budget.top_scale, confidence))
    t_middle = float(gap_confidence_margin(rate, 1.0 / budget.middle_scale, confidence))
    branch = jnp.asarray(branch)
    margin = jnp.where(branch == BRANCH_TOP, t_top, jnp.where(branch == BRANCH_MIDDLE, t_middle, jnp.nan))
    return jnp.asarray(gaps) + threshold - margin
