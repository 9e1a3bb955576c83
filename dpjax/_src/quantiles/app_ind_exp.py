"""AppIndExp: IndExp with the per-quantile budget of the optimal (epsilon, delta) composition.

Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1: ``m`` independent single-quantile exponential
mechanisms, each with ``epsilon_0`` chosen as the largest value whose ``m``-fold composition is
``(epsilon, delta)``-DP by Dong, Durfee, Rogers (ICML 2020), Thm. 3: an exponential mechanism with
parameter ``epsilon_0`` is ``epsilon_0``-bounded-range, and ``k`` nonadaptive ``epsilon_0``-BR
mechanisms are ``(epsilon, delta_k(epsilon_0; epsilon))``-DP with

    delta_k = max_l sum_{i=0}^{k} C(k, i) p^{k-i} (1 - p)^i max(e^{k t_l - i eps_0} - e^epsilon, 0),
    p = (e^{-t} - e^{-eps_0}) / (1 - e^{-eps_0}),  t_l = clip((epsilon + (l+1) eps_0)/(k+1), 0, eps_0).

The composition theorem lives in :mod:`dpjax._src.accounting.bounded_range`; the mechanism computes
``epsilon_0`` in the graph there (:func:`~dpjax.accounting.composition_epsilon`), so
epsilon and delta may be traced.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.typing import ArrayLike

from dpjax._src.accounting.bounded_range import composition_epsilon, optimal_composition_epsilon
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import ApproxDP, RangeBounded
from dpjax._src.accounting.neighbors import Neighbors, NeighborsLike
from dpjax._src.host_checks import check_epsilon, check_probability
from dpjax._src.quantiles.exp_mech import QuantileMethod, independent_quantiles, number_of_levels
from dpjax._src.validation import Checks


def app_ind_exp(
    key: jax.Array,
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    epsilon: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    delta: ArrayLike = 1e-6,
    neighbors: NeighborsLike = Neighbors.SWAP,
    method: QuantileMethod = "auto",
) -> jax.Array:
    """AppIndExp (Gillenwater, Joseph, Kulesza 2021, Sec. 5.1): IndExp with the DDR20 budget.

    ``m`` independent single-quantile exponential mechanisms (Smith 2011, Alg. 2; see
    :func:`dpjax.quantiles.emq`), each with the largest ``epsilon_0`` whose ``m``-fold composition
    is ``(epsilon, delta)``-DP (:func:`composition_epsilon`, computed in the graph in the working
    dtype, conservatively; within ``~1e-4`` relative of
    :func:`~dpjax.accounting.optimal_composition_epsilon`),
    sorted. Neighboring relation: ``"swap"`` (default) or ``"add_remove"``. Guarantee:
    ``(epsilon, delta)``-DP and range-bounded (:func:`app_ind_exp_guarantee`).

    Args:
      key, x, qs, epsilon, bounds, neighbors, method: as :func:`~dpjax.quantiles.ind_exp`
        (``epsilon`` is the total, may be traced; ``method="auto"`` draws each gap by the literal
        Gumbel-max for one release and from a log-mass heap built once under ``vmap`` over keys).
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

    return independent_quantiles(checks, key, x, qs, epsilon, bounds, neighbors, per_level, method)


@elementwise("epsilon", "delta")
def app_ind_exp_guarantee(
    qs: ArrayLike | Sequence[float],
    epsilon: float,
    *,
    delta: float = 1e-6,
    neighbors: NeighborsLike = Neighbors.SWAP,
) -> RangeBounded:
    """AppIndExp's guarantee: ``m`` EMQ releases at ``epsilon_0``, each ``epsilon_0``-range-bounded.

    ``RangeBounded(m epsilon_0, rho=m epsilon_0^2/8, approx=ApproxDP(epsilon, delta))`` under
    ``neighbors``, with ``m = len(qs)`` and ``epsilon_0`` the per-release budget of the optimal
    composition theorem (:func:`~dpjax.accounting.optimal_composition_epsilon`; the
    mechanism's in-graph value never exceeds it): ``m epsilon_0``-range-bounded by composition
    (Durfee and Rogers 2019, Lemma 3.2), ``m epsilon_0^2/8``-zCDP (Cesar and Rogers 2021,
    Lemma 3.4), and ``(epsilon, delta)``-DP (Dong, Durfee and Rogers 2020, Thm. 3), each accountant
    using the bound that suits its budget. With ``delta = 0``, ``epsilon_0 = epsilon / m``.
    """
    Neighbors.check(neighbors)
    m = number_of_levels(qs)
    epsilon, delta = check_epsilon(epsilon), check_probability(delta, "delta")
    epsilon_0 = optimal_composition_epsilon(epsilon, delta, m) if delta > 0 else epsilon / m
    return RangeBounded(m * epsilon_0, rho=m * (epsilon_0 * epsilon_0) / 8, approx=ApproxDP(epsilon, delta))


__all__ = [
    "app_ind_exp",
    "app_ind_exp_guarantee",
]
