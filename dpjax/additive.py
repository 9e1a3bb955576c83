"""Additive noise mechanisms: the Laplace and Gaussian mechanisms.

* Laplace mechanism (Dwork, McSherry, Nissim, Smith 2006): ``value + Lap(sensitivity/epsilon)`` is
  epsilon-DP when ``value`` has L1 sensitivity ``sensitivity`` under the chosen neighbouring relation.
* Gaussian mechanism (Bun and Steinke 2016, Prop. 1.6): ``value + N(0, sigma^2)`` is
  ``sensitivity^2 / (2 sigma^2)``-zCDP when ``value`` has L2 sensitivity ``sensitivity``.

They are the reference points of the library (known exact privacy loss, used by the audit tests)
and the last step of composite mechanisms such as the DP sum.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax import noise
from dpjax.accounting import ZCDP, PureDP
from dpjax.accounting.elementwise import elementwise
from dpjax.validation import Checks, check_epsilon, check_positive, float_dtype


def laplace_mechanism(key, value, epsilon: float, *, sensitivity: float = 1.0) -> jax.Array:
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


def gaussian_mechanism(key, value, sigma: float, *, sensitivity: float = 1.0) -> jax.Array:
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
    return ZCDP(sensitivity**2 / (2 * sigma**2), event=event)


def gaussian_sigma_for_zcdp(rho: float, *, sensitivity: float = 1.0) -> float:
    """The noise scale that makes the Gaussian mechanism exactly ``rho``-zCDP."""
    return check_positive(sensitivity, "sensitivity") / (2 * check_positive(rho, "rho")) ** 0.5
