"""Scaled noise samplers with correct upper tails: Laplace, Gumbel, Exponential and Gaussian.

All samplers follow ``jax.random``: ``sampler(key, shape=(), scale=1.0, dtype=None, *, mode="high")``.

Why not plain ``jax.random``: a float32 uniform has 23-24 bits, so the naive Gumbel
``-log(-log U)`` never exceeds about 16.6 and the naive Exponential ``-log U`` never exceeds about
16.6 either. Mechanisms that compare noisy values against a threshold (AboveThreshold, Gumbel
top-k with a ⊥ threshold, report-noisy-max over 10^6 candidates) live in exactly those tails.

``mode="high"`` (the default) builds every variate from a standard exponential whose *both* tails
are exact to about 44 in float32 and float64:

* 64 random bits give a sign bit ``s`` and a uniform ``W`` on (0, 1/2] with resolution
  2^-64 near 0 (relative precision of the dtype elsewhere);
* ``E = -log(W)`` when ``s`` is set (the upper half of Exp(1), E >= log 2) and
  ``E = -log1p(-W)`` otherwise (the lower half, E < log 2, fine near 0).

Since ``U = W`` or ``U = 1 - W`` is uniform on (0, 1), ``E = -log U`` is exactly Exp(1), and
neither branch ever evaluates ``log`` of a number rounded to 1. From ``E``: Gumbel ``-log E``
(tails to about +44 and -3.8, i.e. probabilities down to 1e-19), Laplace ``±E`` and Gaussian by
Box-Muller ``sqrt(2E) cos(2 pi V)`` (to about 9.4 sigma).

``mode="low"`` delegates to ``jax.random`` (one 32-bit word per variate, truncated tails), for
uses where the tail is irrelevant and speed is all.

These are floating-point samplers: they are right in distribution for studies, training and
benchmarks, but they are not hardened against floating-point side channels (Mironov 2012).

The exact integer samplers :func:`discrete_laplace` and :func:`discrete_gaussian` (Canonne, Kamath
and Steinke 2020; integer arithmetic only, see :mod:`dpjax.exact_noise`) and :func:`release_key`
(a key from the operating system's entropy) are re-exported here for releases.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax import lax

from dpjax.exact_noise import discrete_gaussian, discrete_laplace, release_key
from dpjax.validation import check_choice

__all__ = [
    "SAMPLERS",
    "discrete_gaussian",
    "discrete_laplace",
    "exponential",
    "exponential_from_sign_and_half_uniform",
    "gaussian",
    "gaussian_from_words",
    "gumbel",
    "laplace",
    "laplace_from_sign_and_half_uniform",
    "release_key",
    "sample",
    "sign_and_half_uniform_from_bits",
    "standard_exponential",
]

_MODES = ("high", "low")


def _float_dtype(dtype):
    dtype = jnp.dtype(float) if dtype is None else jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype must be a floating dtype, got {dtype}.")
    return jax.dtypes.canonicalize_dtype(dtype)


def _prepare(shape, scale, dtype, mode):
    check_choice(mode, "mode", _MODES)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return shape, jnp.asarray(scale, _float_dtype(dtype)), _float_dtype(dtype)


def _sign_and_half_uniform(key, shape, dtype):
    """A fair sign bit and W uniform on (0, 1/2] with resolution 2^-64 near zero."""
    hi, lo = jax.random.bits(key, (2, *shape), jnp.uint32)
    return sign_and_half_uniform_from_bits(hi, lo, dtype)


def sign_and_half_uniform_from_bits(hi, lo, dtype):
    """The deterministic map behind ``mode="high"``: two uint32 words to (sign, W).

    The top bit of ``hi`` is the sign; ``W = (h + (l + 1/2) 2^-32) 2^-32`` with ``h`` the other 31
    bits of ``hi`` and ``l = lo``, so ``P(W < w) = 2w`` down to ``w`` of about 2^-64. Exposed so the
    tail can be checked exactly, pattern by pattern, in the tests.
    """
    sign = (hi >> 31).astype(jnp.bool_)
    hi31 = (hi & jnp.uint32(0x7FFFFFFF)).astype(dtype)
    lo32 = lo.astype(dtype) + jnp.asarray(0.5, dtype)
    w = (hi31 + lo32 * jnp.asarray(2.0**-32, dtype)) * jnp.asarray(2.0**-32, dtype)
    return sign, w


def exponential_from_sign_and_half_uniform(upper_half, w):
    """Exp(1) from (sign, W): ``-log W`` on the upper half, ``-log1p(-W)`` on the lower half."""
    return jnp.where(upper_half, -jnp.log(w), -jnp.log1p(-w))


def laplace_from_sign_and_half_uniform(negative, w):
    """Laplace(1) from (sign, W): ``|Z| = -log(2W)``, 2W being uniform on (0, 1] and fine near 0."""
    magnitude = -jnp.log(2 * w)
    return jnp.where(negative, -magnitude, magnitude)


def standard_exponential(key, shape: Sequence[int] | int = (), dtype=None) -> jax.Array:
    """Exp(1) variates with both tails exact to about 44 (see the module docstring)."""
    shape, _, dtype = _prepare(shape, 1.0, dtype, "high")
    return exponential_from_sign_and_half_uniform(*_sign_and_half_uniform(key, shape, dtype))


def exponential(key, shape=(), scale=1.0, dtype=None, *, mode: str = "high") -> jax.Array:
    """One-sided Exponential noise with density ``exp(-z/scale)/scale`` on z >= 0.

    Mean ``scale``, variance ``scale**2``; in ``mode="high"`` ``P(Z > t*scale) = exp(-t)`` holds
    out to t of about 44 in float32 and float64.
    """
    shape, scale, dtype = _prepare(shape, scale, dtype, mode)
    if mode == "low":
        return scale * jax.random.exponential(key, shape, dtype)
    return scale * standard_exponential(key, shape, dtype)


def gumbel(key, shape=(), scale=1.0, dtype=None, *, mode: str = "high") -> jax.Array:
    """Gumbel noise (location 0) with density ``exp(-(z/b + exp(-z/b)))/b``, b = ``scale``.

    Mean ``0.5772 * scale``, variance ``pi**2/6 * scale**2``. In ``mode="high"`` the upper tail
    ``P(Z > t*scale) = 1 - exp(-exp(-t))`` is right out to t of about 44 (float32 and float64),
    where the naive float32 sampler stops at 16.6.
    """
    shape, scale, dtype = _prepare(shape, scale, dtype, mode)
    if mode == "low":
        return scale * jax.random.gumbel(key, shape, dtype)
    return -scale * jnp.log(standard_exponential(key, shape, dtype))


def laplace(key, shape=(), scale=1.0, dtype=None, *, mode: str = "high") -> jax.Array:
    """Laplace noise with density ``exp(-|z|/b)/(2b)``, b = ``scale``; variance ``2 b**2``.

    In ``mode="high"`` ``P(|Z| > t*scale) = exp(-t)`` holds out to t of about 44.
    """
    shape, scale, dtype = _prepare(shape, scale, dtype, mode)
    if mode == "low":
        return scale * jax.random.laplace(key, shape, dtype)
    return scale * laplace_from_sign_and_half_uniform(*_sign_and_half_uniform(key, shape, dtype))


def gaussian(key, shape=(), scale=1.0, dtype=None, *, mode: str = "high") -> jax.Array:
    """Gaussian noise N(0, scale**2); ``mode="high"`` is exact in the tails to about 9.4 sigma."""
    shape, scale, dtype = _prepare(shape, scale, dtype, mode)
    if mode == "low":
        return scale * jax.random.normal(key, shape, dtype)
    radius_key, angle_key = jax.random.split(key)
    negative, w = _sign_and_half_uniform(radius_key, shape, dtype)
    angle = jax.random.uniform(angle_key, shape, dtype, maxval=jnp.pi / 2)
    return scale * _box_muller(negative, w, angle)


def _box_muller(negative, w, angle):
    """``±sqrt(2E) cos(angle)`` with ``E = -log(2W)`` (Exp(1): 2W is uniform on (0, 1]) and
    ``angle`` uniform on [0, pi/2): a standard Gaussian, tail-exact to about 9.4 sigma."""
    z = jnp.sqrt(-2 * jnp.log(2 * w)) * lax.cos(angle)
    return jnp.where(negative, -z, z)


def gaussian_from_words(words, dtype) -> jax.Array:
    """Standard Gaussians (``mode="high"``'s law) from uint32 words ``[4, ...]``, one variate per
    position of ``words[0]``.

    Words 0 and 1 give the sign and W (:func:`sign_and_half_uniform_from_bits`); words 2 and 3 the
    angle, uniform on [0, pi/2) with the dtype's full precision (the top ``nmant + 1`` of their 64
    bits, exact in ``dtype``). For counter-based callers that draw many variates from one hash each
    (e.g. one threefry block per user and round in :mod:`dpjax.budgeting.pie`).
    """
    dtype = _float_dtype(dtype)
    negative, w = sign_and_half_uniform_from_bits(words[0], words[1], dtype)
    bits = jnp.finfo(dtype).nmant + 1
    if bits <= 32:
        u = (words[2] >> (32 - bits)).astype(dtype)
    else:
        high = words[2].astype(dtype) * jnp.asarray(2.0 ** (bits - 32), dtype)
        u = high + (words[3] >> (64 - bits)).astype(dtype)
    u = u * jnp.asarray(2.0**-bits, dtype)
    return _box_muller(negative, w, u * jnp.asarray(jnp.pi / 2, dtype))


SAMPLERS = {"laplace": laplace, "gumbel": gumbel, "exponential": exponential, "gaussian": gaussian}


def sample(name: str, key, shape=(), scale=1.0, dtype=None, *, mode: str = "high") -> jax.Array:
    """Dispatches to a sampler by name ("laplace", "gumbel", "exponential", "gaussian")."""
    check_choice(name, "noise", SAMPLERS)
    return SAMPLERS[name](key, shape, scale, dtype, mode=mode)
