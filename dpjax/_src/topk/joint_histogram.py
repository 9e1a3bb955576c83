"""The joint top-k mechanism for integer counts through the histogram of its errors.

Gillenwater, Joseph, Munoz Medina and Ribero Diaz, "A Joint Exponential Mechanism for Differentially
Private Top-k", ICML 2022, Alg. 1: with ``c_(1) >= ... >= c_(d)`` the sorted counts and
``E(S) = max_i (c_(i) - c_{s_i})`` (an integer for integer counts), draw ``S`` with
``P(S) ∝ exp(-E(S) / b)``. The same law, counted by error value instead of by sorted difference:

* With ``n_i(e) = #{j : c_j >= c_(i) - e}`` (0-based rows ``i``; nested in ``i`` and ``e``), the
  sequences with ``E(S) <= e`` are those with row ``i`` among the ``n_i(e)`` largest counts,
  ``N(e) = prod_i (n_i(e) - i)`` of them (the counting of the paper's Lemma 3.7).
* Through the threshold of :mod:`dpjax._src.topk.joint_head`: ``(u, S)`` with density
  ``exp(-u / b) 1[E(S) <= u]`` has ``S``-marginal ``b exp(-E(S) / b)``; ``N(u) = N(floor(u))``, so
  ``u`` is drawn to its unit cell ``[e, e + 1)``, weight ``N(e) (exp(-e/b) - exp(-(e+1)/b))``
  (the last cell ``[W - 1, inf)``: ``N(W - 1) exp(-(W - 1)/b)``), from ``W`` log-weights, one
  ``log N(e)`` each (a sum over the rows of ``log (n_i(e) - i)``, no cancellation), and then a
  uniform sequence among those with every row ``i`` within the ``n_i(e)`` largest, row by row
  (``O(k^2)``).
* Every ``n_i(e)`` comes from the top ``k`` counts where ``c_(i) - e > c_(k)`` (fewer than ``k``
  items are above ``c_(k)``) and else from the cumulative histogram of ``c_(k) - c_j`` over a
  static window ``[0, W)`` (one scatter-add over the ``d`` items): no sort. A sorted position maps
  to its count value by the cumulative histogram and to its item, the ``r``-th of that value in
  index order (the order of a stable sort), through key-independent per-block counts (blocks of
  ``max(1024, W)`` items: one search over the blocks, one count per run of 1024 items of the block
  and one scan of a run) for one release, or through one stable sort of the counts (key
  independent) for many keys.

Truncation and fallback. Thresholds ``u >= W`` are out of the window (the last cell stands for them
with ``N(W - 1)``). Where every error is below ``W`` (``c_(1) - c_(d) < W``: then ``N(W - 1)`` is
every sequence) nothing is left out and the draw is exact. Else the left-out or misplaced mass is at
most ``prod_i (d - i) exp(-W / b)`` (in units of ``b``) and is dropped when that bound is below
``exp(-200)`` times the likeliest cell's mass: the rule of :mod:`dpjax._src.topk.joint_head`, a total
variation below ``1e-86``. For a concrete ``b`` the window is chosen static and wide enough for
that rule to hold whatever the counts (:func:`window_for`, ``W ~ b (k ln d + 201 + ln b)``, at most
:data:`MAX_WINDOW`); for a traced ``epsilon`` (or a wider need) the window is
:data:`DEFAULT_WINDOW` and where the rule fails the caller's ``fallback`` sampler runs, chosen by a
key-independent branch (:func:`dpjax._src.lanes.cond`: under ``vmap`` over keys a real branch, taken
once; under ``vmap`` over epsilon the fallback runs only where some lane needs it).

So one release costs a partial top-k and one scatter-add over the ``d`` counts, the ``O(k W) =
O(k^2 / epsilon ln d)`` table of the ``n_i(e)`` (``k W`` logs) and ``O(k (k + d / W + W))`` for
the sequence, and each further key under ``vmap`` ``O(log W + k^2)`` after one sort: the
complexity of Wu and Zhang (NeurIPS 2024,
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
from dpjax._src.topk.joint_head import NEGLIGIBLE, log_count, prefix_sequence

__all__: list[str] = []

SMALL_WINDOW = 1024  # count values c_(k) - c_j in [0, W) are histogrammed: tried first
DEFAULT_WINDOW = 2048  # the window for a traced epsilon
MAX_WINDOW = 32768  # the widest window :func:`window_for` gives
BLOCK = 1024  # at least this many items per block of the per-block counts (single release)


def window_for(d: int, k: int, scale: float) -> int | None:
    """A static window that always holds the law for a concrete ``scale`` b (so no fallback): a
    power of two ``W >= b (log prod_i (d - i) + 201 - log(1 - exp(-1/b)))``, at least 512, where
    that is at most :data:`MAX_WINDOW`; else None. (The ``e = 0`` cell holds ``N(0) >= 1``
    sequences, so the largest log-weight is at least ``log(1 - exp(-1/b))``, and the tail bound
    ``log prod_i (d - i) - W / b`` is more than 201 below it: negligible by the rule above,
    whatever the counts.)"""
    if not scale > 0:
        return None
    cell = -math.log(-math.expm1(-1.0 / scale)) if math.isfinite(scale) else math.inf
    need = scale * (sum(math.log(d - i) for i in range(k)) + NEGLIGIBLE + 1.0 + cell)
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
    return jnp.concatenate([jnp.zeros(1, jnp.int32), _running_sum(counts.astype(jnp.int32))])


def _running_sum(x) -> jax.Array:
    """``jnp.cumsum`` of a 1-D array by :func:`jax.lax.associative_scan` (several times faster than
    XLA's CPU cumulative sum at these sizes, the same integers)."""
    return lax.associative_scan(jnp.add, x)


def _eligible(hist: _Histogram, e) -> jax.Array:
    """``n_i(e) = #{j : c_j >= c_(i) - e}`` of every row, for ``-1 <= e < W``: from the top ``k``
    where ``c_(i) - e > c_(k)``, else from the histogram."""
    u = e - hist.diffs[:, -1]
    top = jnp.sum(hist.diffs <= e, axis=1, dtype=jnp.int32)
    return jnp.where(u < 0, top, hist.above + hist.cum[jnp.maximum(u + 1, 0)])


def _log_weights(hist: _Histogram, d: int, k: int, scale) -> tuple[jax.Array, jax.Array]:
    """The ``[W]`` log-weights of the threshold's cells (module docstring) and whether the left-out
    tail is negligible (every error below ``W``, or the tail bound below ``exp(-200)`` of the
    likeliest cell's mass)."""
    dtype = scale.dtype
    window = hist.cum.shape[0] - 1
    e = jnp.arange(window, dtype=jnp.int32)
    counts = log_count(_eligible_all(hist, e), k, dtype)  # log N(e), rows [k, W] summed
    with jax.numpy_dtype_promotion("standard"):
        cell = jnp.where(e < window - 1, jnp.log(-jnp.expm1(-1 / scale)), jnp.zeros((), dtype))
        logits = counts - e.astype(dtype) / scale + cell
    # Every error below W: c_(1) - c_j = diffs[0, -1] + (c_(k) - c_j) < W for every item.
    span = jnp.maximum(window - hist.diffs[0, -1], 0)
    everything = hist.above + hist.cum[span] == d
    log_total = jnp.sum(jnp.log(jnp.asarray(d, dtype) - jnp.arange(k).astype(dtype)))
    negligible = everything | (log_total - window / scale < jnp.max(logits) - NEGLIGIBLE)
    return logits, negligible


def _eligible_all(hist: _Histogram, e) -> jax.Array:
    """:func:`_eligible` of every row at each of the ``e``, shape ``[k, len(e)]``."""
    top = jnp.sum(hist.diffs[:, :, None] <= e[None, None, :], axis=1, dtype=jnp.int32)
    u = e[None, :] - hist.diffs[:, -1:]
    return jnp.where(u < 0, top, hist.above + hist.cum[jnp.maximum(u + 1, 0)])


def _item(hist: _Histogram, position, block: int | None) -> jax.Array:
    """The item at a sorted position (counts decreasing, ties by index): one of the top ``k`` above
    ``c_(k)``; else its value from the cumulative histogram, its block from the value's per-block
    counts and its place in the block (or the stable order's entry, if ``block`` is None)."""
    if block is None:
        return hist.lookup[position]
    below = position - hist.above
    value = jnp.searchsorted(hist.cum[1:], below, side="right").astype(jnp.int32)
    rank = below - hist.cum[value]
    per_block = _running_sum(hist.lookup[:, value])
    chosen = jnp.searchsorted(per_block, rank, side="right").astype(jnp.int32)
    rank = rank - jnp.where(chosen > 0, per_block[jnp.maximum(chosen - 1, 0)], 0)
    inside = lax.dynamic_slice(hist.values, (chosen * block,), (block,)) == value
    # Within the block: the sub-block of BLOCK items holding the match (counts, no scan of the block),
    # then the match's place in it.
    per_sub = _running_sum(jnp.sum(inside.reshape(-1, BLOCK), axis=1, dtype=jnp.int32))
    sub = jnp.searchsorted(per_sub, rank, side="right").astype(jnp.int32)
    rank = rank - jnp.where(sub > 0, per_sub[jnp.maximum(sub - 1, 0)], 0)
    matches = lax.dynamic_slice(inside, (sub * BLOCK,), (BLOCK,)).astype(jnp.int32)
    item = chosen * block + sub * BLOCK + jnp.sum(_running_sum(matches) <= rank).astype(jnp.int32)
    return jnp.where(below < 0, hist.ids[jnp.clip(position, 0, hist.ids.shape[0] - 1)], item)


def sample(
    key, scores, scale, *, k: int, window: int, draw, fallback, sort: bool = False, first: int | None = None
) -> jax.Array:
    """One draw of the joint mechanism for integer ``scores`` (module docstring), or of
    ``fallback(key, scores, scale)`` where the window does not hold the law (None: the window is
    known to hold it, :func:`window_for`). ``draw = (prepare, pick)``: ``pick(key,
    prepare(logits))`` is an exact draw of an index with probability ``softmax(logits)``;
    ``sort``: items are looked up in one stable sort of the counts (for many keys) instead of the
    per-block counts; ``first``: a narrower window tried first, from the same histogram (its first
    ``first`` values), the whole ``window`` only where it does not hold the law."""
    if scores.dtype.itemsize < 4 or scores.dtype == jnp.bool_:
        scores = scores.astype(jnp.int32)
    d = scores.shape[0]
    block = None if sort else min(max(BLOCK, window), BLOCK * -(-d // BLOCK))  # a multiple of BLOCK
    hist = _histogram(scores, k, window, block)
    prepare, pick = draw
    entry_key, sequence_key = jax.random.split(key)

    def attempt(view: _Histogram, otherwise) -> jax.Array:
        logits, negligible = _log_weights(view, d, k, scale)

        def release() -> jax.Array:
            e = pick(entry_key, prepare(logits))
            positions = prefix_sequence(sequence_key, _eligible(view, e), k)
            return jax.vmap(lambda p: _item(view, p, block))(positions)

        if otherwise is None:
            return release()
        # Key independent: a real branch under vmap over keys, and under a vmap that batches the
        # scale the next attempt runs only where some lane needs it (lanes.cond).
        return lanes.cond(negligible, release, otherwise)

    otherwise = None if fallback is None else lambda: fallback(key, scores, scale)
    last = functools.partial(attempt, hist, otherwise)
    if first is None or first >= window:
        return last()
    # The first values of the histogram are the narrower window's (the top counts' differences,
    # clamped at the wider window, are beyond either alike).
    return attempt(hist._replace(cum=hist.cum[: first + 1]), last)


def sampler(*, k: int, window: int | None, draw, fallback, sort: bool = False):
    """:func:`sample` as ``f(key, scores, scale)`` for a static ``window`` from :func:`window_for`
    (no fallback needed) or None (a traced scale: :data:`DEFAULT_WINDOW`, then ``fallback``); a
    window wider than :data:`SMALL_WINDOW` is tried only where that one does not hold the law
    (counts crowded within it need no more), both from one histogram."""
    return functools.partial(
        sample,
        k=k,
        window=window or DEFAULT_WINDOW,
        draw=draw,
        fallback=None if window else fallback,
        sort=sort,
        first=SMALL_WINDOW,
    )
