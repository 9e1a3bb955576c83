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

from dpjax.accounting import ApproxDP, Neighbors
from dpjax.accounting.bounded_range import composition_epsilon
from dpjax.accounting.elementwise import elementwise
from dpjax.quantiles.exp_mech import independent_quantiles
from dpjax.validation import Checks, check_epsilon, check_probability


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
      key, x, qs, epsilon, bounds, neighbors: as :func:`~dpjax.quantiles.ind_exp` (``epsilon`` is the
        total, may be traced).
      delta: the approximate-DP delta in [0, 1] (may be traced; the paper uses 1e-6 for n = 1000).

    Returns:
      As :func:`~dpjax.quantiles.ind_exp`: shape ``(m,)``, sorted, in ``[a, b]``; NaN on invalid
      traced input.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000,))
      >>> deciles = app_ind_exp(jax.random.key(0), x, jnp.linspace(0.1, 0.9, 9), 1.0, bounds=(-10, 10))
    """
    checks = Checks()
    delta = checks.probability(delta, "delta")

    def per_level(epsilon, m: int, dtype):
        return composition_epsilon(epsilon, delta, m, dtype)

    return independent_quantiles(checks, key, x, qs, epsilon, bounds, neighbors, per_level)


@elementwise("epsilon", "delta")
def app_ind_exp_guarantee(
    epsilon: float, *, delta: float = 1e-6, neighbors: Neighbors | str = Neighbors.SWAP
) -> ApproxDP:
    """AppIndExp's guarantee: ``(epsilon, delta)``-DP under ``neighbors`` (``m`` EMQ releases at the
    per-release epsilon of the optimal composition theorem, :func:`optimal_composition_epsilon`)."""
    Neighbors.check(neighbors)
    return ApproxDP(check_epsilon(epsilon), check_probability(delta, "delta"))


__all__ = ["app_ind_exp", "app_ind_exp_guarantee"]
