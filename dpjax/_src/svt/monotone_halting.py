"""The halting index of AboveThreshold over monotone cumulative counts (Durfee 2023, Alg. 1-2).

This is the AboveThreshold engine of the unbounded quantile estimators
(:mod:`dpjax.quantiles.unbounded`, :mod:`dpjax.quantiles.unbounded_many`): the same law as
:func:`dpjax.svt.above_threshold` with sensitivity-1 queries, specialised to non-decreasing integer
counts so that a trial costs O(log bins) instead of one noise per query.

Given integer counts ``f_i`` (non-decreasing in i, equal to ``n_counted`` from ``tail_start`` on), a
threshold ``T``, and noise scales ``s1 = 1/epsilon1`` (threshold) and ``s2 = 1/epsilon2`` (queries),
the mechanism halts at the first query i >= ``first`` with ``f_i + nu_i >= T + nu``. Every parameter
(threshold, epsilons, cap) is a value that may be traced; divisions by a scale are written as
products with the epsilon, so constant and traced parameters give the same bits under ``jit``.

Given the threshold noise ``nu``, the queries are independent: query i halts with probability
``p_i = S(T + nu - f_i)`` (S the survival function of the query noise), i.e. with hazard
``a_i = -log(1 - p_i)``. Three exact samplers, all drawing ``nu`` the same way:

* ``"literal"``: one noise per query up to the cap (the reference, draws everything);
* ``"blocks"``: one noise per query in blocks of ``BLOCK`` inside a ``lax.while_loop`` that stops at
  the first hit, up to ``tail_start``; then the closed-form tail below;
* ``"fast"`` (default): far below the threshold (``y_i = exp((f_i - T - nu)/s2) <= y0``) the hazard
  is dominated by ``kappa * y_i`` whose running sum is a prefix ``logcumsumexp`` of the counts
  (key-independent, computed once), so candidate halting queries are proposed by inversion
  (``searchsorted``, O(log bins)) and accepted with probability ``a_i / (kappa y_i) >= 1/kappa``
  (Lewis-Shedler thinning of the slot-wise Poisson process); near the threshold every query halts
  with probability >= 1/2 and is drawn literally; then the closed-form tail. Per trial this costs
  O(log bins) in expectation, whatever the halting index.

Closed-form tail: from ``tail_start`` on every count is ``n_counted`` and the number G of further
queries is geometric, ``G = 1 + floor(E / a)`` with ``E ~ Exp(1)``, so no trial can run long and
``vmap`` over keys never waits for a straggler (with epsilon1 = epsilon2 G has infinite mean).

The comparison is centred, ``nu_i - nu >= (c - f_i) + (T - c)`` with ``c = floor(T)``, so integer
counts stay exact for n up to 2**31. A halting index beyond ``cap`` is truncated to ``cap`` and
flagged (post-processing of the transcript prefix; paper footnote 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src import noise as noise_lib

__all__: list[str] = []

_BLOCK = 256
_NEAR_BLOCK = 16
METHODS = ("fast", "blocks", "literal")
_LOG2 = math.log(2.0)
# Thinning bound: a(y) <= kappa * y for y <= y0, where the halting probability at y0 is 1/2.
_LOG_Y0 = {"exponential": -_LOG2, "laplace": 0.0, "gumbel": math.inf}
_KAPPA = {"exponential": 2 * _LOG2, "laplace": _LOG2, "gumbel": 1.0}
_MAX_PROPOSALS = 1000  # a guard only: each proposal is accepted with probability >= 1/kappa > 0.7


def _neg_log_cdf(name: str, u, rate):
    """``a = -log P(nu < u)`` for query noise of scale ``1/rate``: the hazard of a query at gap u."""
    a = u * rate
    if name == "exponential":
        # -log(1 - e^-a), accurate for small a (expm1) and for large a (log1p).
        small = -jnp.log(-jnp.expm1(-jnp.clip(a, 1e-30, _LOG2)))
        large = -jnp.log1p(-jnp.exp(-jnp.maximum(a, _LOG2)))
        return jnp.where(a <= 0, jnp.inf, jnp.where(a < _LOG2, small, large))
    if name == "laplace":
        return jnp.where(a > 0, -jnp.log1p(-0.5 * jnp.exp(-jnp.maximum(a, 0))), _LOG2 - a)
    return jnp.exp(-a)  # gumbel: P(nu < u) = exp(-exp(-u/scale))


def _literal_blocks(key, count_at, start, stop, nu_threshold, base, frac, scale2, *, noise, dtype, block):
    """First query i in [start, stop) with ``nu_i - nu >= T - f_i``, or -1; noise per block
    ``fold_in(key, block_index)``, queries indexed from ``start``."""
    offsets = jnp.arange(block, dtype=jnp.int32)

    def cond(state):
        b, found = state
        return (found < 0) & (start + b * block < stop)

    def body(state):
        b, _ = state
        idx = start + b * block + offsets
        nu = noise_lib.sample(noise, jax.random.fold_in(key, b), (block,), scale2, dtype)
        gap = (base - count_at(idx)).astype(dtype) + frac  # T - f_i, centred so counts stay exact
        hit = (idx < stop) & (nu - nu_threshold >= gap)
        return b + 1, jnp.where(jnp.any(hit), idx[jnp.argmax(hit)], -1)

    return lax.while_loop(cond, body, (jnp.int32(0), jnp.int32(-1)))[1]


@jax.jit
def _cumlogsumexp_nondecreasing(terms) -> jax.Array:
    """``lax.cumlogsumexp`` of a non-decreasing 1-D array (``-inf`` entries allowed), with one
    exponential per entry: the thinning's prefix log-masses (the terms ``(f_i - T) / s2`` increase
    with the counts).

    ``log_w[i] = t_i + log R_i`` with ``R_i = sum_{j <= i} exp(t_j - t_i)``, which satisfies the linear
    recurrence ``R_i = exp(t_{i-1} - t_i) R_{i-1} + 1`` (``+ 0`` for ``t_i = -inf``); it is evaluated
    by an associative scan of multiply-adds. Every factor is at most 1 and ``R_i >= 1`` for finite
    ``t_i``, so nothing overflows and a product that underflows is a contribution below the dtype's
    smallest number relative to ``R_i``. ``lax.cumlogsumexp`` evaluates a ``logaddexp`` per node of its
    scan instead (an exponential and a logarithm each), much slower on the count table of traced
    data (figures in benchmarks/README.md).
    """
    previous = jnp.concatenate([terms[:1], terms[:-1]])
    one = jnp.ones((), terms.dtype)
    decay = jnp.where(terms == previous, one, jnp.exp(previous - terms))  # equal infinities: 1
    step = jnp.where(jnp.isneginf(terms), jnp.zeros((), terms.dtype), one)

    def combine(earlier, later):
        return earlier[0] * later[0], later[0] * earlier[1] + later[1]

    _, ratio = lax.associative_scan(combine, (decay, step))
    return terms + jnp.log(ratio)


def _thinning(key, counts, start, stop, nu_threshold, base, frac, scale2, rate2, *, noise, dtype):
    """Halting query in [start, a_end) by thinning, or -1; returns ``(found, a_end)`` where
    ``a_end`` is the first query (<= stop) whose halting probability exceeds 1/2."""
    f = counts.f
    gap_f = (f - base).astype(dtype) - frac  # f_i - T
    a_end = jnp.searchsorted(gap_f, nu_threshold + scale2 * _LOG_Y0[noise], side="right")
    a_end = jnp.clip(a_end, start, stop).astype(jnp.int32)
    terms = jnp.where(jnp.arange(f.shape[0]) >= start, gap_f * rate2, -jnp.inf)
    log_w = _cumlogsumexp_nondecreasing(terms)  # key-independent: computed once under vmap
    log_kappa = math.log(_KAPPA[noise])

    def cond(state):
        it, _, _, done = state
        return ~done & (it < _MAX_PROPOSALS)

    def body(state):
        it, log_v, _, _ = state
        e, e_accept = noise_lib.standard_exponential(jax.random.fold_in(key, it), (2,), dtype)
        log_v = jnp.logaddexp(log_v, jnp.log(e) + nu_threshold * rate2 - log_kappa)
        slot = jnp.searchsorted(log_w, log_v, side="left").astype(jnp.int32)
        outside = slot >= a_end
        y = jnp.exp((gap_f[jnp.minimum(slot, f.shape[0] - 1)] - nu_threshold) * rate2)
        if noise == "gumbel":  # the hazard is exactly y: every proposal is a halt (y may overflow)
            accept = jnp.asarray(True)
        else:
            hazard = -jnp.log1p(-y) if noise == "exponential" else -jnp.log1p(-0.5 * y)
            accept = jnp.exp(-e_accept) * _KAPPA[noise] * y < hazard  # exp(-Exp(1)) is uniform
        found = jnp.where(~outside & accept, slot, -1)
        return it + 1, log_v, found, outside | accept

    init = (jnp.int32(0), jnp.asarray(-jnp.inf, dtype), jnp.int32(-1), a_end <= start)
    return lax.while_loop(cond, body, init)[2], a_end


def _tail(key, nu_threshold, base, frac, n_counted, stop, rate2, *, noise, dtype, cap):
    """Closed-form halting index in the constant stretch [stop, ...): ``(k, truncated)``."""
    u = nu_threshold + (base - n_counted).astype(dtype) + frac  # T + nu - n_counted
    rate = _neg_log_cdf(noise, u, rate2)
    extra = jnp.floor(noise_lib.standard_exponential(key, (), dtype) / rate)  # G - 1, maybe inf
    tail_k = (stop - 1).astype(dtype) + 1 + extra
    return jnp.minimum(tail_k, cap).astype(jnp.int32), tail_k > cap


def halting_index(
    key,
    counts,
    threshold,
    epsilon1,
    epsilon2,
    *,
    noise: noise_lib.Sampler,
    dtype,
    first: int,
    cap,
    method: str = "fast",
    count_at: Callable[[jax.Array], jax.Array] | None = None,
    n_counted=None,
    tail_start=None,
):
    """Samples AboveThreshold's halting index over monotone counts.

    Args:
      key: a ``jax.random`` key.
      counts: the tabulated counts, any object with fields ``f`` (the int32 counts, non-decreasing),
        ``n_counted`` and ``tail_start`` such as :class:`dpjax._src.quantiles.unbounded_bins._Counts`
        (required by ``method="fast"``); or ``None`` with ``count_at``, ``n_counted`` and
        ``tail_start`` given (counts computed on the fly, e.g. per recursion node).
      threshold: T = q*n as a pair ``(c, T - c)``: an int32 ``c = floor(T)`` and its float remainder
        (may be traced, so one compiled kernel serves every q and n); see :func:`split_threshold`.
      epsilon1, epsilon2: privacy parameters of the threshold and of each query (sensitivity 1):
        the noise scales are ``1/epsilon1`` and ``1/epsilon2`` (may be traced).
      noise: "exponential", "laplace" or "gumbel" (static).
      dtype: float dtype of the noise (static).
      first: index of the first query (1 for Algorithm 2, 0 for Algorithm 4) (static).
      cap: largest query index (int32, may be traced); a later halt is truncated to ``cap`` and flagged.
      method: "fast", "blocks" or "literal" (see the module docstring; static); all have the same law.
      count_at: maps an int32 array of query indices to int32 counts (``n_counted`` from
        ``tail_start`` on); defaults to a lookup in ``counts``.

    Returns:
      ``(k, truncated)``: the int32 halting index in [first, cap] and a bool flag.
    """
    if counts is not None:
        last = counts.f.shape[0] - 1
        n_counted, tail_start = counts.n_counted, counts.tail_start

        def count_at(idx):
            return jnp.where(idx <= last, counts.f[jnp.minimum(idx, last)], counts.n_counted)

    key_threshold, key_queries, key_tail, key_thin = jax.random.split(key, 4)
    base = jnp.asarray(threshold[0], jnp.int32)
    frac = jnp.asarray(threshold[1], dtype)
    rate2 = jnp.asarray(epsilon2, dtype)
    one = jnp.ones((), dtype)
    scale1, scale2 = one / jnp.asarray(epsilon1, dtype), one / rate2
    nu_threshold = noise_lib.sample(noise, key_threshold, (), scale1, dtype)
    common = dict(noise=noise, dtype=dtype)

    def literal(start, stop, block):  # the literal queries in [start, stop), on key_queries
        return _literal_blocks(
            key_queries, count_at, start, stop, nu_threshold, base, frac, scale2, block=block, **common
        )

    if method == "literal":
        found = literal(first, cap + 1, _BLOCK)
        return jnp.where(found >= 0, found, cap), found < 0
    stop = jnp.clip(tail_start, first, cap + 1).astype(jnp.int32)
    if method == "blocks":
        found = literal(first, stop, _BLOCK)
    else:
        found, a_end = _thinning(
            key_thin, counts, first, stop, nu_threshold, base, frac, scale2, rate2, **common
        )
        near = literal(jnp.where(found >= 0, stop, a_end), stop, _NEAR_BLOCK)
        found = jnp.where(found >= 0, found, near)
    tail_k, truncated = _tail(key_tail, nu_threshold, base, frac, n_counted, stop, rate2, cap=cap, **common)
    return jnp.where(found >= 0, found, tail_k), (found < 0) & truncated


def split_threshold(threshold) -> tuple[jax.Array, jax.Array]:
    """``(floor(T), T - floor(T))`` for a threshold 0 <= T < 2**31 (a float array, may be traced): the
    int32 integer part (exact) and the float remainder."""
    threshold = jnp.asarray(threshold)
    base = jnp.floor(threshold)
    return base.astype(jnp.int32), threshold - base
