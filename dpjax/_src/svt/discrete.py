"""AboveThreshold on integer queries with exact discrete Laplace noise and exact comparisons.

Lyu, Su and Li (2017), "Understanding the Sparse Vector Technique for Differential Privacy",
Algorithm 1 with c = 1 (Dwork and Roth 2014, Algorithm 1), noise from
:func:`dpjax.noise.discrete_laplace` (Canonne, Kamath and Steinke 2020, Algorithm 2): the noisy
threshold ``T + rho``, ``rho ~ DLap(sensitivity/epsilon1)``, and the first query with
``q_i + nu_i >= T + rho``, ``nu_i ~ DLap(sensitivity/epsilon2)``, compared in integers.

Guarantee: ``epsilon1 + 2 epsilon2``-DP (``epsilon1 + epsilon2``-DP for monotonic queries), as
Lyu et al.'s Theorem 2 for continuous Laplace noise: its proof carries over to integer noise, ties
included (``docs/derivations.md``).

**Range.** Queries and the threshold lie in [-B, B] (B = (L - 1)/2, L the maximum of the dtype
computed in, int64 when the threshold needs it; checked eagerly and exactly, clamped when traced:
1-Lipschitz, so the sensitivity holds); the noise saturates
at +-L (:mod:`dpjax.exact_noise`), so a comparison could differ from the exact one only when a
draw reaches +-L: probability below ``2 exp(-L / b)`` per draw (below ``e^-127`` for int32 at the
largest scale the sampler accepts), a delta far below any stated one.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src import exact, noise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.host_checks import check_exact_integers, check_flag, check_rational, is_traced, release_bound

__all__ = [
    "discrete_above_threshold",
    "discrete_above_threshold_guarantee",
]


def _scale(sensitivity, epsilon, name):
    scale = check_rational(sensitivity, "sensitivity") / check_rational(epsilon, name)
    return exact.scale_at_least(scale, exact.word_type())


def _common_dtype(queries, threshold):
    """Queries and threshold in one dtype, exactly: the queries' dtype when the threshold is known to
    lie in its range ``[-B, B]``, else int64 (a traced threshold, or one the queries' int32 cannot
    hold: only under ``jax_enable_x64``, as :func:`dpjax.validation.check_exact_integers` refuses
    such a threshold without it)."""
    if threshold.dtype != queries.dtype and not is_traced(threshold):
        bound = release_bound(queries.dtype)
        with jax.ensure_compile_time_eval():
            if -bound <= int(threshold) <= bound:
                return queries, threshold.astype(queries.dtype)
    dtype = jnp.promote_types(queries.dtype, threshold.dtype)
    return queries.astype(dtype), threshold.astype(dtype)


def discrete_above_threshold(
    key: jax.Array,
    queries: ArrayLike,
    threshold: ArrayLike,
    epsilon1: exact.Rational,
    epsilon2: exact.Rational,
    *,
    sensitivity: exact.Rational = 1,
) -> jax.Array:
    """The index of the first integer query whose noisy value reaches the noisy threshold, or -1.

    Guarantee (:func:`discrete_above_threshold_guarantee`): ``epsilon1 + 2 epsilon2``-DP, and
    ``epsilon1 + epsilon2``-DP for monotonic queries, when every query changes by at most the integer
    ``sensitivity`` between neighbors (proof in ``docs/derivations.md``).

    Args:
      key: a ``jax.random`` key (:func:`dpjax.noise.release_key` for a release).
      queries: integer query answers, shape ``(n,)``, any integer dtype (taken exactly, as
        :func:`dpjax.additive.discrete_laplace_mechanism` takes its data).
      threshold: the public integer threshold (a Python int or an integer scalar; may be traced),
        compared exactly: queries are widened to int64 for a threshold beyond their range (under
        ``jax_enable_x64``; without it a threshold outside int32's ``[-B, B]`` is refused).
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
    queries = check_exact_integers(queries, "queries")  # exact, in [-B, B] (traced ones clamped)
    if queries.ndim != 1 or queries.size == 0:
        raise ValueError(f"queries must have shape (n,) with n >= 1, got {queries.shape}.")
    threshold = check_exact_integers(threshold, "threshold")
    if threshold.ndim != 0:
        raise ValueError(f"threshold must be a scalar, got shape {threshold.shape}.")
    check_rational(sensitivity, "sensitivity")
    queries, threshold = _common_dtype(queries, threshold)
    scales = _scale(sensitivity, epsilon1, "epsilon1"), _scale(sensitivity, epsilon2, "epsilon2")
    return _first_above(key, queries, threshold, scales)


@functools.partial(jax.jit, static_argnames="scales")
def _first_above(key, queries, threshold, scales):
    """The first noisy query at or above the noisy threshold, or -1 (compiled once per shape, dtype
    and pair of noise scales)."""
    threshold_key, query_key = jax.random.split(key)
    dtype = queries.dtype
    rho = noise.discrete_laplace(threshold_key, scales[0], (), dtype)
    nu = noise.discrete_laplace(query_key, scales[1], queries.shape, dtype)
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
    epsilon1: exact.Rational,
    epsilon2: exact.Rational,
    *,
    sensitivity: exact.Rational = 1,
    monotonic: bool = False,
) -> PureDP:
    """``epsilon1 + 2 epsilon2``-DP, or ``epsilon1 + epsilon2``-DP for monotonic queries (Lyu, Su and
    Li 2017, Thm. 2; Durfee 2023, Lemma 3.1), which the discrete noise keeps (``docs/derivations.md``)."""
    check_rational(sensitivity, "sensitivity")
    check_flag(monotonic, "monotonic")
    e1 = float(check_rational(epsilon1, "epsilon1"))
    e2 = float(check_rational(epsilon2, "epsilon2"))
    return PureDP(e1 + (1 if monotonic else 2) * e2)
