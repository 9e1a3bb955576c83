"""AboveThreshold on integer queries with exact discrete Laplace noise and exact comparisons.

Lyu, Su and Li (2017), "Understanding the Sparse Vector Technique for Differential Privacy",
Algorithm 1 with c = 1 (Dwork and Roth 2014, Algorithm 1), noise from
:func:`dpjax.noise.discrete_laplace` (Canonne, Kamath and Steinke 2020, Algorithm 2): the noisy
threshold ``T + rho``, ``rho ~ DLap(sensitivity/epsilon1)``, and the first query with
``q_i + nu_i >= T + rho``, ``nu_i ~ DLap(sensitivity/epsilon2)``, compared in integers.

Guarantee: ``epsilon1 + 2 epsilon2``-DP (``epsilon1 + epsilon2``-DP for monotonic queries), as
Lyu et al.'s Theorem 2 for continuous Laplace noise: its proof carries over to integer noise, ties
included (``docs/derivations.md``).

**Range.** Queries and the threshold lie in [-B, B] (B = (L - 1)/2, L the dtype's maximum;
checked eagerly, clamped when traced: 1-Lipschitz, so the sensitivity holds); the noise saturates
at +-L (:mod:`dpjax.exact_noise`), so a comparison could differ from the exact one only when a
draw reaches +-L: probability below ``2 exp(-L / b)`` per draw (below ``e^-127`` for int32 at the
largest scale the sampler accepts), a delta far below any stated one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax import _exact_machine, additive, exact_noise, noise
from dpjax.accounting import PureDP

__all__ = [
    "discrete_above_threshold",
    "discrete_above_threshold_guarantee",
]


def _scale(sensitivity, epsilon, name):
    scale = exact_noise.exact_rational(sensitivity, "sensitivity") / exact_noise.exact_rational(epsilon, name)
    return additive._scale_at_least(scale, _exact_machine.word_type())


def discrete_above_threshold(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon1: exact_noise.Rational,
    epsilon2: exact_noise.Rational,
    *,
    sensitivity: exact_noise.Rational = 1,
) -> jax.Array:
    """The index of the first integer query whose noisy value reaches the noisy threshold, or -1.

    Guarantee (:func:`discrete_above_threshold_guarantee`): ``epsilon1 + 2 epsilon2``-DP, and
    ``epsilon1 + epsilon2``-DP for monotonic queries, when every query changes by at most the integer
    ``sensitivity`` between neighbors (proof in ``docs/derivations.md``).

    Args:
      key: a ``jax.random`` key (:func:`dpjax.noise.release_key` for a release).
      queries: integer query answers, shape ``(n,)`` (int32 or int64).
      threshold: the public integer threshold (a Python int or an integer scalar; may be traced).
      epsilon1, epsilon2: budgets of the threshold and of the queries, > 0: host-side exact rationals
        (the noise scales ``sensitivity/epsilon`` are exact; rounded up when too long, as in
        :func:`dpjax.additive.discrete_laplace_mechanism`).
      sensitivity: the queries' integer sensitivity, >= 1 (host-side).

    Returns:
      An int32 scalar: the first index ``i`` with ``q_i + nu_i >= T + rho``, or -1 if none.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> i = discrete_above_threshold(jax.random.key(0), jnp.array([1, 5, 40]), 20, 1, 1)
    """
    queries = additive._integer_value(queries)
    if queries.ndim != 1 or queries.size == 0:
        raise ValueError(f"queries must have shape (n,) with n >= 1, got {queries.shape}.")
    threshold = additive._integer_value(threshold).astype(queries.dtype)
    if threshold.ndim != 0:
        raise ValueError(f"threshold must be a scalar, got shape {threshold.shape}.")
    exact_noise.exact_rational(sensitivity, "sensitivity")
    additive._check_release_range(queries, "queries")
    additive._check_release_range(threshold, "threshold")
    bound = additive._release_bound(queries.dtype)  # traced values out of range are clamped
    queries, threshold = jnp.clip(queries, -bound, bound), jnp.clip(threshold, -bound, bound)
    threshold_key, query_key = jax.random.split(key)
    dtype = queries.dtype
    rho = noise.discrete_laplace(threshold_key, _scale(sensitivity, epsilon1, "epsilon1"), (), dtype)
    nu = noise.discrete_laplace(query_key, _scale(sensitivity, epsilon2, "epsilon2"), queries.shape, dtype)
    # q + nu >= T + rho  <=>  nu - rho >= T - q, with |T - q| < L: compare nu >= (T - q) + rho exactly.
    gap = threshold - queries
    above = _above(nu, gap, rho)
    return jnp.where(jnp.any(above), jnp.argmax(above), -1).astype(jnp.int32)


def _above(nu, gap, rho):
    """``nu >= gap + rho`` exactly: ``gap + rho`` is formed only where it cannot overflow."""
    info = jnp.iinfo(nu.dtype)
    overflow_high = (rho > 0) & (gap > info.max - rho)
    overflow_low = (rho < 0) & (gap < info.min - rho)
    total = jnp.where(overflow_high | overflow_low, 0, gap + rho)
    return jnp.where(overflow_high, False, jnp.where(overflow_low, True, nu >= total))


def discrete_above_threshold_guarantee(
    epsilon1: exact_noise.Rational,
    epsilon2: exact_noise.Rational,
    *,
    sensitivity: exact_noise.Rational = 1,
    monotonic: bool = False,
):
    """``epsilon1 + 2 epsilon2``-DP, or ``epsilon1 + epsilon2``-DP for monotonic queries (Lyu, Su and
    Li 2017, Thm. 2; Durfee 2023, Lemma 3.1), which the discrete noise keeps (``docs/derivations.md``)."""
    exact_noise.exact_rational(sensitivity, "sensitivity")
    e1 = float(exact_noise.exact_rational(epsilon1, "epsilon1"))
    e2 = float(exact_noise.exact_rational(epsilon2, "epsilon2"))
    return PureDP(e1 + (1 if monotonic else 2) * e2)
