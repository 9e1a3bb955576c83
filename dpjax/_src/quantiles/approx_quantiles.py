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
``g`` of the clamped sorted data (see :mod:`dpjax._src.quantiles.intervals`), and its two children
share that gap, cut at ``v`` (widths ``v - x_g`` and ``x_{g+1} - v``), the points left of the gap
going left and the others right. Every node's EM is one exact draw over the global gaps masked to
its range, by default through tilted segment trees over blocks of the gaps
(:mod:`dpjax._src.quantiles.range_tree`: ``O(log n)`` variates and gathers per node and key), else
in three stages over superblocks, blocks of ``~n^(1/3)`` gaps and one block's gaps
(:mod:`dpjax._src.quantiles.range_em`); the
sort, the log widths and the tables depend on the data, the levels and epsilon only, so under
``vmap`` over keys with the data fixed they are computed once.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src import auto as _auto
from dpjax._src import sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import RangeBounded
from dpjax._src.accounting.neighbors import Neighbors, NeighborsLike
from dpjax._src.host_checks import check_choice, check_epsilon, float_dtype
from dpjax._src.quantiles.exp_mech import number_of_levels
from dpjax._src.quantiles.intervals import check_inputs, gumbel_argmax, sorted_gaps
from dpjax._src.quantiles.range_em import (
    Node,
    Tables,
    build_tables,
    heap_draw,
    node_em,
    node_em_superblocks,
)
from dpjax._src.quantiles.range_tree import RangeTrees, build_trees, node_em_trees
from dpjax._src.validation import Checks

__all__ = [
    "ApproxQuantilesMethod",
    "approx_quantiles",
    "approx_quantiles_guarantee",
]

ApproxQuantilesMethod: TypeAlias = Literal["auto", "segments", "tree", "superblocks", "blocks"]
"""How each node's exponential mechanism is drawn (static): ``"auto"`` (default:
``"segments"`` under ``vmap`` over keys, ``"tree"`` for one release), ``"segments"``, ``"tree"``,
``"superblocks"`` or ``"blocks"`` (see :func:`approx_quantiles`)."""


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


def _node_epsilon(epsilon, m: int, neighbors: str):
    """Each node's budget: ``epsilon / depth`` (add/remove) or ``epsilon / (2 depth)`` (swap)."""
    depth = m.bit_length()
    return epsilon / (depth if neighbors == "add_remove" else 2 * depth)


def _node_parameters(levels, epsilon_node, m: int):
    """Each static node's rescaled level ``q`` and EM parameter ``c`` (key independent), by depth."""
    ends = jnp.concatenate([jnp.zeros(1, levels.dtype), levels, jnp.ones(1, levels.dtype)])
    parameters = []
    for nodes in _recursion_levels(m):
        s, mid, e = (np.array(column) for column in zip(*nodes, strict=True))
        q = (ends[mid + 1] - ends[s]) / (ends[e + 1] - ends[s])
        parameters.append((q, epsilon_node / (2 * jnp.maximum(q, 1 - q))))
    return parameters


def _level_em(method: str) -> Callable[..., tuple[jax.Array, jax.Array]]:
    """The node EM of ``method`` over one level's nodes (a ``vmap``): ``(keys, edges, log_width,
    node)`` and, but for ``"blocks"``, the nodes' rows of the tables; returns (gaps, values)."""
    if method == "segments":
        return jax.vmap(node_em_trees, in_axes=(0, None, None, 0, 0))
    if method == "blocks":
        return jax.vmap(node_em, in_axes=(0, None, None, 0))
    draw = heap_draw if method == "tree" else gumbel_argmax
    return jax.vmap(functools.partial(node_em_superblocks, draw=draw), in_axes=(0, None, None, 0, 0))


@functools.partial(jax.jit, static_argnames=("neighbors", "method"))
@sharded.auto_axes
def _approx_quantiles(key, x, levels, epsilon, lower, upper, neighbors: str, method: str) -> jax.Array:
    """Alg. 1 after validation, level by level; the nodes of a level run in one ``vmap``."""
    dtype = float_dtype(x)
    m = levels.shape[0]
    levels = jnp.asarray(levels, dtype)
    lower, upper = jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    edges, log_width = sorted_gaps(x, lower, upper)
    n = log_width.shape[0] - 1
    parameters = _node_parameters(levels, _node_epsilon(jnp.asarray(epsilon, dtype), m, neighbors), m)
    tables: RangeTrees | Tables  # each node's key-independent rows (not for "blocks")
    if method == "segments":
        tables = build_trees(log_width, jnp.concatenate([c for _, c in parameters]))
    elif method != "blocks":
        tables = build_tables(log_width, jnp.concatenate([c for _, c in parameters]))
    em = _level_em(method)
    values = jnp.zeros(m, dtype)
    gaps = jnp.zeros(m, jnp.int32)
    first = 0
    for depth, nodes in enumerate(_recursion_levels(m)):
        s, mid, e = (np.array(column) for column in zip(*nodes, strict=True))
        has_lo, has_hi = s > 0, e < m
        gap_lo = jnp.where(has_lo, gaps[np.maximum(s - 1, 0)], 0)
        gap_hi = jnp.where(has_hi, gaps[np.minimum(e, m - 1)], n)
        lo = jnp.where(has_lo, values[np.maximum(s - 1, 0)], lower)
        hi = jnp.where(has_hi, values[np.minimum(e, m - 1)], upper)
        node = Node(gap_lo, gap_hi, lo, hi, *parameters[depth])
        keys = jax.random.split(jax.random.fold_in(key, depth), len(nodes))
        if method != "blocks":
            rows = jax.tree.map(operator.itemgetter(slice(first, first + len(nodes))), tables)
            chosen, released = em(keys, edges, log_width, node, rows)
        else:
            chosen, released = em(keys, edges, log_width, node)
        first += len(nodes)
        values = values.at[mid].set(released)
        gaps = gaps.at[mid].set(chosen)
    return values


def approx_quantiles(
    key: jax.Array,
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    epsilon: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    neighbors: NeighborsLike = Neighbors.SWAP,
    method: ApproxQuantilesMethod = "auto",
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
      method: how each node's exponential mechanism is drawn (static; the same law, different random
        streams): ``"segments"`` (:mod:`dpjax._src.quantiles.range_tree`: per node two heaps of
        tilted block sums, key independent; per key the node's range is covered by ``O(log n)``
        heap nodes and three gap-sized blocks, and three walks of the top-down Gumbel process pick
        a unit, its block and the gap: ``O(log n)`` variates and gathers), ``"superblocks"``
        (:mod:`dpjax._src.quantiles.range_em`: every node's tilted block sums prepared together,
        then three Gumbel-max stages of ``~n^(1/3)`` units per node and key), ``"tree"`` (the same
        stages, each drawn by the top-down Gumbel process over a log-mass heap of its units),
        ``"blocks"`` (two Gumbel-max stages of ``~sqrt(n)`` units) or ``"auto"`` (default): by the
        rule of :mod:`dpjax._src.auto`, ``"segments"`` under ``vmap`` over keys with the data
        shared (the fastest per release there: its heaps are built once) and ``"tree"`` for one
        release (it prepares less: its tables are smaller than the segment heaps).

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
    x, levels, epsilon, lower, upper = check_inputs(checks, x, qs, epsilon, bounds)
    neighbors = Neighbors.check(neighbors)
    check_choice(method, "method", get_args(ApproxQuantilesMethod))
    levels = jnp.asarray(levels, float_dtype(x))
    paths = {
        name: functools.partial(_approx_quantiles, neighbors=str(neighbors), method=name)
        for name in get_args(ApproxQuantilesMethod)
        if name != _auto.AUTO
    }
    released = _auto.run(method, paths, key, x, levels, epsilon, lower, upper, fast="segments", single="tree")
    return checks.guard(released)


@elementwise("epsilon")
def approx_quantiles_guarantee(
    qs: ArrayLike | Sequence[float], epsilon: float, *, neighbors: NeighborsLike = Neighbors.SWAP
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
    depth = number_of_levels(qs).bit_length()
    epsilon = check_epsilon(epsilon)
    return RangeBounded(epsilon, rho=epsilon * epsilon / (8 * depth))
