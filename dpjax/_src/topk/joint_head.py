"""The joint top-k mechanism sampled through its error threshold: a pruned head, else the literal sampler.

Gillenwater, Joseph, Munoz Medina and Ribero Diaz, "A Joint Exponential Mechanism for Differentially
Private Top-k", ICML 2022, Alg. 1: with ``c_(1) >= ... >= c_(d)`` the sorted scores and
``E(S) = max_i (c_(i) - c_{s_i})``, draw ``S`` with ``P(S) ∝ exp(-E(S) / b)``. The same law through
an auxiliary threshold ``u`` (the counting of the paper's Lemma 3.7, used the other way round):

* ``(u, S)`` with density ``exp(-u / b) 1[E(S) <= u]`` has ``S``-marginal ``b exp(-E(S) / b)``, and
  given ``u`` the sequence is uniform among those with every row ``r`` inside the prefix of the
  ``m_r(u) = #{j : c_(r) - c_j <= u}`` largest scores: ``N(u) = prod_r (m_r(u) - r)`` sequences
  (0-based rows; the prefixes are nested), drawn row by row in ``O(k^2)``.
* ``N`` is constant between consecutive differences ``t < t'``, so ``u`` need only be drawn to its
  interval, with weight ``N(t) (exp(-t/b) - exp(-t'/b))``; ``t'`` is the least next difference of
  the ``k`` rows, ``min_r (c_(r) - c_(m_r(t)+1))``: no sort of the ``d k`` differences.
* Pruning: only the ``w + 1`` largest scores are ranked (an exact partial top-k). Below
  ``U = c_(k) - c_(w+1)`` every ``m_r(u) <= w`` and the intervals come from the ranked head
  (``k w`` candidates, one binary search per row each). Above ``U`` the mass is at most
  ``prod_r (d - r) exp(-U/b)`` (times ``b``). Where that bound is below ``exp(-200)`` times the
  likeliest interval's mass, the draw is over the head's intervals alone: a change of the law below
  ``1e-86`` (Gumbel-max in float64 could not pick such an outcome anyway: its noise spans less
  than 200 nats). Otherwise (scores crowded within about
  ``b k log d`` of ``c_(k)``) the paper's literal sampler runs. The choice is key independent, so
  under ``vmap`` over keys it is a real branch, taken once, and under a ``vmap`` that batches
  epsilon (:func:`dpjax._src.lanes.cond`) the literal sampler runs only where some lane needs it.

So where the scores' gaps are wide against ``b k log d`` one release costs one partial top-k over
``d`` and ``O(k^2 w log w)`` key-independent work, and each further key under ``vmap``
``O(log(k w) + k^2)``. The law is that of the differences as computed in the scores' dtype, as in
:mod:`dpjax._src.topk.joint`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src import lanes, sharded

__all__: list[str] = []


def nth_free(n, taken, k: int):
    """The ``n``-th (0-based) nonnegative integer not in ``taken`` (a fixed point in ``k`` steps)."""
    return lax.fori_loop(0, k, lambda _, y: n + jnp.sum(taken <= y).astype(jnp.int32), n)


def prefix_sequence(key, m, k: int) -> jax.Array:
    """A uniform sequence of distinct positions with row ``r`` among the first ``m[r]`` (nested
    prefixes, ``m[r] - r >= 1``): row by row, a uniform position not taken by the rows before."""
    keys = jax.random.split(key, k)

    def body(r, taken):
        n = jax.random.randint(keys[r], (), 0, jnp.maximum(m[r] - r, 1), jnp.int32)
        return taken.at[r].set(nth_free(n, taken, k))

    return lax.fori_loop(0, k, body, jnp.full(k, jnp.iinfo(jnp.int32).max, jnp.int32))


def log_count(m, k: int, dtype) -> jax.Array:
    """``log prod_r (m_r - r)`` over the rows ``r``, the leading axis of ``m`` (``[k, ...]``), and
    ``-inf`` where a factor is not positive. The sum over the rows is a product with ones: XLA's CPU
    reduction over a short leading axis is many times slower."""
    free = m - jnp.arange(k, dtype=m.dtype).reshape((k,) + (1,) * (m.ndim - 1))
    log_free = jnp.log(jnp.maximum(free, 1).astype(dtype))
    total = jnp.tensordot(jnp.ones(k, dtype), log_free, axes=1, precision=lax.Precision.HIGHEST)
    return jnp.where(jnp.all(free > 0, axis=0), total, -jnp.inf)


NEGLIGIBLE = 200.0  # a tail bound below exp(-200) times the likeliest interval's mass is dropped


class _Head(NamedTuple):
    ids: jax.Array  # [w]: the ranked head's item ids, largest score first
    m: jax.Array  # [k w, k]: m_r(t) of each candidate difference t
    logits: jax.Array  # [k w]: each interval's log-mass (-inf for a repeated or tail difference)
    complete: jax.Array  # the tail bound is negligible (or the head is every item)


def _head(scores, k: int, width: int, scale) -> _Head:
    """The key-independent head: the ``width`` largest scores (and the next one, which sets ``U``),
    each candidate difference's ``m_r``, and the log-masses of the intervals and of the tail."""
    d, dtype = scores.shape[0], scale.dtype
    whole = width >= d
    values, ids = sharded.top_k(scores, d if whole else width + 1)
    diff = values[:k, None] - values[None, :]  # rows nondecreasing; exact for integer scores
    cols = d if whole else width
    t = diff[:, :cols].ravel()
    m = jax.vmap(lambda row: jnp.searchsorted(row, t, side="right").astype(jnp.int32))(diff).T
    row = jnp.arange(k * cols, dtype=jnp.int32) // cols
    first = jnp.concatenate([jnp.ones((k, 1), bool), diff[:, 1:cols] != diff[:, : cols - 1]], 1).ravel()
    ranks = jnp.arange(k, dtype=jnp.int32)
    # t also a difference of an earlier row r: its last entry <= t equals t.
    prior = diff[ranks[None, :], jnp.maximum(m - 1, 0)]  # [k w, k]
    seen = (ranks[None, :] < row[:, None]) & (m > 0) & (prior == t[:, None])
    following = diff[ranks[None, :], jnp.minimum(m, diff.shape[1] - 1)] - t[:, None]
    gap = jnp.min(jnp.where(m < diff.shape[1], following.astype(dtype), jnp.inf), axis=1)
    log_mass = log_count(m.T, k, dtype) - t.astype(dtype) / scale + jnp.log(-jnp.expm1(-gap / scale))
    tail_start = jnp.asarray(jnp.inf, dtype) if whole else diff[k - 1, width].astype(dtype)
    logits = jnp.where(first & ~jnp.any(seen, axis=1) & (t.astype(dtype) < tail_start), log_mass, -jnp.inf)
    log_max = jnp.sum(jnp.log(jnp.asarray(d, dtype) - ranks.astype(dtype)))
    complete = whole or (log_max - tail_start / scale < jnp.max(logits) - NEGLIGIBLE)
    return _Head(ids[:cols], m, logits, jnp.asarray(complete))


def sample(key, scores, scale, *, k: int, width: int, draw, literal) -> jax.Array:
    """One draw of the joint mechanism (module docstring) from the head of ``width`` items where its
    tail is negligible, else from ``literal(key, scores, scale)`` (the paper's sampler over all
    ``d k`` differences). ``draw = (prepare, pick)``: ``pick(key, prepare(logits))`` is an exact
    draw of an index with probability ``softmax(logits)``."""
    if scores.dtype == jnp.bool_:
        scores = scores.astype(jnp.int32)
    d = scores.shape[0]
    prepare, pick = draw
    entry_key, sequence_key = jax.random.split(key)

    def release(head: _Head) -> jax.Array:
        s = pick(entry_key, prepare(head.logits))
        return head.ids[prefix_sequence(sequence_key, head.m[s], k)]

    first = _head(scores, k, width, scale)
    if width >= d:
        return release(first)
    # Key independent: a real branch under vmap over keys, and under a vmap that batches the scale
    # the literal sampler runs only where some lane needs it (lanes.cond).
    return lanes.cond(first.complete, lambda: release(first), lambda: literal(key, scores, scale))


def default_width(d: int, k: int) -> int:
    """The head's size: 64 or ``8 k`` items, whichever is larger (all ``d`` when that is not less)."""
    return min(d, max(64, 8 * k))
