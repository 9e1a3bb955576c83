"""Composition of ``k`` nonadaptive bounded-range mechanisms (Dong, Durfee, Rogers, ICML 2020, Thm. 3).

An exponential mechanism with parameter ``epsilon_0`` is ``epsilon_0``-bounded-range, and ``k``
nonadaptive ``epsilon_0``-BR mechanisms are ``(epsilon, delta_k(epsilon_0; epsilon))``-DP with

    delta_k = max_l sum_{i=0}^{k} C(k, i) p^{k-i} (1 - p)^i max(e^{k t_l - i eps_0} - e^epsilon, 0),
    p = (e^{-t} - e^{-eps_0}) / (1 - e^{-eps_0}),  t_l = clip((epsilon + (l+1) eps_0)/(k+1), 0, eps_0).

:func:`optimal_composition_epsilon` inverts it on the host (the largest ``epsilon_0`` for a target
``(epsilon, delta)``); :func:`composition_epsilon` does so in the graph, so epsilon and delta may be
traced (used by :func:`dpjax.quantiles.app_ind_exp`). Gillenwater, Joseph and Kulesza's code (ICML
2021) searches a grid of step 0.01; the bisection here (``delta_k`` is nondecreasing in
``epsilon_0``) is :func:`dpjax._src.numerics.bisect`, and the grid search is kept for parity. Everything is
in log space (``lgamma`` binomials), so large ``k`` is fine.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike, DTypeLike

from dpjax._src.host_checks import check_epsilon, check_int, check_probability
from dpjax._src.numerics import bisect, resolution_steps

__all__ = [
    "composition_delta",
    "composition_epsilon",
    "optimal_composition_epsilon",
]


def _log_composition_delta(epsilon_0, epsilon, k: int, xp=np):
    """``log delta_k(epsilon_0; epsilon)`` of ``k`` nonadaptive ``epsilon_0``-BR mechanisms (DDR20 Thm. 3).

    ``xp`` is the array module: ``numpy`` (host, float64) or ``jax.numpy`` (in the graph, in the
    dtype of ``epsilon_0``; the arguments may then be traced). ``p`` and ``1 - p`` are formed as
    ``e^{-t} (1 - e^{t - eps_0}) / (1 - e^{-eps_0})`` and ``(1 - e^{-t}) / (1 - e^{-eps_0})`` with
    ``expm1``, so their logs keep full relative precision; ``-inf`` when ``epsilon_0 <= 0``.
    """
    dtype = np.float64 if xp is np else jnp.result_type(epsilon_0)
    log_binom = xp.asarray(
        [math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1) for j in range(k + 1)], dtype
    )
    i = xp.asarray(np.arange(k + 1), dtype)
    ell = xp.asarray(np.arange(k + 1)[:, None], dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = xp.clip((epsilon + (ell + 1) * epsilon_0) / (k + 1), 0, epsilon_0)
        log_norm = xp.log(-xp.expm1(-epsilon_0))
        log_p = xp.log(-xp.expm1(t - epsilon_0)) - t - log_norm
        log_q = xp.log(-xp.expm1(-t)) - log_norm
        excess = k * t - i * epsilon_0 - epsilon
        terms = (
            log_binom
            + xp.where(i < k, (k - i) * log_p, 0)
            + xp.where(i > 0, i * log_q, 0)
            + epsilon
            + xp.log(xp.expm1(xp.maximum(excess, xp.finfo(dtype).tiny)))
        )
        terms = xp.where(excess > 0, terms, -xp.inf)
        top = xp.max(terms, axis=1, keepdims=True)
        top = xp.where(xp.isfinite(top), top, 0)
        per_ell = top[:, 0] + xp.log(xp.sum(xp.exp(terms - top), axis=1))
        return xp.where(epsilon_0 > 0, xp.max(per_ell), -xp.inf)


def composition_delta(epsilon_0: float, epsilon: float, k: int) -> float:
    """``delta_k(epsilon_0; epsilon)`` of ``k`` nonadaptive ``epsilon_0``-BR mechanisms (DDR20 Thm. 3)."""
    return float(np.exp(_log_composition_delta(float(epsilon_0), float(epsilon), k)))


def optimal_composition_epsilon(epsilon: float, delta: float, k: int, *, grid: bool = False) -> float:
    """The largest ``epsilon_0`` such that ``k`` ``epsilon_0``-BR mechanisms are ``(epsilon, delta)``-DP.

    Host-side, in float64 (:func:`dpjax.quantiles.app_ind_exp` computes its budget in the graph with
    :func:`composition_epsilon` instead).

    Args:
      epsilon, delta: the target guarantee.
      k: number of composed mechanisms, >= 1.
      grid: reproduce the authors' grid search (``epsilon/k - 0.01`` upward in steps of 0.01)
        instead of bisection (:func:`dpjax._src.numerics.bisect` to float64 resolution, rounded down).
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
    low, _ = bisect(
        lambda epsilon_0: composition_delta(epsilon_0, epsilon, k) <= delta, low, high,
        resolution_steps(np.float64),
    )
    return float(low)


@functools.partial(jax.jit, static_argnames=("k", "dtype"))
def composition_epsilon(epsilon: ArrayLike, delta: ArrayLike, k: int, dtype: DTypeLike) -> jax.Array:
    """The per-mechanism budget of :func:`dpjax.quantiles.app_ind_exp`, in the graph.

    ``epsilon`` and ``delta`` may be traced; ``k`` and ``dtype`` are static. The bisection of
    :func:`optimal_composition_epsilon` in ``dtype``, run to the dtype's resolution
    (:func:`dpjax._src.numerics.resolution_steps` halvings), with a conservative test: ``epsilon_0``
    is kept only if ``log delta_k(epsilon_0) <= log delta - 16 (k + 1) u (1 + |log delta| + epsilon)``,
    ``u`` the unit roundoff (``epsilon / k`` when ``delta = 0``). The margin is 16 times the largest
    rounding error of :func:`_log_composition_delta` measured against float64 (``k <= 600``, ``epsilon`` in
    ``[0.01, 30]``), so rounding never makes the composition exceed ``delta``; in float32 it costs a
    relative ``~1e-4`` of ``delta``.
    """
    epsilon, delta = jnp.asarray(epsilon, dtype), jnp.asarray(delta, dtype)
    log_delta = jnp.log(delta)
    unit = jnp.finfo(dtype).eps
    limit = log_delta - 16 * (k + 1) * unit * (1 + jnp.abs(log_delta) + epsilon)

    def valid(epsilon_0):
        return _log_composition_delta(epsilon_0, epsilon, k, jnp) <= limit

    # Basic composition is always valid: delta_k(epsilon / k) = 0 (and the only choice if delta = 0,
    # where the test above cannot allow for rounding).
    basic = epsilon / k
    low, _ = bisect(valid, basic, epsilon, resolution_steps(dtype))
    return jnp.where(delta > 0, jnp.where(valid(epsilon), epsilon, low), basic)
