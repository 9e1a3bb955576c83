"""The blocked partial selection equals ``lax.top_k`` exactly (values and indices, ties to the lower
index), on ties, signed zeros, infinities, NaN, integers beyond float32's exact range and inputs
built against the block ranking."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from dpjax._src import partial_top_k

D = 8192  # above partial_top_k.MIN_ITEMS: the blocked path runs


@functools.partial(jax.jit, static_argnums=1)
def _both(x, k):
    return partial_top_k.blocked_top_k(x, k), lax.top_k(x, k)


def _assert_equal(x, k):
    (values, ids), (want_values, want_ids) = _both(jnp.asarray(x), k)
    assert partial_top_k._block_size(np.shape(x)[-1], k) > 0
    np.testing.assert_array_equal(np.asarray(ids), np.asarray(want_ids))
    np.testing.assert_array_equal(
        np.asarray(values).view(f"i{np.asarray(values).itemsize}"),
        np.asarray(want_values).view(f"i{np.asarray(want_values).itemsize}"),
    )


def _adversarial_float32() -> np.ndarray:
    """Rows built against the block ranking: everything tied; ties at the k-th value spread over
    many blocks, with the block maxima equal; the top items packed in one block and in the last
    (partial) block; signed zeros, infinities and NaN of both signs."""
    rng = np.random.default_rng(0)
    rows = [np.zeros(D), np.ones(D)]
    tied = rng.integers(0, 3, D).astype(float)
    tied[rng.choice(D, 40, replace=False)] = 3.0  # 40 items above, the rest tied in 3 values
    rows.append(tied)
    packed = rng.normal(size=D)
    packed[100:164] = 50.0 + np.arange(64)  # the whole top in a few neighboring blocks
    rows.append(packed)
    last = rng.normal(size=D)
    last[-30:] = 9.0  # the top at the end of the axis
    rows.append(last)
    zeros = np.where(rng.random(D) < 0.5, 0.0, -0.0)
    zeros[rng.choice(D, 5, replace=False)] = -1.0
    rows.append(zeros)
    special = rng.normal(size=D)
    special[rng.choice(D, 20, replace=False)] = np.inf
    special[rng.choice(D, 20, replace=False)] = -np.inf
    special[rng.choice(D, 10, replace=False)] = np.nan
    special[rng.choice(D, 10, replace=False)] = -np.nan
    rows.append(special)
    return np.asarray(rows, np.float32)


@pytest.mark.parametrize("k", [1, 41, 100])
def test_equals_lax_top_k_on_adversarial_float32_rows(k):
    _assert_equal(_adversarial_float32(), k)


def test_equals_lax_top_k_on_random_ties_and_odd_lengths():
    rng = np.random.default_rng(1)
    for d, k in ((D + 3, 7), (10_001, 64), (D, 128)):
        _assert_equal(rng.integers(0, 20, (3, d)).astype(np.float32), k)


def _integer_rows():
    """int32, uint32 and narrower rows: beyond 2^24, at the int32 extremes and on bit patterns that
    are float32 denormals, infinities and NaNs, many tied maxima, and values below -2^24 that
    float32 rounds together but that cannot enter the top k."""
    rng = np.random.default_rng(2)
    small = rng.integers(0, 5, (2, D)).astype(np.int32)
    big = small.copy()
    big[0, 17] = 2**24 + 1
    big[1, ::97] = 2**30 - 7  # many tied maxima
    int32 = np.iinfo(np.int32)
    floats = [2**23, 0x7F800000, 0x7F800001, 0x7FC00000]  # as float32: a denormal, inf and NaNs
    patterns = np.array([int32.min, int32.min + 1, -(2**24) - 1, -1, 0, 1, *floats, int32.max], np.int32)
    extremes = rng.choice(patterns, (2, D))
    below = -(2**24) - rng.integers(0, 3, (2, D)).astype(np.int32)
    below[:, ::64] = rng.integers(0, 3, (2, D // 64))  # every block's maximum within 2^24
    narrow = (rng.integers(-9, 9, (2, D)).astype(np.int8), rng.integers(0, 2**16, (2, D)).astype(np.uint16))
    return (small, big, -big, extremes, extremes.view(np.uint32), below, *narrow)


def test_equals_lax_top_k_on_integers():
    """On the CPU 32-bit integers are ranked by float32 total-order keys, with no check."""
    for x in _integer_rows():
        _assert_equal(x, 33)


def test_equals_lax_top_k_on_integers_off_the_cpu(monkeypatch):
    """The other backends' path: float32 keys when the block maxima are exact in float32 (one
    check and one ``lax.cond``), else the native ranking."""
    taken = []
    monkeypatch.setattr(jax.lax, "platform_dependent", lambda *, cpu, default: taken.append(1) or default())
    _both.clear_cache()
    for x in _integer_rows():
        _assert_equal(x, 33)
    _both.clear_cache()
    assert taken


def test_equals_lax_top_k_on_64_bit_integers(x64):
    """64-bit integers: through float32 keys when the block maxima are within 2^24, else natively."""
    rng = np.random.default_rng(4)
    fits = rng.integers(-(2**31), 2**31, (2, D))
    wide = fits.copy()
    wide[1, 5] = 2**40
    for x in (fits, wide, -wide, fits.astype(np.uint64) & 0xFFFF, wide.astype(np.uint64)):
        _assert_equal(x, 33)


def test_under_vmap_and_in_x64(x64):
    x = jnp.asarray(np.random.default_rng(3).integers(0, 9, (4, D)), jnp.float64)
    batched = jax.jit(jax.vmap(lambda row: partial_top_k.blocked_top_k(row, 20)))(x)
    want = lax.top_k(x, 20)
    np.testing.assert_array_equal(np.asarray(batched[1]), np.asarray(want[1]))
    np.testing.assert_array_equal(np.asarray(batched[0]), np.asarray(want[0]))


def test_small_inputs_take_lax_top_k():
    assert partial_top_k._block_size(partial_top_k._MIN_ITEMS - 1, 1) == 0
    assert partial_top_k._block_size(10**6, 10**5) == 0
    assert partial_top_k._block_size(10**5, 100) == 64  # sqrt(10^3) rounds to 32, below the floor 64
    assert partial_top_k._block_size(10**6, 100) == 128
