"""One ApproxQuantiles node's exponential mechanism: a quantile of the sorted data in a sub-range.

Kaplan, Schnapp and Stemmer (ICML 2022, Alg. 1) run, at every node of the recursion, the
single-quantile exponential mechanism (Smith 2011, Alg. 2) on the data between the two outputs that
bound the node. With the sorted data's ``n + 1`` gaps (:func:`dpjax._src.quantiles.intervals.sorted_gaps`), a
node owns the gaps ``gap_lo..gap_hi`` (the end gaps cut at its bounds ``lo`` and ``hi``), and gap
``g`` has weight ``width_g exp(-c |g - T|)``, ``T = gap_lo + q (gap_hi - gap_lo)``. The gaps strictly
left of ``T`` carry ``exp(-c T) sum width_g e^{c g}`` and those right of it ``exp(c T) sum width_g
e^{-c g}``: sums over fixed blocks of gaps are therefore key and range independent once ``c`` is
known, and ``c`` depends only on the static node and epsilon (not on the key or on earlier
outputs). Two exact samplers of the same law, both Gumbel-max over unit masses (an exact draw from
``softmax``) where every mass is exact and the units straddling ``T`` or the range's ends are summed
gap by gap:

* ``"blocks"``: blocks of ``~sqrt(n)`` gaps, then the chosen block's gaps; the block tables are
  computed per node (two log-sum-exps over all gaps), ``O(sqrt(n))`` per node and key.
* ``"superblocks"``: superblocks of ``B^2`` gaps, their blocks of ``B ~ n^(1/3)`` gaps, then the
  chosen block's gaps, ``O(n^(1/3))`` per node and key. The tables of all nodes are prepared
  together (:func:`build_tables`): the widths are rescaled per block by the block's largest width once
  (``n`` exponentials, node independent) and every node's two tilted block sums are one matrix
  product with the vectors ``e^{c (o - B + 1)}`` and ``e^{-c o}``, ``o < B`` (exact float sums of
  nonnegative terms, relative error ``<= B eps``). A term is lost to underflow only if it is below
  ``tiny`` times its block's largest width, while the block's sum is at least ``e^{-c (B - 1)}``
  times it, so the tables' relative error is below ``e^{-L}`` when ``c (B - 1) <= L =
  -log(tiny) / 2`` (``L = 43`` in float32, 354 in float64); for larger ``c`` the tables are exact
  log-sum-exps instead (a ``lax.cond`` on the key-independent ``c``, so under ``vmap`` over keys only
  one branch runs; under a ``vmap`` that batches epsilon, :func:`dpjax._src.lanes.cond`, only the
  branches some lane needs).
* ``"tree"``: the superblock layout and tables, each of the three stages drawn by the top-down
  Gumbel process over a log-mass heap of that stage's log-masses (:mod:`dpjax._src.quantiles.em_sampler`,
  Maddison, Tarlow and Minka 2014, Sec. 3) instead of Gumbel-max: ``~log2(n^(1/3))`` exponential
  variates per stage where Gumbel-max takes one per unit. Under ``vmap`` over keys the random
  variates are most of the superblock sampler's cost, so this is the fast path; its law is the
  same up to the rounding of each heap's log-sums (relative ``2 L eps (M + 1)`` per split, ``L =
  ceil(log2 B)``, see :mod:`dpjax._src.gumbel_process`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src import lanes
from dpjax._src.quantiles import em_sampler
from dpjax._src.quantiles.intervals import gumbel_argmax

__all__: list[str] = []


class Node(NamedTuple):
    """One node's range: its global gaps ``gap_lo..gap_hi``, cut at ``lo`` and ``hi``, its level
    ``q`` and EM parameter ``c``."""

    gap_lo: jax.Array
    gap_hi: jax.Array
    lo: jax.Array
    hi: jax.Array
    q: jax.Array
    c: jax.Array


class Tables(NamedTuple):
    """One node's key-independent tilted sums (log), per block of ``B`` gaps and per superblock of
    ``B^2``: ``left`` is ``log sum width_g e^{c (g - end)}`` and ``right`` ``log sum width_g
    e^{-c (g - start)}`` over the unit's gaps."""

    left: jax.Array
    right: jax.Array
    super_left: jax.Array
    super_right: jax.Array


def block_logits(edges, log_width, node: Node, start, size: int):
    """The exact log-weights of the node's gaps ``start..start+size-1`` (``-inf`` outside its range):
    ``log(cut width) - c |g - gap_lo - q (gap_hi - gap_lo)|``."""
    dtype = log_width.dtype
    gap = start + jnp.arange(size, dtype=jnp.int32)
    safe = jnp.clip(gap, 0, log_width.shape[0] - 1)
    ends = jnp.stack([node.gap_lo, node.gap_hi])
    cut = jnp.minimum(edges[ends + 1], node.hi) - jnp.maximum(edges[ends], node.lo)  # the end gaps, cut
    with jax.numpy_dtype_promotion("standard"):
        cut = jnp.log(jnp.maximum(cut, 0))
    width = jnp.where(gap == node.gap_lo, cut[0], jnp.where(gap == node.gap_hi, cut[1], log_width[safe]))
    distance = (gap - node.gap_lo).astype(dtype) - node.q * (node.gap_hi - node.gap_lo).astype(dtype)
    inside = (gap >= node.gap_lo) & (gap <= node.gap_hi)
    return jnp.where(inside, width - node.c * jnp.abs(distance), -jnp.inf)


def _padded_blocks(log_width, size: int, blocks: int):
    return jnp.pad(log_width, (0, blocks * size - log_width.shape[0]), constant_values=-jnp.inf).reshape(
        blocks, size
    )


def _block_tables(log_width, c, size: int, blocks: int):
    """Per block of ``size`` gaps, ``log sum width_g e^{c (g - end)}`` and ``log sum width_g
    e^{-c (g - start)}`` by log-sum-exp: the block's mass, up to ``e^{-c (T - end)}`` or
    ``e^{-c (start - T)}``, when it lies wholly left or right of ``T`` (relative to the end nearest
    ``T``, so the dominant terms are near 1 and no large values cancel)."""
    padded = _padded_blocks(log_width, size, blocks)
    offset = c * jnp.arange(size, dtype=log_width.dtype)
    left = jax.nn.logsumexp(padded + (offset - offset[-1]), axis=1)
    return left, jax.nn.logsumexp(padded - offset, axis=1)


def _unit_masses(start, unit: int, left, right, node: Node, target):
    """The exact log-masses of units of ``unit`` gaps starting at ``start`` that lie wholly inside
    the node's range and on one side of ``T`` (``target = T - gap_lo``); ``-inf`` for units outside
    the range; a unit holding ``gap_lo``, ``gap_hi`` or ``T`` gets a wrong value the caller replaces."""
    offset = (start - node.gap_lo).astype(left.dtype) - target  # start - T
    end = offset + (unit - 1)  # end - T
    masses = jnp.where(end <= 0, left + node.c * end, right - node.c * offset)
    return jnp.where((start + unit - 1 < node.gap_lo) | (start > node.gap_hi), -jnp.inf, masses)


def node_em(key, edges, log_width, node: Node):
    """``"blocks"``: one node's gap and value by Gumbel-max over blocks of ``B ~ sqrt(n)`` gaps (the
    blocks holding ``gap_lo``, ``gap_hi`` and ``T`` summed gap by gap), then the chosen block's gaps.
    Returns ``(gap, value)``, the value uniform in the chosen (cut) gap; a node whose range has zero
    width returns ``lo``. ``O(n)`` per node (tables, key independent) and ``O(n / B + B)`` per key."""
    dtype = log_width.dtype
    size = math.isqrt(log_width.shape[0] - 1) + 1
    blocks = -(-log_width.shape[0] // size)
    left_tables, right_tables = _block_tables(log_width, node.c, size, blocks)
    start = jnp.arange(blocks, dtype=jnp.int32) * size
    target = node.q * (node.gap_hi - node.gap_lo).astype(dtype)  # T - gap_lo
    masses = _unit_masses(start, size, left_tables, right_tables, node, target)
    kink = node.gap_lo + jnp.floor(target).astype(jnp.int32)
    for special in (node.gap_lo, node.gap_hi, kink):
        b = special // size
        masses = masses.at[b].set(jax.nn.logsumexp(block_logits(edges, log_width, node, b * size, size)))
    block_key, gap_key, uniform_key = jax.random.split(key, 3)
    chosen_block = gumbel_argmax(block_key, masses).astype(jnp.int32)
    inside = gumbel_argmax(gap_key, block_logits(edges, log_width, node, chosen_block * size, size))
    return release(uniform_key, edges, node, chosen_block * size + inside.astype(jnp.int32))


def release(key, edges, node: Node, chosen):
    """``(gap, value)``: the chosen gap (clipped to the node's range) and a value uniform in it, cut
    at the node's bounds ``lo`` and ``hi``."""
    chosen = jnp.clip(chosen, node.gap_lo, node.gap_hi)
    u = jax.random.uniform(key, (), edges.dtype)
    a = jnp.maximum(edges[chosen], node.lo)
    b = jnp.minimum(edges[chosen + 1], node.hi)
    return chosen, jnp.clip(a + u * (b - a), node.lo, node.hi)


def _layout(gaps: int) -> tuple[int, int]:
    """``(B, S)``: blocks of ``B = ceil(gaps^(1/3))`` gaps and ``S`` superblocks of ``B`` blocks."""
    size = 1
    while size**3 < gaps:
        size += 1
    return size, -(-gaps // (size * size))


def block_tables(log_width, cs, size: int, blocks: int):
    """Every node's per-block tilted sums ``(left, right)``, shape ``[nodes, blocks]`` (EM parameters
    ``cs``, blocks of ``size`` gaps), key independent: one matrix product over the rescaled widths
    when ``max(cs) (size - 1) <= -log(tiny) / 2``, exact log-sum-exps otherwise (see the module
    docstring)."""
    dtype = log_width.dtype
    limit = -math.log(float(jnp.finfo(dtype).tiny)) / 2

    def product(cs):
        padded = _padded_blocks(log_width, size, blocks)
        top = jnp.max(padded, axis=1)
        top = jnp.where(jnp.isfinite(top), top, jnp.zeros((), dtype))
        scaled = jnp.exp(padded - top[:, None])  # node independent
        offset = cs[None, :] * jnp.arange(size, dtype=dtype)[:, None]  # [B, nodes]
        vectors = jnp.concatenate([jnp.exp(offset - offset[-1:]), jnp.exp(-offset)], axis=1)
        sums = jnp.matmul(scaled, vectors, precision=lax.Precision.HIGHEST)  # [blocks, 2 nodes]
        with jax.numpy_dtype_promotion("standard"):
            logs = jnp.log(sums) + top[:, None]
        return logs[:, : cs.shape[0]].T, logs[:, cs.shape[0] :].T

    def exact(cs):
        return jax.vmap(lambda c: _block_tables(log_width, c, size, blocks))(cs)

    # Under a vmap that batches epsilon, exact runs only where some lane needs it (lanes.cond).
    return lanes.cond(jnp.all(cs * (size - 1) <= limit), product, exact, cs)


def build_tables(log_width, cs) -> Tables:
    """Every node's :class:`Tables` (leading axis: the nodes, EM parameters ``cs``), key independent
    (:func:`block_tables`, then the superblocks' sums of their blocks)."""
    size, supers = _layout(log_width.shape[0])
    left, right = block_tables(log_width, cs, size, size * supers)
    shift = cs[:, None, None] * size * jnp.arange(size, dtype=log_width.dtype)[None, None, :]  # [nodes, 1, B]
    super_left = jax.nn.logsumexp(left.reshape(-1, supers, size) - shift[..., ::-1], axis=2)
    super_right = jax.nn.logsumexp(right.reshape(-1, supers, size) - shift, axis=2)
    return Tables(left, right, super_left, super_right)


def heap_draw(key, logits) -> jax.Array:
    """One index with probability ``softmax(logits)`` by the top-down Gumbel process over the
    logits' log-mass heap (``"tree"``; O(len) sums, O(log len) variates)."""
    return em_sampler.em_index(key, em_sampler.em_tree(logits))


def node_em_superblocks(key, edges, log_width, node: Node, tables: Tables, draw=gumbel_argmax):
    """``"superblocks"``: the law of :func:`node_em` by Gumbel-max over superblocks, then over the
    chosen superblock's blocks, then over the chosen block's gaps, every mass exact (tables for units
    wholly inside the range on one side of ``T``, gap by gap for the <= 3 blocks holding
    ``gap_lo``, ``gap_hi`` or ``T``, and the superblocks holding those from their blocks).
    ``O(n^(1/3))`` per node and key. ``draw(key, logits)`` draws each stage (``"tree"``:
    :func:`heap_draw`)."""
    dtype = log_width.dtype
    size, supers = _layout(log_width.shape[0])
    target = node.q * (node.gap_hi - node.gap_lo).astype(dtype)  # T - gap_lo
    kink = node.gap_lo + jnp.floor(target).astype(jnp.int32)
    special = jnp.stack([node.gap_lo, node.gap_hi, kink]) // size  # the blocks summed gap by gap
    special_mass = jax.vmap(lambda b: jax.nn.logsumexp(block_logits(edges, log_width, node, b * size, size)))(
        special
    )

    def block_masses(sb):
        index = sb * size + jnp.arange(size, dtype=jnp.int32)
        masses = _unit_masses(index * size, size, tables.left[index], tables.right[index], node, target)
        for i in range(3):
            masses = jnp.where(index == special[i], special_mass[i], masses)
        return masses

    start = jnp.arange(supers, dtype=jnp.int32) * size * size
    masses = _unit_masses(start, size * size, tables.super_left, tables.super_right, node, target)
    for i in range(3):
        masses = masses.at[special[i] // size].set(jax.nn.logsumexp(block_masses(special[i] // size)))
    super_key, block_key, gap_key, uniform_key = jax.random.split(key, 4)
    chosen_super = draw(super_key, masses).astype(jnp.int32)
    block = chosen_super * size + draw(block_key, block_masses(chosen_super)).astype(jnp.int32)
    inside = draw(gap_key, block_logits(edges, log_width, node, block * size, size))
    return release(uniform_key, edges, node, block * size + inside.astype(jnp.int32))
