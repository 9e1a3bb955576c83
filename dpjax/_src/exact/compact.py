"""The first ``size`` positions where a 1-D mask is set, as ``jnp.nonzero(mask, size=size, fill_value=fill)``.

XLA's CPU backend runs ``jnp.nonzero`` as a cumulative sum and a scatter over the whole mask, which
the exact samplers' gathers of a few rare lanes pay at every round. Here the mask is packed 32
positions to a word, the prefix sum runs over the words' population counts only (``n / 32`` of
them), and each output finds its word by binary search and its bit by a five-step select within the
word: the same indices, in order (timings in benchmarks/README.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

_U32 = jnp.uint32


def _packed(mask: jax.Array) -> jax.Array:
    """``mask`` (1-D, bool) packed 32 positions to a uint32 word: bit ``i`` of word ``w`` is position
    ``32 w + i``."""
    rows = jnp.pad(mask, (0, -mask.shape[0] % 32)).reshape(-1, 32).astype(_U32)
    return jnp.sum(rows << jnp.arange(32, dtype=_U32), axis=1, dtype=_U32)


def nonzero(mask: jax.Array, size: int, fill: int) -> jax.Array:
    """The first ``size`` indices (int32, increasing) where ``mask`` (1-D, bool) is set, then ``fill``."""
    words = _packed(mask)
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


def ranks(mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per position of a 1-D bool ``mask``, how many set positions precede it (int32), and how many
    are set: a prefix sum over the packed words' population counts, then one in-word count each."""
    n = mask.shape[0]
    words = _packed(mask)
    counts = lax.population_count(words).astype(jnp.int32)
    starts = jnp.cumsum(counts, dtype=jnp.int32) - counts
    lower = (_U32(1) << jnp.arange(32, dtype=_U32)) - 1  # the bits below each position of a word
    within = lax.population_count(words[:, None] & lower).astype(jnp.int32)
    return (starts[:, None] + within).reshape(-1)[:n], jnp.sum(counts, dtype=jnp.int32)


def fill(filled, out: jax.Array, values: jax.Array, kept: jax.Array):
    """The new count of filled lanes and ``out`` with its lanes from ``filled`` on given the ``kept``
    ones of ``values``, in order (a scatter by :func:`ranks`): the output of a stream of candidates
    of which some are rejected."""
    n = out.shape[0]
    rank, total = ranks(kept)
    out = out.at[jnp.where(kept, filled + rank, n)].set(values, mode="drop")
    return jnp.minimum(filled + total, n), out


def stream(key, n: int, dtype, draw) -> jax.Array:
    """``n`` values from a stream of candidates: rounds ``draw(fold_in(key, i))``, i = 0, 1, ..., each
    giving ``(values, kept)``, until the kept values, in order, fill the output (:func:`fill`)."""

    def round_(carry):
        i, filled, out = carry
        return i + 1, *fill(filled, out, *draw(jax.random.fold_in(key, i)))

    more = lambda carry: carry[1] < n  # noqa: E731
    return lax.while_loop(more, round_, (jnp.int32(0), jnp.int32(0), jnp.zeros(n, dtype)))[2]
