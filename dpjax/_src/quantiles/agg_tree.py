"""AggTree: quantiles from a noisy tree of bucket counts with Honaker aggregation (pure epsilon-DP).

The tree-based counting mechanism (Dwork, Naor, Pitassi, Rothblum 2010; Chan, Shi, Song 2011) as
used by Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1: ``[a, b]`` is cut into ``b^h`` equal
buckets, the leaves of a tree with branching factor ``b`` and height ``h``; every node counts the
points in its range. A record increments one node per level, so under swap (the paper's model) one
swap changes at most ``2h`` counts by 1: Laplace noise of scale ``2h / epsilon`` on every node of
levels ``1..h`` gives pure ``epsilon``-DP, and the root is the public ``n``. Under add/remove the
root is noised too and the L1 sensitivity is ``h + 1``. (The paper's ``Lap(h/epsilon)`` is the
add/remove count without the root; the authors' code uses ``2h`` under swap, as here.)

The noisy counts are then made consistent by Honaker's (2015) two-pass weighted averaging
("from below", "from above", combined), which is the least-squares (best linear unbiased) fit of a
consistent tree to the noisy counts. Each quantile is read by descending the tree as dp_multiq's
``compute_quantile`` does: at a node, the first child whose cumulative aggregated count reaches the
remaining fraction of the node's count is entered, and at the last level the position is
interpolated linearly inside the node's range. The counts are used as they are, negative ones
included: a cumulative count is then an unbiased estimate of a rank, whereas clipping each node at
0 adds the positive part of the noise of every empty node and pushes high quantiles far past the
data when the bounds are loose. Everything after the noise is post-processing, so any number of
quantiles is released for the same ``epsilon``.

Under ``vmap`` over keys the bucket counts are computed once; only the noise and the aggregation
and queries (``O(b^h)``) run per key. Only ``b``, ``h`` and the number of quantiles are static (they
fix shapes); the levels, epsilon and the bounds may be traced.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import noise, sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.accounting.neighbors import Neighbors, NeighborsLike
from dpjax._src.host_checks import check_epsilon, check_int, float_dtype
from dpjax._src.quantiles.intervals import check_inputs
from dpjax._src.validation import Checks

_DEFAULT_BRANCHING = 8
_DEFAULT_HEIGHT = 3
_MAX_LEAVES = 2**24


def _agg_tree_sensitivity(height: int, neighbors: NeighborsLike = Neighbors.SWAP) -> int:
    """L1 sensitivity of the noised counts: ``2 h`` (swap) or ``h + 1`` (add/remove, root noised)."""
    return 2 * height if neighbors == "swap" else height + 1


def _level_counts(x, lower, upper, branching, height, dtype):
    """Exact counts of levels 1..h (level l has b^l nodes, heap order within the level)."""
    leaves = branching**height
    position = (jnp.clip(x.astype(dtype), lower, upper) - lower) / (upper - lower) * leaves
    leaf = jnp.clip(jnp.floor(position).astype(jnp.int32), 0, leaves - 1)
    counts = [jnp.zeros(leaves, dtype).at[leaf].add(1)]
    for _ in range(height - 1):
        counts.append(counts[-1].reshape(-1, branching).sum(axis=1))
    return counts[::-1]


def _noisy_levels(keys, counts, scale):
    """Every node of levels 1..h plus its own Laplace(``scale``) noise, one scale for all levels
    (Sec. 5.1): the budget is split evenly, ``epsilon / h`` per level of swap sensitivity 2."""
    return [c + noise.laplace(k, c.shape, scale, c.dtype) for c, k in zip(counts, keys, strict=True)]


def _sibling_rest(t, branching):
    """For each node, the sum of ``t`` over its siblings (excluding itself)."""
    family = t.reshape(-1, branching).sum(axis=1)
    return jnp.repeat(family, branching) - t


def _honaker(noisy, root, root_var, var, branching):
    """Honaker (2015) aggregation of a noisy count tree.

    Args:
      noisy: list of per-level noisy counts, levels 1..h (level l of size b^l).
      root: the root count estimate (``n`` under swap, a noisy count under add/remove).
      root_var: its variance (0 when ``n`` is public).
      var: the noise variance of every noisy node.
      branching: b.

    Returns:
      The list of combined estimates ``t*`` for levels 1..h.
    """
    height = len(noisy)
    below, below_var = [None] * height, [None] * height
    below[-1], below_var[-1] = noisy[-1], var
    for level in range(height - 2, -1, -1):
        children = below[level + 1].reshape(-1, branching).sum(axis=1)
        children_var = branching * below_var[level + 1]
        weight = children_var / (var + children_var)
        below[level] = weight * noisy[level] + (1 - weight) * children
        below_var[level] = weight * var
    above, above_var = root[None], root_var
    combined = []
    for level in range(height):
        from_parent = jnp.repeat(above, branching) - _sibling_rest(below[level], branching)
        parent_var = above_var + (branching - 1) * below_var[level]
        weight = parent_var / (below_var[level] + parent_var)
        combined.append(weight * below[level] + (1 - weight) * from_parent)
        weight_up = parent_var / (var + parent_var)
        above = weight_up * noisy[level] + (1 - weight_up) * from_parent
        above_var = weight_up * var
    return combined


def _descend(levels, q, lower, upper, branching):
    """Reads the ``q``-quantile from consistent level counts by tree descent (dp_multiq ``tree.py``).

    The counts are not clipped at 0: the entered child is the first whose cumulative count reaches
    ``frac * total`` (tolerance 1e-6), so its count is positive (up to the tolerance) and the
    fraction inside it lies in [0, 1]. When the children's total is not positive the descent stops
    and interpolates inside the current node.
    """
    dtype = levels[0].dtype
    node = jnp.int32(0)
    left, width, frac = jnp.asarray(lower, dtype), jnp.asarray(upper - lower, dtype), jnp.asarray(q, dtype)
    stopped = jnp.bool_(False)
    for counts in levels:
        children = lax.dynamic_slice(counts, (node * branching,), (branching,))
        cumulative = jnp.cumsum(children)
        total = cumulative[-1]
        target = frac * total
        child = jnp.argmax(cumulative >= target - 1e-6 * total).astype(jnp.int32)
        before = cumulative[child] - children[child]
        inside = jnp.where(
            children[child] > 0, (target - before) / jnp.where(children[child] > 0, children[child], 1), 0
        )
        move = ~stopped & (total > 0)
        node = jnp.where(move, node * branching + child, node)
        left = jnp.where(move, left + child * (width / branching), left)
        width = jnp.where(move, width / branching, width)
        frac = jnp.where(move, jnp.clip(inside, 0, 1), frac)
        stopped = ~move
    return jnp.clip(left + frac * width, lower, upper)


def agg_tree(
    key: jax.Array,
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    epsilon: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    branching: int = _DEFAULT_BRANCHING,
    height: int = _DEFAULT_HEIGHT,
    neighbors: NeighborsLike = Neighbors.SWAP,
) -> jax.Array:
    """AggTree quantiles (Gillenwater, Joseph, Kulesza 2021, Sec. 5.1; tree counting of Dwork et al.
    2010 and Chan et al. 2011 with Honaker 2015 aggregation).

    Neighboring relation: ``"swap"`` (default; ``n`` public, Laplace scale ``2h/epsilon``) or
    ``"add_remove"`` (root noised too, scale ``(h+1)/epsilon``). Guarantee: pure ``epsilon``-DP for
    the whole tree, whatever the number of quantiles read from it (:func:`agg_tree_guarantee`).

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty; ``n`` static); clamped to ``bounds``.
      qs: ``m`` strictly increasing levels in [0, 1] (may be traced; ``m`` is static).
      epsilon: privacy parameter, > 0 (may be traced).
      bounds: ``(a, b)`` with ``a < b`` (may be traced: either end, or an array of shape ``(2,)``).
      branching: b >= 2 (static: b and h fix the tree's shape). The paper tuned b and h on N(0, 1)
        data without reporting them; the defaults ``b = 8, h = 3`` (512 buckets) were tuned the
        same way here (best mean error on N(0, 1), n = 1000, bounds [-100, 100], epsilon = 1,
        m = 1 and 5; re-checked over b in 2..32 after the unclipped descent: 8.8 / 11.4 missed
        points per quantile, next b = 10, h = 3 with 10.3 / 13.0, Durfee's (2023) "generally
        best" choice).
      height: h >= 1 (static), with ``b^h <= 2^24`` leaves.
      neighbors: a :class:`~dpjax.accounting.Neighbors` or its value, "swap" or "add_remove" (static).

    Returns:
      Shape ``(m,)``: sorted estimates in ``[a, b]``; all NaN when a traced input is invalid
      (levels, ``epsilon``, bounds) or traced data contain NaN or infinities. Concrete invalid
      inputs raise a ``ValueError`` before any randomness is used.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000,))
      >>> quartiles = agg_tree(jax.random.key(0), x, [0.25, 0.5, 0.75], 1.0, bounds=(-10, 10))
    """
    checks = Checks()
    x, levels, epsilon, lower, upper = check_inputs(checks, x, qs, epsilon, bounds)
    branching = check_int(branching, "branching", minimum=2)
    height = check_int(height, "height", minimum=1)
    if branching**height > _MAX_LEAVES:
        raise ValueError(f"branching**height must be <= {_MAX_LEAVES}, got {branching}**{height}.")
    neighbors = Neighbors.check(neighbors)
    return checks.guard(_agg_tree(key, x, levels, epsilon, lower, upper, branching, height, neighbors))


@functools.partial(jax.jit, static_argnames=("branching", "height", "neighbors"))
@sharded.auto_axes
def _agg_tree(key, x, levels, epsilon, lower, upper, branching, height, neighbors):
    """AggTree after validation (compiled: an eager call runs the arithmetic of a traced one)."""
    dtype = float_dtype(x)
    lower, upper = jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    counts = _level_counts(x, lower, upper, branching, height, dtype)
    scale = jnp.asarray(_agg_tree_sensitivity(height, neighbors), dtype) / jnp.asarray(epsilon, dtype)
    var = 2 * scale**2
    level_keys = jax.random.split(key, height + 1)
    noisy = _noisy_levels(level_keys[1:], counts, scale)
    n = jnp.asarray(x.shape[0], dtype)
    if neighbors == "swap":
        root, root_var = n, 0.0
    else:
        root, root_var = n + noise.laplace(level_keys[0], (), scale, dtype), var
    tree = _honaker(noisy, root, root_var, var, branching)
    levels = jnp.asarray(levels, dtype)
    estimates = jnp.stack([_descend(tree, q, lower, upper, branching) for q in levels])
    return jnp.sort(estimates)


@elementwise("epsilon")
def agg_tree_guarantee(epsilon: float, *, neighbors: NeighborsLike = Neighbors.SWAP) -> PureDP:
    """AggTree's guarantee: pure ``epsilon``-DP for the whole noisy tree (all quantiles) under
    ``neighbors`` (the Laplace scale, :func:`_agg_tree_sensitivity`, is calibrated to it)."""
    Neighbors.check(neighbors)
    return PureDP(check_epsilon(epsilon))


__all__ = [
    "agg_tree",
    "agg_tree_guarantee",
]
