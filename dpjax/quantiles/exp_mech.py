"""The exponential mechanism for one quantile (EMQ) and IndExp, one EMQ per quantile level.

Smith (2011), "Privacy-preserving statistical estimation with optimal convergence rates", Alg. 2;
in the form of Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1 ("IndExp"). The output is in gap
``i`` of the clamped sorted data (see :mod:`dpjax.quantiles.intervals`) with probability

    P[i] ∝ (x_{i+1} - x_i) * exp(-(epsilon / (2 Delta)) * |i - q n|),

then uniform inside the gap: the exponential mechanism with utility ``-| #{x < o} - q n |``, whose
sensitivity is ``Delta = 1`` under swap and ``max(q, 1 - q)`` under add/remove (the target ``q n``
moves by ``q`` when a record is added). Everything is in log space (zero-width gaps get weight
exactly 0) and the gap is drawn by Gumbel-max. Under ``vmap`` over keys the sort and the scores are
computed once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax.accounting import PureDP
from dpjax.quantiles.intervals import (
    check_bounds,
    check_data,
    check_neighbors,
    check_quantiles,
    gaps,
    gumbel_argmax,
    uniform_in_gaps,
)
from dpjax.validation import check_epsilon, check_probability


def emq_sensitivity(q: float, neighbors: str = "swap") -> float:
    """Sensitivity of the rank utility ``-|#{x < o} - q n|``: 1 (swap), ``max(q, 1 - q)`` (add/remove)."""
    return 1.0 if neighbors == "swap" else max(q, 1.0 - q)


def gap_logits(log_width, q, epsilon, neighbors: str = "swap"):
    """Log weights of the gaps for quantile ``q``: ``log width - epsilon/(2 Delta) |i - q n|``."""
    n = log_width.shape[0] - 1
    c = epsilon / (2.0 * emq_sensitivity(q, neighbors))
    ranks = jnp.arange(n + 1, dtype=log_width.dtype)
    return log_width - jnp.asarray(c, log_width.dtype) * jnp.abs(ranks - jnp.asarray(q * n, log_width.dtype))


def independent_releases(key, x, qs, epsilon_each: float, bounds, neighbors: str = "swap") -> jax.Array:
    """One EMQ release per level in ``qs`` (validated), each with ``epsilon_each``; sorted output.

    The shared body of IndExp and AppIndExp (they differ only in how the budget is split).
    """
    lower, upper = bounds
    edges, log_width = gaps(x, lower, upper)
    logits = jnp.stack([gap_logits(log_width, float(q), epsilon_each, neighbors) for q in qs])
    choice_key, uniform_key = jax.random.split(key)
    index = gumbel_argmax(choice_key, logits, axis=-1)
    return jnp.sort(uniform_in_gaps(uniform_key, edges, index))


def emq(key, x, q: float, epsilon: float, *, bounds, neighbors: str = "swap") -> jax.Array:
    """The exponential mechanism for the ``q``-quantile of ``x`` within ``bounds`` (Smith 2011, Alg. 2).

    Neighbouring relation: ``"swap"`` (default; one record replaced, sensitivity 1) or
    ``"add_remove"`` (sensitivity ``max(q, 1 - q)``). Guarantee: pure ``epsilon``-DP
    (:func:`emq_guarantee`). ``epsilon = 0`` is allowed and gives a uniform draw on the bounds.

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty); values are clamped to ``bounds``.
      q: quantile level in [0, 1].
      epsilon: privacy parameter, >= 0.
      bounds: ``(a, b)`` with ``a < b``, data independent.
      neighbors: ``"swap"`` or ``"add_remove"``.

    Returns:
      A scalar in ``[a, b]``, in ``x``'s float dtype (default float for integer data).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jnp.array([0.3, -1.2, 0.7, 0.7, 2.0])
      >>> median = emq(jax.random.key(0), x, 0.5, 1.0, bounds=(-2.0, 2.0))
    """
    bounds = check_bounds(bounds)
    q = check_probability(q, "q")
    epsilon = check_epsilon(epsilon, allow_zero=True)
    neighbors = check_neighbors(neighbors)
    x = check_data(x)
    return independent_releases(key, x, [q], epsilon, bounds, neighbors)[0]


def emq_guarantee(epsilon: float) -> PureDP:
    """EMQ's guarantee: pure ``epsilon``-DP (under the relation it was run with)."""
    return PureDP(check_epsilon(epsilon, allow_zero=True))


def ind_exp(key, x, qs, epsilon: float, *, bounds, neighbors: str = "swap") -> jax.Array:
    """IndExp: ``m`` independent EMQ releases with ``epsilon / m`` each, sorted.

    Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1 (baseline); each release is Smith (2011),
    Alg. 2. Guarantee: pure ``epsilon``-DP by basic composition (:func:`ind_exp_guarantee`).
    Neighbouring relation as in :func:`emq`.

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty).
      qs: ``m`` strictly increasing levels in [0, 1] (concrete).
      epsilon: total privacy parameter, >= 0.
      bounds: ``(a, b)`` with ``a < b``.
      neighbors: ``"swap"`` or ``"add_remove"``.

    Returns:
      Shape ``(m,)``, sorted, in ``[a, b]``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000,))
      >>> deciles = ind_exp(jax.random.key(0), x, jnp.linspace(0.1, 0.9, 9), 1.0, bounds=(-10, 10))
    """
    bounds = check_bounds(bounds)
    qs = check_quantiles(qs)
    epsilon = check_epsilon(epsilon, allow_zero=True)
    neighbors = check_neighbors(neighbors)
    x = check_data(x)
    return independent_releases(key, x, qs, epsilon / qs.size, bounds, neighbors)


def ind_exp_guarantee(epsilon: float) -> PureDP:
    """IndExp's guarantee: pure ``epsilon``-DP (``m`` releases of ``epsilon / m``)."""
    return PureDP(check_epsilon(epsilon, allow_zero=True))


__all__ = ["emq", "emq_guarantee", "ind_exp", "ind_exp_guarantee"]
