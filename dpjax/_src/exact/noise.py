"""The implementation behind :mod:`dpjax.exact_noise` (its docstring states the mechanisms, their papers and
guarantees; this module's functions carry theirs)."""

import math
import secrets
from collections.abc import Sequence
from fractions import Fraction
from typing import TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from dpjax._src.exact import fast as _exact_fast
from dpjax._src.exact import gauss_fast as _exact_gauss_fast
from dpjax._src.exact import machine as _exact_machine
from dpjax._src.host_checks import check_rational

__all__ = [
    "LIMITS",
    "Rational",
    "discrete_gaussian",
    "discrete_laplace",
    "exact_rational",
    "release_key",
]


def scale_cap(word) -> int:
    """Scale numerators and denominators must be below this for ``word`` (:data:`LIMITS`)."""
    return _exact_machine.cap(word)


LIMITS = {
    "uint32": "scale numerator t < 2^24 and denominator s < 2^24; discrete Gaussian sigma^2 = p/q with "
    "4 q p^2 < 2^32 (sigma >= 1) or 2 p q < 2^16 (sigma < 1)",
    "uint64": "scale numerator t < 2^48 and denominator s < 2^48; discrete Gaussian sigma^2 = p/q with "
    "4 q p^2 < 2^64 (sigma >= 1) or 2 p q < 2^32 (sigma < 1)",
}


Rational: TypeAlias = float | Fraction | tuple[int, int]
"""An exact positive rational on the host (never traced): a Python or NumPy number (a float is its
exact binary value), a ``Fraction`` or a ``(numerator, denominator)`` pair of ints."""


def exact_rational(value: Rational, name: str) -> Fraction:
    """``value`` as an exact positive ``Fraction``: an int (Python or NumPy), a float (its exact binary
    value), a ``Fraction`` or a ``(numerator, denominator)`` pair of ints. Booleans of every kind and
    traced values are refused (:func:`dpjax.validation.check_rational`, the one rule)."""
    return check_rational(value, name)


def _int_dtype(dtype):
    dtype = jnp.dtype(jnp.int32 if dtype is None else dtype)
    if dtype not in (jnp.dtype(jnp.int32), jnp.dtype(jnp.int64)):
        raise ValueError(f"dtype must be int32 or int64, got {dtype}.")
    if dtype == jnp.dtype(jnp.int64) and not jax.config.jax_enable_x64:
        raise ValueError("int64 output needs jax_enable_x64 (jax.config.update('jax_enable_x64', True)).")
    return dtype


def too_large(name: str, value: Fraction, word) -> ValueError:
    hint = "" if word == np.uint64 else " (enable jax_enable_x64 for 64-bit limits)"
    return ValueError(
        f"{name} = {value} is too large a fraction for exact integer sampling: limits are "
        f"{LIMITS[np.dtype(word).name]}{hint}. A float is taken at its exact binary value "
        f"(0.1 is {Fraction(0.1)}): pass a Fraction or a (numerator, denominator) pair."
    )


def _laplace_params(scale: Fraction, word) -> tuple[int, int]:
    """(t, s) of Algorithm 2 for scale t/s, checked against the word's limits."""
    t, s = scale.numerator, scale.denominator
    if t >= scale_cap(word) or s >= scale_cap(word):
        raise too_large("scale", scale, word)
    return t, s


def gaussian_params(sigma: Fraction, word) -> dict:
    """Algorithm 3's proposal scale and ``gamma = w (|r Y - c|)^2 / D`` for sigma^2 = p/q."""
    variance = sigma * sigma
    p, q = variance.numerator, variance.denominator
    bits = np.iinfo(word).bits
    if sigma >= 1:
        m = math.isqrt(p // q)  # floor(sigma): m^2 <= p/q < (m + 1)^2
        proposal, gamma = Fraction(p, q * m), {"r": 1, "c": m, "w": q, "D": 2 * p}
    else:
        proposal, gamma = Fraction(1), {"r": q, "c": p, "w": 1, "D": 2 * p * q}
    D, w = gamma["D"], gamma["w"]
    if D >= scale_cap(word) or w * D * D >= 2**bits:
        raise too_large("sigma^2", variance, word)
    return {"laplace": _laplace_params(proposal, word), **gamma}



def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _machine(key, shape, dtype, t_s, gauss):
    """The state machine's samples: Algorithm 2's (t, s) and Algorithm 3's gamma as word arrays."""
    word = _exact_machine.word_type()
    lap = _exact_machine.laplace_words(*t_s, word)
    gauss = None if gauss is None else {name: jnp.asarray(gauss[name], word) for name in ("r", "c", "w", "D")}
    return _exact_machine.sample(key, lap, gauss, shape, np.dtype(dtype))


def discrete_laplace(
    key: jax.Array, scale: Rational, shape: Sequence[int] | int = (), dtype: DTypeLike | None = None
) -> jax.Array:
    """Exact discrete Laplace noise: ``P(Z = z) = (1 - q)/(1 + q) q^|z|`` on the integers, q = exp(-1/scale).

    Canonne, Kamath and Steinke (2020), Algorithm 2 with Algorithm 1, on integer arithmetic only
    (see the module docstring). The variance is ``2q/(1 - q)^2``.

    Args:
      key: a ``jax.random`` key.
      scale: the scale ``t/s`` > 0 as an exact rational: int, float (its exact binary value),
        ``Fraction`` or ``(t, s)``. Host-side (static): the algorithm's Bernoulli probabilities are
        fractions of ``t`` and ``s``, which a traced value could not give exactly.
      shape: output shape (static).
      dtype: int32 (default) or int64 (needs ``jax_enable_x64``). Saturates at the dtype's
        maximum ``L`` (probability ``< 2 exp(-L/scale)``), an exact post-processing.

    Returns:
      Integer noise of ``shape``. For ``t <= 64`` (and ``s < 2^31``) and more than 256 values the
      fast pass: fixed work per lane on three threefry hashes, a few percent more candidates than
      values, of which it drops the 6% it leaves rejected and loops settle the 2% it leaves open, at
      scale 10 (:mod:`dpjax._src.exact.fast`). Otherwise the state machine (faster and quicker to
      compile for a few values per key under ``vmap``): about 7 steps per lane on average, a
      geometric tail (1e-3 of the lanes need more than 30), the slow lanes gathered into smaller
      buffers (:mod:`dpjax._src.exact.machine`). Both loop until every lane has an accepted sample.

    Example:
      >>> import jax
      >>> z = discrete_laplace(jax.random.key(0), (10, 3), (4,))   # scale 10/3
    """
    dtype = _int_dtype(dtype)
    t, s = _laplace_params(exact_rational(scale, "scale"), _exact_machine.word_type())
    shape = _shape(shape)
    n = math.prod(shape)
    if t > _exact_fast.MAX_T or s >= _exact_fast.MAX_S or n <= _exact_fast.MIN_LANES:
        return _machine(key, shape, dtype, (t, s), None)
    plan = _exact_fast.plan(n, t, s)
    return _exact_fast.sample(key, _exact_fast.constants(t, s), shape, np.dtype(dtype), plan)


def discrete_gaussian(
    key: jax.Array, sigma: Rational, shape: Sequence[int] | int = (), dtype: DTypeLike | None = None
) -> jax.Array:
    """Exact discrete Gaussian noise: ``P(Z = z) ∝ exp(-z^2 / (2 sigma^2))`` on the integers.

    Canonne, Kamath and Steinke (2020), Algorithm 3 (a discrete Laplace proposal accepted by
    Algorithm 1), integer arithmetic only (see the module docstring). Its variance is below
    ``sigma^2`` (CKS20 Prop. 19).

    Args:
      key: a ``jax.random`` key.
      sigma: sigma > 0 as an exact rational (int, float at its exact binary value, ``Fraction``, or
        a pair); host-side (static) for the same reason as :func:`discrete_laplace`'s scale.
      shape: output shape (static).
      dtype: int32 (default) or int64 (needs ``jax_enable_x64``); saturates at the dtype's maximum.

    Returns:
      Integer noise of ``shape``. For more than 512 values and a proposal scale the fast pass serves
      (``t/s`` with ``t <= 64``, at most about 21, and ``gamma``'s denominator ``D <= 2^13``: e.g.
      integer sigma up to 21), the fast rounds (:mod:`dpjax._src.exact.gauss_fast`): a round draws about
      1.4 candidates per value (sigma 10) from the discrete Laplace fast pass and reads each
      acceptance from three 16-bit digits, settles the 0.1% left undecided exactly from their state,
      and the output takes the accepted candidates in order (a second round with probability about
      3e-5). They take longer to compile than the state machine. Otherwise the state
      machine: about 11 to 14 steps per lane on average (the proposal is accepted with probability
      about 0.76, and its test takes a few trials), 4% of the lanes need more than 30
      (:mod:`dpjax._src.exact.machine`). Both loop until every lane has accepted.

    Example:
      >>> import jax
      >>> z = discrete_gaussian(jax.random.key(0), 3, (4,))
    """
    dtype = _int_dtype(dtype)
    gauss = gaussian_params(exact_rational(sigma, "sigma"), _exact_machine.word_type())
    shape, (t, s) = _shape(shape), gauss["laplace"]
    n = math.prod(shape)
    if n <= _exact_gauss_fast.MIN_LANES or not _exact_gauss_fast.applies(t, s, gauss):
        return _machine(key, shape, dtype, (t, s), gauss)
    word = _exact_machine.word_type()
    lap = _exact_machine.laplace_words(t, s, word)
    words = {name: jnp.asarray(gauss[name], word) for name in ("r", "c", "w", "D")}
    return _exact_gauss_fast.sample(key, _exact_gauss_fast.constants(t, s, gauss), lap, words, shape,
                                    np.dtype(dtype), _exact_gauss_fast.plan(n, t, s, gauss))


def release_key(impl: str | None = None) -> jax.Array:
    """A fresh ``jax.random`` key whose every bit comes from the operating system's entropy.

    ``secrets.token_bytes`` (``os.urandom``: getrandom(2) on Linux) fills the key's data: 64 bits
    for the default ``threefry2x32`` (its key is two 32-bit words), 128 for ``"rbg"``. The key is
    unpredictable to anyone who does not see this process. What comes next is JAX's generator:
    ``threefry2x32`` is a counter-based pseudo-random function (Salmon et al. 2011, "Parallel random
    numbers: as easy as 1, 2, 3"), Threefry-2x32 with 20 rounds, which passes the statistical test
    batteries (BigCrush) and has no known practical distinguisher, but it is not a certified
    cryptographically secure generator: no NIST/FIPS validation, no security proof, and a 64-bit
    key, short of a cryptographic key's 128 bits. Its outputs are predictable to anyone who learns
    the key. Draw one release key per release, keep it out of logs, and if your threat model needs a
    certified CSPRNG, generate the bits with one and run the exact samplers' algorithms on them.

    Args:
      impl: the ``jax.random`` implementation (default: JAX's default, threefry2x32).

    Returns:
      A new-style typed key (``jax.random.key_data`` gives its words).
    """
    shape = jax.random.key_data(jax.random.key(0, impl=impl)).shape
    words = np.frombuffer(secrets.token_bytes(4 * math.prod(shape)), np.uint32).reshape(shape)
    return jax.random.wrap_key_data(jnp.asarray(words), impl=impl)
