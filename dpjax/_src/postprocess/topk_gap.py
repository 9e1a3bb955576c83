"""Estimators from the free gaps of Noisy-Top-K-with-Gap (Ding, Wang, Zhang, Kifer 2019, §5).

:func:`dpjax.selection.noisy_top_k_with_gap` releases the winners ``j_1..j_k`` and the gaps
``g_i = (q_{j_i} + eta_{j_i}) - (q_{j_{i+1}} + eta_{j_{i+1}})`` with ``eta`` iid of scale ``b``: Laplace
(the paper's mechanism, the default) or Gumbel (``noise="gumbel"`` there). The estimators below take the
same ``noise`` (static): they default to Laplace, so gaps released with Gumbel noise must be passed with
``noise="gumbel"`` (the Laplace formulas would be wrong for them).

* :func:`blue_estimate` (§5.2, Theorem 3, "Noisy-Top-K-with-Gap with Measures"): the best linear
  unbiased estimate of the winners' true values from independent measurements
  ``alpha_i = q_{j_i} + xi_i`` and the gaps ``g_1..g_{k-1}``, in the paper's O(k) prefix-sum form, for
  any variance ratio ``lam = Var(eta)/Var(xi)``. Its MSE relative to the measurements alone is
  :func:`blue_mse_ratio` ``= (1 + lam k)/(k + lam k)`` (Corollary 1): 0.55 at k = 10, lam = 1. The BLUE
  uses only the first two moments (Gauss-Markov), so it holds for any iid selection noise; only ``lam``
  depends on the noise (:func:`variance_ratio`: ``Var Lap(b) = 2 b^2``, ``Var Gumbel(b) = pi^2 b^2 / 6``).
* :func:`gap_lower_confidence_bound`: ``q_{j_i} - q_{j_{i+1}} >= g_i - t`` with the given confidence,
  where ``t`` (:func:`gap_confidence_radius`) solves ``P(eta - eta' <= t) = confidence`` for the
  difference of two iid ``Lap(b)`` variables, whose tail is ``P(Z >= t) = (2 + t/b)/4 * exp(-t/b)``; for
  two iid Gumbel(b) variables the difference is Logistic(b) and ``t = b log(c / (1 - c))``.
  The same radius bounds any pairwise difference ``q_{j_a} - q_{j_c} >= g_a + ... + g_{c-1} - t``.

Caveat (beyond Ding et al. 2019, as are the Gumbel forms): both results treat the winners' noise as
unconditioned (Laplace or Gumbel) noise. That holds when the top k+1 true values are separated by
many noise scales; with near-ties the winners' noise is biased upward (the BLUE is then biased by
rank and the bound over-covers less).
Post-processing of released values costs no privacy.

Parameters. Every numeric parameter (``lam``, the scales, ``confidence``) may be traced, e.g. under
a ``jax.vmap`` over the mechanism's epsilon; only ``k`` of :func:`blue_mse_ratio` and ``noise`` are
static.
Concrete values are checked eagerly (a ``ValueError`` naming the argument); a traced invalid value
(out of range, NaN, infinite) or NaN in the measurements or gaps makes the estimates NaN.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src.host_checks import check_choice, check_int, float_dtype
from dpjax._src.postprocess.laplace_difference import laplace_difference_quantile
from dpjax._src.selection_gap import GAP_NOISES, GapNoise
from dpjax._src.validation import Checks

__all__ = [
    "blue_estimate",
    "blue_mse_ratio",
    "gap_confidence_radius",
    "gap_lower_confidence_bound",
    "variance_ratio",
]

# Var(noise of scale b) / b^2 for the selection noises: 2 for Laplace, pi^2/6 for Gumbel.
_VARIANCE = {"laplace": 2.0, "gumbel": math.pi**2 / 6}


def variance_ratio(
    selection_scale: ArrayLike, measurement_scale: ArrayLike, *, noise: GapNoise = "laplace"
) -> float | jax.Array:
    """``lam = Var(selection noise)/Var(measurement noise)`` for Laplace measurements.

    ``(b_sel/b_meas)^2`` for Laplace selection noise (``noise="laplace"``, the default) and
    ``pi^2/12 * (b_sel/b_meas)^2`` for Gumbel selection noise (``noise="gumbel"``: ``Var Gumbel(b) =
    pi^2 b^2/6`` against ``Var Lap(b) = 2 b^2``). Both scales are finite and > 0 and may be traced;
    ``noise`` is static. A float for concrete scales; for traced ones a scalar, NaN when a scale is
    invalid.

    Example: the paper's protocol (half the budget each, Laplace measurements ``Lap(2k/epsilon)``)
    gives ``lam = 1`` for monotone (counting) queries and ``lam = 4`` for general ones.
    """
    factor = _VARIANCE[check_choice(noise, "noise", GAP_NOISES)] / _VARIANCE["laplace"]
    checks = Checks()
    ratio = checks.positive(selection_scale, "selection_scale") / checks.positive(
        measurement_scale, "measurement_scale"
    )
    return checks.guard(ratio**2 * factor)


def blue_estimate(measurements: ArrayLike, gaps: ArrayLike, lam: ArrayLike) -> jax.Array:
    """Theorem 3's best linear unbiased estimate of the k winners' true values.

    With ``alpha`` the sum of the measurements, ``p_0 = 0``, ``p_i = g_1 + ... + g_i`` and
    ``p = p_1 + ... + p_{k-1} = sum_i (k - i) g_i``:
    ``beta_i = (alpha + lam k alpha_i + p - k p_{i-1}) / ((1 + lam) k)``, O(k) per release.
    Invariants: ``sum(beta) == sum(measurements)``, and
    ``beta_i - beta_{i+1} = (lam (alpha_i - alpha_{i+1}) + g_i) / (1 + lam)``.

    Args:
      measurements: ``alpha``, shape [..., k]: independent unbiased measurements of the winners in
        winning order (e.g. ``q[indices] + Lap(k/epsilon_meas)``), all of one variance.
      gaps: shape [..., k] as released (or [..., k-1]); only ``g_1..g_{k-1}`` are used, ``g_k``
        involves the unmeasured runner-up.
      lam: ``Var(gap noise per query)/Var(measurement)``, a finite scalar >= 0 (see
        :func:`variance_ratio`, with the mechanism's ``noise``; may be traced).

    Returns:
      ``beta``, shaped like ``measurements``; each entry has variance
      ``Var(alpha_i) * (1 + lam k)/(k (1 + lam))`` (:func:`blue_mse_ratio`). All NaN when a traced
      ``lam`` is invalid or traced inputs hold NaN.

    Example:
      >>> import jax.numpy as jnp
      >>> beta = blue_estimate(jnp.array([105.0, 88.0, 71.0]), jnp.array([14.0, 18.0, 3.0]), lam=1.0)
    """
    checks = Checks()
    alpha = checks.array(measurements, "measurements", ndim=None, kind="float")
    gaps = checks.array(gaps, "gaps", ndim=None, kind="float", allow_empty=True)  # k = 1
    if alpha.ndim == 0:
        raise ValueError("measurements must have a trailing axis of size k.")
    k = alpha.shape[-1]
    if gaps.ndim == 0 or gaps.shape[-1] not in (k, k - 1) or gaps.shape[:-1] != alpha.shape[:-1]:
        raise ValueError(
            f"gaps must have shape {alpha.shape} or {(*alpha.shape[:-1], k - 1)}, got {gaps.shape}."
        )
    lam = jnp.asarray(checks.epsilon(lam, "lam", allow_zero=True), float_dtype(alpha, gaps))
    prefix = jnp.cumsum(gaps[..., : k - 1], axis=-1)  # p_1 .. p_{k-1}
    previous = jnp.concatenate([jnp.zeros_like(alpha[..., :1]), prefix], axis=-1)  # p_0 .. p_{k-1}
    total = prefix.sum(axis=-1, keepdims=True)
    numerator = alpha.sum(axis=-1, keepdims=True) + lam * k * alpha + total - k * previous
    return checks.guard(numerator / ((1 + lam) * k))


def blue_mse_ratio(k: int, lam: ArrayLike) -> float | jax.Array:
    """Corollary 1: ``E|beta_i - q_i|^2 / E|alpha_i - q_i|^2 = (1 + lam k)/(k + lam k)``.

    ``k`` is static; ``lam`` (>= 0) may be traced: a float for a concrete ``lam``, else a scalar,
    NaN when ``lam`` is invalid.
    """
    k = check_int(k, "k", minimum=1)
    checks = Checks()
    lam = checks.epsilon(lam, "lam", allow_zero=True)
    return checks.guard((1 + lam * k) / (k + lam * k))


def gap_confidence_radius(
    scale: ArrayLike, confidence: ArrayLike = 0.95, *, noise: GapNoise = "laplace"
) -> jax.Array:
    """The ``t`` with ``P(eta - eta' <= t) = confidence`` for iid ``eta, eta'`` of scale ``scale``.

    Laplace (``noise="laplace"``, the default): solves the closed-form tail
    ``(2 + t/b)/4 * exp(-t/b) = 1 - confidence``
    (:func:`~dpjax._src.postprocess.laplace_difference.laplace_difference_quantile` with equal rates) to
    the precision of the working dtype (that of ``scale``, at least float32). Gumbel
    (``noise="gumbel"``): the difference is Logistic(b), ``t = b (log c - log(1 - c))``. Negative
    when ``confidence < 1/2``. ``scale`` (> 0) and ``confidence`` (in (0, 1)) may be traced,
    ``noise`` is static; the result is a scalar, NaN when a traced value is invalid.

    Example:
      >>> round(float(gap_confidence_radius(1.0, 0.95)), 4)
      3.2718
    """
    check_choice(noise, "noise", GAP_NOISES)
    checks = Checks()
    b = checks.positive(scale, "scale")
    confidence = checks.probability(confidence, "confidence", open_low=True, open_high=True)
    dtype = float_dtype(b)
    confidence = jnp.asarray(confidence, dtype)
    if noise == "gumbel":
        return checks.guard(jnp.asarray(b, dtype) * (jnp.log(confidence) - jnp.log1p(-confidence)))
    rate = 1 / jnp.asarray(b, dtype)
    p = jnp.minimum(confidence, 1 - confidence)  # exact for confidence >= 1/2
    x = laplace_difference_quantile(p, rate, rate)
    return checks.guard(jnp.where(confidence >= 0.5, x, -x))


def gap_lower_confidence_bound(
    gaps: ArrayLike, scale: ArrayLike, confidence: ArrayLike = 0.95, *, noise: GapNoise = "laplace"
) -> jax.Array:
    """Lower confidence bounds ``g_i - t`` on the true gaps ``q_{j_i} - q_{j_{i+1}}``.

    Each bound holds with probability ``confidence`` (marginally, per gap, under the unconditioned
    noise model of the module docstring); ``scale`` is the mechanism's noise scale,
    :func:`dpjax.selection.noisy_top_k_with_gap_scale`, and ``noise`` (static) its noise, as in
    :func:`gap_confidence_radius`. ``scale`` and ``confidence`` may be traced; the bounds are NaN
    where a traced value is invalid.

    Example:
      >>> import jax.numpy as jnp
      >>> lower = gap_lower_confidence_bound(jnp.array([12.0, 3.5]), scale=20.0)
    """
    checks = Checks()
    gaps = checks.array(gaps, "gaps", ndim=None, kind="float")
    return checks.guard(gaps - gap_confidence_radius(jnp.asarray(scale, gaps.dtype), confidence, noise=noise))
