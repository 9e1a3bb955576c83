"""Top-k of ``log_weights + Gumbel(1)`` by the top-down Gumbel process: O(d) once, O(k log d) per draw.

Maddison, Tarlow and Minka (2014), "A* sampling", Section 3 (the top-down construction of the Gumbel
process): over a region R of candidates with total mass ``Z_R = sum_{i in R} exp(l_i)``, the largest
perturbed value ``max_{i in R} l_i + G_i`` is Gumbel(log Z_R), its argmax is independent of it and
falls in a sub-region with probability proportional to the sub-region's mass. Splitting R into two
halves A (holding the argmax) and B, the max over A is the max over R and the max over B is, given
it, Gumbel(log Z_B) truncated below the max over R. Expanding best first, the regions in the buffer
are disjoint, cover the candidates not yet emitted, and each carries the exact max over itself; so the
node popped with the largest value, walked down to its leaf, is the next largest perturbed value.
The first k leaves, in order, are the top-k of ``l + G`` exactly (Plackett-Luce, Durfee and Rogers
2019, Lemma 4.2).

Preparation (key independent: under ``vmap`` over keys it runs once): the log-weights are padded with
``-inf`` to ``D = 2^L`` leaves and summed pairwise in log space up a heap (node ``n`` has children
``2n`` and ``2n + 1``, leaves ``D .. 2D - 1``). Each internal node also stores ``-log P(left child)``
as ``log(1 + exp(l_right - l_left))``, a difference of log-masses, never of masses.

One draw: the root's max is ``log Z - log E`` (E ~ Exp(1)); then k times: pop the largest buffered
value g at node n and walk down L levels: go left iff ``E > -log P(left)`` (probability
``P(left)``), and push the other child with ``-logaddexp(-g, log E' - l_child)``, which is Gumbel(l_child)
truncated to ``< g`` exactly (``P(T < t) = F(t) / F(g)``). That is ``1 + 2kL`` exponentials from
:mod:`dpjax.noise` (both tails exact to about 44, so split probabilities down to about 1e-19 are
resolved, as in the literal Gumbel-max) and a buffer of ``1 + kL`` values: a static loop of k * L
steps plus k argmaxes over the buffer.

Float precision. Each pairwise log-sum rounds with an absolute error of about
``eps * (|l_node| + 1)``, so a node at height h carries at most ``h eps (M + 1)`` with M the largest
``|l|`` on the way (the weights are shifted by their maximum by the callers, so M is a few tens for
every candidate with a non-negligible probability). A split probability ``P(left)`` is then off by a
relative ``2 L eps (M + 1)`` at most and a Plackett-Luce probability, a product of at most ``L`` splits
per selection, by ``2 k L^2 eps (M + 1)`` at most: about 1e-3 in float32 and 1e-12 in float64 at
``d = 10^6``, ``k = 10``, ``M = 40`` in the worst case (rounding errors of opposite sign cancel in
practice, and the chi-square tests at 10^5 draws see none). The literal Gumbel-max's error is
``eps * (|l_i| + 1)`` per candidate, which is why it stays the default for releases. A truncated value
may round to ``g`` itself (a tie), which only affects the order of equal rounded values.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src.noise import standard_exponential

__all__: list[str] = []


class LogMassTree(NamedTuple):
    """The heap of :func:`log_mass_tree` (key independent)."""

    log_mass: jax.Array  # [2D]: entry n is log of the mass under node n (entry 0 unused)
    split: jax.Array  # [D]: entry n < D is -log P(left child of n) (entry 0 unused)
    size: int  # d, the number of candidates (static)


def _heap_levels(values: jax.Array, combine, fill) -> list[jax.Array]:
    """The levels of a complete binary tree over ``values`` padded with ``fill`` to ``D = 2^L``
    leaves, leaves first: level ``l + 1`` holds ``combine(left, right)`` of level ``l``'s pairs, O(d).
    ``combine`` is elementwise and associative (``jnp.logaddexp`` for log-masses, ``jnp.maximum``
    for maxima)."""
    d = values.shape[0]
    leaves = 1 << max(0, math.ceil(math.log2(d)))
    level = jnp.full(leaves, fill, values.dtype).at[:d].set(values)
    levels = [level]
    while level.shape[0] > 1:
        pairs = level.reshape(-1, 2)
        level = combine(pairs[:, 0], pairs[:, 1])
        levels.append(level)
    return levels


def heap(values: jax.Array, combine, fill) -> jax.Array:
    """The levels of :func:`_heap_levels` as one array, root first: entry ``n`` (1 <= n < D) is
    ``combine(entry 2n, entry 2n + 1)``, the leaves are entries ``D .. 2D - 1`` and entry 0 is
    ``fill`` (unused)."""
    levels = _heap_levels(values, combine, fill)
    return jnp.concatenate([jnp.full(1, fill, values.dtype), *reversed(levels)])


def log_mass_tree(log_weights: jax.Array) -> LogMassTree:
    """Builds the log-mass heap for ``P(i) ∝ exp(log_weights[i])``, O(d).

    The split probabilities are computed level by level from the pairs of each level, not from
    slices of the concatenated heap: on data sharded over several devices XLA's partitioner
    mis-slices the concatenation (wrong masses, seen with jaxlib 0.10 on 8 virtual CPU devices).

    Args:
      log_weights: shape [d], float, finite or ``-inf`` (weight 0), at least one finite entry.

    Returns:
      A :class:`LogMassTree` in the dtype of ``log_weights``.
    """
    levels = _heap_levels(log_weights, jnp.logaddexp, -jnp.inf)
    splits = []
    for level in levels[:-1]:
        pairs = level.reshape(-1, 2)
        left, right = pairs[:, 0], pairs[:, 1]
        delta = jnp.where(jnp.isneginf(left) & jnp.isneginf(right), 0, right - left)
        splits.append(jnp.logaddexp(0, delta))
    unused = jnp.zeros(1, log_weights.dtype)
    log_mass = jnp.concatenate([unused, *reversed(levels)])
    split = jnp.concatenate([unused, *reversed(splits)])
    return LogMassTree(log_mass, split, log_weights.shape[0])


def top_k(key, tree: LogMassTree, k: int) -> tuple[jax.Array, jax.Array]:
    """The k largest of ``log_weights + Gumbel(1)``, largest first, O(k log d) per draw.

    Args:
      key: a ``jax.random`` key.
      tree: from :func:`log_mass_tree`.
      k: 1 <= k <= number of candidates with a finite log-weight (static).

    Returns:
      ``(values, indices)``: the perturbed values (float, [k]) and int32 indices [k], distinct.
    """
    leaves = tree.split.shape[0]
    depth = leaves.bit_length() - 1
    dtype = tree.log_mass.dtype
    exponentials = standard_exponential(key, (1 + 2 * k * depth,), dtype)
    slots = 1 + k * depth
    values = jnp.full(slots, -jnp.inf, dtype).at[0].set(tree.log_mass[1] - jnp.log(exponentials[0]))
    nodes = jnp.ones(slots, jnp.int32)

    def emit(t, carry):
        values, nodes, top_values, top_nodes = carry
        j = jnp.argmax(values)
        g, node = values[j], nodes[j]
        values = values.at[j].set(-jnp.inf)

        def descend(level, carry):
            values, nodes, node = carry
            step = t * depth + level
            internal = node < leaves
            parent = jnp.where(internal, node, 1)
            go_left = exponentials[1 + 2 * step] > tree.split[parent]
            child = 2 * parent + jnp.where(go_left, 0, 1)
            other = 2 * parent + jnp.where(go_left, 1, 0)
            truncated = -jnp.logaddexp(-g, jnp.log(exponentials[2 + 2 * step]) - tree.log_mass[other])
            values = values.at[1 + step].set(jnp.where(internal, truncated, -jnp.inf))
            nodes = nodes.at[1 + step].set(other)
            return values, nodes, jnp.where(internal, child, node)

        values, nodes, node = lax.fori_loop(0, depth, descend, (values, nodes, node))
        return values, nodes, top_values.at[t].set(g), top_nodes.at[t].set(node)

    init = (values, nodes, jnp.zeros(k, dtype), jnp.zeros(k, jnp.int32))
    _, _, top_values, top_nodes = lax.fori_loop(0, k, emit, init)
    return top_values, (top_nodes - leaves).astype(jnp.int32)
