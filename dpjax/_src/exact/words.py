"""Two uniform 32-bit words per position from one threefry hash: the random bits of the samplers.

JAX's default pseudo-random function is Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror and Shaw,
"Parallel random numbers: as easy as 1, 2, 3", SC 2011). For 32-bit words ``jax.random.bits`` hashes
once per word and keeps the XOR of the hash's two output words; :func:`random_word_pairs` keeps both.
It binds JAX's primitive, which XLA's CPU backend runs as one loop over the whole array, so its output
is materialized once whatever consumes it. Re-exported as :func:`dpjax.noise.random_word_pairs`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.random import threefry2x32_p

__all__ = ["random_word_pairs"]


def random_word_pairs(key: jax.Array, shape: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """Two independent uniform uint32 words ``(hi, lo)`` per position of ``shape``.

    For threefry keys (JAX's default) they are the two output words of one threefry2x32 hash of
    the position's flat index: the two halves of ``jax.random.bits(key, shape, jnp.uint64)``
    (JAX's partitionable threefry), available without ``jax_enable_x64``. ``jax.random.bits`` with
    32-bit words hashes once per word and keeps the XOR of the two outputs, so this is half the
    hashing for the same number of independent words. Other key implementations:
    ``jax.random.bits(key, (2, *shape), jnp.uint32)``.
    """
    shape = tuple(shape)
    if str(jax.random.key_impl(key)) != "threefry2x32":
        hi, lo = jax.random.bits(key, (2, *shape), jnp.uint32)
        return hi, lo
    size = math.prod(shape)
    if size >= 2**32:
        raise ValueError(f"at most 2^32 - 1 word pairs per call, got shape {shape}.")
    data = jax.random.key_data(key)
    index = lax.iota(jnp.uint32, size).reshape(shape)
    hi, lo = threefry2x32_p.bind(data[0], data[1], jnp.zeros(shape, jnp.uint32), index)
    return hi, lo
