"""Exact discrete Gaussian noise on the fast discrete Laplace pass, its acceptance read from three digits.

Canonne, Kamath and Steinke (2020), Algorithm 3 (discrete Gaussian, sigma^2 = p/q): a discrete Laplace
proposal ``Y`` accepted with probability exp(-gamma), ``gamma = w (r|Y| - c)^2 / D``
(``dpjax._src.exact.noise.gaussian_params``), else start over. A *round* gives every lane of a buffer one
candidate and decides most acceptances with fixed work:

* the candidate is one of :func:`dpjax._src.exact.fast.candidates`, one call per buffer (a void one is
  rejected);
* with ``g = floor(gamma)`` and ``a/D`` its fraction, exp(-gamma) is the probability that ``g``
  Bernoulli(exp(-1)) trials and one Bernoulli(exp(-a/D)) (Algorithm 1) all succeed, independent
  trials; each is read from one 16-bit digit of one fresh word pair (:mod:`dpjax._src.exact.tables`): the
  first three exp(-1) trials against V's table, the fraction against a table row per value of
  ``|Y| < L``, gathered (``L`` covers six proposal scales; past it ``g > 3``, which :func:`applies`
  checks);
* the fraction's trials past its table (``W`` below the last tabled threshold, 2% to 10% of the
  digits where ``a/D`` is 1/2 or more and ``D`` is large enough that few thresholds are comparable)
  are fresh Bernoulli(``a / (D k)``) trials, ``k = k_1 + 1, ...``: each is read from one of the
  digits of the exp(-1) trials the lane does not need (``3 - g`` of them, the last ones first),
  against thresholds tabled per row, a tie decided by the resolver with its exact fraction;
* the lane is accepted when every needed trial succeeded and ``g <= 3``, rejected as soon as one failed.

The candidates are a stream: a round draws a buffer of them, about 1.4 per value at sigma 10
(:func:`plan`), and the output takes those not rejected, in stream order
(:func:`dpjax._src.exact.compact.stream`). Of a round's candidates, 6% are void in the Laplace pass (rejected,
:func:`dpjax._src.exact.fast.candidates`), and about 76% of the others are accepted from their digits
alone; about 0.1% are settled exactly, from the state they are in:

* a needed digit pending (a tie with a threshold, or the fraction's trials past the table) and none
  failed: :func:`dpjax._src.exact.tables.resolve` decides each pending trial with its exact conditional law
  given the digit, as in :mod:`dpjax._src.exact.fast` (the lane's digits are read again from its words);
* every read trial succeeded but ``g > 3`` (0.1% of the lanes at sigma 10): the other ``g - 3``
  exp(-1) trials are fresh and independent of what was read, so :mod:`dpjax._src.exact.machine` decides
  them, with the fraction's test passed (``gamma``'s fraction set to 0) or, for ``|Y| >= L``, still to
  do, and stops at the first failure (:func:`dpjax._src.exact.machine.accepts`).

Exactness: a conjunction of independent trials is decided false by any failed one, whatever the
others; a pending trial's resolution and the machine's trials have the conditional laws of the
trials they continue, so each candidate is accepted with probability exactly exp(-gamma). Candidates
are i.i.d. (kept discrete Laplace samples of the stream, each with its own acceptance trials), so
the accepted ones, taken in stream order, are i.i.d. with Algorithm 3's law: a rejection starts
Algorithm 3 over at the next candidate. Which lanes are gathered depends only on decided events, and
a lane left out of a full buffer waits unchanged. Integer operations only: the tables are exact host
integers passed as arguments.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax._src.exact import compact, fast, machine, tables
from dpjax._src.exact.words import random_word_pairs

MAX_ROWS = 128
"""The acceptance table covers ``|Y| < L``, ``L`` a power of two up to this: proposal scales up to
about 21, as far as the tests go."""
MIN_LANES = 512
"""Calls of at most this many values take the state machine, which compiles sooner and is as fast
on small calls; the rounds win from here on (the measurements are in benchmarks/README.md)."""
MAX_D = 2**13
"""``gamma``'s denominator ``D`` stays at most this: the resolver forms ``D k`` for trials ``k < 2^18``."""
_WHOLE_READ = 3  # exp(-1) trials read per candidate: two digits of one word and half of another
_FRESH = 3  # fresh trials past the fraction's table, read from the exp(-1) trials' spare digits
_DONE, _REJECTED, _PENDING, _MACHINE = range(4)
_U32 = jnp.uint32


class Constants(NamedTuple):
    """The round's arguments for one sigma.

    Attributes:
      laplace: the proposal's :class:`dpjax._src.exact.fast.Constants`.
      r, c, w, d: ``gamma = w (r|Y| - c)^2 / D`` as uint32 words.
      whole: ``g >= j`` iff ``|r|Y| - c| >= whole[j - 1]``, j = 1, ..., 4 (``g`` is counted up to 4).
      packed: :func:`dpjax._src.exact.tables.packed_thresholds` of the fraction ``a_y / D`` per ``|Y| < L``,
        then two words of :func:`fresh_thresholds`.
      residual, denominator: the resolver's fractions of those rows.
    """

    laplace: fast.Constants
    r: jax.Array
    c: jax.Array
    w: jax.Array
    d: jax.Array
    whole: jax.Array
    packed: jax.Array
    residual: jax.Array
    denominator: jax.Array


def rows(t: int, s: int) -> int:
    """``L``: the table's length for proposal scale ``t/s`` (six scales, a power of two)."""
    return fast.chain_length(math.ceil(6 * t / s))


def applies(t: int, s: int, gauss: dict) -> bool:
    """Whether the fast rounds serve Algorithm 3 with proposal ``t/s`` and ``gamma``'s ``gauss``."""
    if t > fast.MAX_T or s >= fast.MAX_S or gauss["D"] > MAX_D or rows(t, s) > MAX_ROWS:
        return False
    length, w, r, c, D = rows(t, s), gauss["w"], gauss["r"], gauss["c"], gauss["D"]
    far = max(r * (length - 1), c)  # |r|Y| - c| <= far in the table
    return w * far * far < 2**31 and w * (r * length - c) ** 2 >= (_WHOLE_READ + 1) * D  # g > 3 past it


def fresh_thresholds(numerators: tuple[int, ...], b: int) -> np.ndarray:
    """Per ``gamma = a/b``, ``a`` in ``numerators``: the 16-bit thresholds ``q_j = floor(2^16 a / (b k))``
    of the fresh trials ``k = k_1 + j``, j = 1, 2, 3, past the table's ``k_1`` trials, and whether each
    has a remainder (a digit equal to it is a tie), packed as ``[q_1 | q_2 << 16, q_3 | ties << 16]``."""
    tabled = (tables.thresholds(numerators, b).below > 0).sum(0)
    packed = np.zeros((len(numerators), 2), np.uint64)
    for row, (a, k1) in enumerate(zip(numerators, tabled, strict=True)):
        for j in range(1, _FRESH + 1):
            q, rest = divmod(2**tables.DIGIT * a, b * (int(k1) + j))
            word, shift = divmod(16 * (j - 1), 32)
            packed[row, word] |= np.uint64(q) << np.uint64(shift)
            packed[row, 1] |= np.uint64(rest != 0) << np.uint64(16 + j - 1)
    return packed.astype(np.uint32)


def constants(t: int, s: int, gauss: dict) -> Constants:
    """:class:`Constants` for Algorithm 3 (``applies(t, s, gauss)``)."""
    length, D = rows(t, s), gauss["D"]
    numerators = tuple(gauss["w"] * (gauss["r"] * v - gauss["c"]) ** 2 % D for v in range(length))
    whole = [math.isqrt(-(-j * D // gauss["w"]) - 1) + 1 for j in range(1, _WHOLE_READ + 2)]  # w d^2 >= j D
    words = functools.partial(jnp.asarray, dtype=_U32)
    laplace = fast.constants(t, s)
    r, c, w, d = (words(gauss[k]) for k in ("r", "c", "w", "D"))
    return Constants(laplace, r, c, w, d, words(whole),
                     words(np.concatenate([tables.packed_thresholds(numerators, D),
                                           fresh_thresholds(numerators, D)], axis=1)),
                     words(tables.thresholds(numerators, D).residual),
                     words(tables.thresholds(numerators, D).denominator))


class _Reading(NamedTuple):
    """What a lane's words say about its candidate's acceptance (:func:`_read`).

    ``fresh_tie``: the fraction's trial ``k_1 + j`` read from a spare digit ties with its threshold;
    its digit is then pending past ``k_1 + j - 1`` trials (``tabled``), and the resolver starts
    that trial at its remainder (:func:`_resolved`).
    """

    v: jax.Array
    a: jax.Array
    whole: jax.Array
    in_table: jax.Array
    fresh_tie: jax.Array
    trials: tuple  # (needed, Digit) per trial: the fraction's, then the exp(-1) ones


def _read(y, hi, lo, c: Constants) -> _Reading:
    """The candidate ``y``'s ``g`` (counted up to 4; 4 past the table) and ``a``, and the digits of its
    trials: exp(-1) trials 1 and 2 from ``hi``, 3 from ``lo``'s low half, the fraction from its top half
    (not needed past the table), and the fraction's fresh trials from the spare ones of those."""
    length = c.packed.shape[0]
    v = jnp.abs(y).astype(_U32)
    in_table = v < length
    ry = c.r * jnp.minimum(v, length - 1)
    d = jnp.where(ry >= c.c, ry - c.c, c.c - ry)
    a = c.w * d * d % c.d
    whole = sum(((d >= threshold).astype(jnp.int32) for threshold in c.whole), jnp.zeros(v.shape, jnp.int32))
    whole = jnp.where(in_table, whole, _WHOLE_READ + 1)
    row = c.packed[jnp.minimum(v, length - 1)]  # a gather: as fast here as a select chain, compiles in less
    below, tie, tabled = tables.unpack(row)
    slots = [hi >> 16, hi & 0xFFFF, lo & 0xFFFF]
    fraction, fresh_tie = _fresh_trials(tables.read_digit(lo >> 16, below, tie, tabled, a > 0), row, slots,
                                        whole)
    ones = [fast.v_digit(x) for x in slots]
    needed = [in_table, *(whole >= j for j in range(1, _WHOLE_READ + 1))]
    return _Reading(v, a, whole, in_table, fresh_tie, tuple(zip(needed, [fraction, *ones], strict=True)))


def _fresh_trials(digit: tables.Digit, row, slots, whole):
    """The fraction's ``digit`` after its fresh trials past the table, ``k_1 + j`` read from
    ``slots[3 - j]`` where ``g <= 3 - j`` (that exp(-1) trial is not needed), and whether one tied.

    A failure at trial ``k`` decides ``K = k``; a tie, or successes up to the last spare digit, leave
    the digit pending past the trials passed (``tabled``)."""
    going, passed, count = digit.beyond, digit.tabled, digit.count
    tied_any = jnp.zeros_like(going)
    for j in range(1, _FRESH + 1):
        x = slots[_FRESH - j]
        q = (row[..., 3 + (j - 1) // 2] >> (16 * ((j - 1) % 2))) & 0xFFFF
        has_rest = ((row[..., 4] >> (16 + j - 1)) & 1) == 1
        read = going & (whole <= _FRESH - j)
        tied = read & has_rest & (x == q)
        failed = read & ~tied & (x >= q)
        count = jnp.where(failed, passed, count)  # K = passed + 1
        passed = jnp.where(read & (x < q), passed + 1, passed)
        tied_any |= tied
        going &= ~(tied | failed)
    pending = going | tied_any
    return tables.Digit(jnp.where(pending, passed, count), passed, digit.tie, pending), tied_any


def _status(reading: _Reading, outcomes):
    """The lane's status from ``outcomes``: per trial (success, failure), where neither is pending."""
    needed = [need for need, _ in reading.trials]
    failed = [need & no for need, (_, no) in zip(needed, outcomes, strict=True)]
    open_ = [need & ~yes & ~no for need, (yes, no) in zip(needed, outcomes, strict=True)]
    status = jnp.where(reading.whole > _WHOLE_READ, _MACHINE, _DONE)
    status = jnp.where(functools.reduce(jnp.logical_or, open_), _PENDING, status)
    return jnp.where(functools.reduce(jnp.logical_or, failed), _REJECTED, status)


def _read_outcomes(reading: _Reading):
    """(success, failure) per trial as its digit decides it (neither where pending)."""
    return [(~digit.pending & digit.output, ~digit.pending & ~digit.output) for _, digit in reading.trials]


def _resolved(key, reading: _Reading, live, c: Constants):
    """The status of the ``live`` lanes once :func:`dpjax._src.exact.tables.resolve` has decided every
    pending trial of theirs (one run over the three trials)."""
    one = jnp.ones_like(reading.v)
    digits = [digit for _, digit in reading.trials]
    row = jnp.minimum(reading.v, c.packed.shape[0] - 1)
    fraction = tables.start_pending(digits[0], c.residual, c.denominator, row, reading.a, c.d,
                                    live & digits[0].pending)
    rest = (reading.a << tables.DIGIT) % fraction.d  # a fresh trial's tie: P(success) = rest / (D k)
    starts = [fraction._replace(r=jnp.where(reading.fresh_tie, rest, fraction.r))]
    v_table = fast.V_TABLE
    starts += [tables.start_pending(digit, v_table.residual, v_table.denominator, 0 * one, one, one,
                                    live & digit.pending) for digit in digits[1:]]
    output = tables.resolve_sparse(key, jax.tree.map(lambda *a: jnp.concatenate(a), *starts), one.shape[0])
    output = output.reshape(len(digits), -1)
    outcomes = [(jnp.where(digit.pending, won, yes), jnp.where(digit.pending, ~won, no))
                for digit, won, (yes, no) in zip(digits, output, _read_outcomes(reading), strict=True)]
    return _status(reading, outcomes)


def _settle_pending(key, y, hi, lo, status, c: Constants):
    """Resolves the ``_PENDING`` lanes (0.02% at sigma 10, at most 0.07% from sigma 1/2 to 21), up to
    1/1024 of the lanes plus 64 gathered at a time."""
    size = y.shape[0]
    capacity = min(size, fast.round_up(-(-size // 1024) + 64))

    def body(carry):
        i, status = carry
        index = compact.nonzero(status == _PENDING, capacity, size)
        at = jnp.minimum(index, size - 1)
        reading = _read(y[at], hi[at], lo[at], c)
        sub = _resolved(jax.random.fold_in(key, i), reading, index < size, c)
        return i + 1, status.at[index].set(sub, mode="drop")

    more = lambda carry: jnp.any(carry[1] == _PENDING)  # noqa: E731
    return lax.while_loop(more, body, (jnp.int32(0), status))[1]


def _round(key, c: Constants, size: int, chunk: int, dtype):
    """One candidate per lane of a buffer of ``size`` lanes (``chunk``: the Laplace pass's): the
    candidates and their status, none pending; a candidate the Laplace pass voids is rejected."""
    keys = jax.random.split(key, 3)
    y, kept = fast.candidates(keys[0], c.laplace, size, chunk, dtype)
    hi, lo = random_word_pairs(keys[1], (size,))
    reading = _read(y, hi, lo, c)
    status = jnp.where(kept, _status(reading, _read_outcomes(reading)), _REJECTED)
    settle = functools.partial(_settle_pending, keys[2], y, hi, lo, c=c)
    return y, lax.cond(jnp.any(status == _PENDING), settle, lambda s: s, status)


def _machine_accepts(key, y, live, c: Constants, lap, gauss, dtype):
    """Whether the state machine accepts the candidates ``y`` of the ``live`` lanes (``_MACHINE``): its
    test with ``g - 3`` exp(-1) trials left, and the fraction's test passed (``|y| < L``) or still to
    do."""
    word = machine.word_type()
    top = word(np.iinfo(dtype).max)
    st = machine.acceptance_state(y, live, gauss, word, top)
    st["whole"] = jnp.where(live, st["whole"] - _WHOLE_READ, st["whole"])  # g > 3, three trials passed
    st["gnum"] = jnp.where(live & (jnp.abs(y).astype(_U32) < c.packed.shape[0]), 0, st["gnum"])
    return machine.accepts(key, st, lap, gauss, top)


class Plan(NamedTuple):
    """The static buffer sizes of :func:`sample` (:func:`plan`).

    Attributes:
      lanes, chunk: the candidates of a round and its Laplace pass's ``chunk``.
      machine: the machine's buffer.
    """

    lanes: int
    chunk: int
    machine: int


def plan(n: int, t: int, s: int, gauss: dict) -> Plan:
    """Buffers from the expected shares of a round (host floats, only to size buffers): enough
    candidates that ``n`` of them are not rejected but with probability about 3e-5 (the mean plus four
    standard deviations and 64), and the machine's lanes plus 20% and 64."""
    q = math.exp(-s / t)
    v = np.arange(60 * t // s + 2)
    laplace = (1 - q) / (1 + q) * q**v * np.where(v > 0, 2, 1)
    gamma = gauss["w"] * (gauss["r"] * v.astype(np.float64) - gauss["c"]) ** 2 / gauss["D"]
    kept = float(np.sum(laplace * np.exp(-gamma)))
    far = v >= rows(t, s)
    handed = float(np.sum(laplace[far | (gamma >= _WHOLE_READ + 1)])) * math.exp(-_WHOLE_READ)
    lanes = fast.stream_lanes(n, kept * (1 - fast.void_share(t, s)))
    machine = min(lanes, fast.round_up(math.ceil(1.2 * lanes * handed) + 64))
    return Plan(lanes, fast.chunk(lanes, t, s), machine)


@functools.partial(jax.jit, static_argnames=("shape", "dtype", "plan"))
def sample(key, c: Constants, lap, gauss, shape, dtype, plan: Plan):
    """Exact discrete Gaussian samples of ``shape`` (``lap`` and ``gauss``: the machine's words).

    A round gives ``plan.lanes`` candidates, the stream's next ones, and decides the lanes handed to
    the machine; the output's lanes take the candidates accepted, in stream order, until every
    lane has one (one round but with probability about 3e-5). The candidates are i.i.d. and each is
    decided from its own trials, so the accepted ones are i.i.d. with Algorithm 3's law."""

    def draw(key):
        keys = jax.random.split(key, 2)
        y, status = _round(keys[0], c, plan.lanes, plan.chunk, dtype)
        return y, _decide_handed(keys[1], y, status, c, lap, gauss, dtype, plan.machine) == _DONE

    return compact.stream(key, math.prod(shape), dtype, draw).reshape(shape)


def _decide_handed(key, y, status, c: Constants, lap, gauss, dtype, capacity: int):
    """``status`` with the lanes handed to the machine (``_MACHINE``) decided, ``capacity`` at a time."""
    size = y.shape[0]

    def handed(carry):
        j, status = carry
        index = compact.nonzero(status == _MACHINE, capacity, size)
        y_handed = y[jnp.minimum(index, size - 1)]
        accepted = _machine_accepts(jax.random.fold_in(key, j), y_handed, index < size, c, lap, gauss, dtype)
        return j + 1, status.at[index].set(jnp.where(accepted, _DONE, _REJECTED), mode="drop")

    more = lambda carry: jnp.any(carry[1] == _MACHINE)  # noqa: E731
    return lax.while_loop(more, handed, (jnp.int32(0), status))[1]
