"""The joint top-k mechanism for integer counts through the histogram of its errors.

Gillenwater, Joseph, Munoz Medina and Ribero Diaz, "A Joint Exponential Mechanism for Differentially
Private Top-k", ICML 2022, Alg. 1: with ``c_(1) >= ... >= c_(d)`` the sorted counts and
``E(S) = max_i (c_(i) - c_{s_i})`` (an integer for integer counts), draw ``S`` with
``P(S) ∝ exp(-E(S) / b)``. The same law, counted by error value instead of by sorted difference:

* With ``n_i(e) = #{j : c_j >= c_(i) - e}`` (0-based rows ``i``; nested in ``i`` and ``e``), the
  sequences with ``E(S) <= e`` are those with row ``i`` among the ``n_i(e)`` largest counts,
  ``N(e) = prod_i (n_i(e) - i)`` of them (the counting of the paper's Lemma 3.7).
* Those with ``E(S) = e`` split by the first row ``i*`` above ``e - 1``: rows before it within
  ``n_i(e - 1)``, row ``i*`` among the ``n_{i*}(e) - n_{i*}(e - 1)`` counts exactly
  ``c_(i*) - e``, rows after it within ``n_i(e)``:
  ``prod_{i < i*} (n_i(e-1) - i) (n_{i*}(e) - n_{i*}(e-1)) prod_{i > i*} (n_i(e) - i)`` sequences
  (nesting makes each factor exact), which telescope to ``N(e) - N(e - 1)`` with no cancellation.
  So ``(e, i*)`` is drawn with weight (that count) x ``exp(-e / b)`` from a ``[W, k]`` table of
  log-weights, then a uniform sequence in it row by row (``O(k^3)`` at most).
* Every ``n_i(e)`` comes from the top ``k`` counts where ``c_(i) - e > c_(k)`` (fewer than ``k``
  items are above ``c_(k)``) and else from the cumulative histogram of ``c_(k) - c_j`` over a
  static window ``[0, W)`` (one scatter-add over the ``d`` items): no sort. A sorted position maps
  to its count value by the cumulative histogram and to its item, the ``r``-th of that value in
  index order (the order of a stable sort), through key-independent per-block counts (blocks of
  ``max(1024, W)`` items: one search over the blocks and one count within a block) for one
  release, or through one stable sort of the counts (key independent) for many keys.

Truncation and fallback. Errors ``e >= W`` are out of the window. Where every count lies within
``W`` of ``c_(k)`` nothing is left out and the draw is exact. Else the left-out mass is at most
``prod_i (d - i) exp(-W / b)`` and is dropped when that bound is below ``exp(-200)`` times the
likeliest ``(e, i*)`` entry's mass: the rule of :mod:`dpjax._src.topk.joint_head`, a total
variation below ``1e-86``. For a concrete ``b`` the window is chosen static and wide enough for
that rule to hold whatever the counts (:func:`window_for`, ``W ~ b (k ln d + 201)``, at most
:data:`MAX_WINDOW`); for a traced ``epsilon`` (or a wider need) the window is
:data:`DEFAULT_WINDOW` and where the rule fails the caller's ``fallback`` sampler runs, chosen by a
key-independent branch (:func:`dpjax._src.lanes.cond`: under ``vmap`` over keys a real branch, taken
once; under ``vmap`` over epsilon the fallback runs only where some lane needs it).

So one release costs a partial top-k and one scatter-add over the ``d`` counts, the ``O(k W) =
O(k^2 / epsilon ln d)`` table and ``O(k (k^2 + d / W + W))`` for the sequence, and each further key
under ``vmap`` ``O(log(k W) + k^3)`` after one sort: the complexity of Wu and Zhang (NeurIPS 2024,
``O(d + k^2 / epsilon ln d)``). Their sampler is not offered as a method: it draws from a pruned
variant of the joint mechanism (a different law with its own privacy proof, reported with similar
accuracy), and every method of :func:`dpjax.selection.joint_top_k` samples the law above.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src import lanes, sharded
from dpjax._src.topk.joint_head import NEGLIGIBLE, nth_free

__all__: list[str] = []

SMALL_WINDOW = 1024  # count values c_(k) - c_j in [0, W) are histogrammed: tried first
DEFAULT_WINDOW = 2048  # the window for a traced epsilon
MAX_WINDOW = 32768  # the widest window :func:`window_for` gives
BLOCK = 1024  # at least this many items per block of the per-block counts (single release)


def window_for(d: int, k: int, scale: float) -> int | None:
    """A static window that always holds the law for a concrete ``scale`` b (so no fallback): a
    power of two ``W >= b (log prod_i (d - i) + 201)``, at least 512, where that is at most
    :data:`MAX_WINDOW`; else None. (The ``e = 0`` entries hold ``N(0) >= 1`` sequences, so the
    largest log-weight is at least 0, and the tail bound ``log prod_i (d - i) - W / b`` is below
    ``-201``: negligible by the rule above, whatever the counts.)"""
    need = scale * (sum(math.log(d - i) for i in range(k)) + NEGLIGIBLE + 1.0)
    if not math.isfinite(need) or need >= MAX_WINDOW:
        return None
    return max(512, 1 << max(0, math.ceil(need)).bit_length())


class _Histogram(NamedTuple):
    ids: jax.Array  # [k]: the k largest counts' items, in sorted order (ties by index)
    above: jax.Array  # #{j : c_j > c_(k)} (< k; sorted positions [0, above) are ids[:above])
    diffs: jax.Array  # [k, k]: c_(i) - c_(r) for r > i, 0 for r <= i, at most W
    cum: jax.Array  # [W + 1]: cum[t] = #{j : 0 <= c_(k) - c_j < t}
    values: jax.Array  # [nb * block]: c_(k) - c_j where in [0, W), W otherwise (and padding)
    lookup: jax.Array  # per-block counts [nb, W], or the stable order of the counts [d]


def _clamped(difference, window: int) -> jax.Array:
    """A nonnegative difference of integers as int32, at most ``window`` (wrapped: ``window``)."""
    return jnp.where((difference < 0) | (difference >= window), window, difference).astype(jnp.int32)


def _histogram(scores, k: int, window: int, block: int | None) -> _Histogram:
    """The key-independent counts: the top ``k``, the histogram of ``c_(k) - c_j`` (one scatter-add)
    and the lookup of items by sorted position (per-block counts, or one stable sort if ``block``
    is None)."""
    d = scores.shape[0]
    top, ids = sharded.top_k(scores, k)
    rows = jnp.arange(k, dtype=jnp.int32)
    later = rows[None, :] > rows[:, None]
    diffs = jnp.where(later, _clamped(top[:, None] - top[None, :], window), 0)
    above = jnp.sum(diffs[:, k - 1] > 0, dtype=jnp.int32)
    values = jnp.where(scores <= top[k - 1], _clamped(top[k - 1] - scores, window), window)
    if block is None:
        cum = jnp.zeros(window + 1, jnp.int32).at[values].add(1)[:window]
        order = lax.sort((jnp.invert(scores), jnp.arange(d, dtype=jnp.int32)), num_keys=1, is_stable=True)[1]
        return _Histogram(ids, above, diffs, _cumulative(cum), values, order)
    nb = -(-d // block)
    values = jnp.pad(values, (0, nb * block - d), constant_values=window)
    slot = (jnp.arange(nb * block, dtype=jnp.int32) // block) * window + values
    slot = jnp.where(values < window, slot, nb * window)  # out of the window: dropped
    blocks = jnp.zeros(nb * window, jnp.int32).at[slot].add(1, mode="drop").reshape(nb, window)
    return _Histogram(ids, above, diffs, _cumulative(jnp.sum(blocks, axis=0)), values, blocks)


def _cumulative(counts) -> jax.Array:
    return jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(counts, dtype=jnp.int32)])


def _eligible(hist: _Histogram, e) -> jax.Array:
    """``n_i(e) = #{j : c_j >= c_(i) - e}`` of every row, for ``-1 <= e < W``: from the top ``k``
    where ``c_(i) - e > c_(k)``, else from the histogram."""
    u = e - hist.diffs[:, -1]
    top = jnp.sum(hist.diffs <= e, axis=1, dtype=jnp.int32)
    return jnp.where(u < 0, top, hist.above + hist.cum[jnp.maximum(u + 1, 0)])


def _log_weights(hist: _Histogram, d: int, k: int, scale) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The law of ``(e, i*)`` (module docstring) as ``(log_mass, weights, negligible)``: the ``[W]``
    log-masses of the error values, each column of ``weights`` (``[k, W]``, linear) proportional to
    the law of ``i*`` given ``e``, and whether the left-out tail is negligible (every count in the
    window, or the tail bound below ``exp(-200)`` of the likeliest error value's mass).

    Every ``n_i(e)``, ``-1 <= e < W``, is computed once (the ``e - 1`` factors are the table one
    step back) and every factor is split exactly into a mantissa and a power of two, so the products
    over rows are products of mantissas and sums of integer exponents: one ``log`` per error value,
    not per entry. Within an error value the weights are scaled by its largest power of two; a
    weight below ``2^-100`` of its error value's largest (float32; ``2^-1000`` in float64) is
    rounded to 0, below the resolution of the uniform variates that draw ``i*``."""
    dtype = scale.dtype
    window = hist.cum.shape[0] - 1
    e = jnp.arange(-1, window, dtype=jnp.int32)
    eligible = _eligible_all(hist, e)  # [k, W + 1]
    free_m, free_p = _split(eligible - jnp.arange(k, dtype=jnp.int32)[:, None], dtype)
    step_m, step_p = _split(eligible[:, 1:] - eligible[:, :-1], dtype)

    earlier = jnp.tril(jnp.ones((k, k), dtype), -1)

    def exclusive(m, p):  # products over the earlier rows (the exponents' sums exact: small integers)
        m = jnp.cumprod(jnp.concatenate([jnp.ones((1, window), dtype), m[:-1]]), axis=0)
        return m, jnp.matmul(earlier, p, precision=lax.Precision.HIGHEST)

    before_m, before_p = exclusive(free_m[:, :-1], free_p[:, :-1])
    later_m, later_p = exclusive(free_m[::-1, 1:], free_p[::-1, 1:])
    mantissa = before_m * step_m * later_m[::-1]  # in [2^-k, 1), or 0
    power = before_p + step_p + later_p[::-1]
    top = jnp.max(jnp.where(mantissa > 0, power, -(2.0**30)), axis=0)  # no entry: 0 weights
    lowest = -100 if jnp.finfo(dtype).bits == 32 else -1000  # mantissa 2^lowest stays normal
    weights = jnp.where(power - top >= lowest, mantissa * _power_of_two(power - top, lowest, dtype), 0)
    total = jnp.sum(weights, axis=0)
    with jax.numpy_dtype_promotion("standard"):
        log_mass = jnp.log(total) + top.astype(dtype) * math.log(2.0) - e[1:].astype(dtype) / scale
    log_mass = jnp.where(total > 0, log_mass, -jnp.inf)
    everything = hist.above + hist.cum[window] == d
    log_total = jnp.sum(jnp.log(jnp.asarray(d, dtype) - jnp.arange(k).astype(dtype)))
    negligible = everything | (log_total - window / scale < jnp.max(log_mass) - NEGLIGIBLE)
    return log_mass, weights, negligible


def _split(x, dtype) -> tuple[jax.Array, jax.Array]:
    """Nonnegative integers ``x`` as ``m 2^p`` exactly (``m`` in ``[1/2, 1)`` and the integer ``p``,
    both of ``dtype``); 0 (and negative ``x``, a factor of no sequence) as ``m = 0``."""
    m, p = jnp.frexp(jnp.maximum(x, 0).astype(dtype))
    return m, p.astype(dtype)


def _power_of_two(p, lowest: int, dtype) -> jax.Array:
    """``2^p`` for integer-valued ``p`` of ``dtype`` clipped to ``[lowest, 0]`` (normal numbers), built
    from its exponent bits."""
    bits = jnp.finfo(dtype).nmant
    integer = jnp.int32 if bits < 32 else jnp.int64
    biased = (jnp.clip(p, lowest, 0).astype(integer) + jnp.finfo(dtype).maxexp - 1) << bits
    return lax.bitcast_convert_type(biased, dtype)


def _eligible_all(hist: _Histogram, e) -> jax.Array:
    """:func:`_eligible` of every row at each of the ``e``, shape ``[k, len(e)]``."""
    top = jnp.sum(hist.diffs[:, :, None] <= e[None, None, :], axis=1, dtype=jnp.int32)
    u = e[None, :] - hist.diffs[:, -1:]
    return jnp.where(u < 0, top, hist.above + hist.cum[jnp.maximum(u + 1, 0)])


def _positions(key, hist: _Histogram, e, star, k: int) -> jax.Array:
    """A uniform sequence of sorted positions with error ``e`` whose first row at ``e`` is ``star``."""
    before, now = _eligible(hist, e - 1), _eligible(hist, e)
    rows = jnp.arange(k, dtype=jnp.int32)
    high = jnp.where(rows < star, before, now)
    keys = jax.random.split(key, k)

    def body(r, taken):
        available = jnp.where(r == star, high[r] - before[r], high[r] - r)
        n = jax.random.randint(keys[r], (), 0, jnp.maximum(available, 1), jnp.int32)
        pick = jnp.where(r == star, before[r] + n, nth_free(n, taken, k))
        return taken.at[r].set(pick)

    return lax.fori_loop(0, k, body, jnp.full(k, jnp.iinfo(jnp.int32).max, jnp.int32))


def _item(hist: _Histogram, position, block: int | None) -> jax.Array:
    """The item at a sorted position (counts decreasing, ties by index): one of the top ``k`` above
    ``c_(k)``; else its value from the cumulative histogram, its block from the value's per-block
    counts and its place in the block (or the stable order's entry, if ``block`` is None)."""
    if block is None:
        return hist.lookup[position]
    below = position - hist.above
    value = jnp.searchsorted(hist.cum[1:], below, side="right").astype(jnp.int32)
    rank = below - hist.cum[value]
    per_block = jnp.cumsum(hist.lookup[:, value])
    chosen = jnp.searchsorted(per_block, rank, side="right").astype(jnp.int32)
    rank = rank - jnp.where(chosen > 0, per_block[jnp.maximum(chosen - 1, 0)], 0)
    inside = lax.dynamic_slice(hist.values, (chosen * block,), (block,)) == value
    # Within the block: the sub-block of BLOCK items holding the match (counts, no scan of the block),
    # then the match's place in it.
    per_sub = jnp.cumsum(jnp.sum(inside.reshape(-1, BLOCK), axis=1, dtype=jnp.int32))
    sub = jnp.searchsorted(per_sub, rank, side="right").astype(jnp.int32)
    rank = rank - jnp.where(sub > 0, per_sub[jnp.maximum(sub - 1, 0)], 0)
    matches = lax.dynamic_slice(inside, (sub * BLOCK,), (BLOCK,)).astype(jnp.int32)
    item = chosen * block + sub * BLOCK + jnp.sum(jnp.cumsum(matches) <= rank).astype(jnp.int32)
    return jnp.where(below < 0, hist.ids[jnp.clip(position, 0, hist.ids.shape[0] - 1)], item)


def sample(key, scores, scale, *, k: int, window: int, draw, fallback, sort: bool = False) -> jax.Array:
    """One draw of the joint mechanism for integer ``scores`` (module docstring), or of
    ``fallback(key, scores, scale)`` where the window does not hold the law (None: the window is
    known to hold it, :func:`window_for`). ``draw = (prepare, pick)``: ``pick(key,
    prepare(logits))`` is an exact draw of an index with probability ``softmax(logits)``;
    ``sort``: items are looked up in one stable sort of the counts (for many keys) instead of the
    per-block counts."""
    if scores.dtype.itemsize < 4 or scores.dtype == jnp.bool_:
        scores = scores.astype(jnp.int32)
    d = scores.shape[0]
    block = None if sort else min(max(BLOCK, window), BLOCK * -(-d // BLOCK))  # a multiple of BLOCK
    hist = _histogram(scores, k, window, block)
    log_mass, weights, negligible = _log_weights(hist, d, k, scale)
    prepare, pick = draw
    entry_key, row_key, sequence_key = jax.random.split(key, 3)

    def release() -> jax.Array:
        e = pick(entry_key, prepare(log_mass))
        with jax.numpy_dtype_promotion("standard"):
            star = jax.random.categorical(row_key, jnp.log(weights[:, e])).astype(jnp.int32)
        positions = _positions(sequence_key, hist, e, star, k)
        return jax.vmap(lambda p: _item(hist, p, block))(positions)

    if fallback is None:
        return release()
    # Key independent: a real branch under vmap over keys, and under a vmap that batches the scale
    # the fallback runs only where some lane needs it (lanes.cond).
    return lanes.cond(negligible, release, lambda: fallback(key, scores, scale))


def sampler(*, k: int, window: int | None, draw, fallback, sort: bool = False):
    """:func:`sample` as ``f(key, scores, scale)`` for a static ``window`` from :func:`window_for`
    (no fallback needed) or None (a traced scale: :data:`DEFAULT_WINDOW`, then ``fallback``); a
    window wider than :data:`SMALL_WINDOW` is tried only where that one does not hold the law
    (counts crowded within it need no more)."""
    wide = window or DEFAULT_WINDOW
    last = functools.partial(
        sample, k=k, window=wide, draw=draw, fallback=None if window else fallback, sort=sort
    )
    if wide <= SMALL_WINDOW:
        return last
    return functools.partial(sample, k=k, window=SMALL_WINDOW, draw=draw, fallback=last, sort=sort)
