"""The limit of a release: a lower bound on its time from the bytes it moves and the random bits it draws.

A release must read its inputs and write its outputs, and must compute every threefry hash its
sampler draws (JAX's default ``threefry2x32``: 64 output bits per hash). Neither can go faster than
the device's best measured rate, so

    limit = max(bytes / bandwidth(bytes), hashes / hash_rate)

is a lower bound on the release's time, and ``limit_ratio = time / limit`` is at least 1 up to
measurement noise (:func:`self_check` flags a ratio below :data:`SELF_CHECK`: a bug in the bound).

* **Bytes** (:func:`bytes_moved`): the arrays the call reads (the data once, the keys) plus the
  arrays it writes (the outputs). A Monte Carlo call reads the shared data once for all its releases.
* **Random bits** (:func:`threefry_hashes`): counted from the call's jaxpr, so they are the draws the
  sampler that ran actually makes (a tree sampler's O(k log d), an inverse CDF's O(log n), not the
  d draws of the literal kernel): ``random_bits`` (one hash per element with JAX's partitionable
  threefry, the default; one per 64 bits otherwise), ``threefry2x32`` (one hash per element),
  ``random_split`` / ``random_fold_in`` (one hash per key). A ``scan`` multiplies its body by its
  length, a ``cond`` counts its cheapest branch and a ``while`` loop's body counts zero times (it
  may stop at once): the count is a lower bound.
* **Rates** (:func:`measure_limits`, measured in the same run): the streaming bandwidth on a ladder
  of array sizes from 16 KiB (in cache) to 256 MiB (far beyond every cache), each rung the best of
  the repeats of many passes inside one call (no dispatch in the rate), the larger of a
  read-and-write pass and a read-only reduction; a call that moves B bytes is bounded with the rate
  of the largest rung at most B (a smaller working set is never slower). The hash rate is the best
  over the repeats, ``jax.random.bits`` and ``threefry2x32`` and 2^12 or 2^20 hashes per pass, of
  2^22 hashes in one call. The rates are measured at the start and at the end of the run and the
  higher of the two is used (a busy moment cannot lower a bound into one the rows beat).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time

import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.extend.random import threefry2x32_p

__all__ = [
    "HASH_BITS",
    "HASH_LADDER",
    "LADDER",
    "SELF_CHECK",
    "Limits",
    "bound",
    "bytes_moved",
    "measure_limits",
    "rebound",
    "self_check",
    "threefry_hashes",
]

HASH_BITS = 64  # output bits of one threefry2x32 hash
SELF_CHECK = 0.9  # a limit ratio below this is a bound that the release beat: a bug
LADDER = tuple(2 ** (14 + 2 * i) for i in range(8))  # 16 KiB ... 256 MiB
_PASS_BYTES = 2**28  # bytes moved per timed call of every rung
_HASHES = 2**22  # hashes per timed call of every rung
HASH_LADDER = (2**12, 2**20)


def _hashes_of_eqn(eqn) -> float:
    name = eqn.primitive.name
    out = eqn.outvars[0].aval
    if name == "random_bits":
        if jax.config.jax_threefry_partitionable:  # type: ignore[attr-defined]  # jax's Config stub lacks the options
            return out.size * math.ceil(eqn.params["bit_width"] / HASH_BITS)
        return math.ceil(out.size * eqn.params["bit_width"] / HASH_BITS)
    if name == "threefry2x32":
        return out.size
    if name in ("random_split", "random_fold_in"):
        return out.size
    return 0


def _sub_jaxprs(params):
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jax.extend.core.ClosedJaxpr):
                yield item.jaxpr
            elif isinstance(item, jax.extend.core.Jaxpr):
                yield item


def _counts_up(eqn, carry: int) -> bool:
    """Whether the ``while`` body adds the literal 1 to loop-carried value ``carry``."""
    body = eqn.params["body_jaxpr"].jaxpr
    out, counter = body.outvars[carry], body.invars[eqn.params["body_nconsts"] + carry]
    Literal = jax.extend.core.Literal
    for e in body.eqns:
        if e.primitive.name == "add" and e.outvars[0] is out:
            a, b = e.invars
            return (a is counter and isinstance(b, Literal) and int(b.val) == 1) or (
                b is counter and isinstance(a, Literal) and int(a.val) == 1
            )
    return False


def _trips(eqn) -> int:
    """The trip count of a ``while`` loop that counts by one from a constant to a constant
    (``fori_loop``: its condition is one ``lt`` of its loop-carried counter, initially a literal,
    and a literal bound); 0 for any other loop (it may stop at once)."""
    cond = eqn.params["cond_jaxpr"].jaxpr
    if [e.primitive.name for e in cond.eqns] != ["lt"]:
        return 0
    Literal, nconsts = jax.extend.core.Literal, eqn.params["cond_nconsts"]
    carry = {id(var): i - nconsts for i, var in enumerate(cond.invars) if i >= nconsts}
    low, high = cond.eqns[0].invars
    position = carry.get(id(low))
    if position is None or not (_counts_up(eqn, position)):
        return 0
    init = eqn.invars[nconsts + eqn.params["body_nconsts"] + position]
    if isinstance(high, Literal):
        upper = high
    elif id(high) in carry:
        upper = eqn.invars[nconsts + eqn.params["body_nconsts"] + carry[id(high)]]
    else:
        return 0
    if not (isinstance(init, Literal) and isinstance(upper, Literal)):
        return 0
    return max(0, int(upper.val) - int(init.val))


def _count(jaxpr) -> tuple[float, int]:
    """(hashes, loops): a lower bound on the hashes, and the data-dependent ``while`` loops whose
    draws it leaves out."""
    total, loops = 0.0, 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "while":
            body, inner = _count(eqn.params["body_jaxpr"].jaxpr)
            trips = _trips(eqn)
            total += trips * body + _count(eqn.params["cond_jaxpr"].jaxpr)[0]  # the condition runs once
            loops += inner + (1 if body and not trips else 0)
        elif name == "cond":
            counts = [_count(branch.jaxpr) for branch in eqn.params["branches"]]
            total += min(c[0] for c in counts)
            loops += max(c[1] for c in counts)
        elif name == "scan":
            body, inner = _count(eqn.params["jaxpr"].jaxpr)
            total, loops = total + eqn.params["length"] * body, loops + inner
        else:
            total += _hashes_of_eqn(eqn)
            for sub in _sub_jaxprs(eqn.params):
                hashes, inner = _count(sub)
                total, loops = total + hashes, loops + inner
    return total, loops


def threefry_hashes(fn, *args) -> tuple[float, int]:
    """A lower bound on the threefry hashes one call of ``fn(*args)`` computes, from its jaxpr, and
    the number of data-dependent loops whose draws the bound leaves out (they may stop at once)."""
    return _count(jax.make_jaxpr(fn)(*args).jaxpr)


def bytes_moved(reads, writes) -> int:
    """Bytes of the arrays read (any pytree; keys as their key data) plus the arrays written."""
    def nbytes(leaf):
        if jnp.issubdtype(getattr(leaf, "dtype", np.float32), jax.dtypes.prng_key):
            return int(jax.random.key_data(leaf).nbytes)
        return int(getattr(leaf, "nbytes", 0))

    return sum(nbytes(leaf) for leaf in jax.tree_util.tree_leaves((reads, writes)))


@dataclasses.dataclass(frozen=True)
class Limits:
    """The device's measured rates: ``bandwidth[size]`` bytes per second for a working set of
    ``size`` bytes (the rungs of :data:`LADDER`), ``hash_rate`` threefry hashes per second."""

    bandwidth: dict[int, float]
    hash_rate: float

    def bandwidth_for(self, nbytes: float) -> float:
        """The rate of the largest rung at most ``nbytes`` (the smallest rung below it)."""
        rungs = [size for size in sorted(self.bandwidth) if size <= nbytes] or [min(self.bandwidth)]
        return self.bandwidth[rungs[-1]]

    def best(self, other: Limits) -> Limits:
        """The higher rate of ``self`` and ``other`` for every rung and for the hashes."""
        bandwidth = {size: max(rate, other.bandwidth.get(size, 0.0)) for size, rate in self.bandwidth.items()}
        return Limits(bandwidth, max(self.hash_rate, other.hash_rate))

    def to_json(self) -> dict:
        return {
            "stream_bandwidth_by_bytes": {str(k): v for k, v in sorted(self.bandwidth.items())},
            "hash_rate": self.hash_rate,
            "random_bits_per_second": HASH_BITS * self.hash_rate,
        }


def _best(fn, arg, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn(arg)`` after a warm-up call (seconds)."""
    jax.block_until_ready(fn(arg))
    best = math.inf
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        jax.block_until_ready(fn(arg))
        best = min(best, time.perf_counter() - start)
    return best


@functools.cache
def _stream_kernels(size: int):
    """The read-and-write and the read-only pass over ``size`` bytes, repeated inside one call
    (compiled once per process: the second measurement of a run reuses them)."""
    passes = max(1, _PASS_BYTES // size)

    def write(v):
        return lax.fori_loop(0, passes, lambda i, u: u * 0.999 + 1.0, v)

    def read(v):
        return lax.fori_loop(0, passes, lambda i, acc: acc + jnp.sum(v + i.astype(v.dtype)), 0.0)

    return passes, jax.jit(write), jax.jit(read)


def _rung(size: int, repeats: int) -> float:
    """Best bytes per second over ``size`` float32 bytes: passes inside one call, read+write or read."""
    x = jnp.ones(size // 4, jnp.float32)
    passes, write, read = _stream_kernels(size)
    return max(2 * size * passes / _best(write, x, repeats), size * passes / _best(read, x, repeats))


@functools.cache
def _hash_kernel(size: int, direct: bool):
    """``_HASHES`` hashes in passes of ``size``, each XOR-ed into a carried array (in cache for small
    sizes): ``jax.random.bits`` (one hash per 32-bit word) or ``threefry2x32`` itself."""
    passes = max(1, _HASHES // size)

    def step(i, acc, key):
        key = jax.random.fold_in(key, i)
        if not direct:
            return acc ^ jax.random.bits(key, (size,), jnp.uint32)
        data = jax.random.key_data(key)
        counts = lax.iota(jnp.uint32, size)
        hi, lo = threefry2x32_p.bind(data[0], data[1], jnp.zeros(size, jnp.uint32), counts)
        return acc ^ hi ^ lo

    def run(key):
        return lax.fori_loop(0, passes, lambda i, acc: step(i, acc, key), jnp.zeros(size, jnp.uint32))

    return passes, jax.jit(run)


def _hash_rate(repeats: int) -> float:
    """Best hashes per second over the rungs of :data:`HASH_LADDER` and both ways of hashing."""
    rates = []
    for size in HASH_LADDER:
        for direct in (False, True):
            passes, kernel = _hash_kernel(size, direct)
            rates.append(size * passes / _best(kernel, jax.random.key(0), repeats))
    return max(rates)


def measure_limits(memory: int | None = None, *, repeats: int = 5) -> Limits:
    """Measures the bandwidth ladder (rungs up to a sixteenth of ``memory``) and the hash rate."""
    rungs = [size for size in LADDER if memory is None or size <= max(LADDER[0], memory // 16)]
    return Limits({size: _rung(size, repeats) for size in rungs}, _hash_rate(repeats))


def bound(nbytes: float, hashes: float, limits: Limits, releases: int = 1, open_loops: int = 0) -> dict:
    """The limit of a call that moves ``nbytes`` and computes ``hashes`` for ``releases`` releases,
    per release: its memory and RNG parts, the larger (``seconds``) and which one binds.
    ``open_loops``: data-dependent loops whose draws are not in ``hashes`` (recorded)."""
    memory = nbytes / limits.bandwidth_for(nbytes) / releases
    rng = hashes / limits.hash_rate / releases
    return {
        "bytes": nbytes / releases,
        "random_bits": HASH_BITS * hashes / releases,
        "memory_seconds": memory,
        "rng_seconds": rng,
        "seconds": max(memory, rng),
        "binds": "memory" if memory >= rng else "RNG",
        "uncounted_loops": open_loops,
        "call": {"bytes": nbytes, "hashes": hashes, "releases": releases},
    }


def rebound(part: dict, limits: Limits) -> None:
    """Recomputes a timed part's bound and limit ratio with ``limits`` (from its call's counts)."""
    old = part["bound"]
    call = old["call"]
    part["bound"] = bound(call["bytes"], call["hashes"], limits, call["releases"], old["uncounted_loops"])
    part["limit_ratio"] = part["seconds"] / part["bound"]["seconds"] if part["bound"]["seconds"] else None


def self_check(record: dict, threshold: float = SELF_CHECK) -> list[str]:
    """The rows whose time beat their limit (``limit_ratio < threshold``): each is a bug in a bound."""
    failures = []
    for row in record.get("rows", []):
        for part in ("single", "monte_carlo"):
            ratio = row.get(part, {}).get("limit_ratio")
            if ratio is not None and ratio < threshold:
                failures.append(f"{row['mechanism']} ({row['setting']}): {part} at {ratio:.3g}x its limit")
    return failures
