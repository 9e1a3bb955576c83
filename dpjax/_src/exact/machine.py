"""The exact samplers' state machine: Canonne, Kamath and Steinke (2020), Algorithms 1-3, one step per word.

Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020),
Algorithm 1 (Bernoulli(exp(-gamma)) for a rational gamma), Algorithm 2 (discrete Laplace) and
Algorithm 3 (discrete Gaussian), written as one fixed-shape state machine per lane: every lane
advances by one step per round on one fresh uniform machine word from ``jax.random.bits``, and a
``while_loop`` runs rounds until every lane has accepted. Only integer operations (additions,
multiplications, shifts, comparisons and one division by a constant per candidate) touch the
random bits. It serves the discrete Gaussian, and the discrete Laplace wherever
:mod:`dpjax._src.exact.fast` does not apply (scale numerators above 64, calls of at most 256 values).

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
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax._src.exact import compact

_DRAW, _ACCEPT_U, _GEOMETRIC, _WHOLE, _FRACTION, _DONE = range(6)


def word_type():
    """The internal unsigned word: uint64 under ``jax_enable_x64``, else uint32."""
    return np.uint64 if jax.config.jax_enable_x64 else np.uint32


def _chunk_bits(word) -> int:
    return 16 if word == np.uint64 else 8


def cap(word) -> int:
    """Denominators of compared fractions stay below ``2^(bits - c)`` so ``den 2^c`` fits."""
    return 2 ** (np.iinfo(word).bits - _chunk_bits(word))


def _sat_mul(a, b, top):
    """``min(a b, top)`` for unsigned ``a, b <= top``, without overflow."""
    safe = (a == 0) | (b <= top // jnp.maximum(a, 1))
    return jnp.where(safe, a * b, top)


def _sat_add(a, b, top):
    return jnp.where(a > top - jnp.minimum(b, top), top, a + b)


# Per-lane state: phase; U; Algorithm 1's trial k and part (0: Bernoulli(gamma), 1: Bernoulli(1/k));
# the comparison in progress num/den; gamma = gnum/gden; Y, (U + t V) mod s; the sign; floor(gamma) left.
_FIELDS = ("phase", "u", "k", "part", "num", "den", "gnum", "gden", "y", "rem", "neg", "whole")


def initial(shape, word):
    """Lanes about to start Algorithm 2 (or 3) with a fresh draw of ``U``."""
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
    x = w >> (bits - c)
    phase = state["phase"]
    st = dict(state)
    num, den, drawn, active = _draw(st, phase, w, lap, word)
    trial = _trial(st, phase, x, num, den, active, c, word)
    new_phase, laplace_done = _laplace_phases(st, phase, w, drawn, trial, lap, word, top)
    if gauss is None:
        new_phase = jnp.where(laplace_done, _DONE, new_phase)
    else:
        new_phase = _gaussian_phases(st, phase, new_phase, laplace_done, trial, gauss, word, top)
    st["phase"] = new_phase
    return st


class _Trial(NamedTuple):
    """The outcome of one step's comparison for every lane (:func:`_trial`).

    Attributes:
      ended: Algorithm 1 stopped at ``K = k`` (a trial failed).
      result_one: it stopped with its output 1 (``K`` odd).
      result_zero: it stopped with its output 0 (``K`` even).
    """

    ended: jax.Array
    result_one: jax.Array
    result_zero: jax.Array


def _draw(st, phase, w, lap, word):
    """_DRAW: a uniform U on [0, t) from the low bits; its first trial Bernoulli(U/t) on the top
    digit. Updates ``st`` and returns ``(num, den, drawn, active)``: the comparison to make and which
    lanes drew a U and take part in this step."""
    one = word(1)
    t = lap["t"]
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
    return num, den, drawn, active


def _trial(st, phase, x, num, den, active, c, word) -> _Trial:
    """Compares the top digit ``x`` with ``num/den`` and moves Algorithm 1 to its next trial or
    comparison (updates ``st``)."""
    one = word(1)
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
    return _Trial(ended, result_one, result_zero)


def _restart_exp1(mask, st, word):
    """A fresh Bernoulli(exp(-1)) where ``mask``: trial 1 (gamma/1 = 1) always succeeds."""
    st["k"] = jnp.where(mask, word(2), st["k"])
    st["part"] = jnp.where(mask, word(0), st["part"])
    st["num"] = jnp.where(mask, word(1), st["num"])
    st["den"] = jnp.where(mask, word(2), st["den"])
    return st


def _laplace_phases(st, phase, w, drawn, trial: _Trial, lap, word, top):
    """Algorithm 2 after the step's trial: U accepted or redrawn, V's Bernoulli(exp(-1)) run, the
    sign. Updates ``st`` and returns ``(new_phase, laplace_done)``."""
    one = word(1)
    s = lap["s"]
    new_phase = phase
    # U accepted (Algorithm 1 returned 1): start V's Bernoulli(exp(-1)) run, Y = floor(U/s).
    accept_u = ((phase == _DRAW) | (phase == _ACCEPT_U)) & trial.result_one
    new_phase = jnp.where(drawn & ~trial.ended, _ACCEPT_U, new_phase)
    new_phase = jnp.where(((phase == _DRAW) | (phase == _ACCEPT_U)) & trial.result_zero, _DRAW, new_phase)
    new_phase = jnp.where(accept_u, _GEOMETRIC, new_phase)
    st["y"] = jnp.where(accept_u, st["u"] // s, st["y"])
    st["rem"] = jnp.where(accept_u, st["u"] % s, st["rem"])
    st = _restart_exp1(accept_u, st, word)

    # _GEOMETRIC: V += 1 on each Bernoulli(exp(-1)) success: Y += floor(t/s), carrying t mod s.
    geometric = phase == _GEOMETRIC
    more = geometric & trial.result_one
    rem = st["rem"] + jnp.where(more, lap["t_mod_s"], word(0))
    carry = rem >= s
    st["rem"] = jnp.where(carry, rem - s, rem)
    step_y = lap["t_div_s"] + carry.astype(word)
    st["y"] = jnp.where(more, _sat_add(st["y"], step_y, top), st["y"])
    st = _restart_exp1(more, st, word)
    # V complete: sign B from the low bit; B = 1 with Y = 0 is rejected.
    finished = geometric & trial.result_zero
    negative = (w & one) == one
    reject = finished & negative & (st["y"] == 0)
    new_phase = jnp.where(finished & reject, _DRAW, new_phase)
    laplace_done = finished & ~reject
    st["neg"] = jnp.where(laplace_done, negative.astype(word), st["neg"])
    return new_phase, laplace_done


def _gaussian_phases(st, phase, new_phase, laplace_done, trial: _Trial, gauss, word, top):
    """Algorithm 3 after the step's trial: the acceptance test of a finished proposal, its
    ``floor(gamma)`` Bernoulli(exp(-1)) trials and Algorithm 1 on the fraction. Updates ``st`` and
    returns the new phase."""
    one = word(1)
    st, new_phase = _gaussian_acceptance(st, new_phase, laplace_done, gauss, word, top)
    # _WHOLE: floor(gamma) Bernoulli(exp(-1)) trials must all succeed.
    whole = phase == _WHOLE
    passed = whole & trial.result_one
    st["whole"] = jnp.where(passed, st["whole"] - one, st["whole"])
    to_fraction = passed & (st["whole"] == 0)
    st = _restart_exp1(passed & ~to_fraction, st, word)
    st = _start_fraction(st, to_fraction, word)
    new_phase = jnp.where(to_fraction, _FRACTION, new_phase)
    new_phase = jnp.where(whole & trial.result_zero, _DRAW, new_phase)
    fraction = phase == _FRACTION
    new_phase = jnp.where(fraction & trial.result_one, _DONE, new_phase)
    return jnp.where(fraction & trial.result_zero, _DRAW, new_phase)


def _start_fraction(st, mask, word):
    """Algorithm 1 on gamma's fractional part gnum/gden, from trial k = 1."""
    st["k"] = jnp.where(mask, word(1), st["k"])
    st["part"] = jnp.where(mask, word(0), st["part"])
    st["num"] = jnp.where(mask, st["gnum"], st["num"])
    st["den"] = jnp.where(mask, st["gden"], st["den"])
    return st


def _gaussian_acceptance(st, new_phase, proposed, gauss, word, top):
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
    st = _restart_exp1(has_whole, st, word)
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
    index = compact.nonzero(state["phase"] != _DONE, capacity, n)
    valid = index < n
    sub = jax.tree.map(lambda a: a[jnp.minimum(index, n - 1)], state)
    sub["phase"] = jnp.where(valid, sub["phase"], _DONE)
    sub = _rounds(key, sub, rounds, lap, gauss, word, top)
    return jax.tree.map(lambda a, b: a.at[index].set(b, mode="drop"), state, sub)


def complete(key, state, lap, gauss, top):
    """Runs every lane of ``state`` until it has accepted (lanes already ``_DONE`` stay as they are).

    Up to ``_SMALL`` lanes the loop runs until the slowest lane accepts; above, ``_ROUNDS`` steps on
    all lanes, as many on the unfinished ones gathered into a buffer of a quarter of the size, then
    buffers of 1/64 of the size until every lane has accepted."""
    word = state["y"].dtype.type
    n = state["phase"].shape[0]
    rounds = _ROUNDS[gauss is not None]
    if n <= _SMALL:
        return _rounds(key, state, None, lap, gauss, word, top)
    keys = jax.random.split(key, 3)
    state = _rounds(keys[0], state, rounds, lap, gauss, word, top)
    state = _gathered(keys[1], state, math.ceil(n / 4), rounds, lap, gauss, word, top)

    def tail(carry):
        j, st = carry
        return j + 1, _gathered(jax.random.fold_in(keys[2], j), st, math.ceil(n / 64), None, lap, gauss, word,
                                top)

    return lax.while_loop(lambda c: jnp.any(c[1]["phase"] != _DONE), tail, (jnp.int32(0), state))[1]


def acceptance_state(y, live, gauss, word, top):
    """Lanes at the start of Algorithm 3's acceptance test of the proposals ``y`` where ``live``, the
    others done."""
    state = initial(y.shape, word)
    state["y"], state["neg"] = jnp.abs(y).astype(word), (y < 0).astype(word)
    done = jnp.full(y.shape, _DONE, jnp.int32)
    state, state["phase"] = _gaussian_acceptance(state, done, live, gauss, word, top)
    return state


def accepts(key, state, lap, gauss, top):
    """Whether each lane's Algorithm 3 acceptance test in progress in ``state`` accepts: its steps run
    until it accepts or would start over, which is a rejection (the lane stops there). Lanes already
    ``_DONE`` stay and count as accepted."""
    word = state["y"].dtype.type
    shape = state["phase"].shape

    def body(carry):
        i, st, rejected = carry
        st = _step(st, jax.random.bits(jax.random.fold_in(key, i), shape, word), lap, gauss, word, top)
        rejected |= st["phase"] == _DRAW
        st["phase"] = jnp.where(rejected, _DONE, st["phase"])
        return i + 1, st, rejected

    more = lambda carry: jnp.any(carry[1]["phase"] != _DONE)  # noqa: E731
    return ~lax.while_loop(more, body, (jnp.int32(0), state, jnp.zeros(shape, bool)))[2]


def signed(state, dtype):
    """The accepted samples ``(1 - 2B) Y`` of ``state`` as ``dtype``."""
    y = state["y"].astype(dtype)
    return jnp.where(state["neg"] == 1, -y, y)


def laplace_words(t: int, s: int, word) -> dict:
    """Algorithm 2's constants for scale ``t/s`` as ``word`` arrays (arguments, not constants, so one
    program serves every scale)."""
    lap = {"t": t, "s": s, "mask": 2 ** (t - 1).bit_length() - 1, "t_div_s": t // s, "t_mod_s": t % s}
    return {name: jnp.asarray(value, word) for name, value in lap.items()}


@functools.partial(jax.jit, static_argnames=("shape", "dtype"))
def sample(key, lap, gauss, shape, dtype):
    """The state machine's samples, compiled once per kind, shape and dtype (the rational's integers
    are the arguments ``lap`` and ``gauss``)."""
    word = word_type()
    state = complete(key, initial((math.prod(shape),), word), lap, gauss, word(np.iinfo(dtype).max))
    return signed(state, dtype).reshape(shape)
