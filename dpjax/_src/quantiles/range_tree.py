"""One ApproxQuantiles node's exponential mechanism in O(log n) per key: tilted segment trees.

Kaplan, Schnapp and Stemmer (ICML 2022, Alg. 1) run at every node the single-quantile exponential
mechanism (Smith 2011, Alg. 2) on the data between the two outputs that bound it: gap ``g`` of the
node's range ``gap_lo..gap_hi`` has weight ``width_g exp(-c |g - T|)`` (see
:mod:`dpjax._src.quantiles.range_em`). ``c`` depends on the static node and epsilon only, the range
and ``T`` on the key (through the earlier outputs). Split at ``k = floor(T)``: a set ``U`` of gaps
wholly left of ``T`` ending at ``e`` has mass ``exp(-c (T - e)) sum_U width_g e^{-c (e - g)}`` and
one wholly right of it starting at ``s`` has ``exp(-c (s - T)) sum_U width_g e^{-c (g - s)}``: the
sums are key independent once ``U`` is fixed.

Key-independent preparation (once per data, levels and epsilon, so once under ``vmap`` over keys):
the node's two tilted sums per block of ``B`` gaps (:func:`dpjax._src.quantiles.range_em.block_tables`),
then per direction a heap over the blocks (``D = 2^L`` leaves) whose node over the blocks ``[s, s +
2^h)`` holds the sum tilted from its end (left) or its start (right), combined pairwise in log space
(``logaddexp(a, b - c B 2^(h-1))`` and its mirror; no tilt grows beyond its node, so nothing
overflows), and ``-log P(left child)`` as ``log(1 + exp(delta))`` of the two tilted children, a
difference of log-masses.

One draw (per node and key): the blocks holding ``gap_lo``, ``k`` and ``gap_hi`` are weighed gap by
gap (exact logits, the end gaps cut at the node's bounds); the full blocks between them, left and
right of ``T``, are covered by at most ``2 (L + 1)`` canonical heap nodes each (the bottom-up
segment-tree decomposition), whose exact masses are their tilted sums times the tilt to ``T``.
Three walks of the top-down Gumbel process (Maddison, Tarlow and Minka 2014, Sec. 3; go to the
first child iff an Exp(1) variate exceeds ``-log P(first child)``, one variate a level, as in
:mod:`dpjax._src.gumbel_process`) then pick one of these ``<= 3 + 4 (L + 1)`` units (over their
log-mass heap, :func:`dpjax._src.quantiles.em_sampler.em_tree`), walk a chosen heap node down to
its block (over the prepared splits) and pick the block's gap (over the heap of its ``B`` exact
logits); the value is uniform in the gap, cut at the node's bounds. Every stage draws from the
exact conditional law, so the gap has the law of the literal Gumbel-max over all the node's gaps
(:func:`dpjax._src.quantiles.range_em.node_em`), up to the float rounding of the log-sums
(relative ``2 L eps (M + 1)`` per split, as in :mod:`dpjax._src.gumbel_process`). Per key:
``ceil(log2(7 + 4 L)) + L + ceil(log2 B)`` exponential variates, ``O(L + B)`` gathers and
log-sums, no pass over the range (``B = 16``, ``L = 13`` at ``n = 10^5``: 23 variates).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src.noise import standard_exponential
from dpjax._src.quantiles import em_sampler
from dpjax._src.quantiles.range_em import Node, block_logits, block_tables, release

__all__: list[str] = []


class RangeTrees(NamedTuple):
    """Every node's tilted heaps over the blocks (leading axis: the nodes; then the direction,
    0 tilted from the end (left of ``T``), 1 from the start (right of ``T``)): ``mass`` ``[2, 2D]``
    (entry ``v`` of heap node ``v``, leaves ``D..2D-1``, entry 0 unused) and ``split`` ``[2, D]``
    (``-log P(left child)``)."""

    mass: jax.Array
    split: jax.Array


def layout(gaps: int) -> tuple[int, int]:
    """``(B, L)``: blocks of ``B = min(16, max(1, gaps // 8))`` gaps under a heap of ``2^L``
    leaves (``B = 1`` on tiny data, so that every stage of the draw runs there too)."""
    size = min(16, max(1, gaps // 8))
    blocks = -(-gaps // size)
    return size, max(0, math.ceil(math.log2(blocks)))


def _combine(first, second):
    """A parent's log-mass and ``-log P(first)`` from its two children's, both already tilted to
    the parent's reference gap (``-inf`` for an empty child)."""
    empty = jnp.isneginf(first) & jnp.isneginf(second)
    split = jnp.where(empty, 0, jnp.logaddexp(0, jnp.where(empty, 0, second - first)))
    return jnp.where(jnp.isneginf(first), second, first + split), split


def build_trees(log_width, cs) -> RangeTrees:
    """Every node's :class:`RangeTrees` (EM parameters ``cs``), key independent, ``O(n)`` per node."""
    dtype = log_width.dtype
    size, depth = layout(log_width.shape[0])
    leaves = 1 << depth
    left, right = block_tables(log_width, cs, size, -(-log_width.shape[0] // size))
    pad = ((0, 0), (0, leaves - left.shape[1]))
    level = jnp.stack([jnp.pad(t, pad, constant_values=-jnp.inf) for t in (left, right)], axis=1)
    masses, splits = [level], []
    for h in range(1, depth + 1):
        tilt = (cs * (size << (h - 1)))[:, None].astype(dtype)
        pairs = level.reshape(*level.shape[:2], -1, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        # left of T: tilted from the end, the first child is farther; right of T: the second is.
        left_mass, left_split = _combine(a[:, 0] - tilt, b[:, 0])
        right_mass, right_split = _combine(a[:, 1], b[:, 1] - tilt)
        level = jnp.stack([left_mass, right_mass], axis=1)
        masses.append(level)
        splits.append(jnp.stack([left_split, right_split], axis=1))
    unused = jnp.zeros((cs.shape[0], 2, 1), dtype)
    return RangeTrees(
        jnp.concatenate([unused, *reversed(masses)], axis=2),
        jnp.concatenate([unused, *reversed(splits)], axis=2),
    )


def _canonical(first, stop, depth: int):
    """The heap nodes covering the blocks ``[first, stop)`` (arrays of such ranges), by the
    bottom-up segment-tree decomposition in closed form: at height ``h`` the walk's ends are
    ``l = ceil((first + D) / 2^h)`` and ``r = floor((stop + D) / 2^h)``; ``l`` is taken when odd
    and ``l < r``, then ``r - 1`` when ``r`` is odd and ``l' < r`` (``l' = l + 1`` if ``l`` was
    taken). Returns ``(nodes, heights, valid)`` with a trailing axis of ``2 (depth + 1)`` slots."""
    height = jnp.arange(depth + 1, dtype=jnp.int32)
    lo = (first[..., None] + (1 << depth) + (1 << height) - 1) >> height
    hi = (stop[..., None] + (1 << depth)) >> height
    take_lo = (lo < hi) & (lo % 2 == 1)
    take_hi = (lo + take_lo < hi) & (hi % 2 == 1)
    nodes = jnp.concatenate([lo, hi - 1], axis=-1)
    heights = jnp.concatenate([height, height])
    return nodes, jnp.broadcast_to(heights, nodes.shape), jnp.concatenate([take_lo, take_hi], axis=-1)


def _walk(walk, v, split, depth: int):
    """From heap node ``v`` down to a leaf: go to the second child iff the step's Exp(1) variate is
    at most ``split[v] = -log P(first child)`` (the top-down Gumbel process, one variate a level).
    ``split`` is a function of the node (a gather, so that no row of the heap is copied per key)."""

    def step(i, v):
        internal = v < (1 << depth)
        parent = jnp.where(internal, v, 1)
        go_second = walk[i] <= split(parent)
        return jnp.where(internal, 2 * parent + go_second.astype(jnp.int32), v)

    return lax.fori_loop(0, depth, step, v) if depth else v


def _heap_draw(walk, logits):
    """An index with probability ``softmax(logits)`` by the walk down their log-mass heap
    (:func:`dpjax._src.quantiles.em_sampler.em_tree`, ``ceil(log2 len)`` variates ``walk``)."""
    tree = em_sampler.em_tree(logits)
    depth = walk.shape[0]
    return _walk(walk, jnp.ones((), jnp.int32), lambda v: tree.split[v], depth) - (1 << depth)


def node_em_trees(key, edges, log_width, node: Node, trees: RangeTrees):
    """One node's ``(gap, value)`` by the segment-tree draw of the module docstring (the law of
    :func:`dpjax._src.quantiles.range_em.node_em`), ``O(log n + B)`` per key."""
    dtype = log_width.dtype
    size, depth = layout(log_width.shape[0])
    leaves = 1 << depth
    target = node.q * (node.gap_hi - node.gap_lo).astype(dtype)  # T - gap_lo
    kink = node.gap_lo + jnp.floor(target).astype(jnp.int32)
    special = jnp.stack([node.gap_lo, kink, node.gap_hi]) // size  # blocks weighed gap by gap
    logits = jax.vmap(lambda b: block_logits(edges, log_width, node, b * size, size))(special)
    repeated = jnp.concatenate([jnp.zeros(1, bool), special[1:] == special[:-1]])
    special_mass = jnp.where(repeated, -jnp.inf, jax.nn.logsumexp(logits, axis=1))
    # the full blocks left of T (side 0) and right of it (side 1)
    nodes, heights, valid = _canonical(special[:2] + 1, special[1:], depth)
    side = jnp.arange(2, dtype=jnp.int32)[:, None]
    first = (nodes << heights) - leaves  # each unit's first block
    start = (first * size - node.gap_lo).astype(dtype)  # its first gap, relative to gap_lo
    end = start + (size << heights).astype(dtype) - 1
    tilted = trees.mass[side, jnp.clip(nodes, 0, 2 * leaves - 1)]
    masses = jnp.where(side == 0, tilted - node.c * (target - end), tilted - node.c * (start - target))
    masses = jnp.concatenate([special_mass, jnp.where(valid, masses, -jnp.inf).ravel()])
    units, gaps = (math.ceil(math.log2(k)) for k in (masses.shape[0], size))
    walk_key, uniform_key = jax.random.split(key)
    walk = standard_exponential(walk_key, (units + depth + gaps,), dtype)
    chosen = _heap_draw(walk[:units], masses)
    nodes = jnp.concatenate([special + leaves, nodes.ravel()])[chosen]
    side = jnp.concatenate([jnp.zeros(3, jnp.int32), jnp.broadcast_to(side, heights.shape).ravel()])[chosen]
    block = _walk(walk[units : units + depth], nodes, lambda v: trees.split[side, v], depth) - leaves
    logits = block_logits(edges, log_width, node, block * size, size)
    inside = _heap_draw(walk[units + depth :], logits)
    return release(uniform_key, edges, node, block * size + inside)
