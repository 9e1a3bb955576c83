"""The first ``size`` positions where a 1-D mask is set, as ``jnp.nonzero(mask, size=size, fill_value=fill)``.

XLA's CPU backend runs ``jnp.nonzero`` as a cumulative sum and a scatter over the whole mask, about
8 ns per position at 10^5 (1.1 ms), which the exact samplers' gathers of a few rare lanes pay at every
round. Here the mask is packed 32 positions to a word, the prefix sum runs over the words' population
counts only, and each output finds its word by binary search and its bit by a five-step select
within the word: the same indices, in order, 2x to 6x faster at 10^5 positions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

_U32 = jnp.uint32


def nonzero(mask: jax.Array, size: int, fill: int) -> jax.Array:
    """The first ``size`` indices (int32, increasing) where ``mask`` (1-D, bool) is set, then ``fill``."""
    n = mask.shape[0]
    packed = jnp.pad(mask, (0, -n % 32)).reshape(-1, 32).astype(_U32) << jnp.arange(32, dtype=_U32)
    words = jnp.sum(packed, axis=1, dtype=_U32)  # bit i of word w: position 32 w + i
    ends = jnp.cumsum(lax.population_count(words).astype(jnp.int32))  # set positions up to each word
    j = jnp.arange(size, dtype=jnp.int32)
    w = jnp.minimum(jnp.searchsorted(ends, j, side="right"), ends.shape[0] - 1)  # the j-th's word
    rank = j - jnp.where(w > 0, ends[w - 1], 0)
    word, bit = words[w], jnp.zeros(size, _U32)
    for width in (16, 8, 4, 2, 1):  # the rank-th set bit of the word, halving the span
        low = lax.population_count((word >> bit) & _U32(2**width - 1)).astype(jnp.int32)
        skip = rank >= low
        bit, rank = bit + jnp.where(skip, _U32(width), _U32(0)), rank - jnp.where(skip, low, 0)
    return jnp.where(j < ends[-1], 32 * w + bit.astype(jnp.int32), fill)
