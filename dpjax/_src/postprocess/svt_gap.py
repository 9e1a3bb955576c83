"""Estimators from the free gaps of (adaptive) sparse vector with gap (Ding, Wang, Zhang, Kifer 2019).

A ⊤ of :func:`dpjax.svt.sparse_vector_with_gap` or :func:`dpjax.svt.adaptive_sparse_vector_with_gap`
releases the gap ``gamma_i = q_i + nu_i - (T + eta)``, so ``gamma_i + T`` estimates ``q_i`` with noise
``nu_i - eta`` of variance ``2*b_T^2 + 2*b_q^2`` (threshold scale ``b_T``, branch query scale ``b_q``).

* :func:`combine_gap_and_measurement` (§6.2, "Sparse-Vector-with-Gap with Measures"): the
  inverse-variance weighted average of ``gamma_i + T`` and an independent measurement ``alpha_i``.
  With the paper's protocol (half the budget for the sparse vector at the optimal ``theta``, half for
  ``Lap(k/(epsilon/2))`` measurements) the MSE drops by :func:`svt_measure_reduction`, e.g. 35.77% for
  monotonic queries at ``k = 10``, tending to 50% (monotonic) or 20% (general).
* :func:`query_lower_confidence_bound` (Lemma 5): ``q_i >= gamma_i + T - t`` with the given probability,
  where ``t`` solves ``P(nu_i - eta >= -t) = confidence`` for the difference of two Laplace variables.

Caveats (beyond Ding et al. 2019): queries close to the threshold are selected with upward-biased noise,
and gaps of one run share ``eta`` (covariance ``2*b_T^2``), so sums of the estimates need care.
Post-processing of released values costs no privacy.

Parameters. Every numeric parameter (the threshold, the variances, the Laplace rates, the fields of
the :class:`~dpjax.svt.GapBudget`, ``confidence``) may be traced, e.g. under a ``jax.vmap`` over
the run's epsilon; only ``k`` and ``iterations`` are static. The computations are in JAX, in the
working dtype (that of the inputs, at least float32). Concrete rates and confidences are checked
eagerly (a ``ValueError`` naming the argument); invalid traced ones make the result NaN.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src.host_checks import check_int, float_dtype, is_traced
from dpjax._src.postprocess.laplace_difference import laplace_difference_quantile, laplace_difference_tail
from dpjax._src.svt.gap_core import BRANCH_MIDDLE, BRANCH_TOP
from dpjax._src.svt.gap_parameters import GapBudget
from dpjax._src.validation import Checks

__all__ = [
    "combine_gap_and_measurement",
    "gap_confidence_margin",
    "gap_tail_probability",
    "gap_variance",
    "query_lower_confidence_bound",
    "svt_measure_reduction",
]


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


def combine_gap_and_measurement(
    gaps: ArrayLike,
    threshold: ArrayLike,
    measurements: ArrayLike,
    gap_variance: ArrayLike,
    measurement_variance: ArrayLike,
):
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


def _rates(checks: Checks, threshold_rate, query_rate):
    """The two Laplace rates as arrays of one float dtype, checked finite and > 0."""
    rates = []
    for value, name in ((threshold_rate, "threshold_rate"), (query_rate, "query_rate")):
        rate = checks.array(value, name, ndim=None)
        if is_traced(rate):
            checks.record(rate > 0, f"{name} must be > 0.")
        else:
            with jax.ensure_compile_time_eval():
                if not bool(jnp.all(rate > 0)):
                    raise ValueError(f"{name} must be > 0.")
        rates.append(rate)
    dtype = float_dtype(*rates)
    return (rate.astype(dtype) for rate in rates)


def gap_tail_probability(t: ArrayLike, threshold_rate: ArrayLike, query_rate: ArrayLike):
    """``P(nu - eta >= -t)`` for ``t >= 0``, ``eta ~ Lap(1/threshold_rate)``, ``nu ~ Lap(1/query_rate)``
    (Ding et al. 2019, Lemma 5); the rates are the inverse Laplace scales, > 0.

    Lemma 5's ``1 - (a^2 e^{-bt} - b^2 e^{-at}) / (2 (a^2 - b^2))`` (``a``, ``b`` the threshold and
    query rates), rewritten with ``expm1`` so that it is exact as ``b -> a`` (where it tends to
    ``1 - (2 + a t)/4 e^{-a t}``). Broadcasts; every argument may be traced (NaN where a traced
    rate is invalid).
    """
    checks = Checks()
    a, b = _rates(checks, threshold_rate, query_rate)
    t = jnp.asarray(t, a.dtype)
    return checks.guard(1 - laplace_difference_tail(t, a, b))


def gap_confidence_margin(threshold_rate: ArrayLike, query_rate: ArrayLike, confidence: ArrayLike = 0.95):
    """The ``t`` of Lemma 5 with ``P(nu - eta >= -t) = confidence``: the
    :func:`~dpjax._src.postprocess.laplace_difference.laplace_difference_quantile` at ``1 - confidence``,
    by bisection to the working dtype's resolution. E.g. ``t = 16.359`` for rates 0.2 and 0.2 at 95%.

    The rates (> 0, broadcast) and ``confidence`` (in (1/2, 1)) may be traced; the margin is NaN
    where a traced one is invalid.
    """
    checks = Checks()
    confidence = checks.probability(confidence, "confidence", open_low=True, open_high=True)
    message = "confidence must be > 0.5 for a lower bound below the estimate"
    if is_traced(confidence):
        checks.record(confidence > 0.5, message + ".")
    elif confidence <= 0.5:
        raise ValueError(f"{message}, got {confidence}.")
    a, b = _rates(checks, threshold_rate, query_rate)
    target = 1 - jnp.asarray(confidence, a.dtype)  # P(nu - eta < -t) at the margin
    return checks.guard(laplace_difference_quantile(target, a, b))


def query_lower_confidence_bound(
    gaps: ArrayLike, threshold: ArrayLike, budget: GapBudget, branch, confidence: ArrayLike = 0.95
):
    """Lower confidence bounds ``gamma_i + T - t_conf`` on the reported queries (Lemma 5).

    ``branch`` gives each gap's branch (top or middle), which sets the query-noise rate; with the
    monotonic scales the rates are ``eps1``/``eps2``, with the general ones ``eps1/2``/``eps2/2``.
    Each bound holds with probability ``confidence`` (marginally, per query; away from the threshold,
    where the selection does not bias the noise). NaN where ``branch`` is not a ⊤, and everywhere
    when a traced ``confidence`` or budget scale is invalid. ``threshold``, ``confidence`` and the
    budget's scales may be traced.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from dpjax import svt
      >>> counts = jnp.array([3.0, 800.0, 2.0, 950.0])
      >>> res = svt.sparse_vector_with_gap(jax.random.key(0), counts, 500.0, 1.0, c=2, monotonic=True)
      >>> budget = svt.gap_budget(1.0, 2, monotonic=True)
      >>> lcb = query_lower_confidence_bound(res.gaps, 500.0, budget, res.answer_branches)
    """
    gaps = jnp.asarray(gaps)
    dtype = float_dtype(gaps)
    rate = 1 / jnp.asarray(budget.threshold_scale, dtype)
    query_rates = 1 / jnp.asarray([budget.top_scale, budget.middle_scale], dtype)
    t_top, t_middle = gap_confidence_margin(rate, query_rates, confidence)
    branch = jnp.asarray(branch)
    margin = jnp.where(branch == BRANCH_TOP, t_top, jnp.where(branch == BRANCH_MIDDLE, t_middle, jnp.nan))
    return gaps + jnp.asarray(threshold, dtype) - margin
