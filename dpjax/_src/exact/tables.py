"""Algorithm 1 of Canonne, Kamath and Steinke read from one 16-bit digit: tabled thresholds, exact ties.

Canonne, Kamath and Steinke (2020), Algorithm 1 decides Bernoulli(exp(-gamma)) for a rational
``gamma`` in [0, 1] by trials ``A_k ~ Bernoulli(gamma / k)`` until the first failure ``K``, with output
1 iff ``K`` is odd. The trials may share one uniform ``W``: ``A_k = [W < T_k]`` with
``T_k = gamma^k / k!`` (the first ``k`` trials all succeed with probability ``T_k``, which is what the
independent trials give), so the first digits of ``W`` decide ``K`` at once. Here ``W``'s first digit
``x`` has 16 bits and the thresholds ``theta_k = 2^16 T_k`` are tabled on the host in exact integer
arithmetic for each ``gamma = U/t``, ``U`` in [0, t):

* ``x < floor(theta_k)`` means ``W < T_k`` for sure, ``x > floor(theta_k)`` means ``W >= T_k`` (and so
  does ``x = theta_k`` when ``theta_k`` is an integer): ``K - 1`` is the number of tabled thresholds
  above ``x``.
* ``x = floor(theta_k)`` for a non-integer ``theta_k`` (a *tie*, probability about 2^-16 per threshold)
  leaves ``W < T_k`` open; it holds with the rational probability ``frac(theta_k)``, decided exactly by
  comparing fresh random bits with that fraction's binary expansion (bit by bit, integers only).
* Thresholds are tabled while ``floor(theta_k) >= 2`` and ``t^k k!`` fits the comparison word: from
  ``k_1``, the last tabled one, the trials continue as independent fresh trials
  ``Bernoulli(U / (t k))``, ``k = k_1 + 1, ...``. This is the same law: the first ``k_1`` trials read
  ``W``, the others are independent of it, and ``P(A_1 ... A_k all succeed) = T_k`` for every ``k``.
  Tabled thresholds at least 2 apart (``T_{k+1} <= T_k / 2``) make a tie touch one threshold only, and
  a tie at ``k < k_1`` that resolves to ``W < T_k`` gives ``K = k + 1`` (``x >= theta_{k+1}``).

Only integer operations touch the random bits; the tables are integers computed with Python's exact
integers. :mod:`dpjax._src.exact.fast` reads Algorithm 2's trials this way; :func:`resolve` finishes the
few that one digit leaves open.
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
from dpjax._src.exact.words import random_word_pairs

DIGIT = 16
MAX_TRIALS = 7  # 2^16 / 8! < 2: no threshold of trial 8 or later is ever tabled
_COMPARE_CAP = 2**31  # bit-serial comparisons double a residual below the denominator in uint32
_U32 = jnp.uint32


class Thresholds(NamedTuple):
    """Algorithm 1's tabled thresholds for ``gamma = a/b``, one column per numerator ``a``.

    Attributes:
      below: ``floor(theta_k)`` for tabled trials (``x < below`` means ``W < T_k``), 0 past ``k_1``.
      tie: ``floor(theta_k)`` where ``theta_k`` is not an integer, else 2^32 - 1 (no 16-bit digit).
      residual: ``2^16 a^k mod (b^k k!)``, the numerator of ``frac(theta_k)``.
      denominator: ``b^k k!`` per trial (0 past the comparable ones).
    """

    below: np.ndarray
    tie: np.ndarray
    residual: np.ndarray
    denominator: np.ndarray


@functools.cache
def thresholds(numerators: tuple[int, ...], b: int) -> Thresholds:
    """The tables of :class:`Thresholds` for ``gamma = a/b``, ``a`` in ``numerators`` (each <= b)."""
    shape = (MAX_TRIALS, len(numerators))
    below, residual = np.zeros(shape, np.uint32), np.zeros(shape, np.uint32)
    tie = np.full(shape, 2**32 - 1, np.uint32)
    denominator = np.zeros(MAX_TRIALS, np.uint32)
    for k in range(1, MAX_TRIALS + 1):
        den = b**k * math.factorial(k)
        if den >= _COMPARE_CAP:
            break
        denominator[k - 1] = den
        for column, a in enumerate(numerators):
            if k > 1 and below[k - 2, column] == 0:
                continue
            whole, rest = divmod(2**DIGIT * a**k, den)
            if whole < 2:
                continue
            below[k - 1, column], residual[k - 1, column] = whole, rest
            if rest:
                tie[k - 1, column] = whole
    return Thresholds(below, tie, residual, denominator)


# Bit fields of the packed table (one row of three words per numerator): the seven thresholds
# ``below`` (widths fit ``2^16 / k!``), which of them are ties (``theta_k`` not an integer), and k_1.
_FIELDS = (((0, 16), (16, 15)), ((0, 14), (14, 12)), ((0, 10), (10, 7), (17, 4)))
_TIE_FLAGS = ((1, 26), (1, 27), (1, 28), (1, 29), (1, 30), (1, 31), (2, 21))  # (word, bit) per trial
_TABLED = (2, 22)


@functools.cache
def packed_thresholds(numerators: tuple[int, ...], b: int) -> np.ndarray:
    """:func:`thresholds` packed as ``[len(numerators), 3]`` uint32 words (:data:`_FIELDS`), so one
    lookup per attempt reads all of them."""
    table = thresholds(numerators, b)
    packed = np.zeros((len(numerators), 3), np.uint64)
    fields = [field for word, spans in enumerate(_FIELDS) for field in ((word, *span) for span in spans)]
    for k, (word, shift, bits) in enumerate(fields):
        assert int(table.below[k].max(initial=0)) < 2**bits
        packed[:, word] |= table.below[k].astype(np.uint64) << np.uint64(shift)
        flag_word, flag_bit = _TIE_FLAGS[k]
        packed[:, flag_word] |= (table.tie[k] != 2**32 - 1).astype(np.uint64) << np.uint64(flag_bit)
    tabled = (table.below > 0).sum(0).astype(np.uint64)
    packed[:, _TABLED[0]] |= tabled << np.uint64(_TABLED[1])
    return packed.astype(np.uint32)


def unpack(rows):
    """``(below, tie, tabled)`` lists per trial from packed rows ``[..., 3]``."""
    below, tie = [], []
    fields = [field for word, spans in enumerate(_FIELDS) for field in ((word, *span) for span in spans)]
    for k, (word, shift, bits) in enumerate(fields):
        value = (rows[..., word] >> shift) & ((1 << bits) - 1)
        flag_word, flag_bit = _TIE_FLAGS[k]
        flagged = ((rows[..., flag_word] >> flag_bit) & 1) == 1
        below.append(value)
        tie.append(jnp.where(flagged, value, jnp.uint32(2**32 - 1)))
    tabled = ((rows[..., _TABLED[0]] >> _TABLED[1]) & 7).astype(jnp.int32)
    return below, tie, tabled


class Digit(NamedTuple):
    """What one digit ``x`` of ``W`` decides about Algorithm 1 (vectorized over lanes).

    Attributes:
      count: ``K - 1`` when decided: the number of tabled thresholds above ``x``.
      tabled: ``k_1``, the number of tabled thresholds.
      tie: ``x`` ties with threshold ``count + 1``.
      beyond: ``W < T_{k_1}``: the trials go on past the table.
    """

    count: jax.Array  # type: ignore[assignment]  # the field shadows tuple.count, as meant
    tabled: jax.Array
    tie: jax.Array
    beyond: jax.Array

    @property
    def pending(self):
        return self.tie | self.beyond

    @property
    def output(self):
        """Algorithm 1's output where decided: 1 iff ``K = count + 1`` is odd."""
        return (self.count & 1) == 0


def read_digit(x, below, tie, tabled, positive) -> Digit:
    """Decides Algorithm 1 on digit ``x``: ``below``/``tie`` hold one value (or array) per trial."""
    count = sum([(x < b).astype(jnp.int32) for b in below], jnp.zeros(x.shape, jnp.int32))
    is_tie = functools.reduce(jnp.logical_or, [x == v for v in tie], jnp.zeros(x.shape, bool))
    beyond = (count == tabled) & positive & ~is_tie
    return Digit(count, tabled + jnp.zeros_like(count), is_tie, beyond)


class Pending(NamedTuple):
    """An undecided Algorithm 1 per lane of the resolver.

    ``r/d`` is the comparison in progress (a fresh uniform below ``r/d`` is a success) of trial ``k``;
    ``stop``: a success ends Algorithm 1 with ``K = k + 1`` (a tie below the last tabled threshold),
    otherwise a success moves on to the fresh trial ``Bernoulli(a / (b (k + 1)))``.
    """

    k: jax.Array
    r: jax.Array
    d: jax.Array
    a: jax.Array
    b: jax.Array
    stop: jax.Array
    done: jax.Array
    output: jax.Array


def start_pending(digit: Digit, residual, denominator, column, a, b, live) -> Pending:
    """The resolver's state for the ``live`` lanes, whose ``digit`` is pending (a tie or trials past
    the table) for ``gamma = a/b``: ``residual`` and ``denominator`` are those of
    :class:`Thresholds` (``column`` of ``residual`` is gamma's)."""
    trial = jnp.where(digit.tie, digit.count + 1, digit.tabled + 1)
    row = jnp.clip(digit.count, 0, MAX_TRIALS - 1)
    a, b = jnp.asarray(a, _U32), jnp.asarray(b, _U32)
    r = jnp.where(digit.tie, jnp.asarray(residual)[row, column], a)
    d = jnp.where(digit.tie, jnp.asarray(denominator)[row], b * trial.astype(_U32))
    stop = digit.tie & (trial < digit.tabled)
    return Pending(trial.astype(_U32), r, d, a + 0 * r, b + 0 * r, stop, ~live, jnp.zeros(r.shape, bool))


_BITS_PER_ROUND = 8


def resolve(key, p: Pending) -> jax.Array:
    """Algorithm 1's output for every lane of ``p``, exactly: fresh bits compared one at a time with
    the binary expansion of ``r/d`` (integers only), eight per lane per round."""

    def micro(p: Pending, bit):
        live = ~p.done
        r2 = p.r << 1
        above = r2 >= p.d  # the fraction's next binary digit
        r = jnp.where(above, r2 - p.d, r2)
        decided = live & (bit != above.astype(_U32))
        success = decided & (bit == 0)
        finished = (decided & (bit == 1)) | (success & p.stop)
        output = (jnp.where(success, p.k + 1, p.k) & 1) == 1  # K odd
        onward = success & ~p.stop  # the next fresh trial Bernoulli(a / (b (k + 1)))
        k = jnp.where(onward, jnp.minimum(p.k + 1, 2**18), p.k)
        return Pending(k, jnp.where(onward, p.a, r), jnp.where(onward, p.b * k, p.d), p.a, p.b, p.stop,
                       p.done | finished, jnp.where(finished, output, p.output))

    def body(carry):
        i, p = carry
        word = random_word_pairs(jax.random.fold_in(key, i), p.r.shape)[0]
        return i + 1, lax.fori_loop(0, _BITS_PER_ROUND, lambda j, p: micro(p, (word >> j) & 1), p)

    return lax.while_loop(lambda c: jnp.any(~c[1].done), body, (jnp.int32(0), p))[1].output


def resolve_sparse(key, p: Pending, capacity: int) -> jax.Array:
    """:func:`resolve` of the lanes of ``p`` not done, gathered ``capacity`` at a time: the same laws,
    and the work of the lanes still open rather than of all of them."""
    size = p.r.shape[0]

    def body(carry):
        i, p = carry
        index = compact.nonzero(~p.done, capacity, size)
        sub = jax.tree.map(lambda a: a[jnp.minimum(index, size - 1)], p)
        output = resolve(jax.random.fold_in(key, i), sub._replace(done=sub.done | (index >= size)))
        return i + 1, p._replace(done=p.done.at[index].set(True, mode="drop"),
                                 output=p.output.at[index].set(output, mode="drop"))

    return lax.while_loop(lambda carry: jnp.any(~carry[1].done), body, (jnp.int32(0), p))[1].output
