"""AppIndExp: IndExp with the per-quantile budget of the optimal (epsilon, delta) composition.

Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1: ``m`` independent single-quantile exponential
mechanisms, each with ``epsilon_0`` chosen as the largest value whose ``m``-fold composition is
``(epsilon, delta)``-DP by Dong, Durfee, Rogers (ICML 2020), Thm. 3: an exponential mechanism with
parameter ``epsilon_0`` is ``epsilon_0``-bounded-range, and ``k`` nonadaptive ``epsilon_0``-BR
mechanisms are ``(epsilon, delta_k(epsilon_0; epsilon))``-DP with

    delta_k = max_l sum_{i=0}^{k} C(k, i) p^{k-i} (1 - p)^i max(e^{k t_l - i eps_0} - e^epsilon, 0),
    p = (e^{-t} - e^{-eps_0}) / (1 - e^{-eps_0}),  t_l = clip((epsilon + (l+1) eps_0)/(k+1), 0, eps_0).

The composition theorem lives in :mod:`dpjax.accounting.bounded_range`; the mechanism computes
``epsilon_0`` in the graph there (:func:`~dpjax.accounting.bounded_range.composition_epsilon`), so
epsilon and delta may be traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.accounting import ApproxDP, Neighbors
from dpjax.accounting.bounded_range import composition_epsilon
from dpjax.accounting.elementwise import elementwise
from dpjax.quantiles.exp_mech import independent_releases
from dpjax.quantiles.intervals import check_inputs
from dpjax.validation import Checks, check_epsilon, check_probability, float_dtype


def app_ind_exp(
    key, x, qs, epsilon: float, *, bounds, delta: float = 1e-6, neighbors: Neighbors | str = Neighbors.SWAP
) -> jax.Array:
    """AppIndExp (Gillenwater, Joseph, Kulesza 2021, Sec. 5.1): IndExp with the DDR20 budget.

    ``m`` independent single-quantile exponential mechanisms (Smith 2011, Alg. 2; see
    :func:`dpjax.quantiles.emq`), each with the largest ``epsilon_0`` whose ``m``-fold composition
    is ``(epsilon, delta)``-DP (:func:`composition_epsilon`, computed in the graph in the working
    dtype, conservatively; within ``~1e-4`` relative of
    :func:`~dpjax.accounting.bounded_range.optimal_composition_epsilon`),
    sorted. Neighbouring relation: ``"swap"`` (default) or ``"add_remove"``. Guarantee:
    ``(epsilon, delta)``-DP (:func:`app_ind_exp_guarantee`).

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty; ``n`` static).
      qs: ``m`` strictly increasing levels in [0, 1] (may be traced; ``m`` is static).
      epsilon: total privacy parameter, > 0 (may be traced).
      bounds: ``(a, b)`` with ``a < b`` (may be traced).
      delta: the approximate-DP delta in [0, 1] (may be traced; the paper uses 1e-6 for n = 1000).
      neighbors: a :class:`~dpjax.accounting.Neighbors` or its value, "swap" or "add_remove" (static).

    Returns:
      Shape ``(m,)``, sorted, in ``[a, b]``; all NaN when a traced input is invalid or traced data
      contain NaN or infinities.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000,))
      >>> deciles = app_ind_exp(jax.random.key(0), x, jnp.linspace(0.1, 0.9, 9), 1.0, bounds=(-10, 10))
    """
    checks = Checks()
    x, levels, epsilon, lower, upper = check_inputs(checks, x, qs, epsilon, bounds)
    delta = checks.probability(delta, "delta")
    neighbors = Neighbors.check(neighbors)
    dtype = float_dtype(x)
    epsilon_0 = composition_epsilon(epsilon, delta, levels.shape[0], dtype)
    return checks.guard(
        independent_releases(key, x, jnp.asarray(levels, dtype), epsilon_0, lower, upper, neighbors)
    )


@elementwise("epsilon", "delta")
def app_ind_exp_guarantee(
    epsilon: float, *, delta: float = 1e-6, neighbors: Neighbors | str = Neighbors.SWAP
) -> ApproxDP:
    """AppIndExp's guarantee: ``(epsilon, delta)``-DP under ``neighbors`` (``m`` EMQ releases at the
    per-release epsilon of the optimal composition theorem, :func:`optimal_composition_epsilon`)."""
    Neighbors.check(neighbors)
    return ApproxDP(check_epsilon(epsilon), check_probability(delta, "delta"))


__all__ = ["app_ind_exp", "app_ind_exp_guarantee"]
