"""The RDP route of :meth:`dpjax.accounting.Accountant.epsilon`: every spend as a Renyi-DP curve.

Renyi DP (Mironov 2017, Def. 4) composes by adding curves order by order (Prop. 1) and converts to
(epsilon, delta)-DP by dp_accounting's conversion (``rdp_privacy_accountant.compute_epsilon``:
Canonne, Kamath and Steinke 2020, Prop. 12 / Asoodeh et al. 2021, the best of several). Each spend
enters with the tightest curve this module can prove for it, at every order the least of:

* its own ``dp_accounting`` event where the RDP accountant supports it (Laplace: Mironov 2017,
  Prop. 6, exact; Gaussian, Poisson-subsampled Gaussian: Mironov, Talwar and Zhang 2019, exact);
* ``alpha rho`` for a rho-zCDP bound (Bun and Steinke 2016, Def. 1.1), attached or implied;
* for an epsilon-range-bounded spend the exact RDP of the class (:func:`range_bounded_rdp`), which
  is at most ``alpha epsilon^2 / 8`` (Cesar and Rogers 2021, Lemma 3.4) and at most ``epsilon``;
* for a pure epsilon-DP spend the RDP of randomized response (:func:`pure_dp_rdp`), the worst
  epsilon-DP pair (Kairouz, Oh and Viswanath 2015, Thm. 2.1: it dominates every epsilon-DP pair,
  and Renyi divergences do not grow under post-processing).

(epsilon, delta)-DP spends have no RDP curve: they add by basic composition to the RDP route's
epsilon, which then gets the delta they leave.
"""

from __future__ import annotations

import math

import numpy as np

from dpjax._src.accounting.guarantees import ApproxDP, Guarantee, PureDP, RangeBounded

__all__ = [
    "pure_dp_rdp",
    "range_bounded_rdp",
    "rdp_epsilon",
]

_GRID = 4096  # cells of the range-bounded maximization (each cell bounded from above, see below)


def _orders() -> np.ndarray:
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    return np.asarray(rdp.DEFAULT_RDP_ORDERS, dtype=np.float64)


def range_bounded_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """An upper bound, tight to ``O(alpha epsilon / 4096)``, on the order-``alpha`` Renyi divergence of
    every epsilon-range-bounded mechanism.

    A range-bounded pair has privacy loss in ``[t - epsilon, t]`` for some ``t`` in ``[0, epsilon]``
    (Durfee and Rogers 2019, Def. 3.1). Given ``t``, ``E_Q[e^L] = 1`` and ``y -> y^alpha`` is convex,
    so ``E_Q[e^{alpha L}]`` is largest for the two-point loss, ``t`` with ``Q``-probability
    ``q(t) = (e^{-t} - e^{-epsilon}) / (1 - e^{-epsilon})`` and ``t - epsilon`` otherwise (the pair of
    Dong, Durfee and Rogers 2020, Thm. 3): ``E = e^{alpha t} (e^{-alpha epsilon} + q(t) (1 -
    e^{-alpha epsilon}))``. The maximum over ``t`` is bounded cell by cell on a grid (``q``
    decreases and ``e^{alpha t}`` increases in ``t``), so the result is a valid bound. Its
    Hoeffding bound is ``alpha epsilon^2 / 8`` (Cesar and Rogers 2021, Lemma 3.4); the result is
    the least of the three.
    """
    orders = np.asarray(orders, dtype=np.float64)
    if epsilon == 0:
        return np.zeros_like(orders)
    t = np.linspace(0.0, epsilon, _GRID + 1)
    q = (np.exp(-t[:-1]) - math.exp(-epsilon)) / -math.expm1(-epsilon)  # at the cell's left end
    a = orders[:, None]
    tail = np.exp(-a * epsilon)
    log_moment = a * t[None, 1:] + np.log(tail + q[None, :] * (1 - tail))  # at the right end
    grid = np.max(log_moment, axis=1) / (orders - 1)
    return np.minimum(np.minimum(grid, orders * epsilon * epsilon / 8), epsilon)


def pure_dp_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """The order-``alpha`` Renyi divergence of randomized response with log-odds ``epsilon``, the
    largest of any epsilon-DP pair: ``log(p^a (1-p)^(1-a) + (1-p)^a p^(1-a)) / (a - 1)``,
    ``p = e^epsilon / (1 + e^epsilon)``; at most ``epsilon`` and ``alpha epsilon^2 / 2``."""
    orders = np.asarray(orders, dtype=np.float64)
    log_p = -np.logaddexp(0.0, -epsilon)
    log_1p = -np.logaddexp(0.0, epsilon)
    terms = np.logaddexp(orders * log_p + (1 - orders) * log_1p, orders * log_1p + (1 - orders) * log_p)
    curve = terms / (orders - 1)
    return np.minimum(np.minimum(curve, epsilon), orders * epsilon * epsilon / 2)


def _curve(guarantee: Guarantee, orders: np.ndarray) -> np.ndarray:
    """The guarantee's own RDP curve from its range, pure or zCDP bound (the least at each order)."""
    if isinstance(guarantee, RangeBounded):
        curve = range_bounded_rdp(guarantee.epsilon, orders)
    elif isinstance(guarantee, PureDP):
        curve = pure_dp_rdp(guarantee.epsilon, orders)
    else:
        curve = np.full_like(orders, np.inf)
    try:
        rho = guarantee.to_zcdp().rho
    except TypeError:
        return curve
    return np.minimum(curve, orders * rho)


def rdp_epsilon(guarantees: list[Guarantee], delta: float) -> float:
    """Epsilon at ``delta`` of the composition by the RDP route (module docstring); ``inf`` when the
    (epsilon, delta) spends use up ``delta`` or a spend has no RDP curve."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    orders = _orders()
    supports = rdp.RdpAccountant(list(orders)).supports
    total = np.zeros_like(orders)
    eps_approx, delta_approx = 0.0, 0.0
    distinct: list[tuple[Guarantee, object]] = []
    counts: list[int] = []
    for g in guarantees:
        if isinstance(g, ApproxDP):
            eps_approx, delta_approx = eps_approx + g.epsilon, delta_approx + g.delta
            continue
        entry = (g, getattr(g, "event", None))
        if entry in distinct:
            counts[distinct.index(entry)] += 1
        else:
            distinct.append(entry)
            counts.append(1)
    for (g, event), count in zip(distinct, counts, strict=True):
        curve = _curve(g, orders)
        if event is not None and supports(event):
            curve = np.minimum(curve, rdp.RdpAccountant(list(orders)).compose(event).rdp)
        total = total + count * curve
    left = delta - delta_approx
    if left <= 0 or not np.any(np.isfinite(total)):
        return math.inf
    finite = np.isfinite(total)
    epsilon, _ = rdp.compute_epsilon(orders[finite], total[finite], left)
    return float(epsilon) + eps_approx
