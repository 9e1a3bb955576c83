"""The implementation behind :mod:`dpjax.noise` (its docstring states the mechanisms, their papers and
guarantees; this module's functions carry theirs)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias, get_args

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike, DTypeLike

from dpjax._src.exact import discrete_gaussian, discrete_laplace, random_word_pairs, release_key
from dpjax._src.host_checks import check_choice
from dpjax._src.numerics import ceil_div

__all__ = [
    "SAMPLERS",
    "NoiseMode",
    "Sampler",
    "discrete_gaussian",
    "discrete_laplace",
    "exponential",
    "exponential_from_sign_and_half_uniform",
    "gaussian",
    "gaussian_from_words",
    "gumbel",
    "laplace",
    "laplace_from_sign_and_half_uniform",
    "random_word_pairs",
    "release_key",
    "sample",
    "sign_and_half_uniform_from_bits",
    "standard_exponential",
]

NoiseMode: TypeAlias = Literal["high", "low"]
"""``"high"``: tails exact far out (the default); ``"low"``: JAX's own samplers."""
_MODES: tuple[NoiseMode, ...] = get_args(NoiseMode)
Sampler: TypeAlias = Literal["laplace", "gumbel", "exponential", "gaussian"]
"""The continuous samplers by name (:data:`SAMPLERS`)."""


def _float_dtype(dtype: DTypeLike | None) -> np.dtype:
    dtype = jnp.dtype(float) if dtype is None else jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"dtype must be a floating dtype, got {dtype}.")
    return jax.dtypes.canonicalize_dtype(dtype)


def _prepare(
    shape: Sequence[int] | int, scale: ArrayLike, dtype: DTypeLike | None, mode: NoiseMode
) -> tuple[tuple[int, ...], jax.Array, np.dtype]:
    check_choice(mode, "mode", _MODES)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return shape, jnp.asarray(scale, _float_dtype(dtype)), _float_dtype(dtype)


def _sign_and_half_uniform(key, shape, dtype):
    """A fair sign bit and W uniform on (0, 1/2] with resolution 2^-64 near zero."""
    return sign_and_half_uniform_from_bits(*random_word_pairs(key, shape), dtype)


def sign_and_half_uniform_from_bits(
    hi: jax.Array, lo: jax.Array, dtype: DTypeLike
) -> tuple[jax.Array, jax.Array]:
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


def exponential_from_sign_and_half_uniform(upper_half: ArrayLike, w: jax.Array) -> jax.Array:
    """Exp(1) from (sign, W): ``-log W`` on the upper half, ``-log1p(-W)`` on the lower half."""
    return jnp.where(upper_half, -jnp.log(w), -jnp.log1p(-w))


def laplace_from_sign_and_half_uniform(negative: ArrayLike, w: jax.Array) -> jax.Array:
    """Laplace(1) from (sign, W): ``|Z| = -log(2W)``, 2W being uniform on (0, 1] and fine near 0."""
    magnitude = -jnp.log(2 * w)
    return jnp.where(negative, -magnitude, magnitude)


def standard_exponential(
    key: jax.Array, shape: Sequence[int] | int = (), dtype: DTypeLike | None = None
) -> jax.Array:
    """Exp(1) variates with both tails exact to about 44 (see the module docstring)."""
    shape, _, dtype = _prepare(shape, 1.0, dtype, "high")
    return exponential_from_sign_and_half_uniform(*_sign_and_half_uniform(key, shape, dtype))


def exponential(
    key: jax.Array,
    shape: Sequence[int] | int = (),
    scale: ArrayLike = 1.0,
    dtype: DTypeLike | None = None,
    *,
    mode: NoiseMode = "high",
) -> jax.Array:
    """One-sided Exponential noise with density ``exp(-z/scale)/scale`` on z >= 0.

    Mean ``scale``, variance ``scale**2``; in ``mode="high"`` ``P(Z > t*scale) = exp(-t)`` holds
    out to t of about 44 in float32 and float64.
    """
    shape, scale, dtype = _prepare(shape, scale, dtype, mode)
    if mode == "low":
        return scale * jax.random.exponential(key, shape, dtype)
    return scale * standard_exponential(key, shape, dtype)


def gumbel(
    key: jax.Array,
    shape: Sequence[int] | int = (),
    scale: ArrayLike = 1.0,
    dtype: DTypeLike | None = None,
    *,
    mode: NoiseMode = "high",
) -> jax.Array:
    """Gumbel noise (location 0) with density ``exp(-(z/b + exp(-z/b)))/b``, b = ``scale``.

    Mean ``0.5772 * scale``, variance ``pi**2/6 * scale**2``. In ``mode="high"`` the upper tail
    ``P(Z > t*scale) = 1 - exp(-exp(-t))`` is right out to t of about 44 (float32 and float64),
    where the naive float32 sampler stops at 16.6.
    """
    shape, scale, dtype = _prepare(shape, scale, dtype, mode)
    if mode == "low":
        return scale * jax.random.gumbel(key, shape, dtype)
    return -scale * jnp.log(standard_exponential(key, shape, dtype))


def laplace(
    key: jax.Array,
    shape: Sequence[int] | int = (),
    scale: ArrayLike = 1.0,
    dtype: DTypeLike | None = None,
    *,
    mode: NoiseMode = "high",
) -> jax.Array:
    """Laplace noise with density ``exp(-|z|/b)/(2b)``, b = ``scale``; variance ``2 b**2``.

    In ``mode="high"`` ``P(|Z| > t*scale) = exp(-t)`` holds out to t of about 44.
    """
    shape, scale, dtype = _prepare(shape, scale, dtype, mode)
    if mode == "low":
        return scale * jax.random.laplace(key, shape, dtype)
    return scale * laplace_from_sign_and_half_uniform(*_sign_and_half_uniform(key, shape, dtype))


def gaussian(
    key: jax.Array,
    shape: Sequence[int] | int = (),
    scale: ArrayLike = 1.0,
    dtype: DTypeLike | None = None,
    *,
    mode: NoiseMode = "high",
) -> jax.Array:
    """Gaussian noise N(0, scale**2); ``mode="high"`` is exact in the tails to about 9.4 sigma.

    ``mode="high"`` draws the variates in pairs (:func:`_gaussian_pairs_from_words`) from 3 words
    per pair in float32 and 4 in float64 (:func:`random_word_pairs`: 0.75 and 1 threefry hash per
    variate, against 1 for ``jax.random.normal``), laid out so that every word is read where it was
    made: ``m = ceil(size / 4)`` hashes per row of ``[rows, m]`` feed two halves of ``m`` pairs
    (:func:`_pair_words`), and the flattened output is the halves' first members, then their
    second members (cut to ``size``).
    """
    shape, scale, dtype = _prepare(shape, scale, dtype, mode)
    if mode == "low":
        return scale * jax.random.normal(key, shape, dtype)
    size = math.prod(shape)
    hi, lo = random_word_pairs(key, (_words_per_gaussian_pair(dtype), ceil_div(size, 4)))
    halves = [_gaussian_pairs_from_words(words, dtype) for words in _pair_words(hi, lo)]
    members = [half[0] for half in halves] + [half[1] for half in halves]
    excess = 4 * members[0].shape[0] - size
    while excess:  # cut the tail before the concatenation (a slice after it costs XLA its vectors)
        cut = min(excess, members[-1].shape[0])
        members[-1] = members[-1][: members[-1].shape[0] - cut]
        excess -= cut
        if members[-1].shape[0] == 0:
            members.pop()
    return scale * jnp.concatenate(members).reshape(shape)


def _pair_words(hi, lo):
    """The words of two halves of pairs from hashes ``[rows, m]``: rows 0 and 1 give each half its
    sign and W; float64 (4 rows) gives each half its own angle words (rows 2 and 3), float32 (3
    rows) gives the two halves the two words of row 2's hashes."""
    if hi.shape[0] == 4:
        return (hi[0], lo[0], hi[2], lo[2]), (hi[1], lo[1], hi[3], lo[3])
    return (hi[0], lo[0], hi[2]), (hi[1], lo[1], lo[2])


def _angle_bits(dtype) -> int:
    """Bits of the angle within its octant: the dtype's precision (24 in float32, 53 in float64)."""
    return jnp.finfo(dtype).nmant + 1


def _words_per_gaussian_pair(dtype) -> int:
    """2 words for the sign and W, then the angle's bits, a swap bit and a second sign bit."""
    return 2 + ceil_div(_angle_bits(dtype) + 2, 32)


def _gaussian_pairs_from_words(words, dtype):
    """Two independent standard Gaussians per column of uint32 ``words`` (``[3, m]`` in float32,
    ``[4, m]`` in float64; :func:`_words_per_gaussian_pair`), tail-exact to about 9.4 sigma.

    Box-Muller (1958): with ``E ~ Exp(1)`` and ``Theta`` uniform on [0, 2 pi) independent,
    ``sqrt(2E) (cos Theta, sin Theta)`` are two independent N(0, 1). By the symmetries of the
    circle, ``(cos Theta, sin Theta)`` has the law of ``(S1 a, S2 b)`` with fair independent signs
    S1, S2 and ``(a, b) = (cos psi, sin psi)`` or ``(sin psi, cos psi)`` with probability 1/2 each,
    psi uniform on [0, pi/4). Words 0-1 give S1 and ``E = -log(2W)`` exactly as
    :func:`sign_and_half_uniform_from_bits` (W down to 2^-64, so ``sqrt(2E)`` reaches 9.42); the
    remaining bits, from the top: the swap bit, psi's ``nmant + 1`` bits (psi on a grid of
    ``2^-(nmant + 1) pi/4``, the dtype's precision) and, in the lowest bit, S2. ``cos psi`` and
    ``sin psi`` are within one epsilon of exact (:func:`_quarter_cos_sin`), so each member's tail
    ``P(|Z| > t)`` is exact wherever ``t`` is below the radius' reach, as for a single variate.
    """
    dtype = _float_dtype(dtype)
    first_negative, w = sign_and_half_uniform_from_bits(words[0], words[1], dtype)
    bits = _angle_bits(dtype)
    swap = (words[2] >> 31).astype(jnp.bool_)
    top = (words[2] << 1) >> 1
    if bits + 2 <= 32:
        fraction = (top >> (31 - bits)).astype(dtype)
        second_negative = (words[2] & 1).astype(jnp.bool_)
    else:
        low = bits - 31
        fraction = top.astype(dtype) * jnp.asarray(2.0**low, dtype) + (words[3] >> (32 - low)).astype(dtype)
        second_negative = (words[3] & 1).astype(jnp.bool_)
    psi = fraction * jnp.asarray(2.0**-bits * np.pi / 4, dtype)
    cos, sin = _quarter_cos_sin(psi)
    radius = jnp.sqrt(-2 * jnp.log(2 * w))
    first = radius * jnp.where(swap, sin, cos)
    second = radius * jnp.where(swap, cos, sin)
    return jnp.where(first_negative, -first, first), jnp.where(second_negative, -second, second)


def _taylor_terms(dtype) -> int:
    """The fewest terms J of the cosine's Taylor series with ``(pi/4)^(2J) / (2J)!`` below a
    quarter of the dtype's epsilon (5 in float32, 9 in float64)."""
    eps = float(jnp.finfo(dtype).eps)
    terms = 1
    while (np.pi / 4) ** (2 * terms) / math.factorial(2 * terms) >= eps / 4:
        terms += 1
    return terms


@jax.jit
def _quarter_cos_sin(psi):
    """``(cos psi, sin psi)`` for psi in [0, pi/4] by their Taylor series in Horner form.

    The series alternate with decreasing terms, so truncating after :func:`_taylor_terms` terms
    errs by less than eps/4 relative (cos >= 0.7 and sin >= 0.9 psi there); with the rounding of
    the evaluation both are within one epsilon of exact (tested on the float32 angle grid against
    float64, and in float64 against 40-digit decimals). A polynomial vectorizes where
    ``lax.cos``/``lax.sin`` do a general range reduction per element (on the CPU, more than the
    rest of a pair costs; benchmarks/README.md).
    Jitted, so that an eager call evaluates the same fused multiply-adds as a traced one (XLA
    contracts ``a * b + c`` inside a compiled computation, not across eager operations).
    """
    terms = _taylor_terms(psi.dtype)
    square = psi * psi
    cos = jnp.zeros_like(psi)
    sin = jnp.zeros_like(psi)
    for j in reversed(range(terms)):
        cos = cos * square + (-1) ** j / math.factorial(2 * j)
        sin = sin * square + (-1) ** j / math.factorial(2 * j + 1)
    return cos, sin * psi


def _box_muller(negative, w, angle):
    """``±sqrt(2E) cos(angle)`` with ``E = -log(2W)`` (Exp(1): 2W is uniform on (0, 1]) and
    ``angle`` uniform on [0, pi/2): a standard Gaussian, tail-exact to about 9.4 sigma."""
    z = jnp.sqrt(-2 * jnp.log(2 * w)) * lax.cos(angle)
    return jnp.where(negative, -z, z)


def gaussian_from_words(words: jax.Array, dtype: DTypeLike | None) -> jax.Array:
    """Standard Gaussians (``mode="high"``'s law) from uint32 words ``[4, ...]``, one variate per
    position of ``words[0]``.

    Words 0 and 1 give the sign and W (:func:`sign_and_half_uniform_from_bits`); words 2 and 3 the
    angle, uniform on [0, pi/2) with the dtype's full precision (the top ``nmant + 1`` of their 64
    bits, exact in ``dtype``). For counter-based callers that draw many variates from one hash each
    (e.g. one threefry block per user and round in :mod:`dpjax._src.budgeting.pie`).
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


SAMPLERS: dict[Sampler, Callable[..., jax.Array]] = {
    "laplace": laplace,
    "gumbel": gumbel,
    "exponential": exponential,
    "gaussian": gaussian,
}


def sample(
    name: Sampler,
    key: jax.Array,
    shape: Sequence[int] | int = (),
    scale: ArrayLike = 1.0,
    dtype: DTypeLike | None = None,
    *,
    mode: NoiseMode = "high",
) -> jax.Array:
    """Dispatches to a sampler by name ("laplace", "gumbel", "exponential", "gaussian")."""
    check_choice(name, "noise", SAMPLERS)
    return SAMPLERS[name](key, shape, scale, dtype, mode=mode)
