"""Pure differential privacy as Gaussian differential privacy (Dong, Roth, Su 2022): the conversion
that the quantile clip's accounting (:meth:`dpjax.optax.QuantileClip.accounting_steps`) and the run's
accounting (:mod:`dpjax._src.optax.accounting`) share. Host-side."""

from __future__ import annotations

import math
from statistics import NormalDist

from dpjax._src.host_checks import check_epsilon

__all__ = [
    "pure_dp_to_gdp",
]


def pure_dp_to_gdp(epsilon: float) -> float:
    """The smallest mu such that every epsilon-DP mechanism is mu-GDP: ``2 Phi^-1(e^eps/(1+e^eps))``.

    An epsilon-DP mechanism's trade-off curve is at least ``f_eps(a) = max(0, 1 - e^eps a,
    e^-eps (1 - a))`` (Kairouz, Oh, Viswanath 2015; Dong, Roth, Su 2022, §2.3). The Gaussian curve
    ``G_mu(a) = Phi(Phi^-1(1 - a) - mu)`` is convex, so it lies below ``f_eps``'s two chords once it
    passes through their common point ``a = 1/(1 + e^eps)``, which fixes mu as above. Host-side.

    Example:
      >>> round(pure_dp_to_gdp(1.0), 4)
      1.232
    """
    epsilon = check_epsilon(epsilon)
    return -2.0 * NormalDist().inv_cdf(1.0 / (1.0 + math.exp(epsilon)))
