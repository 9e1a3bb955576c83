"""JointExp: all ``m`` quantiles from one exponential mechanism (pure epsilon-DP, no budget split).

Gillenwater, Joseph, Kulesza, "Differentially Private Quantiles", ICML 2021, Alg. 1 (with the
typos of its printed listing fixed). The output ``o_1 <= ... <= o_m`` in ``[a, b]`` has density

    f(o) ∝ exp(epsilon u(X, o) / (2 Delta)),
    u(X, o) = -sum_{j=1}^{m+1} | n(o_{j-1}, o_j) - (q_j - q_{j-1}) n |,

(``o_0 = a``, ``o_{m+1} > b``, half-open counts), with ``Delta = 2`` under swap and
``2 (1 - min_j (q_j - q_{j-1}))`` under add/remove (the minimum includes the end gaps ``q_1`` and
``1 - q_m``). It is sampled exactly: a nondecreasing sequence of gaps between sorted clamped points
is drawn with weight ``exp(c u) prod tau(i_j) / prod_runs k!`` by a forward pass
(:mod:`dpjax.quantiles.joint_exp_tables`; its Toeplitz convolutions by linear-space block matrix
products, certified exact or else redone by log-space recurrences:
:mod:`dpjax._src.quantiles.joint_exp_linear`, :mod:`dpjax._src.quantiles.joint_exp_toeplitz`) and an exact
two-stage backward pass (gap, then run length, each by Gumbel-max); each ``o_j`` is then uniform
in its gap, and the output is sorted.
Zero-width gaps (duplicates) have probability exactly 0. Runs of several quantiles in one gap whose
weight is provably negligible, and at large ``n`` the gaps of a forward row outside a window around
its mass, are left out of the forward pass, under a per-dataset certificate that the sequences
using them carry at most ``OMITTED_MASS = 2^-64`` of the probability (otherwise the pass restarts
with nothing left out; :func:`~dpjax._src.quantiles.joint_exp_tables.forward_tables`).
That is the resolution of the library's tail-exact Gumbel sampler (``e^-44``), below which no
racing draw resolves probabilities anyway.

Only ``m`` (and the options) are static: the levels, epsilon and the bounds may be traced, and the
omission and its certificate are computed in the graph for whatever epsilon is given (an invalid
traced value, or NaN data under ``jit``, makes the output NaN).

Under ``vmap`` over keys the forward tables (sorting, ``O(m n)`` memory; ``O(n log n + m n)`` time
when ``n / m >> 1 / c``, up to ``O(m^2 n)`` when runs cannot be left out) are computed once; each key
costs one backward pass, ``O(m (sqrt(n) + m))``. That pass has no ``O(log n)`` path (unlike
EMQ/IndExp's ``method="auto"``, :mod:`dpjax._src.quantiles.em_sampler`): each step draws from a row of the
forward table times a kernel ``exp(-c |hi - i - nu|)`` that moves with the gap ``hi`` drawn before
it, so there is no single weight vector to prepare once; the per-key cost is the same with or
without ``vmap`` (the measured rates are in ``benchmarks/README.md``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike

from dpjax._src import sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import RangeBounded
from dpjax._src.accounting.neighbors import Neighbors, NeighborsLike
from dpjax._src.host_checks import check_choice, check_epsilon, float_dtype
from dpjax._src.quantiles.intervals import check_inputs, gumbel_argmax, sorted_gaps, uniform_in_gaps
from dpjax._src.quantiles.joint_exp_tables import (
    METHODS,
    JointExpMethod,
    Tables,
    forward_tables,
    log_normalizer,
)
from dpjax._src.quantiles.joint_exp_weights import log_factorials, log_phi
from dpjax._src.validation import Checks

_DEFAULT_METHOD: JointExpMethod = "linear"


def _joint_exp_sensitivity(qs, neighbors: NeighborsLike = Neighbors.SWAP):
    """``Delta`` of JointExp's utility: 2 (swap); ``2 (1 - min gap of [0, q_1..q_m, 1])`` (add/remove).

    ``qs`` may be traced; the add/remove value is computed in its dtype.
    """
    if neighbors == "swap":
        return 2.0
    levels = jnp.asarray(qs)
    ends = jnp.concatenate([jnp.zeros(1, levels.dtype), levels, jnp.ones(1, levels.dtype)])
    return 2 * (1 - jnp.min(jnp.diff(ends)))


def _tables(checks: Checks, x, qs, epsilon, bounds, neighbors, method, *, allow_zero: bool) -> Tables:
    """Validates (eagerly, or recorded in ``checks`` for traced values) and runs the forward pass."""
    x, levels, epsilon, lower, upper = check_inputs(checks, x, qs, epsilon, bounds, allow_zero=allow_zero)
    neighbors = Neighbors.check(neighbors)
    check_choice(method, "method", METHODS)
    return _forward(x, levels, epsilon, lower, upper, neighbors, method)


@functools.partial(jax.jit, static_argnames=("neighbors", "method"))
@sharded.auto_axes
def _forward(x, levels, epsilon, lower, upper, neighbors: Neighbors, method: JointExpMethod) -> Tables:
    """The forward pass after validation, compiled once per (``m``, relation, method, data shape and
    dtype); the levels, ``epsilon`` and the bounds are arguments, used in the working dtype."""
    dtype = float_dtype(x)
    levels = jnp.asarray(levels, dtype)
    c = jnp.asarray(epsilon, dtype) / (2 * _joint_exp_sensitivity(levels, neighbors))
    edges, log_width = sorted_gaps(x, lower, upper)
    return forward_tables(edges, log_width, levels, c, method)


def joint_exp_tables(
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    epsilon: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    neighbors: NeighborsLike = Neighbors.SWAP,
    method: JointExpMethod = _DEFAULT_METHOD,
) -> Tables:
    """The forward tables of JointExp for ``x`` (see :class:`~dpjax.quantiles.JointExpTables`).

    Arguments as in :func:`joint_exp`, except that ``epsilon = 0`` is allowed here (the tables of
    the uniform law on sorted vectors, used to check the run factors). Every float table is NaN when
    a traced input is invalid.
    """
    checks = Checks()
    return checks.guard(_tables(checks, x, qs, epsilon, bounds, neighbors, method, allow_zero=True))


def joint_exp_log_normalizer(
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    epsilon: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    neighbors: NeighborsLike = Neighbors.SWAP,
    method: JointExpMethod = _DEFAULT_METHOD,
) -> jax.Array:
    """``log Z``: the log of ``integral over a <= o_1 <= ... <= o_m <= b of exp(c u(X, o)) do``
    (``epsilon >= 0``; NaN when a traced input is invalid)."""
    tables = joint_exp_tables(x, qs, epsilon, bounds=bounds, neighbors=neighbors, method=method)
    return log_normalizer(tables)


def _block_logits(tables: Tables, row, block_index, hi, inclusive, target):
    """Exact logits ``log_total[row, i] - c |hi - i - target|`` of the ``B`` gaps of one block,
    ``-inf`` past ``hi`` (past or at ``hi`` if not ``inclusive``)."""
    block = tables.log_total.shape[1] // tables.block_left.shape[1]
    start = block_index * block
    gap = start + jnp.arange(block, dtype=jnp.int32)
    values = lax.dynamic_slice_in_dim(tables.log_total[row], start, block)
    logits = values + log_phi(tables.c, (hi - gap).astype(values.dtype), target)
    allowed = jnp.where(inclusive, gap <= hi, gap < hi)
    return jnp.where(allowed, logits, -jnp.inf)


def _draw_gap(key, tables: Tables, row, hi, inclusive):
    """One exact draw of ``i`` with probability ``∝ alphahat(row, i) phi_{row+1}(hi - i)`` over
    ``i <= hi`` (``inclusive``) or ``i < hi``, in ``O(sqrt(n))``.

    Two levels, each by Gumbel-max: first a block of ``B`` gaps with its total mass, then a gap in
    it. Left of the kink ``hi - nu`` the edge weight is ``exp(-c (hi - i - nu))``, right of it
    ``exp(-c (i - hi + nu))``: for a block on one side the mass is a precomputed per-block
    log-sum-exp (``block_left`` / ``block_right``) plus a constant. Only the block holding the
    kink and the block holding ``hi`` (the mask edge) are summed gap by gap.
    """
    target = tables.nu[row + 1]
    blocks = tables.block_left.shape[1]
    block = tables.log_total.shape[1] // blocks
    n = tables.log_width.shape[0] - 1
    dtype = tables.log_width.dtype
    index = jnp.arange(blocks, dtype=jnp.int32)
    distance = (hi - index * block).astype(dtype) - target  # hi - start - nu
    kink = jnp.clip(jnp.floor(hi - target), 0, n).astype(jnp.int32) // block
    last = hi // block
    masses = jnp.where(
        index < kink,
        tables.block_left[row] - tables.c * distance,
        tables.block_right[row] + tables.c * distance,
    )
    masses = jnp.where(index > last, -jnp.inf, masses)
    for edge in (kink, last):
        exact = jax.nn.logsumexp(_block_logits(tables, row, edge, hi, inclusive, target))
        masses = masses.at[edge].set(exact)
    block_key, gap_key = jax.random.split(key)
    chosen = gumbel_argmax(block_key, masses).astype(jnp.int32)
    inside = gumbel_argmax(gap_key, _block_logits(tables, row, chosen, hi, inclusive, target))
    return chosen * block + inside.astype(jnp.int32)


def _sample_gaps(key, tables: Tables) -> jax.Array:
    """One exact draw of the nondecreasing gap sequence ``(i_1, ..., i_m)`` (Alg. 1 lines 14-17).

    Two-stage backward sampling (Gillenwater et al. 2021, Alg. 1, sampling step): at each step the
    gap of the last open run
    is drawn from ``alphahat(j, i) phi_{j+1}(hi - i)`` (``i <= hi`` at the first step, ``i < hi``
    after; :func:`_draw_gap`, ``O(sqrt(n))``), then its run length ``k <= j`` from
    ``alpha(j, i, k)`` by the closed form; at most ``m`` steps.
    """
    m = tables.log_total.shape[0]
    size = tables.log_width.shape[0]
    dtype = tables.log_width.dtype
    run = jnp.arange(1, m + 1, dtype=jnp.int32)
    log_fact = jnp.asarray(log_factorials(m)[1:], dtype)  # log k!, k = 1..m
    positions = jnp.arange(1, m + 1, dtype=jnp.int32)

    def body(step, carry):
        remaining, hi, sequence = carry
        gap_key, run_key = jax.random.split(jax.random.fold_in(key, step))
        row = jnp.maximum(remaining - 1, 0)
        gap = _draw_gap(gap_key, tables, row, hi, step == 0)
        # Run of k copies: alpha(row, gap, k) = first(row - k + 1, gap) + S[row, row - k + 1]
        # + (k - 1) log tau(gap) - log k!.
        start = jnp.clip(row - run + 1, 0, m - 1)
        run_logits = (
            tables.log_first[start, gap]
            + tables.run_shift[row, start]
            + jnp.where(run > 1, (run - 1) * tables.log_width[gap], 0)
            - log_fact
        )
        run_logits = jnp.where(run <= remaining, run_logits, -jnp.inf)
        length = gumbel_argmax(run_key, run_logits).astype(jnp.int32) + 1
        active = remaining > 0
        fill = active & (positions > remaining - length) & (positions <= remaining)
        sequence = jnp.where(fill, gap, sequence)
        remaining = jnp.where(active, remaining - length, remaining)
        hi = jnp.where(active, gap, hi)
        return remaining, hi, sequence

    n = size - 1
    start = (jnp.int32(m), jnp.int32(n), jnp.zeros(m, jnp.int32))
    return lax.fori_loop(0, m, body, start)[2]


@jax.jit
def _sample_outputs(key, tables: Tables) -> jax.Array:
    """One JointExp release from precomputed tables: gaps, uniform draws inside them, sorted."""
    gap_key, uniform_key = jax.random.split(key)
    sequence = _sample_gaps(gap_key, tables)
    return jnp.sort(uniform_in_gaps(uniform_key, tables.edges, sequence))


def joint_exp(
    key: jax.Array,
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    epsilon: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    neighbors: NeighborsLike = Neighbors.SWAP,
    method: JointExpMethod = _DEFAULT_METHOD,
) -> jax.Array:
    """JointExp (Gillenwater, Joseph, Kulesza, ICML 2021, Alg. 1): ``m`` quantiles in one mechanism.

    Neighboring relation: ``"swap"`` (default, the paper's; ``Delta = 2``) or ``"add_remove"``
    (``Delta = 2 (1 - min_j (q_j - q_{j-1}))`` over the ``m + 1`` gaps of ``[0, q_1, ..., q_m, 1]``).
    Guarantee: pure ``epsilon``-DP for the whole vector (:func:`joint_exp_guarantee`), with no
    split of epsilon over quantiles.

    The forward pass's Toeplitz step is ``method="linear"`` (default: linear-space block matrix
    products, every entry certified accurate relative to itself, else redone by the scan),
    ``"scan"`` (exact log-space recurrences; as accurate in float32, slower) or ``"fft"``
    (the paper's max-shifted FFT; needs float64 data under ``jax_enable_x64`` to be accurate). See
    ``benchmarks/README.md`` for the measurements behind the default. ``qs``, ``epsilon`` and
    ``bounds`` may be traced (``jax.vmap`` over any of them gives what separate calls give); the
    forward pass is compiled once per ``m``, method, data shape and dtype.

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` (may be empty; ``n`` static); clamped to ``bounds``. Computation is
        in ``x``'s float dtype (at least float32; the default float for integer data).
      qs: ``m`` strictly increasing levels in [0, 1] (may be traced; ``m`` is static). They are
        used in the working dtype.
      epsilon: privacy parameter, > 0 (may be traced).
      bounds: ``(a, b)`` with ``a < b``, data independent (may be traced: either end, or an array
        of shape ``(2,)``).
      neighbors: a :class:`~dpjax.accounting.Neighbors` or its value, "swap" or "add_remove" (static).
      method: ``"linear"``, ``"scan"`` or ``"fft"`` (static).

    Returns:
      Shape ``(m,)``: the estimates, sorted, in ``[a, b]``. All NaN when a traced input is invalid
      (levels not increasing or outside [0, 1], bounds not finite with ``a < b``, ``epsilon`` not
      finite and > 0) or traced data contain NaN or infinities; concrete invalid inputs raise a
      ``ValueError`` before any randomness is used.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = 5 * jax.random.normal(jax.random.key(1), (100,))
      >>> deciles = joint_exp(jax.random.key(0), x, jnp.linspace(0.1, 0.9, 9), 1.0, bounds=(-100, 100))
      >>> sweep = jax.vmap(lambda e: joint_exp(jax.random.key(0), x, [0.5], e, bounds=(-100, 100)))(
      ...     jnp.array([0.5, 1.0, 2.0]))  # one compiled call over a grid of epsilon
    """
    checks = Checks()
    tables = _tables(checks, x, qs, epsilon, bounds, neighbors, method, allow_zero=False)
    return checks.guard(_sample_outputs(key, tables))


@elementwise("epsilon")
def joint_exp_guarantee(epsilon: float, *, neighbors: NeighborsLike = Neighbors.SWAP) -> RangeBounded:
    """JointExp's guarantee: ``RangeBounded(epsilon)`` for all ``m`` quantiles together, under
    ``neighbors`` (the utility's sensitivity, :func:`_joint_exp_sensitivity`, is calibrated to it).

    JointExp is one exponential mechanism (Gillenwater, Joseph, Kulesza 2021, Thm. 1) with density
    ``exp(epsilon u / (2 Delta))`` over a data-independent base measure: its privacy loss spans at most
    ``epsilon``, so it is epsilon-range-bounded (Durfee and Rogers 2019, Lemma 3.1), hence epsilon-DP
    and epsilon^2/8-zCDP (Cesar and Rogers 2021, Lemma 3.4).

    This is the guarantee of the mechanism. The sampled law is within total variation
    ``OMITTED_MASS = 2^-64`` of it (see the module docstring), so strictly the implementation is
    ``(epsilon, (1 + e^epsilon) 2^-64)``-DP, a gap of the same order as floating-point sampling's.
    """
    Neighbors.check(neighbors)
    return RangeBounded(check_epsilon(epsilon))


__all__ = [
    "JointExpMethod",
    "joint_exp",
    "joint_exp_guarantee",
    "joint_exp_log_normalizer",
    "joint_exp_tables",
]
