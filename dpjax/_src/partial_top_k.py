"""Exact top-k by a blocked partial selection: ``lax.top_k``'s result without ranking every item.

XLA's CPU ``top_k`` ranks the whole last axis (``O(d log d)`` per row, and it sorts whole rows of
integers; figures in benchmarks/README.md), where only ``k`` items are wanted. :func:`top_k`
first ranks blocks of ``B`` items by their maxima, then runs ``lax.top_k`` on the ``k`` best
blocks' items only: one cheap vectorised pass over the data, then two ``lax.top_k`` calls on about
``sqrt(d k)`` items each.

Why it is exact (the same values and indices as ``lax.top_k``, ties to the lower index). Rank items
by (value descending in IEEE total order, index ascending): ``lax.top_k`` returns the first k in this
order. Rank blocks by their maxima in the same order (ties to the lower block) and keep the first k
blocks S. Take an item e of the true top-k, in block b, and suppose b is not in S. Each block s in S
has a maximum ``M_s >= M_b >= x_e``, and ``M_s == M_b`` only if ``s < b``; so each of these k
maxima is a distinct item ranked before e (larger, or equal with a lower index), and e is not in the
top-k: a contradiction. So the top-k lies in S; the items of S laid out by increasing block index are
in increasing item order, so ``lax.top_k`` over them breaks ties as it does over the whole axis.
Block maxima are taken in the total order ``lax.top_k`` uses (for floats: -NaN < -inf < ... < -0 <
+0 < ... < inf < NaN, through order-preserving integer keys), so signed zeros and NaNs are ranked
exactly as by ``lax.top_k``. Never an approximate top-k.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

__all__: list[str] = []

# Below these sizes lax.top_k alone is as fast (the pass costs about 3 dispatches).
_MIN_ITEMS, _MIN_ITEMS_PER_K = 4096, 64


def _block_size(d: int, k: int) -> int:
    """The block width: the power of two nearest ``sqrt(d / k)`` (the two rankings then have about
    ``sqrt(d k)`` items each) and at least 64 (:func:`_block_maxima` is slower on narrower blocks on
    the CPU; figures in benchmarks/README.md), or 0 when ``lax.top_k`` over the
    whole axis is as cheap."""
    if d < _MIN_ITEMS or d < _MIN_ITEMS_PER_K * k:
        return 0
    return 1 << max(6, round(math.log2(math.sqrt(d / k))))


def _flip(bits: jax.Array) -> jax.Array:
    """Float bits as signed integers with the magnitude bits flipped below zero: the IEEE total
    order as integer order (an involution)."""
    magnitude = jnp.iinfo(bits.dtype).max
    return bits ^ ((bits >> (bits.dtype.itemsize * 8 - 1)) & magnitude)


def _key_dtype(dtype) -> jnp.dtype:
    """The dtype of :func:`_order_keys`: ``dtype`` for integers, the signed integer of its width for
    floats."""
    dtype = jnp.dtype(dtype)
    return jnp.dtype(f"int{8 * dtype.itemsize}") if jnp.issubdtype(dtype, jnp.floating) else dtype


def _order_keys(x: jax.Array) -> jax.Array:
    """Integers in the order ``lax.top_k`` ranks ``x``: ``x`` itself for integers, :func:`_flip` of
    the bits for floats."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    return _flip(lax.bitcast_convert_type(x, _key_dtype(x.dtype)))


def _from_keys(keys: jax.Array, dtype) -> jax.Array:
    """The values whose :func:`_order_keys` are ``keys`` (the same bits)."""
    if not jnp.issubdtype(dtype, jnp.floating):
        return keys
    return lax.bitcast_convert_type(_flip(keys), dtype)


def _lowest(dtype) -> jax.Array:
    """The value ``lax.top_k`` ranks last: the smallest integer, or for floats the NaN with the
    lowest order key."""
    keys = _key_dtype(dtype)
    return _from_keys(jnp.asarray(jnp.iinfo(keys).min, keys), dtype)


_FLOAT32_EXACT = 2**24  # float32 represents every integer of smaller magnitude exactly


def _ranked_as_float32(dtype) -> bool:
    """Integers wider than 16 bits, which XLA's CPU ``top_k`` ranks by sorting whole rows: they are
    ranked through float32 keys (narrower integers are cheap to rank natively)."""
    return jnp.issubdtype(dtype, jnp.integer) and jnp.dtype(dtype).itemsize > 2


def _float32_exact(x: jax.Array) -> jax.Array:
    """Whether every integer of ``x`` is exact in float32 (magnitude below 2^24)."""
    exact = jnp.all(x < _FLOAT32_EXACT)
    if jnp.issubdtype(x.dtype, jnp.signedinteger):
        exact &= jnp.all(x > -_FLOAT32_EXACT)
    return exact


def _rank_by(keys: jax.Array, x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """``lax.top_k(x, k)`` from float32 ``keys`` in the order (and ties) of ``x``."""
    _, indices = lax.top_k(keys, k)
    return jnp.take_along_axis(x, indices, axis=-1), indices


def _rank_float32(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """Integers ranked as their float32 values: exact for the values below 2^24 in magnitude."""
    return _rank_by(x.astype(jnp.float32), x, k)


def _rank_total_order(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """32-bit integers ranked as the float32 values whose :func:`_order_keys` they are (uint32 with
    the top bit flipped): every int32 is the key of one float32, NaN payloads and denormals
    included, so this is exact wherever ``lax.top_k`` ranks float32 in that total order."""
    keys = x if x.dtype == jnp.int32 else lax.bitcast_convert_type(x ^ jnp.uint32(1 << 31), jnp.int32)
    return _rank_by(_from_keys(keys, jnp.float32), x, k)


def _rank_native(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """``lax.top_k(x, k)`` as a tuple (a ``lax.cond`` branch beside the float32 rankings)."""
    values, indices = lax.top_k(x, k)
    return values, indices


def _exact_integer_ranking(run, dtype, exact):
    """``run(rank)`` with ``rank(values, k)`` an exact ``lax.top_k`` of integers of ``dtype`` through
    float32 keys. On the CPU, 32-bit integers take :func:`_rank_total_order` (XLA's CPU ``top_k``
    compares float32 by their bits in the total order): no check and no conditional, which costs
    XLA's CPU runtime a nested execution. Elsewhere (XLA's GPU top-k kernel compares float32 as
    numbers, so NaN keys would misrank) and for 64-bit integers: :func:`_rank_float32` when
    ``exact()``, else the native ranking, under one ``lax.cond``."""

    def guarded():
        return lax.cond(exact(), lambda: run(_rank_float32), lambda: run(_rank_native))

    if jnp.dtype(dtype).itemsize > 4:
        return guarded()
    return lax.platform_dependent(cpu=lambda: run(_rank_total_order), default=guarded)


def _rank(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """``lax.top_k(x, k)``; integers wider than 16 bits through float32 keys
    (:func:`_exact_integer_ranking`)."""
    if not _ranked_as_float32(x.dtype):
        return lax.top_k(x, k)
    return _exact_integer_ranking(lambda rank: rank(x, k), x.dtype, lambda: _float32_exact(x))


def _block_maxima(keys: jax.Array, width: int) -> jax.Array:
    """The maximum of each block of ``width`` consecutive items along the last axis (the last block
    may be shorter), ``[..., ceil(d / width)]``.

    The full blocks are reduced by halving (``maximum`` of the first and second halves, ``log2``
    width times), which XLA fuses into one vectorised pass over the data; a ``max`` along the
    minor axis of a ``[blocks, width]`` view is not vectorised on the CPU (slower; figures in
    benchmarks/README.md), and padding the last block would copy the whole array.
    """
    d = keys.shape[-1]
    full = d // width
    rows = keys[..., : full * width].reshape(*keys.shape[:-1], full, width)
    while rows.shape[-1] > 1:
        half = rows.shape[-1] // 2
        rows = jnp.maximum(rows[..., :half], rows[..., half:])
    maxima = rows[..., 0]
    if full * width == d:
        return maxima
    return jnp.concatenate([maxima, keys[..., full * width :].max(-1, keepdims=True)], axis=-1)


def blocked_top_k(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """``lax.top_k(x, k)`` along the last axis, exactly (values and int32 indices, ties to the lower
    index), by the blocked partial selection of the module docstring where it is cheaper.

    Leading axes are independent rows (``vmap`` works too). ``k`` is static, ``1 <= k <= d``.
    """
    d = x.shape[-1]
    width = _block_size(d, k)
    if width == 0:
        values, indices = _rank(x, k)
        return values, indices.astype(jnp.int32)
    maxima = _from_keys(_block_maxima(_order_keys(x), width), x.dtype)
    if not _ranked_as_float32(x.dtype):
        return _select(x, maxima, k, width, lax.top_k)
    # Where float32 ranking needs a check, one on the block maxima serves both rankings: no item
    # exceeds the largest maximum, and every item of the top k (and every maximum of the k best
    # blocks) is at least the k-th largest maximum, since k blocks hold an item that large. With
    # every maximum exact in float32, the values that can enter either top k are exact and all the
    # others rank below them.
    return _exact_integer_ranking(
        lambda rank: _select(x, maxima, k, width, rank), x.dtype, lambda: _float32_exact(maxima)
    )


def _select(x, maxima, k: int, width: int, rank) -> tuple[jax.Array, jax.Array]:
    """The two rankings of :func:`blocked_top_k` (blocks by ``maxima``, then the k best blocks' items),
    each by ``rank(values, k)``."""
    d = x.shape[-1]
    _, chosen = rank(maxima, k)
    chosen = jnp.sort(chosen, axis=-1)  # increasing block index: candidates in item order
    items = (chosen[..., :, None] * width + jnp.arange(width)).reshape(*x.shape[:-1], k * width)
    gathered = jnp.take_along_axis(x, jnp.minimum(items, d - 1), axis=-1)
    candidates = jnp.where(items < d, gathered, _lowest(x.dtype))
    values, positions = rank(candidates, k)
    return values, jnp.take_along_axis(items, positions, axis=-1).astype(jnp.int32)
