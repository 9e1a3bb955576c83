"""Exact integer noise: the discrete Laplace and discrete Gaussian of Canonne, Kamath and Steinke.

Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020),
Algorithm 1 (Bernoulli(exp(-gamma)) for a rational gamma), Algorithm 2 (discrete Laplace) and
Algorithm 3 (discrete Gaussian), written as one fixed-shape state machine per lane: every lane
advances by one step per round on one fresh uniform machine word from ``jax.random.bits``, and a
``while_loop`` runs rounds until every lane has accepted. Only integer operations (additions,
multiplications, shifts, comparisons and one division by a constant per candidate) touch the
random bits, so the law of the output is exactly the stated one: no floating-point value is ever
computed on the sampling path (a test checks the jaxpr).

**Exact rationals, host-side.** The scale (or sigma) is a Python number made an exact fraction
(``fractions.Fraction``: a float is taken at its exact binary value, ``0.1`` is not 1/10) or a
``(numerator, denominator)`` pair. It is static (not traced): the algorithms' Bernoulli
probabilities are fractions of these integers, and a traced float could not be made an exact
rational. Its size is bounded (:data:`LIMITS`) so that every intermediate product fits the
internal word (uint32, or uint64 under ``jax_enable_x64``); larger ones are refused eagerly.

**How a Bernoulli(num/den) is decided exactly.** The top ``c`` bits of the step's word (``c`` = 8
for uint32, 16 for uint64) are the first digits ``x`` of a uniform W on [0, 1): the trial succeeds
when ``(x + 1) den <= num 2^c`` (W < num/den for sure), fails when ``x den >= num 2^c``, and
otherwise (probability 2^-c) continues on the next step with the residual ``num 2^c - x den``:
the lazy comparison of W's binary expansion with num/den, with no rounding. A uniform on [0, t)
is a masked draw of the low bits, accepted when below ``t`` (probability > 1/2, else redrawn).

**Algorithm 1** (Bernoulli(exp(-gamma)), 0 <= gamma <= 1): trials ``A_k ~ Bernoulli(gamma/k)``,
k = 1, 2, ..., until one fails at ``K``; output 1 iff ``K`` is odd. For k >= 2 the trial is the
product of Bernoulli(gamma) and Bernoulli(1/k), so denominators never grow with k.
**Algorithm 2** (discrete Laplace with scale t/s): ``U`` uniform on [0, t) accepted with
probability exp(-U/t) (Algorithm 1); ``V`` counts Bernoulli(exp(-1)) successes before the first
failure; ``Y = floor((U + t V)/s)`` (kept incrementally, so no product ``t V`` is formed); a sign
bit ``B``, rejecting ``B = 1, Y = 0``; output ``(1 - 2B) Y``.
**Algorithm 3** (discrete Gaussian with variance sigma^2 = p/q): a discrete Laplace proposal ``Y``
of scale ``t`` accepted with probability ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``. Any ``t > 0``
gives the right law (CKS20 Thm. 6's proof); dpjax takes ``t = sigma^2 / floor(sigma)`` for sigma >= 1,
so ``sigma^2/t`` is the integer ``m = floor(sigma)`` and ``gamma = q (|Y| - m)^2 / (2p)`` has the small
denominator ``2p`` (CKS's ``t = floor(sigma) + 1`` has ``2 p q t^2``), and acceptance stays about
``sqrt(pi/2) e^(-1/2) ~ 0.76`` as with ``t ~ sigma``; for sigma < 1 it takes CKS's ``t = 1``. ``gamma``
is split into ``floor(gamma)`` Bernoulli(exp(-1)) trials and Algorithm 1 on the fractional part.

**Rounds.** A discrete Laplace sample takes about 7 steps on average (a U candidate with its
first trial, 1.7 Algorithm-1 trials per candidate, 1.6 candidates, 2.7 trials for V) and a discrete
Gaussian about 11 to 14; the tail is geometric (every phase is a rejection or a run of trials that
stops with probability >= 1/2 per step): measured, ``P(a lane needs more than r steps)`` is about
0.12 at r = 12 and 1e-3 at r = 30 for the discrete Laplace (0.3 and 0.04 for the Gaussian), and
the slowest of 10^5 lanes needs about 50 (Laplace) or 120 (Gaussian) steps. Up to 256 lanes the
``while_loop`` runs until the slowest lane accepts; above, 10 (Gaussian: 16) rounds run on all
lanes, 10 (16) more on the unfinished ones gathered into a buffer of a quarter of the size, and
then buffers of 1/64 of the size loop until every lane has accepted, so the work per sample stays
close to the mean number of steps instead of the maximum.

**Range.** The output saturates at +-``L`` (``L`` the dtype's maximum): values beyond it (probability
``< 2 exp(-L/scale)``) are returned as +-L, an exact post-processing of the exact sample. The
counters (the trial index k, the number of outstanding Bernoulli(exp(-1)) trials) saturate where
reaching them would take more than 2^23 rounds of consecutive successes.
"""

from __future__ import annotations

import functools
import math
import numbers
import secrets
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = [
    "LIMITS",
    "discrete_gaussian",
    "discrete_laplace",
    "exact_rational",
    "release_key",
]

# Phases of the per-lane state machine.
_DRAW, _ACCEPT_U, _GEOMETRIC, _WHOLE, _FRACTION, _DONE = range(6)


def _word_type():
    """The internal unsigned word: uint64 under ``jax_enable_x64``, else uint32."""
    return np.uint64 if jax.config.jax_enable_x64 else np.uint32


def _scale_cap(word) -> int:
    """Scale numerators and denominators must be below this for ``word`` (:data:`LIMITS`)."""
    return _cap(word)


def _chunk_bits(word) -> int:
    return 16 if word == np.uint64 else 8


def _cap(word) -> int:
    """Denominators of compared fractions stay below ``2^(bits - c)`` so ``den 2^c`` fits."""
    return 2 ** (np.iinfo(word).bits - _chunk_bits(word))


LIMITS = {
    "uint32": "scale numerator t < 2^24 and denominator s < 2^24; discrete Gaussian sigma^2 = p/q with "
    "4 q p^2 < 2^32 (sigma >= 1) or 2 p q < 2^16 (sigma < 1)",
    "uint64": "scale numerator t < 2^48 and denominator s < 2^48; discrete Gaussian sigma^2 = p/q with "
    "4 q p^2 < 2^64 (sigma >= 1) or 2 p q < 2^32 (sigma < 1)",
}


def exact_rational(value, name: str) -> Fraction:
    """``value`` as an exact positive ``Fraction``: an int, a float (its exact binary value), a
    ``Fraction`` or a ``(numerator, denominator)`` pair of ints. Traced values are refused."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{name} must be a concrete number, not a traced value: the exact samplers need it as an "
            "exact rational on the host (a Python number, a Fraction or a (numerator, denominator) pair)."
        )
    if isinstance(value, tuple):
        integers = all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value)
        if len(value) != 2 or not integers:
            raise TypeError(f"{name} as a pair must be (numerator, denominator) of ints, got {value!r}.")
        if value[1] == 0:
            raise ValueError(f"{name} has a zero denominator.")
        fraction = Fraction(int(value[0]), int(value[1]))
    elif isinstance(value, bool) or not isinstance(value, numbers.Real | np.ndarray | jax.Array):
        raise TypeError(
            f"{name} must be a real number, a Fraction or a pair of ints, got {type(value).__name__}."
        )
    else:
        if np.ndim(value) != 0:
            raise ValueError(f"{name} must be a scalar, got shape {np.shape(value)}.")
        scalar = value if isinstance(value, Fraction | numbers.Integral) else float(value)
        if isinstance(scalar, float) and not math.isfinite(scalar):
            raise ValueError(f"{name} must be finite, got {scalar}.")
        fraction = Fraction(scalar)
    if fraction <= 0:
        raise ValueError(f"{name} must be > 0, got {fraction}.")
    return fraction


def _int_dtype(dtype):
    dtype = jnp.dtype(jnp.int32 if dtype is None else dtype)
    if dtype not in (jnp.dtype(jnp.int32), jnp.dtype(jnp.int64)):
        raise ValueError(f"dtype must be int32 or int64, got {dtype}.")
    if dtype == jnp.dtype(jnp.int64) and not jax.config.jax_enable_x64:
        raise ValueError("int64 output needs jax_enable_x64 (jax.config.update('jax_enable_x64', True)).")
    return dtype


def _too_large(name: str, value: Fraction, word) -> ValueError:
    hint = "" if word == np.uint64 else " (enable jax_enable_x64 for 64-bit limits)"
    return ValueError(
        f"{name} = {value} is too large a fraction for exact integer sampling: limits are "
        f"{LIMITS[np.dtype(word).name]}{hint}. A float is taken at its exact binary value "
        f"(0.1 is {Fraction(0.1)}): pass a Fraction or a (numerator, denominator) pair."
    )


def _laplace_params(scale: Fraction, word) -> tuple[int, int]:
    """(t, s) of Algorithm 2 for scale t/s, checked against the word's limits."""
    t, s = scale.numerator, scale.denominator
    if t >= _cap(word) or s >= _cap(word):
        raise _too_large("scale", scale, word)
    return t, s


def _gaussian_params(sigma: Fraction, word) -> dict:
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
    if D >= _cap(word) or w * D * D >= 2**bits:
        raise _too_large("sigma^2", variance, word)
    return {"laplace": _laplace_params(proposal, word), **gamma}


def _sat_mul(a, b, top):
    """``min(a b, top)`` for unsigned ``a, b <= top``, without overflow."""
    safe = (a == 0) | (b <= top // jnp.maximum(a, 1))
    return jnp.where(safe, a * b, top)


def _sat_add(a, b, top):
    return jnp.where(a > top - jnp.minimum(b, top), top, a + b)


# Per-lane state: phase; U; Algorithm 1's trial k and part (0: Bernoulli(gamma), 1: Bernoulli(1/k));
# the comparison in progress num/den; gamma = gnum/gden; Y, (U + t V) mod s; the sign; floor(gamma) left.
_FIELDS = ("phase", "u", "k", "part", "num", "den", "gnum", "gden", "y", "rem", "neg", "whole")


def _init(shape, word):
    zero = jnp.zeros(shape, word)
    state = {name: zero for name in _FIELDS}
    state["phase"] = jnp.full(shape, _DRAW, jnp.int32)
    return state


def _compare(x, num, den, c):
    """One c-bit digit of the lazy comparison W < num/den: (success, failure, residual)."""
    low = x * den
    target = num << c
    success = low + den <= target
    failure = low >= target
    return success, failure, target - low


def _step(state, w, lap, gauss, word, top):
    """Advances every lane by one step on its word ``w`` (phases in the module docstring)."""
    bits = np.iinfo(word).bits
    c = _chunk_bits(word)
    one = word(1)
    t, s = lap["t"], lap["s"]
    x = w >> (bits - c)
    phase = state["phase"]
    st = dict(state)

    # _DRAW: a uniform U on [0, t) from the low bits; its first trial Bernoulli(U/t) on the top digit.
    u_new = w & lap["mask"]
    drawn = (phase == _DRAW) & (u_new < t)
    num = jnp.where(drawn, u_new, st["num"])
    den = jnp.where(drawn, t, st["den"])
    st["u"] = jnp.where(drawn, u_new, st["u"])
    st["gnum"] = jnp.where(drawn, u_new, st["gnum"])
    st["gden"] = jnp.where(drawn, t, st["gden"])
    st["k"] = jnp.where(drawn, one, st["k"])
    st["part"] = jnp.where(drawn, word(0), st["part"])
    active = (phase != _DRAW) | drawn
    active &= phase != _DONE

    success, failure, residual = _compare(x, num, den, c)
    decided = active & (success | failure)
    st["num"] = jnp.where(active & ~decided, residual, num)
    st["den"] = den

    k, part = st["k"], st["part"]
    algorithm1 = (phase == _DRAW) | (phase == _ACCEPT_U) | (phase == _FRACTION)
    # Algorithm 1 with gamma = gnum/gden < 1: trial k is Bernoulli(gamma), then Bernoulli(1/k) for k >= 2.
    to_second = algorithm1 & decided & success & (part == 0) & (k >= 2)
    next_trial = decided & success & ~to_second
    ended = decided & failure  # Algorithm 1 stops at K = k; its output is 1 iff k is odd
    odd = (k & one) == one
    result_one = ended & odd
    result_zero = ended & ~odd

    k_next = jnp.where(k < word(2**23), k + one, k)
    st["k"] = jnp.where(next_trial, k_next, k)
    st["part"] = jnp.where(to_second, one, jnp.where(next_trial, word(0), part))
    # the next comparison: Bernoulli(1/k) after Bernoulli(gamma); for gamma = 1 phases only 1/k.
    gamma_one = (phase == _GEOMETRIC) | (phase == _WHOLE)
    nxt_num = jnp.where(to_second, one, jnp.where(gamma_one, one, st["gnum"]))
    nxt_den = jnp.where(to_second, k, jnp.where(gamma_one, k_next, st["gden"]))
    st["num"] = jnp.where(to_second | next_trial, nxt_num, st["num"])
    st["den"] = jnp.where(to_second | next_trial, nxt_den, st["den"])

    new_phase = phase
    # U accepted (Algorithm 1 returned 1): start V's Bernoulli(exp(-1)) run, Y = floor(U/s).
    accept_u = ((phase == _DRAW) | (phase == _ACCEPT_U)) & result_one
    new_phase = jnp.where(drawn & ~ended, _ACCEPT_U, new_phase)
    new_phase = jnp.where(((phase == _DRAW) | (phase == _ACCEPT_U)) & result_zero, _DRAW, new_phase)
    new_phase = jnp.where(accept_u, _GEOMETRIC, new_phase)
    st["y"] = jnp.where(accept_u, st["u"] // s, st["y"])
    st["rem"] = jnp.where(accept_u, st["u"] % s, st["rem"])

    def restart_exp1(mask, st):  # a fresh Bernoulli(exp(-1)): trial 1 (gamma/1 = 1) always succeeds
        st["k"] = jnp.where(mask, word(2), st["k"])
        st["part"] = jnp.where(mask, word(0), st["part"])
        st["num"] = jnp.where(mask, one, st["num"])
        st["den"] = jnp.where(mask, word(2), st["den"])
        return st

    st = restart_exp1(accept_u, st)

    # _GEOMETRIC: V += 1 on each Bernoulli(exp(-1)) success: Y += floor(t/s), carrying t mod s.
    geometric = phase == _GEOMETRIC
    more = geometric & result_one
    rem = st["rem"] + jnp.where(more, lap["t_mod_s"], word(0))
    carry = rem >= s
    st["rem"] = jnp.where(carry, rem - s, rem)
    step_y = lap["t_div_s"] + carry.astype(word)
    st["y"] = jnp.where(more, _sat_add(st["y"], step_y, top), st["y"])
    st = restart_exp1(more, st)
    # V complete: sign B from the low bit; B = 1 with Y = 0 is rejected.
    finished = geometric & result_zero
    negative = (w & one) == one
    reject = finished & negative & (st["y"] == 0)
    new_phase = jnp.where(finished & reject, _DRAW, new_phase)
    laplace_done = finished & ~reject
    st["neg"] = jnp.where(laplace_done, negative.astype(word), st["neg"])
    if gauss is None:
        new_phase = jnp.where(laplace_done, _DONE, new_phase)
    else:
        st, new_phase = _gaussian_acceptance(st, new_phase, laplace_done, gauss, word, top, restart_exp1)
        # _WHOLE: floor(gamma) Bernoulli(exp(-1)) trials must all succeed.
        whole = phase == _WHOLE
        passed = whole & result_one
        st["whole"] = jnp.where(passed, st["whole"] - one, st["whole"])
        to_fraction = passed & (st["whole"] == 0)
        st = restart_exp1(passed & ~to_fraction, st)
        st = _start_fraction(st, to_fraction, word)
        new_phase = jnp.where(to_fraction, _FRACTION, new_phase)
        new_phase = jnp.where(whole & result_zero, _DRAW, new_phase)
        fraction = phase == _FRACTION
        new_phase = jnp.where(fraction & result_one, _DONE, new_phase)
        new_phase = jnp.where(fraction & result_zero, _DRAW, new_phase)
    st["phase"] = new_phase
    return st


def _start_fraction(st, mask, word):
    """Algorithm 1 on gamma's fractional part gnum/gden, from trial k = 1."""
    st["k"] = jnp.where(mask, word(1), st["k"])
    st["part"] = jnp.where(mask, word(0), st["part"])
    st["num"] = jnp.where(mask, st["gnum"], st["num"])
    st["den"] = jnp.where(mask, st["gden"], st["den"])
    return st


def _gaussian_acceptance(st, new_phase, proposed, gauss, word, top, restart_exp1):
    """Algorithm 3's acceptance test for the proposal |Y|: gamma = w a^2 / D with a = |r |Y| - c|,
    split as a = h D + l: floor(gamma) = w h^2 D + 2 w h l + floor(w l^2 / D) (saturating),
    fraction (w l^2 mod D) / D."""
    r, c, w_, D = (gauss[name] for name in ("r", "c", "w", "D"))
    ry = _sat_mul(st["y"], r, top)
    a = jnp.where(ry >= c, ry - c, c - ry)
    h, low = a // D, a % D
    wl2 = w_ * low * low
    whole = _sat_add(_sat_mul(_sat_mul(_sat_mul(h, h, top), w_, top), D, top),
                     _sat_mul(_sat_mul(h, low, top), word(2) * w_, top), top)
    whole = _sat_add(whole, wl2 // D, top)
    st["gnum"] = jnp.where(proposed, wl2 % D, st["gnum"])
    st["gden"] = jnp.where(proposed, D, st["gden"])
    st["whole"] = jnp.where(proposed, jnp.minimum(whole, word(2**23)), st["whole"])
    has_whole = proposed & (st["whole"] > 0)
    st = restart_exp1(has_whole, st)
    st = _start_fraction(st, proposed & ~has_whole, word)
    new_phase = jnp.where(has_whole, _WHOLE, new_phase)
    new_phase = jnp.where(proposed & ~has_whole, _FRACTION, new_phase)
    return st, new_phase


# Above _SMALL lanes (per key, also under vmap): ROUNDS steps on all lanes, then ROUNDS more on the
# unfinished lanes gathered into a buffer of n/4, then buffers of n/64 until every lane has accepted.
# Discrete Laplace takes about 7 steps on average, the discrete Gaussian about 12.
_SMALL = 256
_ROUNDS = {False: 10, True: 16}


def _rounds(key, state, rounds, lap, gauss, word, top):
    """``rounds`` steps of every lane (finished lanes stay as they are), one fresh word per step;
    ``rounds=None``: until every lane is done."""
    shape = state["phase"].shape

    def body(i, st):
        w = jax.random.bits(jax.random.fold_in(key, i), shape, word)
        return _step(st, w, lap, gauss, word, top)

    if rounds is not None:
        return lax.fori_loop(0, rounds, body, state)

    def cond(carry):
        return jnp.any(carry[1]["phase"] != _DONE)

    _, state = lax.while_loop(cond, lambda c: (c[0] + 1, body(c[0], c[1])), (jnp.int32(0), state))
    return state


def _gathered(key, state, capacity, rounds, lap, gauss, word, top):
    """Runs ``rounds`` steps on (up to ``capacity`` of) the unfinished lanes, gathered together."""
    n = state["phase"].shape[0]
    (index,) = jnp.nonzero(state["phase"] != _DONE, size=capacity, fill_value=n)
    valid = index < n
    sub = jax.tree.map(lambda a: a[jnp.minimum(index, n - 1)], state)
    sub["phase"] = jnp.where(valid, sub["phase"], _DONE)
    sub = _rounds(key, sub, rounds, lap, gauss, word, top)
    return jax.tree.map(lambda a, b: a.at[index].set(b, mode="drop"), state, sub)


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def _sample(key, lap, gauss, shape, dtype):
    """The sampler, compiled once per kind, shape and dtype: the rational's integers are arguments."""
    word = _word_type()
    top = word(np.iinfo(dtype).max)
    n = math.prod(shape)
    state = _init((n,), word)
    rounds = _ROUNDS[gauss is not None]
    if n <= _SMALL:
        state = _rounds(key, state, None, lap, gauss, word, top)
    else:
        keys = jax.random.split(key, 3)
        state = _rounds(keys[0], state, rounds, lap, gauss, word, top)
        state = _gathered(keys[1], state, math.ceil(n / 4), rounds, lap, gauss, word, top)

        def tail(carry):
            j, st = carry
            return j + 1, _gathered(jax.random.fold_in(keys[2], j), st, math.ceil(n / 64), None, lap, gauss,
                                    word, top)

        _, state = lax.while_loop(lambda c: jnp.any(c[1]["phase"] != _DONE), tail, (jnp.int32(0), state))
    y = state["y"].astype(dtype)
    return jnp.where(state["neg"] == 1, -y, y).reshape(shape)


def _run(key, shape, dtype, t_s, gauss):
    """Passes Algorithm 2's (t, s) and Algorithm 3's gamma coefficients as word-sized arrays."""
    word = _word_type()
    t, s = t_s
    lap = {"t": t, "s": s, "mask": 2 ** (t - 1).bit_length() - 1, "t_div_s": t // s, "t_mod_s": t % s}
    as_words = functools.partial(jax.tree.map, lambda v: jnp.asarray(v, word))
    gauss = None if gauss is None else as_words({name: gauss[name] for name in ("r", "c", "w", "D")})
    return _sample(key, as_words(lap), gauss, shape, np.dtype(dtype))


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def discrete_laplace(key, scale, shape=(), dtype=None) -> jax.Array:
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
      Integer noise of ``shape``. Rounds: about 7 steps per lane on average, a geometric tail
      (1e-3 of the lanes need more than 30); the fixed-shape loop runs until every lane has accepted,
      gathering the slow lanes into smaller buffers (module docstring).

    Example:
      >>> import jax
      >>> z = discrete_laplace(jax.random.key(0), (10, 3), (4,))   # scale 10/3
    """
    dtype = _int_dtype(dtype)
    lap = _laplace_params(exact_rational(scale, "scale"), _word_type())
    return _run(key, _shape(shape), dtype, lap, None)


def discrete_gaussian(key, sigma, shape=(), dtype=None) -> jax.Array:
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
      Integer noise of ``shape``. Rounds: about 11 to 14 steps per lane on average (the proposal is
      accepted with probability about 0.76, and its test takes a few trials), 4% of the lanes need
      more than 30 (module docstring).

    Example:
      >>> import jax
      >>> z = discrete_gaussian(jax.random.key(0), 3, (4,))
    """
    dtype = _int_dtype(dtype)
    gauss = _gaussian_params(exact_rational(sigma, "sigma"), _word_type())
    return _run(key, _shape(shape), dtype, gauss["laplace"], gauss)


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
    return jax.random.wrap_key_data(words, impl=impl)
