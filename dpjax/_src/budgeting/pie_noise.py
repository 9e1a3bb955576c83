"""PIE's user side (Liang and Yi, Algorithms 4 and 5): each user's Gaussian noise, a stream of its
own per round, and its release ``x + Z / sqrt(2 r)`` (see :mod:`dpjax._src.budgeting.pie`)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry_2x32
from jax.typing import DTypeLike

from dpjax._src import noise
from dpjax._src.noise import NoiseMode
from dpjax._src.numerics import ceil_div

__all__ = ["chunked", "user_gaussians", "user_noise", "user_release"]


def _user_words(round_key, users, count: int) -> jax.Array:
    """uint32 words (count, len(users)); user i's (column i) depend only on ``round_key`` and i.

    Threefry keys (JAX's default): words ``b`` and ``count/2 + b`` of user i are
    ``threefry2x32(round_key, (i, b))``, one hash per two words. Other key implementations:
    ``bits(fold_in(round_key, i), count)``.
    """
    if str(jax.random.key_impl(round_key)) != "threefry2x32":
        bits = jax.vmap(lambda i: jax.random.bits(jax.random.fold_in(round_key, i), (count,), jnp.uint32))
        return bits(users).T
    blocks = ceil_div(count, 2)
    m = users.shape[0]
    keypair = jax.random.key_data(round_key)
    counters = jnp.concatenate([jnp.tile(users, blocks), jnp.repeat(jnp.arange(blocks, dtype=jnp.uint32), m)])
    return threefry_2x32((keypair[0], keypair[1]), counters).reshape(2 * blocks, m)[:count]


def user_gaussians(round_key, users, dshape, dtype, mode):
    """Standard Gaussians (len(users), *dshape): user i's depend only on ``round_key`` and i.

    ``mode="high"``: :func:`dpjax.noise.gaussian_from_words` on 4 words per coordinate from
    :func:`_user_words`; ``mode="low"``: ``jax.random.normal`` from ``fold_in(round_key, i)``.
    """
    if mode == "low":
        return jax.vmap(
            lambda i: noise.gaussian(jax.random.fold_in(round_key, i), dshape, 1.0, dtype, mode=mode)
        )(users)
    coords = int(np.prod(dshape, dtype=np.int64))
    words = _user_words(round_key, users, 4 * coords).reshape(4, coords, users.shape[0])
    return noise.gaussian_from_words(jnp.swapaxes(words, 1, 2).reshape(4, users.shape[0], *dshape), dtype)


def user_noise(
    key: jax.Array,
    round_index: int,
    n: int,
    dshape: Sequence[int] = (),
    dtype: DTypeLike | None = None,
    mode: NoiseMode = "high",
) -> jax.Array:
    """The (n, *dshape) standard Gaussians PIE uses for users 0..n-1 in round ``round_index`` (0-based).

    User i's noise in round j depends only on the key, j and i (:func:`user_gaussians` with the
    round key ``fold_in(key, j)``): not on n, the chunking, the sharding or which other users are
    still active. Exposed for audits.
    """
    users = jnp.arange(n, dtype=jnp.uint32)
    return user_gaussians(jax.random.fold_in(key, round_index), users, tuple(dshape), dtype, mode)


def chunked(fn, x, chunk: int):
    """``fn(x)`` for an element-wise ``fn`` of the leading axis, computed ``chunk`` rows at a time (a
    scan, then the remainder): bounds the temporaries (the noise's random words) to one chunk."""
    size = x.shape[0]
    cs = min(chunk, max(size // 2, 1))
    main = size - size % cs
    if main == cs and main == size:
        return fn(x)
    _, out = lax.scan(lambda _, rows: (None, fn(rows)), None, x[:main].reshape(main // cs, cs, *x.shape[1:]))
    out = out.reshape(main, *out.shape[2:])
    return out if main == size else jnp.concatenate([out, fn(x[main:])])


def user_release(x, r_round, z):
    """User side: ``x + Z/sqrt(2 r)``: the only function that sees raw data."""
    scale = lax.rsqrt(2 * jnp.where(r_round > 0, r_round, 1))
    return x + z * scale.reshape(scale.shape + (1,) * (z.ndim - scale.ndim))
