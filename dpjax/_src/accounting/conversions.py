"""Conversions between privacy notions.

zCDP to (epsilon, delta)-DP uses the conversion of Canonne, Kamath and Steinke, "The Discrete
Gaussian for Differential Privacy" (NeurIPS 2020), Proposition 12 / Corollary 13: rho-zCDP implies
(epsilon, delta)-DP for

    delta = inf_{alpha > 1} exp((alpha - 1)(alpha*rho - epsilon)) / alpha * (1 - 1/alpha)^(alpha - 1),

equivalently

    epsilon = inf_{alpha > 1} alpha rho + (log(1/delta) + (alpha-1) log(1-1/alpha) - log alpha)/(alpha-1).

It is never worse than Bun and Steinke's (2016, Prop. 1.3) epsilon = rho + 2 sqrt(rho log(1/delta)),
which is returned where the numerical minimum would be larger (it never is in exact arithmetic).
"""

from __future__ import annotations

import math

import numpy as np

from dpjax._src.host_checks import check_epsilon, check_probability

__all__ = [
    "bun_steinke_epsilon",
    "zcdp_delta",
    "zcdp_epsilon",
]

# Search alpha = 1 + exp(t) over a grid in t, then refine around the best grid point by Brent's
# bounded minimization to |t - t*| <= 1e-12 (the objectives are smooth in t, so the value is then
# within ~1e-24 relative of the minimum; the best grid point is kept if it is lower).
_T_GRID = np.linspace(-25.0, 25.0, 2001)
_T_TOLERANCE = 1e-12


def _minimize(objective, t_grid=_T_GRID) -> float:
    import scipy.optimize  # here, not at import: scipy.optimize is slow to load

    values = objective(t_grid)
    i = int(np.nanargmin(values))
    lo, hi = t_grid[max(i - 1, 0)], t_grid[min(i + 1, len(t_grid) - 1)]
    refined = scipy.optimize.minimize_scalar(
        lambda t: float(objective(np.array([t]))[0]), bounds=(lo, hi), method="bounded",
        options={"xatol": _T_TOLERANCE},
    )
    return float(np.nanmin([refined.fun, values[i]]))


def bun_steinke_epsilon(rho: float, delta: float) -> float:
    """epsilon = rho + 2 sqrt(rho log(1/delta)) (Bun and Steinke 2016, Prop. 1.3)."""
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP, by CKS20 Cor. 13."""
    rho = check_epsilon(rho, "rho", allow_zero=True)
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    if rho == 0:
        return 0.0
    log_inv_delta = math.log(1 / delta)

    def objective(t):
        alpha_m1 = np.exp(t)  # alpha - 1
        alpha = 1 + alpha_m1
        # (alpha - 1) * log(1 - 1/alpha) = alpha_m1 * (log(alpha_m1) - log(alpha))
        tail = alpha_m1 * (t - np.log1p(alpha_m1))
        return alpha * rho + (log_inv_delta + tail - np.log1p(alpha_m1)) / alpha_m1

    return max(0.0, min(_minimize(objective), bun_steinke_epsilon(rho, delta)))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest delta such that rho-zCDP implies (epsilon, delta)-DP, by CKS20 Prop. 12."""
    rho = check_epsilon(rho, "rho", allow_zero=True)
    epsilon = check_epsilon(epsilon, "epsilon", allow_zero=True)
    if rho == 0:
        return 0.0

    def objective(t):  # log delta(alpha)
        alpha_m1 = np.exp(t)
        alpha = 1 + alpha_m1
        return alpha_m1 * (alpha * rho - epsilon) - np.log(alpha) + alpha_m1 * (t - np.log1p(alpha_m1))

    return float(min(1.0, math.exp(_minimize(objective))))
