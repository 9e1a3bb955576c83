"""Exact discrete Laplace noise in one pass of fixed work per lane, for scales ``t/s`` with ``t <= 64``.

Canonne, Kamath and Steinke (2020), Algorithm 2 (discrete Laplace of scale ``t/s``): ``U`` uniform on
[0, t) accepted with probability exp(-U/t), ``V`` the number of Bernoulli(exp(-1)) successes before
the first failure, a sign ``B``, ``Y = floor((U + t V)/s)``, and ``B = 1, Y = 0`` rejected (start
over); the output is ``(1 - 2B) Y``. Each trial of Algorithm 1 is read from one 16-bit digit of a
uniform (:mod:`dpjax._src.exact.tables`), so every lane does the same fixed work on six 32-bit words
(three threefry hashes):

* two words give the first four trials of ``V``, one digit each;
* four words are four attempts at ``U``: 15 bits for a uniform on [0, t) by multiply-and-reject
  (Lemire 2019: exact, rejected with probability ``(2^15 mod t)/2^15``), one bit for ``B``, one digit for
  ``U``'s acceptance, its thresholds looked up by a chain of selects (no gather, so the pass compiles
  to a few fused loops). The lane takes the first attempt that is not rejected outright.

The lanes are the candidates of a stream (:func:`candidates`). At scale 10 the pass leaves 92% of
them with their sample and 6% *void*: every attempt at ``U`` rejected outright, or ``B = 1, Y = 0``.
A void candidate is rejected, which is Algorithm 2's own rule for ``B = 1, Y = 0`` and exact for the
attempts because they are i.i.d. and independent of ``V``. The other 2% (``V``'s run still open after
four successes, or a pending digit) keep their state in one packed word; they are gathered and
settled, one fresh word pair per step, exactly:

* a pending digit (a tie with a threshold, or every tabled trial passed) is decided by
  :func:`dpjax._src.exact.tables.resolve`; a ``U`` it rejects is dropped (the next attempt follows);
* ``V``'s run still open (four successes, or a pending trial resolved as a success) goes on with fresh
  trials: they are i.i.d., so reading them later changes nothing;
* no attempt kept: more attempts; attempts are i.i.d. and ``V`` is independent of them, so the first
  accepted one has Algorithm 2's law whichever attempt it is;
* ``B = 1, Y = 0``: Algorithm 2 starts over, from fresh words.

:func:`sample` draws rounds of a few percent more candidates than values and fills the output with
the kept ones in stream order (:func:`dpjax._src.exact.compact.stream`): kept candidates are i.i.d. discrete
Laplace samples, so the first ``n`` of them are too. A round falls short of ``n`` with probability
about 3e-5 and the stream goes on with the next round.

Integer operations only; the tables are exact host integers passed as arguments, so one program
serves every ``t`` up to its chain length (a power of two). ``V`` saturates at 2^20 + 4 (a run of
2^20 successes has probability e^-(2^20)).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax._src.exact import compact, tables
from dpjax._src.exact.words import random_word_pairs

MAX_T = 64
"""The largest scale numerator ``t`` of the fast pass (the select chains grow with ``t``)."""
MAX_S = 2**31
"""Scale denominators ``s`` of the fast pass stay below this (its words are uint32)."""
MIN_LANES = 256
"""Calls of at most this many values take the state machine, which compiles sooner and is faster on
small calls; the pass wins from here on (the measurements are in benchmarks/README.md)."""
_UNIFORM_BITS = 15
_ATTEMPTS = 4
_U32 = jnp.uint32


class Constants(NamedTuple):
    """The fast pass's arguments for scale ``t/s``: word-sized scalars and exact tables.

    Attributes:
      t, s: the scale's numerator and denominator.
      lemire_floor: ``2^15 mod t``: 15-bit products with a lower part below it are rejected.
      packed: :func:`dpjax._src.exact.tables.packed_thresholds` of ``gamma = U/t``, one row per ``U``.
      residual, denominator: the tie resolver's fractions (:class:`dpjax._src.exact.tables.Thresholds`).
    """

    t: jax.Array
    s: jax.Array
    lemire_floor: jax.Array
    packed: jax.Array
    residual: jax.Array
    denominator: jax.Array


def chain_length(t: int) -> int:
    """The select chain's length for ``t`` (a power of two, so few programs serve all ``t``)."""
    return max(2, 1 << (t - 1).bit_length())


def constants(t: int, s: int) -> Constants:
    """:class:`Constants` for scale ``t/s`` (``t <= MAX_T``, ``s < MAX_S``), rows padded to the chain."""
    length = chain_length(t)
    table = tables.thresholds(tuple(range(t)), t)
    packed = np.zeros((length, 3), np.uint32)
    packed[:t] = tables.packed_thresholds(tuple(range(t)), t)
    residual = np.zeros((tables.MAX_TRIALS, length), np.uint32)
    residual[:, :t] = table.residual
    words = functools.partial(jnp.asarray, dtype=_U32)
    return Constants(words(t), words(s), words(2**_UNIFORM_BITS % t), words(packed), words(residual),
                     words(table.denominator))


V_TABLE = tables.thresholds((1,), 1)
"""Algorithm 1's thresholds for ``gamma = 1``: V's Bernoulli(exp(-1)) trials."""
V_BELOW = [int(v) for v in V_TABLE.below[:, 0] if v]
V_TIES = [int(v) for v in V_TABLE.tie[:, 0] if v != 2**32 - 1]


def v_digit(x) -> tables.Digit:
    """What digit ``x`` decides about one Bernoulli(exp(-1)) trial of ``V``."""
    return tables.read_digit(x, V_BELOW, V_TIES, len(V_BELOW), True)


def _chain(u, packed):
    """The packed threshold row of ``U`` for every lane, by a chain of selects over the rows: no
    gather, so the whole pass fuses into a few loops (a gather is slower per lane: benchmarks/README.md)."""
    rows = [jnp.zeros_like(u) for _ in range(packed.shape[1])]
    for value in range(packed.shape[0]):
        hit = u == value
        rows = [jnp.where(hit, packed[value, column], row) for column, row in enumerate(rows)]
    return jnp.stack(rows, -1)


class Lanes(NamedTuple):
    """Algorithm 2 in progress, per lane.

    Attributes:
      v: ``V``'s successes so far.
      v_open: ``V``'s run goes on: its next trial is ``v_digit`` if that is pending, else unread.
      v_digit: the digit of ``V``'s trial ``v + 1`` (only its ``pending`` matters while open).
      found: an attempt at ``U`` is kept: accepted, or its ``digit`` pending.
      u, sign: the kept attempt's ``U`` and ``B``.
      digit: the kept attempt's acceptance digit.
    """

    v: jax.Array
    v_open: jax.Array
    v_digit: tables.Digit
    found: jax.Array
    u: jax.Array
    sign: jax.Array
    digit: tables.Digit


def _fresh(shape) -> Lanes:
    """Lanes at the start of Algorithm 2: nothing read yet."""
    zero, no = jnp.zeros(shape, _U32), jnp.zeros(shape, bool)
    digit = tables.Digit(zero.astype(jnp.int32), zero.astype(jnp.int32), no, no)
    return Lanes(zero.astype(jnp.int32), ~no, digit, no, zero, zero, digit)


def _choose(mask, new, old):
    """``new`` where ``mask``, else ``old``, for every array of two matching trees."""
    return jax.tree.map(functools.partial(jnp.where, mask), new, old)


def _v_run(words):
    """Trials of ``V`` on the two digits of each of ``words``, in order: the leading successes, whether
    the run goes on (all succeeded, or the next digit is pending) and the digit of the next trial."""
    v, lead = jnp.zeros(words[0].shape, jnp.int32), jnp.ones(words[0].shape, bool)
    digit = None
    for x in (x for w in words for x in (w >> 16, w & 0xFFFF)):
        d = v_digit(x)
        digit = d if digit is None else _choose(lead, d, digit)
        lead &= ~d.pending & d.output
        v += lead
    return v, (v == 2 * len(words)) | digit.pending, digit


def _attempt(w, c: Constants):
    """One attempt at ``U`` on word ``w``: (kept, U, B, U's acceptance digit); kept unless the uniform
    or the digit rejects it."""
    product = (w & (2**_UNIFORM_BITS - 1)) * c.t
    u = product >> _UNIFORM_BITS
    below, tie, tabled = tables.unpack(_chain(u, c.packed))
    digit = tables.read_digit(w >> 16, below, tie, tabled, u > 0)
    uniform = (product & (2**_UNIFORM_BITS - 1)) >= c.lemire_floor
    return uniform & (digit.pending | digit.output), u, (w >> _UNIFORM_BITS) & 1, digit


def _first_attempt(words, c: Constants):
    """The first attempt among ``words`` that is kept: (found, U, B, its digit)."""
    found = None
    for w in words:
        candidate, *fields = _attempt(w, c)
        if found is None:
            found, kept = candidate, fields
            continue
        kept = _choose(~found & candidate, fields, kept)
        found |= candidate
    return found, *kept


def _advance(lanes: Lanes, v_words, attempt_words, c: Constants) -> Lanes:
    """Reads fresh words: two more trials of ``V`` per word of ``v_words`` where its run goes on
    unread, one attempt at ``U`` per word of ``attempt_words`` where none is kept."""
    v, v_open, v_digit = _v_run(v_words)
    read_v = lanes.v_open & ~lanes.v_digit.pending
    v = jnp.where(read_v, jnp.minimum(lanes.v, 2**20) + v, lanes.v)
    v_open, v_digit = _choose(read_v, (v_open, v_digit), (lanes.v_open, lanes.v_digit))
    attempt = _first_attempt(attempt_words, c)
    found, u, sign, digit = _choose(~lanes.found, attempt, (lanes.found, lanes.u, lanes.sign, lanes.digit))
    return Lanes(v, v_open, v_digit, found, u, sign, digit)


def _magnitude(lanes: Lanes, c: Constants):
    """``Y = floor((U + t V)/s)``."""
    return (lanes.u + c.t * lanes.v.astype(_U32)) // c.s


def _final(lanes: Lanes, c: Constants):
    """Lanes whose sample is decided and accepted (not Algorithm 2's rejected ``B = 1, Y = 0``)."""
    decided = lanes.found & ~lanes.digit.pending & ~lanes.v_open
    return decided & ~((lanes.sign == 1) & (_magnitude(lanes, c) == 0))


def _decide(key, lanes: Lanes, live, c: Constants) -> Lanes:
    """Decides the pending digits of the ``live`` lanes exactly, in one run of
    :func:`dpjax._src.exact.tables.resolve` over both: ``U`` accepted or dropped, ``V``'s trial a success
    (its run goes on, unread) or a failure (it stops)."""
    u_pending = live & lanes.found & lanes.digit.pending
    v_pending = live & lanes.v_open & lanes.v_digit.pending
    one = jnp.ones_like(lanes.u)
    starts = (tables.start_pending(lanes.digit, c.residual, c.denominator, lanes.u, lanes.u, c.t, u_pending),
              tables.start_pending(lanes.v_digit, V_TABLE.residual, V_TABLE.denominator, 0 * one, one, one,
                                   v_pending))
    outcome = tables.resolve(key, jax.tree.map(lambda *a: jnp.concatenate(a), *starts))
    accepted, success = outcome[: one.shape[0]], outcome[one.shape[0] :]

    no = jnp.zeros_like(u_pending)
    accept = tables.Digit(jnp.zeros_like(lanes.digit.count), lanes.digit.tabled, no, no)
    digit = _choose(u_pending, accept, lanes.digit)  # K = 1: accepted, nothing pending
    found = lanes.found & ~(u_pending & ~accepted)
    v_digit = _choose(v_pending, accept, lanes.v_digit)  # decided; read afresh while the run goes on
    v_open = lanes.v_open & ~(v_pending & ~success)
    return Lanes(lanes.v + (v_pending & success), v_open, v_digit, found, lanes.u, lanes.sign, digit)


def _resolve(key, lanes: Lanes, live, c: Constants) -> Lanes:
    """:func:`_decide` on up to 1/16 of the lanes (at least 64), gathered from the ``live`` lanes with a
    pending digit: they are rare, and the others wait for the next step."""
    size = lanes.u.shape[0]
    pending = live & ((lanes.found & lanes.digit.pending) | (lanes.v_open & lanes.v_digit.pending))

    def gathered(lanes):
        index = compact.nonzero(pending, min(size, round_up(-(-size // 16), 64)), size)
        sub = _decide(key, jax.tree.map(lambda a: a[jnp.minimum(index, size - 1)], lanes), index < size, c)
        return jax.tree.map(lambda a, b: a.at[index].set(b, mode="drop"), lanes, sub)

    return lax.cond(jnp.any(pending), gathered, lambda lanes: lanes, lanes)


def _step(key, lanes: Lanes, live, c: Constants) -> Lanes:
    """One step of the ``live`` lanes: pending digits resolved, samples Algorithm 2 rejects started
    over, and where more is needed one fresh word pair read: two trials of ``V``, one attempt at ``U``."""
    keys = jax.random.split(key, 2)
    lanes = _resolve(keys[0], lanes, live, c)
    decided = lanes.found & ~lanes.digit.pending & ~lanes.v_open
    restart = live & decided & ~_final(lanes, c)  # Algorithm 2 rejected the sample: it starts over
    lanes = _choose(restart, _fresh(live.shape), lanes)
    hi, lo = random_word_pairs(keys[1], live.shape)
    return _choose(live & ~_final(lanes, c), _advance(lanes, [hi], [lo], c), lanes)


_SMALL = 512
_STEPS = 2
_SHRINK = 8


def round_up(size: int, multiple: int = 128) -> int:
    """XLA's CPU loops run several times slower on sizes that are not a multiple of the vector width."""
    return -(-size // multiple) * multiple


def _settle(key, lanes: Lanes, live, c: Constants) -> Lanes:
    """Runs the ``live`` lanes until each has an accepted sample (:func:`_step`). Up to ``_SMALL``
    lanes: steps until the slowest is done. Above: ``_STEPS`` steps on all (they settle about four
    lanes in five), then the unfinished ones gathered ``1/_SHRINK`` of the size at a time and settled
    the same way."""
    size = live.shape[0]
    unfinished = lambda lanes, live: live & ~_final(lanes, c)  # noqa: E731

    def small(key, lanes, live):
        def loop(carry):
            i, lanes = carry
            return i + 1, _step(jax.random.fold_in(key, i), lanes, live, c)

        more = lambda carry: jnp.any(unfinished(carry[1], live))  # noqa: E731
        return lax.while_loop(more, loop, (jnp.int32(0), lanes))[1]

    if size <= _SMALL:
        return small(key, lanes, live)
    keys = jax.random.split(key, 2)
    step = lambda i, lanes: _step(jax.random.fold_in(keys[0], i), lanes, live, c)  # noqa: E731
    lanes = lax.fori_loop(0, _STEPS, step, lanes)
    capacity = min(size, round_up(-(-size // _SHRINK)))

    def gathered(carry):
        j, lanes = carry
        index = compact.nonzero(unfinished(lanes, live), capacity, size)
        sub = jax.tree.map(lambda a: a[jnp.minimum(index, size - 1)], lanes)
        sub = small(jax.random.fold_in(keys[1], j), sub, index < size)
        return j + 1, jax.tree.map(lambda a, b: a.at[index].set(b, mode="drop"), lanes, sub)

    more = lambda carry: jnp.any(unfinished(carry[1], live))  # noqa: E731
    return lax.while_loop(more, gathered, (jnp.int32(0), lanes))[1]


def _signed(lanes: Lanes, c: Constants, dtype):
    magnitude = _magnitude(lanes, c).astype(dtype)
    return jnp.where(lanes.sign == 1, -magnitude, magnitude)


def _attempt_kept(t: int) -> float:
    """The probability that one attempt at ``U`` is not rejected outright (host floats)."""
    return (1 - (2**_UNIFORM_BITS % t) / 2**_UNIFORM_BITS) * sum(math.exp(-u / t) for u in range(t)) / t


def void_share(t: int, s: int) -> float:
    """The expected share of void lanes (:func:`candidates`; host floats, only to size buffers): the
    -0 rejection ``(1 - exp(-s/t))/2``, or no attempt kept among four."""
    return -math.expm1(-s / t) / 2 + (1 - _attempt_kept(t)) ** _ATTEMPTS


def chunk(n: int, t: int, s: int) -> int:
    """Unfinished lanes settled per round of the cleanup: about their expected share (``V >= 4``,
    ``e^-4``, and at most 1% of pending digits) plus 64 lanes, rounded up to a multiple of n/64 (few
    programs) and of 128; all ``n`` when that is half or more."""
    share = math.exp(-4) + 0.01 + 64 / max(n, 1)
    if share >= 0.5:
        return n
    return min(n, round_up(math.ceil(n * math.ceil(share * 64) / 64)))


def stream_lanes(n: int, kept: float) -> int:
    """Candidates per round so that ``n`` of them are kept but with probability about 3e-5, each kept
    with probability ``kept`` (a host float, only to size buffers): the mean plus four standard
    deviations plus 64, rounded up to a multiple of 128."""
    return round_up(math.ceil((n + 4 * math.sqrt(n * (1 - kept)) + 64) / kept))


# The state a lane leaves the fast pass in, packed in one word: (field, bit offset, width).
_PACKING = (("v", 0, 3), ("v_open", 3, 1), ("v_count", 4, 3), ("v_tie", 7, 1), ("v_beyond", 8, 1),
            ("found", 9, 1), ("u", 10, 6), ("sign", 16, 1), ("count", 17, 3), ("tabled", 20, 3),
            ("tie", 23, 1), ("beyond", 24, 1))


def _pack(lanes: Lanes):
    """The lanes of the fast pass (``V <= 4``, ``U < 64``) as one uint32 word each."""
    fields = {"v": lanes.v, "v_open": lanes.v_open, "v_count": lanes.v_digit.count,
              "v_tie": lanes.v_digit.tie, "v_beyond": lanes.v_digit.beyond, "found": lanes.found,
              "u": lanes.u, "sign": lanes.sign, "count": lanes.digit.count, "tabled": lanes.digit.tabled,
              "tie": lanes.digit.tie, "beyond": lanes.digit.beyond}
    return sum((fields[name].astype(_U32) << shift for name, shift, _ in _PACKING), jnp.zeros((), _U32))


def _unpack(word) -> Lanes:
    """The inverse of :func:`_pack`."""
    f = {name: (word >> shift) & (2**width - 1) for name, shift, width in _PACKING}
    flag = {name: f[name] == 1 for name in ("v_open", "v_tie", "v_beyond", "found", "tie", "beyond")}
    v_tabled = jnp.full(word.shape, len(V_BELOW), jnp.int32)
    v_digit = tables.Digit(f["v_count"].astype(jnp.int32), v_tabled, flag["v_tie"], flag["v_beyond"])
    count, tabled = f["count"].astype(jnp.int32), f["tabled"].astype(jnp.int32)
    digit = tables.Digit(count, tabled, flag["tie"], flag["beyond"])
    return Lanes(f["v"].astype(jnp.int32), flag["v_open"], v_digit, flag["found"], f["u"], f["sign"], digit)


def _void(lanes: Lanes, c: Constants):
    """Lanes whose candidate Algorithm 2 rejects as the pass leaves them: no attempt at ``U`` kept, or
    the sample decided and ``B = 1, Y = 0``."""
    decided = lanes.found & ~lanes.digit.pending & ~lanes.v_open
    return ~lanes.found | (decided & (lanes.sign == 1) & (_magnitude(lanes, c) == 0))


def candidates(key, c: Constants, size: int, chunk: int, dtype):
    """``size`` candidates of Algorithm 2 from one fast pass: ``(z, kept)``.

    A lane is *void* (not kept) when the pass leaves it rejected: every attempt at ``U`` rejected
    outright, or ``B = 1, Y = 0``. Starting over there is Algorithm 2's own rule for ``B = 1, Y = 0``;
    for the attempts it is exact because attempts are i.i.d. and independent of ``V`` and of the
    other lanes, so the candidate's ``U`` given that some attempt is kept is the first accepted
    attempt's. The kept lanes not finished by the pass (``V``'s run open, a digit pending: about 2%)
    are settled, up to ``chunk`` at a time, so every kept lane holds an exact discrete Laplace sample,
    independent of the others: kept candidates, taken in order, are i.i.d. samples."""
    keys = jax.random.split(key, 2)
    hi, lo = random_word_pairs(keys[0], (3, size))
    state = _pack(_advance(_fresh((size,)), [hi[0], lo[0]], [hi[1], lo[1], hi[2], lo[2]], c))
    lanes = _unpack(lax.optimization_barrier(state))  # the pass runs once, not once per use below
    void = _void(lanes, c)
    todo = ~void & ~_final(lanes, c)
    z = _signed(lanes, c, dtype)
    if chunk >= size:
        return jnp.where(todo, _signed(_settle(keys[1], lanes, todo, c), c, dtype), z), ~void

    def body(carry):
        i, todo, z = carry
        index = compact.nonzero(todo, chunk, size)
        sub = _unpack(state[jnp.minimum(index, size - 1)])
        sub = _settle(jax.random.fold_in(keys[1], i), sub, index < size, c)
        z = z.at[index].set(_signed(sub, c, dtype), mode="drop")
        return i + 1, todo.at[index].set(False, mode="drop"), z

    return lax.while_loop(lambda carry: jnp.any(carry[1]), body, (jnp.int32(0), todo, z))[2], ~void


class Plan(NamedTuple):
    """The static sizes of :func:`sample`: ``lanes`` candidates per round, their cleanup's ``chunk``."""

    lanes: int
    chunk: int


def plan(n: int, t: int, s: int) -> Plan:
    """:class:`Plan` for ``n`` values at scale ``t/s``."""
    lanes = stream_lanes(n, 1 - void_share(t, s))
    return Plan(lanes, chunk(lanes, t, s))


@functools.partial(jax.jit, static_argnames=("shape", "dtype", "plan"))
def sample(key, c: Constants, shape, dtype, plan: Plan):
    """Exact discrete Laplace samples of ``shape``: rounds of ``plan.lanes`` :func:`candidates`, the
    kept ones filling the output's lanes in order, until every lane has one (one round but with
    probability about 3e-5)."""
    n = math.prod(shape)
    if n == 0:
        return jnp.zeros(shape, dtype)
    draw = functools.partial(candidates, c=c, size=plan.lanes, chunk=plan.chunk, dtype=dtype)
    return compact.stream(key, n, dtype, draw).reshape(shape)
