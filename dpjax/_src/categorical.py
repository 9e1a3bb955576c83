"""Categorical sampling from log-weights by a two-level inverse CDF: O(d) once, O(log d) per draw.

Drawing index i with probability ``exp(l_i) / sum_j exp(l_j)`` by the Gumbel-max trick costs d
noise draws per sample. When many samples share the same log-weights (a Monte Carlo over keys),
the cumulative distribution can be built once and each sample is then one binary search. In one
float cumulative sum over d entries, the running total reaches 1 while the increments are about
1/d: at d = 10^6 in float32 each increment carries an error of about 6% of itself. The table is
therefore built in two levels (blocks of B = 2^ceil(log2 sqrt(d)) candidates):

* the block log-masses ``L_b = logsumexp(l in block b)``, shifted by their maximum, and their
  normalized cumulative sums (about sqrt(d) entries);
* within each block, the cumulative sums of ``exp(l_i - max(block))`` normalized by the block's own
  total, so every within-block increment is relative to its block, not to the grand total.

A draw takes one uniform per level and finds the first cumulative value above it by binary
lifting (``log2`` of each level's size steps, one scalar gather each). The uniforms have the
64-bit resolution of :mod:`dpjax.noise` (``U = W`` or ``1 - W`` with ``W`` on (0, 1/2]); the
comparison ``U < c`` is made as ``W < c`` or ``W > 1 - c`` (exact for ``c >= 1/2``), so it is
not limited by a float grid of the uniform near 1.

Exactness: the law is exactly ``P(block b) * P(i | block b)`` with both factors read off the two
rounded tables, so each factor is exact up to the rounding of its cumulative sums: an absolute error
of a few units in the last place of 1 (about 1e-7 in float32, 1e-16 in float64), i.e.
``|P(i) - p_i| <= c eps (P(i | b) + P(b) + eps)`` with ``eps`` the dtype's epsilon and ``c`` a
small constant (below 4 in the tests at d = 10^6). The error is absolute, not relative: a candidate
whose share of its block (or a block whose share of the total) is below ``eps`` gets a rounded
probability, possibly 0. The Gumbel-max sampler has relative errors of the order of ``eps`` down to
probabilities of about 1e-19, which is why it stays the reference for releases. Zero weights
(``-inf`` log-weights, the padding) are never drawn.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src.noise import sign_and_half_uniform_from_bits
from dpjax._src.numerics import ceil_div

__all__: list[str] = []


class _LogCdfTable(NamedTuple):
    """The two-level cumulative table of :func:`log_cdf_table` (key independent)."""

    blocks: jax.Array  # [nb_pow2] normalized cumulative block masses, 1 from the last block on
    within: jax.Array  # [nb * B] per-block normalized cumulative masses, row-major
    block_size: int  # B, a power of two (static)


def _pow2_at_least(n: int) -> int:
    """The smallest power of two ``>= n`` (1 for ``n <= 1``): the block sizes of the two-level tables."""
    return 1 << (max(n, 1) - 1).bit_length()


def log_cdf_table(log_weights: jax.Array, *, block_size: int | None = None) -> _LogCdfTable:
    """Builds the two-level table for ``P(i) ∝ exp(log_weights[i])``, O(d).

    Args:
      log_weights: shape [d], float, finite or ``-inf`` (weight 0), at least one finite entry.
      block_size: B, a power of two (static); default ``2^ceil(log2 sqrt(d))``.

    Returns:
      A :class:`_LogCdfTable` in the dtype of ``log_weights``.
    """
    d = log_weights.shape[0]
    size = _pow2_at_least(math.isqrt(max(d - 1, 0)) + 1) if block_size is None else block_size
    if size < 1 or size & (size - 1):
        raise ValueError(f"block_size must be a power of two, got {size}.")
    num_blocks = ceil_div(d, size)
    padded = jnp.full(num_blocks * size, -jnp.inf, log_weights.dtype).at[:d].set(log_weights)
    padded = padded.reshape(num_blocks, size)
    top = jnp.max(padded, axis=1, keepdims=True)  # finite unless a block has no mass
    top = jnp.where(jnp.isfinite(top), top, 0)
    # XLA's cumsum rounds each prefix separately and can step down by an ulp: cummax keeps the
    # table monotone (a step rounded down becomes a zero increment, within the stated error).
    cumulative = lax.cummax(jnp.cumsum(jnp.exp(padded - top), axis=1), axis=1)
    total = cumulative[:, -1:]
    within = jnp.where(total > 0, cumulative / jnp.where(total > 0, total, 1), 1)  # x / x == 1 exactly
    log_mass = top[:, 0] + jnp.log(total[:, 0])
    block_cumulative = lax.cummax(jnp.cumsum(jnp.exp(log_mass - jnp.max(log_mass))))
    blocks = block_cumulative / block_cumulative[-1]
    padding = jnp.ones(_pow2_at_least(num_blocks) - num_blocks, blocks.dtype)
    return _LogCdfTable(jnp.concatenate([blocks, padding]), within.reshape(-1), size)


def _first_above(table: jax.Array, start, size: int, upper_half, w):
    """The first index ``start <= i < start + size`` with ``U < table[i]`` (binary lifting, size = 2^m).

    ``U`` is ``w`` (lower half) or ``1 - w`` (upper half); ``table[start + size - 1] > U`` must hold.
    """
    position = start - 1  # every index <= position has table value <= U
    step = size // 2
    while step:
        candidate = position + step
        value = table[candidate]
        above = jnp.where(upper_half, w > 1 - value, w < value)
        position = jnp.where(above, position, candidate)
        step //= 2
    return jnp.asarray(position + 1)


def sample_log_cdf(key, table: _LogCdfTable) -> jax.Array:
    """One draw from the table of :func:`log_cdf_table`: an int32 index, O(log d)."""
    hi, lo = jax.random.bits(key, (2, 2), jnp.uint32)
    upper_half, w = sign_and_half_uniform_from_bits(hi, lo, table.within.dtype)
    block = _first_above(table.blocks, 0, table.blocks.shape[0], upper_half[0], w[0])
    size = table.block_size
    return _first_above(table.within, block * size, size, upper_half[1], w[1]).astype(jnp.int32)
