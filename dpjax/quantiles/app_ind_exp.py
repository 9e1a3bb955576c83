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
Everything is in log space (``lgamma`` binomials), so large ``k`` is fine. The mechanism computes
``epsilon_0`` in the graph (:func:`composition_epsilon`), so epsilon and delta may be traced.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax.accounting import ApproxDP, Neighbors
from dpjax.accounting.elementwise import elementwise
from dpjax.quantiles.exp_mech import independent_releases
from dpjax.quantiles.intervals import check_bounds, check_data, check_quantiles
from dpjax.validation import Checks, check_epsilon, check_int, check_probability, float_dtype


def log_composition_delta(epsilon_0, epsilon, k: int, xp=np):
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
    return float(np.exp(log_composition_delta(float(epsilon_0), float(epsilon), k)))


def optimal_composition_epsilon(epsilon: float, delta: float, k: int, *, grid: bool = False) -> float:
    """The largest ``epsilon_0`` such that ``k`` ``epsilon_0``-BR mechanisms are ``(epsilon, delta)``-DP.

    Host-side, in float64 (:func:`app_ind_exp` computes its budget in the graph with
    :func:`composition_epsilon` instead).

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


@functools.partial(jax.jit, static_argnames=("k", "dtype"))
def composition_epsilon(epsilon, delta, k: int, dtype) -> jax.Array:
    """The per-mechanism budget of :func:`app_ind_exp`, in the graph (``epsilon``, ``delta`` may be traced).

    The bisection of :func:`optimal_composition_epsilon` in ``dtype``, run to the dtype's
    resolution (a static number of halvings), with a conservative test: ``epsilon_0`` is kept only
    if ``log delta_k(epsilon_0) <= log delta - 16 (k + 1) u (1 + |log delta| + epsilon)``, ``u`` the
    unit roundoff (``epsilon / k`` when ``delta = 0``). The margin is 16 times the largest rounding error of
    :func:`log_composition_delta` measured against float64 (``k <= 600``, ``epsilon`` in
    ``[0.01, 30]``), so rounding never makes the composition exceed ``delta``; in float32 it costs a
    relative ``~1e-4`` of ``delta``.
    """
    epsilon, delta = jnp.asarray(epsilon, dtype), jnp.asarray(delta, dtype)
    log_delta = jnp.log(delta)
    unit = jnp.finfo(dtype).eps
    limit = log_delta - 16 * (k + 1) * unit * (1 + jnp.abs(log_delta) + epsilon)

    def valid(epsilon_0):
        return log_composition_delta(epsilon_0, epsilon, k, jnp) <= limit

    def halve(_, interval):
        low, high = interval
        mid = 0.5 * (low + high)
        ok = valid(mid)
        return jnp.where(ok, mid, low), jnp.where(ok, high, mid)

    # Basic composition is always valid: delta_k(epsilon / k) = 0 (and the only choice if delta = 0,
    # where the test above cannot allow for rounding).
    basic = epsilon / k
    low, _ = lax.fori_loop(0, jnp.finfo(dtype).nmant + 2, halve, (basic, epsilon))
    return jnp.where(delta > 0, jnp.where(valid(epsilon), epsilon, low), basic)


def app_ind_exp(
    key, x, qs, epsilon: float, *, bounds, delta: float = 1e-6, neighbors: Neighbors | str = Neighbors.SWAP
) -> jax.Array:
    """AppIndExp (Gillenwater, Joseph, Kulesza 2021, Sec. 5.1): IndExp with the DDR20 budget.

    ``m`` independent single-quantile exponential mechanisms (Smith 2011, Alg. 2; see
    :func:`dpjax.quantiles.emq`), each with the largest ``epsilon_0`` whose ``m``-fold composition
    is ``(epsilon, delta)``-DP (:func:`composition_epsilon`, computed in the graph in the working
    dtype, conservatively; within ``~1e-4`` relative of :func:`optimal_composition_epsilon`),
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
    lower, upper = check_bounds(checks, bounds)
    levels = check_quantiles(checks, qs)
    epsilon = checks.epsilon(epsilon)
    delta = checks.probability(delta, "delta")
    neighbors = Neighbors.check(neighbors)
    x = check_data(checks, x)
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


__all__ = ["app_ind_exp", "app_ind_exp_guarantee", "optimal_composition_epsilon"]
