"""ApproxQuantiles: many quantiles by recursive splitting, one exponential mechanism per node.

Kaplan, Schnapp and Stemmer, "Differentially Private Approximate Quantiles", ICML 2022, Alg. 1.
For levels ``q_1 < ... < q_m`` the middle level ``p = q_{floor(m/2)+1}`` (1-based) is released by
the single-quantile exponential mechanism (Smith 2011, Alg. 2; :func:`dpjax.quantiles.emq`) on the
data in ``[a, b]``; the data below the released ``v`` and the levels below ``p`` (rescaled to
``q / p``) recurse on ``[a, v]``, those above on ``[v, b]`` (levels ``(q - p) / (1 - p)``). A node
whose levels are ``q_{s..e-1}`` therefore releases level ``(q_mid - q_{s-1}) / (q_e - q_{s-1})``
(``q_0 = 0``, ``q_{m+1} = 1``) of the data between the two outputs that bound it.

The recursion has ``depth = floor(log2 m) + 1`` levels and is static (it depends on ``m`` only).
The nodes of one level see disjoint data, so under add/remove one record changes one node per
level and each node's EM (add/remove sensitivity ``max(q', 1 - q')``) gets ``epsilon / depth``;
under swap a record may leave one node and enter another, so each node gets
``epsilon / (2 depth)`` (KSS22, Sec. 3, the swap variant; the authors' code divides by the real
``log2 m + 1``, which is this ``depth`` when ``m`` is a power of two and otherwise a smaller
per-node budget).

Each record belongs to exactly one node per level: a released value ``v`` is drawn in a gap
``g`` of the clamped sorted data (see :mod:`dpjax.quantiles.intervals`), and its two children
share that gap, cut at ``v`` (widths ``v - x_g`` and ``x_{g+1} - v``), the points left of the gap
going left and the others right. Every node's EM is one call of :func:`_node_em` over the global
gaps masked to its range, exact by Gumbel-max over blocks of ``~sqrt(n)`` gaps and then one block's
gaps; the sort, the log widths and the nodes' block tables are key independent, computed once under
``vmap`` over keys with the data fixed.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax import sharded
from dpjax.accounting import Neighbors, RangeBounded
from dpjax.accounting.elementwise import _elementwise
from dpjax.accounting.neighbors import NeighborsLike
from dpjax.quantiles.exp_mech import _number_of_levels
from dpjax.quantiles.intervals import _check_inputs, _gaps, _gumbel_argmax
from dpjax.validation import Checks, check_epsilon, float_dtype

__all__ = [
    "approx_quantiles",
    "approx_quantiles_guarantee",
]


def _recursion_levels(m: int) -> list[list[tuple[int, int, int]]]:
    """The static recursion tree of Alg. 1 for ``m`` levels, grouped by depth.

    Each node is ``(s, mid, e)``: it holds the levels ``s..e-1`` (0-based), releases level ``mid =
    s + (e - s) // 2`` and is bounded by the outputs ``s - 1`` and ``e`` (the data bounds at the
    ends). ``len(result) == m.bit_length()``.
    """
    levels: list[list[tuple[int, int, int]]] = []
    frontier = [(0, m)]
    while frontier:
        nodes, children = [], []
        for s, e in frontier:
            mid = s + (e - s) // 2
            nodes.append((s, mid, e))
            children += [(lo, hi) for lo, hi in ((s, mid), (mid + 1, e)) if hi > lo]
        levels.append(nodes)
        frontier = children
    return levels


class _Node(NamedTuple):
    """One node's range: its global gaps ``gap_lo..gap_hi``, cut at ``lo`` and ``hi``, its level
    ``q`` and EM parameter ``c`` (see :func:`_node_em`)."""

    gap_lo: jax.Array
    gap_hi: jax.Array
    lo: jax.Array
    hi: jax.Array
    q: jax.Array
    c: jax.Array


def _block_logits(edges, log_width, node: _Node, start, size: int):
    """The exact log-weights of the node's gaps ``start..start+size-1`` (``-inf`` outside its range):
    ``log(cut width) - c |g - gap_lo - q (gap_hi - gap_lo)|``."""
    dtype = log_width.dtype
    gap = start + jnp.arange(size, dtype=jnp.int32)
    safe = jnp.clip(gap, 0, log_width.shape[0] - 1)
    left = jnp.maximum(edges[safe], node.lo)
    right = jnp.minimum(edges[safe + 1], node.hi)
    with jax.numpy_dtype_promotion("standard"):
        cut_width = jnp.log(jnp.maximum(right - left, 0))
    width = jnp.where((gap == node.gap_lo) | (gap == node.gap_hi), cut_width, log_width[safe])
    distance = (gap - node.gap_lo).astype(dtype) - node.q * (node.gap_hi - node.gap_lo).astype(dtype)
    inside = (gap >= node.gap_lo) & (gap <= node.gap_hi)
    return jnp.where(inside, width - node.c * jnp.abs(distance), -jnp.inf)


def _block_tables(log_width, c, size: int):
    """Per block of ``size`` gaps, ``log sum width_g e^{c (g - end)}`` and ``log sum width_g
    e^{-c (g - start)}``: the block's mass, up to ``e^{-c (T - end)}`` or ``e^{-c (start - T)}``, when
    it lies wholly left or right of the target ``T`` (relative to the end nearest ``T``, so the
    dominant terms are near 1 and no large values cancel)."""
    blocks = -(-log_width.shape[0] // size)
    padded = jnp.pad(log_width, (0, blocks * size - log_width.shape[0]), constant_values=-jnp.inf)
    offset = c * jnp.arange(size, dtype=log_width.dtype)
    padded = padded.reshape(blocks, size)
    left = jax.nn.logsumexp(padded + (offset - offset[-1]), axis=1)
    return left, jax.nn.logsumexp(padded - offset, axis=1)


def _node_em(key, edges, log_width, node: _Node):
    """One node's exponential mechanism: the ``q``-quantile of the data in ``[lo, hi]`` (Smith 2011).

    The node's data are the sorted points ``edges[gap_lo + 1 .. gap_hi]``; its gaps are the global
    gaps ``gap_lo..gap_hi`` with the end gaps cut at ``lo`` and ``hi`` (a single gap ``[lo, hi]``
    when ``gap_lo == gap_hi``). Gap ``g`` has ``g - gap_lo`` node points below it and weight
    ``width * exp(-c |g - T|)``, ``T = gap_lo + q (gap_hi - gap_lo)``. Returns ``(gap, value)``, the
    value uniform in the chosen (cut) gap; a node whose range has zero width returns ``lo``.

    Exact, in two Gumbel-max stages over blocks of ``B ~ sqrt(n)`` gaps (as JointExp's backward
    pass): a block wholly on one side of ``T`` and inside the range has its mass from
    :func:`_block_tables` (``c`` fixed per node, key independent: once per data under ``vmap`` over keys); the
    blocks holding ``gap_lo``, ``gap_hi`` and ``T`` are summed gap by gap; then the chosen block's
    gaps. ``O(n / B + B)`` per node and key.
    """
    dtype = log_width.dtype
    size = math.isqrt(log_width.shape[0] - 1) + 1
    left_tables, right_tables = _block_tables(log_width, node.c, size)
    start = jnp.arange(left_tables.shape[0], dtype=jnp.int32) * size
    target = node.q * (node.gap_hi - node.gap_lo).astype(dtype)  # T - gap_lo
    offset = (start - node.gap_lo).astype(dtype) - target  # start_b - T
    masses = jnp.where(
        offset + (size - 1) <= 0,
        left_tables + node.c * (offset + (size - 1)),
        right_tables - node.c * offset,
    )
    masses = jnp.where((start + size - 1 < node.gap_lo) | (start > node.gap_hi), -jnp.inf, masses)
    kink = node.gap_lo + jnp.floor(target).astype(jnp.int32)
    for special in (node.gap_lo, node.gap_hi, kink):
        b = special // size
        masses = masses.at[b].set(jax.nn.logsumexp(_block_logits(edges, log_width, node, b * size, size)))
    block_key, gap_key, uniform_key = jax.random.split(key, 3)
    chosen_block = _gumbel_argmax(block_key, masses).astype(jnp.int32)
    inside = _gumbel_argmax(gap_key, _block_logits(edges, log_width, node, chosen_block * size, size))
    chosen = jnp.clip(chosen_block * size + inside.astype(jnp.int32), node.gap_lo, node.gap_hi)
    u = jax.random.uniform(uniform_key, (), dtype)
    a = jnp.maximum(edges[chosen], node.lo)
    b = jnp.minimum(edges[chosen + 1], node.hi)
    return chosen, jnp.clip(a + u * (b - a), node.lo, node.hi)


def _node_epsilon(epsilon, m: int, neighbors: str):
    """Each node's budget: ``epsilon / depth`` (add/remove) or ``epsilon / (2 depth)`` (swap)."""
    depth = m.bit_length()
    return epsilon / (depth if neighbors == "add_remove" else 2 * depth)


@functools.partial(jax.jit, static_argnames=("neighbors",))
@sharded.auto_axes
def _approx_quantiles(key, x, levels, epsilon, lower, upper, neighbors: str) -> jax.Array:
    """Alg. 1 after validation, level by level; the nodes of a level run in one ``vmap``."""
    dtype = float_dtype(x)
    m = levels.shape[0]
    levels = jnp.asarray(levels, dtype)
    lower, upper = jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    edges, log_width = _gaps(x, lower, upper)
    n = log_width.shape[0] - 1
    ends = jnp.concatenate([jnp.zeros(1, dtype), levels, jnp.ones(1, dtype)])
    epsilon_node = _node_epsilon(jnp.asarray(epsilon, dtype), m, neighbors)
    values = jnp.zeros(m, dtype)
    gaps = jnp.zeros(m, jnp.int32)
    em = jax.vmap(_node_em, in_axes=(0, None, None, 0))
    for depth, nodes in enumerate(_recursion_levels(m)):
        s, mid, e = (np.array(column) for column in zip(*nodes, strict=True))
        has_lo, has_hi = s > 0, e < m
        gap_lo = jnp.where(has_lo, gaps[np.maximum(s - 1, 0)], 0)
        gap_hi = jnp.where(has_hi, gaps[np.minimum(e, m - 1)], n)
        lo = jnp.where(has_lo, values[np.maximum(s - 1, 0)], lower)
        hi = jnp.where(has_hi, values[np.minimum(e, m - 1)], upper)
        q = (ends[mid + 1] - ends[s]) / (ends[e + 1] - ends[s])
        c = epsilon_node / (2 * jnp.maximum(q, 1 - q))
        keys = jax.random.split(jax.random.fold_in(key, depth), len(nodes))
        chosen, released = em(keys, edges, log_width, _Node(gap_lo, gap_hi, lo, hi, q, c))
        values = values.at[mid].set(released)
        gaps = gaps.at[mid].set(chosen)
    return values


def approx_quantiles(
    key: jax.Array,
    x: ArrayLike,
    qs: ArrayLike,
    epsilon: ArrayLike,
    *,
    bounds: ArrayLike,
    neighbors: NeighborsLike = Neighbors.SWAP,
) -> jax.Array:
    """ApproxQuantiles (Kaplan, Schnapp and Stemmer, ICML 2022, Alg. 1): ``m`` quantiles by
    recursive splitting, each node an exponential-mechanism quantile on its sub-range.

    Neighboring relation: ``"swap"`` (default; each node ``epsilon / (2 depth)``) or
    ``"add_remove"`` (each node ``epsilon / depth``), ``depth = floor(log2 m) + 1``; each node's EM
    uses the add/remove sensitivity ``max(q', 1 - q')`` of its rescaled level ``q'``. Guarantee:
    pure ``epsilon``-DP, ``epsilon``-range-bounded and ``epsilon^2 / (8 depth)``-zCDP
    (:func:`approx_quantiles_guarantee`). Its error grows like ``log^2 m`` (KSS22, Thm. 3.3)
    where IndExp's grows like ``m``.

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty; ``n`` static); values are clamped to ``bounds``.
      qs: ``m`` strictly increasing levels in [0, 1] (may be traced; ``m`` is static).
      epsilon: total privacy parameter, > 0 (may be traced).
      bounds: ``(a, b)`` with ``a < b``, data independent (may be traced).
      neighbors: a :class:`~dpjax.accounting.Neighbors` or its value, "swap" or "add_remove" (static).

    Returns:
      Shape ``(m,)``, nondecreasing, in ``[a, b]``, in ``x``'s float dtype (at least float32);
      all NaN when a traced input is invalid or traced data contain NaN or infinities. Concrete
      invalid inputs raise a ``ValueError`` before any randomness is used.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000,))
      >>> deciles = approx_quantiles(jax.random.key(0), x, jnp.linspace(0.1, 0.9, 9), 1.0, bounds=(-10, 10))
    """
    checks = Checks()
    x, levels, epsilon, lower, upper = _check_inputs(checks, x, qs, epsilon, bounds)
    neighbors = Neighbors.check(neighbors)
    levels = jnp.asarray(levels, float_dtype(x))
    return checks.guard(_approx_quantiles(key, x, levels, epsilon, lower, upper, str(neighbors)))


@_elementwise("epsilon")
def approx_quantiles_guarantee(
    qs, epsilon: float, *, neighbors: NeighborsLike = Neighbors.SWAP
) -> RangeBounded:
    """ApproxQuantiles' guarantee: ``RangeBounded(epsilon, rho=epsilon^2 / (8 depth))``.

    ``depth = floor(log2 m) + 1`` levels, ``m = len(qs)``. Conditioned on the earlier levels' outputs
    the nodes of a level see disjoint data (KSS22, Lemma 3.1 and Thm. 3.2): under add/remove one
    record changes one node's input by add/remove, whose EM at ``epsilon / depth`` is
    ``epsilon / depth``-range-bounded (Durfee and Rogers 2019, Lemma 3.1); under swap it changes
    two nodes by add/remove or one node by a swap, a privacy-loss range of at most
    ``2 epsilon / (2 depth)`` either way. Adaptive composition over the ``depth`` levels: range
    ``epsilon`` (hence ``epsilon``-DP) and ``depth (epsilon/depth)^2 / 8``-zCDP (Cesar and Rogers
    2021, Lemma 3.4). Takes the levels ``qs`` as the mechanism does (only their number matters).
    """
    Neighbors.check(neighbors)
    depth = _number_of_levels(qs).bit_length()
    epsilon = check_epsilon(epsilon)
    return RangeBounded(epsilon, rho=epsilon * epsilon / (8 * depth))
