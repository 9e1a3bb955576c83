"""The implementation behind :mod:`dpjax.additive` (its docstring states the mechanisms, their papers and
guarantees; this module's functions carry theirs)."""

from __future__ import annotations

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src import exact, noise
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import ZCDP, ApproxDP, PureDP
from dpjax._src.host_checks import (
    check_epsilon,
    check_exact_integers,
    check_int,
    check_positive,
    check_probability,
    check_rational,
    float_dtype,
    release_bound,
)
from dpjax._src.validation import Checks

__all__ = [
    "discrete_gaussian_approx_dp",
    "discrete_gaussian_delta",
    "discrete_gaussian_guarantee",
    "discrete_gaussian_mechanism",
    "discrete_gaussian_sigma",
    "discrete_laplace_guarantee",
    "discrete_laplace_mechanism",
    "gaussian_guarantee",
    "gaussian_mechanism",
    "gaussian_sigma_for_zcdp",
    "laplace_guarantee",
    "laplace_mechanism",
]


def laplace_mechanism(
    key: jax.Array, value: ArrayLike, epsilon: ArrayLike, *, sensitivity: ArrayLike = 1.0
) -> jax.Array:
    """Releases ``value + Lap(sensitivity/epsilon)`` elementwise.

    Guarantee: ``epsilon``-DP (see :func:`laplace_guarantee`) when the L1 sensitivity of ``value``
    (summed over all its entries) is at most ``sensitivity``.

    Args:
      key: a ``jax.random`` key.
      value: the exact statistic (any shape, finite).
      epsilon: privacy parameter, > 0 (may be traced).
      sensitivity: L1 sensitivity of ``value``, > 0 (may be traced).

    Returns:
      An array of ``value``'s shape, in a floating dtype (NaN where a traced input is invalid).

    Example:
      >>> import jax
      >>> release = laplace_mechanism(jax.random.key(0), 42.0, epsilon=1.0)
    """
    checks = Checks()
    value = checks.array(value, "value", ndim=None, allow_empty=True)
    epsilon = checks.epsilon(epsilon)
    sensitivity = checks.positive(sensitivity, "sensitivity")
    dtype = float_dtype(value)
    scale = jnp.asarray(sensitivity, dtype) / jnp.asarray(epsilon, dtype)
    return checks.guard(value + noise.laplace(key, value.shape, scale, dtype))


@elementwise("epsilon", "sensitivity")
def laplace_guarantee(epsilon: float, *, sensitivity: float = 1.0) -> PureDP:
    """The Laplace mechanism's guarantee: pure ``epsilon``-DP (Dwork et al. 2006, Thm 1).

    Takes the mechanism's privacy arguments. ``sensitivity`` is validated as the mechanism validates
    it, and cancels from the bound: the noise scale is ``sensitivity/epsilon``, so the release is
    ``epsilon``-DP for every stated value, provided the statistic's L1 sensitivity is at most it.
    ``dp_accounting``'s ``LaplaceDpEvent(1 / epsilon)`` (scale over sensitivity) is attached.
    """
    from dp_accounting import dp_event

    check_positive(sensitivity, "sensitivity")
    epsilon = check_epsilon(epsilon)
    return PureDP(epsilon, event=dp_event.LaplaceDpEvent(noise_multiplier=1 / epsilon))


def gaussian_mechanism(
    key: jax.Array, value: ArrayLike, sigma: ArrayLike, *, sensitivity: ArrayLike = 1.0
) -> jax.Array:
    """Releases ``value + N(0, sigma^2)`` elementwise.

    Guarantee: ``sensitivity^2/(2 sigma^2)``-zCDP (see :func:`gaussian_guarantee`) when the L2
    sensitivity of ``value`` is at most ``sensitivity``. ``sigma`` and ``sensitivity`` may be
    traced; an invalid traced value makes the output NaN.
    """
    checks = Checks()
    value = checks.array(value, "value", ndim=None, allow_empty=True)
    checks.positive(sensitivity, "sensitivity")
    sigma = checks.positive(sigma, "sigma")
    dtype = float_dtype(value)
    return checks.guard(value + noise.gaussian(key, value.shape, jnp.asarray(sigma, dtype), dtype))


@elementwise("sigma", "sensitivity")
def gaussian_guarantee(sigma: float, *, sensitivity: float = 1.0) -> ZCDP:
    """The Gaussian mechanism's guarantee: ``sensitivity^2/(2 sigma^2)``-zCDP (Bun and Steinke 2016,
    Prop. 1.6), with ``dp_accounting``'s ``GaussianDpEvent(sigma / sensitivity)`` attached."""
    from dp_accounting import dp_event

    sensitivity = check_positive(sensitivity, "sensitivity")
    sigma = check_positive(sigma, "sigma")
    event = dp_event.GaussianDpEvent(noise_multiplier=sigma / sensitivity)
    return ZCDP(sensitivity * sensitivity / (2 * sigma * sigma), event=event)  # 0, no OverflowError


def gaussian_sigma_for_zcdp(rho: float, *, sensitivity: float = 1.0) -> float:
    """The noise scale that makes the Gaussian mechanism exactly ``rho``-zCDP."""
    return check_positive(sensitivity, "sensitivity") / (2 * check_positive(rho, "rho")) ** 0.5


# ------------------------------------------------------------------------- exact mechanisms on integers


def add_integer_noise(value, noise_sample) -> jax.Array:
    """``value + noise`` for data in ``[-B, B]`` (:func:`dpjax.validation.check_exact_integers`), with
    the noise clipped so that the release saturates at ``+-B`` (a post-processing) and never wraps."""
    bound = release_bound(value.dtype)
    return value + jnp.clip(noise_sample, -bound - value, bound - value)


def discrete_laplace_mechanism(
    key: jax.Array, value: ArrayLike, epsilon: exact.Rational, *, sensitivity: exact.Rational = 1
) -> jax.Array:
    """Releases ``value + Z`` elementwise, Z exact discrete Laplace with scale ``sensitivity/epsilon``.

    The geometric mechanism (Ghosh, Roughgarden and Sundararajan 2009), sampled exactly with integer
    arithmetic (Canonne, Kamath and Steinke 2020, Algorithm 2; :func:`dpjax.noise.discrete_laplace`):
    ``P(Z = z) ∝ exp(-epsilon |z| / sensitivity)``. Guarantee: pure ``epsilon``-DP
    (:func:`discrete_laplace_guarantee`) when the integer query ``value`` has L1 sensitivity at most
    ``sensitivity`` under the chosen neighboring relation (e.g. a histogram under add/remove of one
    record: sensitivity 1). No floating-point value is involved, so the release has no
    floating-point side channel (Mironov 2012).

    ``epsilon`` and ``sensitivity`` are host-side exact rationals (numbers, ``Fraction`` or
    ``(numerator, denominator)`` pairs; a float is its exact binary value): the noise law depends
    on them exactly. When ``sensitivity/epsilon`` has too many digits for the sampler, the scale is
    rounded up to the nearest ``t/2^j`` it accepts (more noise: still ``epsilon``-DP).
    Data of any integer dtype is taken exactly (:func:`dpjax.validation.check_exact_integers`): it
    must lie in ``[-B, B]``, ``B = (max - 1)/2`` of the dtype computed in (int32, or int64 under
    ``jax_enable_x64`` for 64-bit and uint32 data), checked eagerly and exactly (refused otherwise,
    never truncated or wrapped); traced data is clamped. A release never wraps: where
    ``value + noise`` would leave ``[-B, B]`` it saturates at ``-B`` or ``B`` (post-processing).

    Args:
      key: a ``jax.random`` key (:func:`dpjax.noise.release_key` for a release).
      value: the exact integer statistic (an integer array of any shape and integer dtype).
      epsilon: privacy parameter > 0 (host-side).
      sensitivity: L1 sensitivity > 0 (host-side), an integer for integer queries.

    Returns:
      An int32 or int64 array of ``value``'s shape (the dtype computed in).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> counts = jnp.array([12, 0, 7], jnp.int32)
      >>> release = discrete_laplace_mechanism(jax.random.key(0), counts, epsilon=1)
    """
    value = check_exact_integers(value, "value")
    scale = check_rational(sensitivity, "sensitivity") / check_rational(epsilon, "epsilon")
    scale = exact.scale_at_least(scale, exact.word_type())
    return add_integer_noise(value, noise.discrete_laplace(key, scale, value.shape, value.dtype))


def discrete_laplace_guarantee(
    epsilon: exact.Rational, *, sensitivity: exact.Rational = 1
) -> PureDP:
    """The discrete Laplace mechanism's guarantee: pure ``epsilon``-DP (Ghosh et al. 2009; CKS20
    Sec. 2.1: the privacy loss of ``value + Z`` is at most ``epsilon |value - value'| / sensitivity``).
    A scale the mechanism rounds up makes the realized epsilon smaller than the stated one."""
    check_rational(sensitivity, "sensitivity")
    return PureDP(float(check_rational(epsilon, "epsilon")))


def discrete_gaussian_mechanism(
    key: jax.Array, value: ArrayLike, sigma: exact.Rational, *, sensitivity: exact.Rational = 1
) -> jax.Array:
    """Releases ``value + Z`` elementwise, Z exact discrete Gaussian ``N_Z(0, sigma^2)`` per entry.

    Canonne, Kamath and Steinke (2020), Algorithm 3 (:func:`dpjax.noise.discrete_gaussian`), with
    integer arithmetic only. Guarantee: ``sensitivity^2 / (2 sigma^2)``-zCDP (CKS20 Thm. 4, and
    Thm. 14 for vectors of independent coordinates) when the integer query ``value`` has L2
    sensitivity at most ``sensitivity`` (:func:`discrete_gaussian_guarantee`); for a query whose
    neighbors differ in one coordinate (a count, a histogram under add/remove) the exact
    (epsilon, delta) curve of CKS20 Thm. 7 is :func:`discrete_gaussian_approx_dp`, tighter than the
    zCDP conversion.

    ``sigma`` is a host-side exact rational (number, ``Fraction`` or pair); when it has too many
    digits for the sampler (:data:`dpjax.exact_noise.LIMITS`; a float is its exact binary value, so
    ``3.7`` does) it is rounded **up** to the nearest rational the sampler accepts
    (:func:`discrete_gaussian_sigma`: more noise), and :func:`discrete_gaussian_guarantee` states the
    guarantee of the rounded sigma. ``sensitivity`` only enters the guarantee. Data and releases as
    :func:`discrete_laplace_mechanism`: any integer dtype taken exactly, ``[-B, B]`` checked eagerly
    (clamped when traced), releases saturating at ``+-B``, never wrapping.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> release = discrete_gaussian_mechanism(jax.random.key(0), jnp.array([5, 9]), sigma=3)
    """
    value = check_exact_integers(value, "value")
    check_rational(sensitivity, "sensitivity")
    sigma = exact.sigma_at_least(check_rational(sigma, "sigma"), exact.word_type())
    return add_integer_noise(value, noise.discrete_gaussian(key, sigma, value.shape, value.dtype))


def discrete_gaussian_sigma(sigma: exact.Rational) -> Fraction:
    """The sigma :func:`discrete_gaussian_mechanism` draws with at most, as an exact ``Fraction``:
    ``sigma`` itself when the sampler takes it, else the smallest rational above it that the 64-bit
    sampler (``jax_enable_x64``) takes. Without ``jax_enable_x64`` the mechanism's sigma is at least
    this one (the 32-bit sampler accepts fewer rationals), so a guarantee computed from it holds in
    both modes. A float ``3.7`` (exactly ``3.70000000000000017...``) becomes ``1987/537``, 5e-5 more.

    Example:
      >>> discrete_gaussian_sigma(3)
      Fraction(3, 1)
    """
    return exact.sigma_at_least(check_rational(sigma, "sigma"), np.uint64)


def discrete_gaussian_guarantee(
    sigma: exact.Rational, *, sensitivity: exact.Rational = 1
) -> ZCDP:
    """``sensitivity^2 / (2 sigma^2)``-zCDP (Canonne, Kamath and Steinke 2020, Thm. 4 and Thm. 14), for
    the sigma the mechanism realizes (:func:`discrete_gaussian_sigma`: ``sigma`` rounded up when the
    sampler cannot take it)."""
    sigma = discrete_gaussian_sigma(sigma)
    sensitivity = check_rational(sensitivity, "sensitivity")
    return ZCDP(float(sensitivity**2 / (2 * sigma**2)))


def discrete_gaussian_delta(sigma: exact.Rational, epsilon: float, *, sensitivity: int = 1) -> float:
    """The exact delta at ``epsilon`` of one discrete Gaussian release (CKS20 Thm. 7):

        delta = P[Y > epsilon sigma^2 / D - D/2] - e^epsilon P[Y > epsilon sigma^2 / D + D/2],

    Y ~ N_Z(0, sigma^2), D the integer sensitivity of a query whose neighbors differ in one
    coordinate. The tails are summed in float64 out to 40 sigma beyond the threshold (host-side
    accounting; the neglected mass is below 1e-300). ``sigma`` is the realized one
    (:func:`discrete_gaussian_sigma`)."""
    sigma = discrete_gaussian_sigma(sigma)
    d = check_int(sensitivity, "sensitivity", minimum=1)
    epsilon = check_epsilon(epsilon, allow_zero=True)
    s = float(sigma)
    reach = math.ceil(40 * s) + 2 * d + math.ceil(epsilon * s * s / d) + 2
    z = np.arange(-reach, reach + 1)
    log_w = -(z.astype(np.float64) ** 2) / (2 * s * s)
    norm = np.exp(log_w).sum()  # the sum over all integers of exp(-y^2 / (2 sigma^2))

    def tail(threshold):  # P[Y > threshold]
        return np.exp(log_w[z > threshold]).sum() / norm

    base = epsilon * s * s / d
    return float(max(0.0, tail(base - d / 2) - math.exp(epsilon) * tail(base + d / 2)))


def discrete_gaussian_approx_dp(
    sigma: exact.Rational, delta: float, *, sensitivity: int = 1
) -> ApproxDP:
    """The smallest epsilon with ``discrete_gaussian_delta(sigma, epsilon) <= delta`` (CKS20 Thm. 7),
    for one release of a query whose neighbors differ in one coordinate by at most ``sensitivity``
    (bisection to 1e-9; never above the zCDP conversion of :func:`discrete_gaussian_guarantee`)."""
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    zcdp = discrete_gaussian_guarantee(sigma, sensitivity=sensitivity).to_approx_dp(delta)
    lo, hi = 0.0, zcdp.epsilon
    if discrete_gaussian_delta(sigma, hi, sensitivity=sensitivity) > delta:
        return zcdp
    while hi - lo > 1e-9:
        mid = (lo + hi) / 2
        if discrete_gaussian_delta(sigma, mid, sensitivity=sensitivity) <= delta:
            hi = mid
        else:
            lo = mid
    return ApproxDP(hi, delta)
