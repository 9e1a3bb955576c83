"""AppIndExp: IndExp with the per-quantile budget of the optimal (epsilon, delta) composition.

Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1: ``m`` independent single-quantile exponential
mechanisms, each with ``epsilon_0`` chosen as the largest value whose ``m``-fold composition is
``(epsilon, delta)``-DP by Dong, Durfee, Rogers (ICML 2020), Thm. 3: an exponential mechanism with
parameter ``epsilon_0`` is ``epsilon_0``-bounded-range, and ``k`` nonadaptive ``epsilon_0``-BR
mechanisms are ``(epsilon, delta_k(epsilon_0; epsilon))``-DP with

    delta_k = max_l sum_{i=0}^{k} C(k, i) p^{k-i} (1 - p)^i max(e^{k t_l - i eps_0} - e^epsilon, 0),
    p = (e^{-t} - e^{-eps_0}) / (1 - e^{-eps_0}),  t_l = clip((epsilon + (l+1) eps_0)/(k+1), 0, eps_0).

The authors' code searches a grid of step 0.01; :func:`optimal_composition_epsilon` bisects
instead (``delta_k`` is nondecreasing in ``epsilon_0``) and keeps the grid search for parity.
Everything is in log space (``lgamma`` binomials), so large ``k`` is fine.
"""

from __future__ import annotations

import math

import jax
import numpy as np

from dpjax.accounting import ApproxDP
from dpjax.quantiles.exp_mech import independent_releases
from dpjax.quantiles.intervals import check_bounds, check_data, check_neighbors, check_quantiles
from dpjax.validation import check_epsilon, check_int, check_probability


def composition_delta(epsilon_0: float, epsilon: float, k: int) -> float:
    """``delta_k(epsilon_0; epsilon)`` of ``k`` nonadaptive ``epsilon_0``-BR mechanisms (DDR20 Thm. 3)."""
    if epsilon_0 <= 0:
        return 0.0
    i = np.arange(k + 1, dtype=np.float64)
    log_binom = np.array(
        [math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1) for j in range(k + 1)]
    )
    worst = 0.0
    for ell in range(k + 1):
        t = min(max((epsilon + (ell + 1) * epsilon_0) / (k + 1), 0.0), epsilon_0)
        p = (math.exp(-t) - math.exp(-epsilon_0)) / (-math.expm1(-epsilon_0))
        excess = k * t - i * epsilon_0 - epsilon
        keep = excess > 0
        if not np.any(keep):
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            log_p, log_q = np.log(max(p, 0.0)), np.log(max(1.0 - p, 0.0))
            log_terms = (
                log_binom + np.where(k - i > 0, (k - i) * log_p, 0.0) + np.where(i > 0, i * log_q, 0.0)
            )
        log_terms = log_terms[keep] + epsilon + np.log(np.expm1(excess[keep]))
        top = np.max(log_terms)
        if np.isfinite(top):
            worst = max(worst, float(np.exp(top) * np.sum(np.exp(log_terms - top))))
    return worst


def optimal_composition_epsilon(epsilon: float, delta: float, k: int, *, grid: bool = False) -> float:
    """The largest ``epsilon_0`` such that ``k`` ``epsilon_0``-BR mechanisms are ``(epsilon, delta)``-DP.

    Args:
      epsilon, delta: the target guarantee.
      k: number of composed mechanisms, >= 1.
      grid: reproduce the authors' grid search (``epsilon/k - 0.01`` upward in steps of 0.01)
        instead of bisection (to 1e-9).
    """
    epsilon = check_epsilon(epsilon)
    delta = check_probability(delta, "delta")
    k = check_int(k, "k", minimum=1)
    if grid:
        best = 0.0
        for candidate in np.arange(epsilon / k - 0.01, epsilon, 0.01):
            if composition_delta(float(candidate), epsilon, k) > delta:
                return best
            best = float(candidate)
        return best
    low, high = epsilon / k, epsilon  # basic composition is always valid: delta_k(epsilon/k) = 0
    if composition_delta(high, epsilon, k) <= delta:
        return high
    while high - low > 1e-9:
        mid = 0.5 * (low + high)
        low, high = (mid, high) if composition_delta(mid, epsilon, k) <= delta else (low, mid)
    return low


def app_ind_exp(
    key, x, qs, epsilon: float, *, bounds, delta: float = 1e-6, neighbors: str = "swap"
) -> jax.Array:
    """AppIndExp (Gillenwater, Joseph, Kulesza 2021, Sec. 5.1): IndExp with the DDR20 budget.

    ``m`` independent single-quantile exponential mechanisms (Smith 2011, Alg. 2; see
    :func:`dpjax.quantiles.emq`), each with ``epsilon_0 = optimal_composition_epsilon(epsilon,
    delta, m)``, sorted. Neighbouring relation: ``"swap"`` (default) or ``"add_remove"``.
    Guarantee: ``(epsilon, delta)``-DP (:func:`app_ind_exp_guarantee`).

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty).
      qs: ``m`` strictly increasing levels in [0, 1].
      epsilon: total privacy parameter, > 0.
      bounds: ``(a, b)`` with ``a < b``.
      delta: the approximate-DP delta (the paper uses 1e-6 for n = 1000).
      neighbors: ``"swap"`` or ``"add_remove"``.

    Returns:
      Shape ``(m,)``, sorted, in ``[a, b]``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000,))
      >>> deciles = app_ind_exp(jax.random.key(0), x, jnp.linspace(0.1, 0.9, 9), 1.0, bounds=(-10, 10))
    """
    bounds = check_bounds(bounds)
    qs = check_quantiles(qs)
    epsilon = check_epsilon(epsilon)
    neighbors = check_neighbors(neighbors)
    epsilon_0 = optimal_composition_epsilon(epsilon, delta, qs.size)
    x = check_data(x)
    return independent_releases(key, x, qs, epsilon_0, bounds, neighbors)


def app_ind_exp_guarantee(epsilon: float, delta: float = 1e-6) -> ApproxDP:
    """AppIndExp's guarantee: ``(epsilon, delta)``-DP."""
    return ApproxDP(check_epsilon(epsilon), check_probability(delta, "delta"))


__all__ = ["app_ind_exp", "app_ind_exp_guarantee", "optimal_composition_epsilon"]
