"""The joint top-k mechanism sampled through its error threshold: a pruned head, an exact tail.

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
  ``prod_r (d - r) exp(-U/b)`` (times ``b``); that bound enters the draw as one more outcome, and when
  it is drawn ``u = U + Exponential(b)`` is accepted with probability ``N(u) / prod_r (d - r)``
  (exact rejection: a rejection restarts the draw). Only then is the whole score vector sorted
  (``O(d log d)``; for one release inside the rare branch, under ``vmap`` over keys once per data).
  A tail bound below ``exp(-200)`` times the likeliest interval's mass is dropped, with its sort:
  a change of the law below ``1e-86``, and an outcome that Gumbel-max or the Gumbel process cannot
  pick anyway in float64 (their noise spans less than 200 nats).

So one release costs one partial top-k over ``d`` and ``O(k^2 w log w)`` key-independent work, and
each further key under ``vmap`` ``O(log(k w) + k^2)`` (``+ k log d`` where the tail counts). The
law is that of the differences as computed in the scores' dtype, as in :mod:`dpjax.topk.joint`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax import noise, sharded

__all__: list[str] = []


def _nth_free(n, taken, k: int):
    """The ``n``-th (0-based) nonnegative integer not in ``taken`` (a fixed point in ``k`` steps)."""
    return lax.fori_loop(0, k, lambda _, y: n + jnp.sum(taken <= y).astype(jnp.int32), n)


def _prefix_sequence(key, m, k: int) -> jax.Array:
    """A uniform sequence of distinct positions with row ``r`` among the first ``m[r]`` (nested
    prefixes, ``m[r] - r >= 1``): row by row, a uniform position not taken by the rows before."""
    keys = jax.random.split(key, k)

    def body(r, taken):
        n = jax.random.randint(keys[r], (), 0, jnp.maximum(m[r] - r, 1), jnp.int32)
        return taken.at[r].set(_nth_free(n, taken, k))

    return lax.fori_loop(0, k, body, jnp.full(k, jnp.iinfo(jnp.int32).max, jnp.int32))


def _log_count(m, k: int, dtype) -> jax.Array:
    """``log prod_r (m_r - r)`` along the last axis, ``-inf`` where a factor is not positive."""
    free = m - jnp.arange(k, dtype=m.dtype)
    log_free = jnp.log(jnp.maximum(free, 1).astype(dtype))
    return jnp.where(jnp.all(free > 0, axis=-1), jnp.sum(log_free, axis=-1), -jnp.inf)


_NEGLIGIBLE = 200.0  # a tail bound below exp(-200) times the likeliest interval's mass is dropped


class _Head(NamedTuple):
    ids: jax.Array  # [w]: the ranked head's item ids, largest score first
    m: jax.Array  # [k w, k]: m_r(t) of each candidate difference t
    logits: jax.Array  # [k w + 1]: each interval's log-mass, then the tail bound's
    tail_start: jax.Array  # U (the dtype of the weights; +inf when the head is every item)
    log_max: jax.Array  # log prod_r (d - r)


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
    log_mass = _log_count(m, k, dtype) - t.astype(dtype) / scale + jnp.log(-jnp.expm1(-gap / scale))
    tail_start = jnp.asarray(jnp.inf, dtype) if whole else diff[k - 1, width].astype(dtype)
    keep = first & ~jnp.any(seen, axis=1) & (t.astype(dtype) < tail_start)
    log_max = jnp.sum(jnp.log(jnp.asarray(d, dtype) - ranks.astype(dtype)))
    head = jnp.where(keep, log_mass, -jnp.inf)
    tail = jnp.where(whole, -jnp.inf, log_max - tail_start / scale)
    tail = jnp.where(tail > jnp.max(head) - _NEGLIGIBLE, tail, -jnp.inf)
    logits = jnp.concatenate([head, tail[None]])
    return _Head(ids[:cols], m, logits, tail_start, log_max)


class _Tail(NamedTuple):
    ids: jax.Array  # [d]: every item id, largest score first (ties to the lower id)
    diff: jax.Array  # [k, d]: c_(r) - c_(j) in sorted order, in the dtype of the weights


def _tail(scores, k: int, dtype) -> _Tail:
    """The whole sorted score vector and its ``k`` rows of differences (``O(d log d + d k)``)."""
    ids = jnp.arange(scores.shape[0], dtype=jnp.int32)
    neg_sorted, order = lax.sort((-scores, ids), num_keys=1, is_stable=True)
    diff = (neg_sorted[None, :] - neg_sorted[:k, None]).astype(dtype)
    return _Tail(order, diff)


def _from_tail(key, head: _Head, tail: _Tail, scale, k: int):
    """``u = U + Exponential(b)``, accepted with probability ``N(u) / prod_r (d - r)``, and a uniform
    sequence within the prefixes ``m_r(u)``: ``(ids, accepted)``."""
    u_key, accept_key, sequence_key = jax.random.split(key, 3)
    u = head.tail_start + scale * noise.exponential(u_key, (), 1.0, scale.dtype)
    m = jax.vmap(lambda row: jnp.searchsorted(row, u, side="right"))(tail.diff).astype(jnp.int32)
    log_accept = _log_count(m, k, scale.dtype) - head.log_max
    accepted = jnp.log(jax.random.uniform(accept_key, (), scale.dtype)) < log_accept
    return tail.ids[_prefix_sequence(sequence_key, m, k)], accepted


def _sample(key, scores, scale, *, k: int, width: int, draw, tail_once: bool) -> jax.Array:
    """One draw of the joint mechanism (module docstring). ``draw = (prepare, pick)``: ``pick(key,
    prepare(logits))`` is an exact draw of an index with probability ``softmax(logits)``. With
    ``tail_once`` the sorted tail is built before the draw (key independent: once under ``vmap``
    over keys), else only when the tail is drawn."""
    if scores.dtype == jnp.bool_:
        scores = scores.astype(jnp.int32)
    head = _head(scores, k, width, scale)
    prepare, pick = draw
    prepared = prepare(head.logits)
    last = head.m.shape[0]

    def from_head(key, s):
        return head.ids[_prefix_sequence(key, head.m[jnp.minimum(s, last - 1)], k)], True

    def attempt(key, tail):
        entry_key, rest_key = jax.random.split(key)
        s = pick(entry_key, prepared)
        if tail is None:  # one release: the tail's sort only on the rare branch
            build = functools.partial(_tail, scores, k, scale.dtype)
            from_tail = functools.partial(_from_tail, rest_key, head, scale=scale, k=k)
            return lax.cond(s == last, lambda: from_tail(build()), lambda: from_head(rest_key, s))
        # Both branches, then a select: a batched lax.cond would copy the tail table per key.
        (head_ids, _), (tail_ids, accepted) = (
            from_head(rest_key, s),
            _from_tail(rest_key, head, tail, scale, k),
        )
        return jnp.where(s == last, tail_ids, head_ids), (s != last) | accepted

    def with_tail(key):
        tail = _tail(scores, k, scale.dtype) if tail_once else None

        def body(carry):
            key, _, _ = carry
            key, sub = jax.random.split(key)
            ids, accepted = attempt(sub, tail)
            return key, ids, jnp.asarray(accepted)

        init = (key, jnp.zeros(k, jnp.int32), jnp.asarray(False))
        return lax.while_loop(lambda carry: ~carry[2], body, init)[1]

    def head_only(key):  # the tail cannot be drawn: one attempt, no sort
        entry_key, rest_key = jax.random.split(key)
        return from_head(rest_key, pick(entry_key, prepared))[0]

    if width >= scores.shape[0]:
        return head_only(key)
    # Key independent, so under vmap over keys a real branch: the sort only where the tail counts.
    return lax.cond(head.logits[last] > -jnp.inf, with_tail, head_only, key)


def _default_width(d: int, k: int) -> int:
    """The head's size: 64 or ``8 k`` items, whichever is larger (all ``d`` when that is not less)."""
    return min(d, max(64, 8 * k))
