"""JointExp's forward pass: the dynamic-programming tables in ``O(m n)`` memory.

Gillenwater, Joseph, Kulesza (ICML 2021), Alg. 1 lines 5-13, with the paper's index typos fixed
(the recurrences below match brute-force enumeration, ``tests/test_joint_exp.py``):
``alpha(j, i, k)`` is the mass of the length-``j`` prefixes ending with exactly ``k`` copies of gap
``i``,

    alpha(1, i, 1) = phi_1(i) tau(i)
    alpha(j, i, 1) = tau(i) sum_{i' < i} phi_j(i - i') alphahat(j - 1, i')      (Toeplitz step)
    alpha(j, i, k) = tau(i) phi_j(0) alpha(j - 1, i, k - 1) / k                  (k = 2..j)
    alphahat(j, i) = sum_k alpha(j, i, k),

with ``phi_j(g) = exp(-c |g - nu_j|)``, ``nu_j = (q_j - q_{j-1}) n``. Instead of the paper's
``m x (n+1) x m`` table, only two ``m x (n+1)`` tables are kept, ``log alpha(j, :, 1)`` and
``log alphahat(j, :)``: any ``alpha(j, i, k)`` follows from the first by the closed form (unrolling
the ``k >= 2`` recurrence)

    log alpha(j, i, k) = log alpha(j-k+1, i, 1) + (k-1) log tau(i) - c (N_j - N_{j-k+1}) - log k!

(``N_l = nu_1 + ... + nu_l``), which gives ``alphahat(j, :)`` as one fused log-sum-exp over the
earlier rows of the first table (``O(m n)`` reads per step, ``O(m^2 n)`` in all, no ``m x (n+1)``
run-length state) and is what the backward sampler uses. Runs that are provably negligible (a run
of ``k`` quantiles in one gap costs about ``c (k - 1) n / m`` nats) are omitted under a certified
total-variation bound of :data:`OMITTED_MASS`, which removes the ``O(m^2 n)`` term at large ``n``
(:func:`forward_tables`). Each row is renormalised by its maximum
(``offsets``), which is exact for sampling and keeps float32 logs near 0; the offsets are kept so
the log normaliser is exact too. The levels may be traced (only their number ``m`` is static) and
are used in the working dtype: the targets and run costs are formed as ``nu_j = n (q_j - q_{j-1})``
and ``N_j - N_l = n (q_j - q_l)`` from the levels, never as differences of the large cumulative
sums ``N_j``, so float32 keeps their relative precision even at ``n = 10^6``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax.quantiles.joint_exp_linear import LINEAR_BLOCKS, toeplitz_linear, toeplitz_linear_with_masses
from dpjax.quantiles.joint_exp_toeplitz import aligned_length, safe_max, toeplitz_fft, toeplitz_scan

METHODS = ("linear", "scan", "fft")
"""The Toeplitz steps of the forward pass: linear-space block products with a certified exact
fallback (:mod:`dpjax.quantiles.joint_exp_linear`), exact log-space recurrences, and the paper's
max-shifted FFT (:mod:`dpjax.quantiles.joint_exp_toeplitz`)."""


def toeplitz(method: str, x, c, nu):
    """Dispatches the Toeplitz step to ``"linear"``, ``"scan"`` or ``"fft"``."""
    return {"linear": toeplitz_linear, "scan": toeplitz_scan, "fft": toeplitz_fft}[method](x, c, nu)


class Tables(NamedTuple):
    """The forward tables of one dataset (every log array is renormalised per row).

    Attributes:
      edges: gap end points ``[a, x_1, ..., x_n, b]``, shape ``(n + 2,)``.
      log_width: ``log tau``, shape ``(n + 1,)``.
      log_first: ``log alpha(j, :, 1) - D_j``, shape ``(m, L)``: ``n + 1`` gaps padded with ``-inf``
        to ``L = aligned_length(n + 1)``, the even row length the forward pass works at.
      log_total: ``log alphahat(j, :) - D_j``, shape ``(m, W)``: ``n + 1`` gaps padded with ``-inf``
        to ``W``, a whole number of :func:`sampling_block` blocks (the layout the sampler reads).
      run_shift: ``S[j, l] = D_l - D_j - c (N_j - N_l)`` for ``l <= j`` (the closed form's constant
        for a run of ``j - l + 1`` copies ending at row ``j``; ``-inf`` for omitted runs), shape
        ``(m, m)``.
      offsets: ``D_j``, the cumulative renormalisation, shape ``(m,)``.
      c: ``epsilon / (2 Delta)``.
      nu: the targets ``nu_1..nu_{m+1}``, shape ``(m + 1,)``.
      block_left: ``LSE_{t < B} log_total[j, bB + t] + c t``, shape ``(m, blocks)``.
      block_right: ``LSE_{t < B} log_total[j, bB + t] - c t``, shape ``(m, blocks)``; with
        ``block_left`` these give the mass of a whole block of gaps under the backward edge
        weight ``exp(-c |hi - i - nu|)`` in ``O(1)`` (see :func:`sampling_block`).
      log_omitted: log of a certified upper bound on the probability of the gap sequences left out
        by omitted runs (``-inf`` when none are), see :func:`forward_tables`.
    """

    edges: jax.Array
    log_width: jax.Array
    log_first: jax.Array
    log_total: jax.Array
    run_shift: jax.Array
    offsets: jax.Array
    c: jax.Array
    nu: jax.Array
    block_left: jax.Array
    block_right: jax.Array
    log_omitted: jax.Array


def log_phi(c, gap, nu):
    """``log phi(g) = -c |g - nu|`` (the edge weight of a step of ``g`` gaps toward target ``nu``)."""
    return -c * jnp.abs(gap - nu)


def sampling_block(size: int) -> int:
    """Gaps per block of the backward sampler: about ``sqrt(n)``, so a step costs ``O(sqrt(n))``;
    a multiple of every :data:`~dpjax.quantiles.joint_exp_linear.LINEAR_BLOCKS` size (so the block
    masses follow from the linear step's block summaries, and their loops vectorize: see
    ``BLOCK_ALIGN``)."""
    unit = LINEAR_BLOCKS[0]
    return -(-max(unit, math.isqrt(max(size - 1, 0)) + 1) // unit) * unit


def log_factorials(m: int) -> np.ndarray:
    """``log k!`` for ``k = 0..m``."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, m + 1, dtype=np.float64)))])


class ForwardState(NamedTuple):
    """The loop state of :func:`forward_tables` (one ``lax.while_loop`` over the rows).

    Attributes:
      row: ``j``, the next row to compute (int32; back to 1 on a restart).
      omit: whether negligible runs are still being omitted (false after a restart).
      firsts: ``log alpha(l, :, 1) - D_l`` for the rows done, shape ``(m, L)``.
      log_total: ``log alphahat(l, :) - D_l`` for the rows done, shape ``(m, W)``.
      masses: the two block-mass tables of :func:`_block_masses`, shape ``(2, m, W / B)``.
      first_max: ``max log alpha(l, :, 1) - D_l`` per row, shape ``(m,)``.
      offsets: ``D_l``, shape ``(m,)``.
      run_weight: the run weights of row ``l`` from each earlier row (``-inf`` when omitted or not
        yet computed), shape ``(m, m)``.
      log_omitted: the certificate's log-mass of the left-out sequences so far (scalar).
    """

    row: jax.Array
    omit: jax.Array
    firsts: jax.Array
    log_total: jax.Array
    masses: jax.Array
    first_max: jax.Array
    offsets: jax.Array
    run_weight: jax.Array
    log_omitted: jax.Array


OMITTED_MASS = 2.0**-64
"""Certified upper bound on the probability of the gap sequences that the forward pass leaves out
(:func:`forward_tables`), so a release's law is within this total variation of the exact one."""


def forward_tables(
    edges, log_width, levels, c, method: str, margin_nats=None, restart_above: float = OMITTED_MASS
) -> Tables:
    """The forward tables for the levels ``levels`` (shape ``(m,)``, used in ``log_width``'s dtype),
    traceable in everything but ``m``, ``method`` and the test knob ``restart_above``. Nothing in the
    omission or its certificate depends on ``c`` through Python control flow.

    Step ``j`` leaves out the runs from rows ``l < j`` whose weight is provably below
    ``max(new runs of row j) - margin_j`` at every gap, where ``margin_j`` allows for
    ``log(1 / OMITTED_MASS)``, the ``n + 1`` gaps and the ``m - 1 - j`` quantiles still to place
    (tests override it with ``margin_nats`` and raise ``restart_above``). When ``n / m >> 1 / c``
    this drops the whole ``O(m^2 n)`` run term: ``k`` quantiles in one gap cost ``c (N_j - N_l)``, about
    ``c (k - 1) n / m`` nats. Omitted pairs get ``run_shift = -inf``, so tables and sampler describe
    exactly the mechanism restricted to the sequences without those runs, and ``log_omitted`` bounds
    the probability of the others: the first omitted run of a left-out sequence has restricted
    prefix mass times run weight at most ``exp(D_{j-1} + bound_jl)`` at each gap, and any
    completion of the ``m - 1 - j`` later quantiles weighs at most the volume
    ``(b - a)^{m-1-j} / (m-1-j)!`` (every ``phi <= 1``); the sum is divided by the restricted
    normaliser ``Z' <= Z``. If that bound exceeds ``restart_above`` (e.g. data whose widths make runs
    likely), the pass restarts with nothing omitted: one ``lax.while_loop`` over the rows, so the
    tables are updated in place and the restart costs nothing unless taken.
    """
    dtype = log_width.dtype
    levels = jnp.asarray(levels, dtype)
    size = log_width.shape[0]
    n = size - 1
    m = levels.shape[0]
    nu = jnp.diff(jnp.concatenate([jnp.zeros(1, dtype), levels, jnp.ones(1, dtype)])) * n
    rows = np.arange(m)
    # Run weights: run_gap[j, l] = N_j - N_l = n (q_j - q_l); run_len[j, l] = j - l = k - 1 (static).
    run_gap = (levels[:, None] - levels[None, :]) * n
    run_len = rows[:, None] - rows[None, :]
    log_fact = jnp.asarray(log_factorials(m + 1)[np.clip(run_len + 1, 0, m)], dtype)
    # Rows l >= j are masked by a -inf weight; a length of 1 there keeps 0 * -inf (NaN) out.
    run_len = jnp.asarray(np.maximum(run_len, 1), dtype)
    c_arr = jnp.asarray(c, dtype)
    # Certificate terms: log(n + 1) + log of the completion volume (b - a)^r / r!, r = m - 1 - j.
    log_range = jax.nn.logsumexp(log_width)
    later = jnp.asarray(m - 1 - rows, dtype)
    completion = math.log(size) + later * log_range - jnp.asarray(log_factorials(m)[m - 1 - rows], dtype)
    if margin_nats is None:
        positive = jnp.isfinite(log_width)
        typical = jnp.sum(jnp.where(positive, log_width, 0)) / jnp.maximum(jnp.sum(positive), 1)
        margin = -math.log(OMITTED_MASS) + math.log(m * size) + later * jnp.maximum(log_range - typical, 0)
    else:
        margin = jnp.full((m,), margin_nats, dtype)
    max_log_width = jnp.max(log_width)
    # Rows are worked at the aligned length (zero-width gaps past n, so every entry there is -inf).
    length = aligned_length(size)
    widths = jnp.pad(log_width, (0, length - size), constant_values=-jnp.inf)
    gaps = jnp.arange(length, dtype=dtype)
    last_edge = log_phi(c_arr, n - gaps, nu[-1])

    first = widths + log_phi(c_arr, gaps, nu[0])
    top = safe_max(first)
    firsts = jnp.full((m, length), -jnp.inf, dtype).at[0].set(first - top)
    block = sampling_block(size)
    width = padded_width(size)
    log_total = jnp.full((m, width), -jnp.inf, dtype).at[0, :length].set(first - top)
    # Block masses are computed row by row while the row is in cache (one pass over (m, n) saved);
    # under "linear", those of row j - 1 come with step j's Toeplitz step (the last row's after).
    masses = jnp.zeros((2, m, width // block), dtype)
    if method != "linear":
        masses = masses.at[:, 0].set(_block_masses(log_total[0], c_arr, block))
    first_max = jnp.full((m,), -jnp.inf, dtype).at[0].set(jnp.max(first) - top)
    offsets = jnp.zeros((m,), dtype).at[0].set(top)

    def step(state: ForwardState) -> ForwardState:
        j, omit, firsts, log_total, masses, first_max, offsets, run_weight, log_omitted = state
        # New runs: Toeplitz step from the previous row (relative to D_{j-1}), none at gap 0.
        previous_row = lax.dynamic_index_in_dim(log_total, j - 1, 0, keepdims=False)
        previous = previous_row[:length]
        if method == "linear":
            # The linear step also gives the block masses of the previous row.
            stepped, previous_masses = toeplitz_linear_with_masses(
                previous, c_arr, nu[j], block, lambda: _block_masses(previous_row, c_arr, block)
            )
            masses = lax.dynamic_update_index_in_dim(masses, previous_masses, j - 1, 1)
        else:
            stepped = toeplitz(method, previous, c_arr, nu[j])
        new_first = jnp.where(gaps == 0, -jnp.inf, widths + stepped)
        # Runs of k = j - l + 1 >= 2 copies of gap i (the closed form above), relative to D_{j-1}.
        weight = offsets - offsets[j - 1] - c_arr * run_gap[j] - log_fact[j]
        bound = weight + first_max + run_len[j] * max_log_width
        reference = jnp.max(new_first)
        kept = (rows < j) & ~(omit & (bound < reference - margin[j]))
        dropped = jnp.where((rows < j) & ~kept, offsets[j - 1] + bound, -jnp.inf)
        log_omitted = jnp.logaddexp(log_omitted, jax.nn.logsumexp(dropped) + completion[j])
        weight = jnp.where(kept, weight, -jnp.inf)
        total, top = _logsumexp_recent_rows(new_first, reference, firsts, weight, widths, j, m)
        firsts = lax.dynamic_update_index_in_dim(firsts, new_first - top, j, 0)
        row = jnp.pad(total - top, (0, width - length), constant_values=-jnp.inf)
        log_total = lax.dynamic_update_index_in_dim(log_total, row, j, 0)
        if method != "linear":
            masses = lax.dynamic_update_index_in_dim(masses, _block_masses(row, c_arr, block), j, 1)
        first_max = first_max.at[j].set(reference - top)
        offsets = offsets.at[j].set(offsets[j - 1] + top)
        run_weight = run_weight.at[j].set(weight)
        # After the last row: certify (log_omitted relative to log Z') or restart without omitting.
        log_omitted = lax.cond(
            j == m - 1,
            lambda: log_omitted - offsets[j] - jax.nn.logsumexp(total - top + last_edge),
            lambda: log_omitted,
        )
        restart = (j == m - 1) & omit & (log_omitted > math.log(restart_above))
        log_omitted = jnp.where(restart, -jnp.inf, log_omitted)
        return ForwardState(
            jnp.where(restart, 1, j + 1).astype(jnp.int32),
            omit & ~restart,
            firsts,
            log_total,
            masses,
            first_max,
            offsets,
            run_weight,
            log_omitted,
        )

    start = ForwardState(
        row=jnp.int32(1),
        omit=jnp.bool_(True),
        firsts=firsts,
        log_total=log_total,
        masses=masses,
        first_max=first_max,
        offsets=offsets,
        run_weight=jnp.full((m, m), -jnp.inf, dtype),
        log_omitted=jnp.asarray(-jnp.inf, dtype),
    )
    final = lax.while_loop(lambda state: state.row < m, step, start)
    firsts, log_total, masses, offsets = final.firsts, final.log_total, final.masses, final.offsets
    run_weight, log_omitted = final.run_weight, final.log_omitted
    if method == "linear":
        masses = masses.at[:, m - 1].set(_block_masses(log_total[m - 1], c_arr, block))
    kept = jnp.isfinite(run_weight) | (rows[:, None] == rows[None, :])
    run_shift = jnp.where(kept, offsets[None, :] - offsets[:, None] - c_arr * run_gap, -jnp.inf)
    return Tables(
        edges,
        log_width,
        firsts,
        log_total,
        run_shift,
        offsets,
        c_arr,
        nu,
        masses[0],
        masses[1],
        log_omitted,
    )


ROW_CHUNK = 4


def _logsumexp_recent_rows(first, first_max, firsts, weight, log_width, j, m: int):
    """``(total, safe_max(total))`` for the elementwise
    ``total = LSE(first, firsts[l] + weight[l] + (j - l) log_width)`` over rows ``l < j``
    (``first_max = max(first)``, which is the maximum when no row is live).

    Rows are visited backwards from ``l = j - 1`` in chunks of :data:`ROW_CHUNK` (offsets
    ``t = j - 1 - l`` are static, so each chunk is an unrolled elementwise max and exp-sum chain that
    XLA CPU fuses into one pass); a chunk whose rows all have ``-inf`` weight (omitted, or before
    row 0) is skipped by ``lax.cond``, and so is the whole pass when every row is."""
    chunks = [range(start, min(start + ROW_CHUNK, m - 1)) for start in range(0, m - 1, ROW_CHUNK)]
    back = jnp.clip(j - 1 - jnp.arange(m - 1), 0, m - 1)
    live = (jnp.arange(m - 1) < j) & jnp.isfinite(weight[back])

    def row(t):
        l = back[t]
        return firsts[l] + weight[l] + (t + 1) * log_width

    def over_chunks(value, combine):
        for chunk in chunks:

            def fold(value, chunk=chunk):
                for t in chunk:
                    value = combine(value, jnp.where(live[t], row(t), -jnp.inf))
                return value

            value = lax.cond(jnp.any(live[chunk[0] : chunk[-1] + 1]), fold, lambda value: value, value)
        return value

    def with_runs(first):
        top = over_chunks(first, jnp.maximum)
        top = jnp.where(jnp.isfinite(top), top, 0)
        total = top + jnp.log(over_chunks(jnp.exp(first - top), lambda acc, r: acc + jnp.exp(r - top)))
        return total, safe_max(total)

    def without_runs(first):
        return first, jnp.where(jnp.isfinite(first_max), first_max, jnp.zeros_like(first_max))

    return lax.cond(jnp.any(live), with_runs, without_runs, first)


def padded_width(size: int) -> int:
    """The row length ``aligned_length(size)`` rounded up to a whole number of :func:`sampling_block`
    blocks."""
    block = sampling_block(size)
    return -(-aligned_length(size) // block) * block


def _block_masses(row, c, block: int):
    """Per block of ``block`` gaps of a padded row, ``LSE row + c t`` and ``LSE row - c t`` (stacked)."""
    padded = row.reshape(-1, block)
    ramp = c * jnp.arange(block, dtype=row.dtype)
    return jnp.stack([jax.nn.logsumexp(padded + ramp, axis=1), jax.nn.logsumexp(padded - ramp, axis=1)])


def log_normalizer(tables: Tables) -> jax.Array:
    """``log Z = log sum_s exp(c u(s)) prod tau / gamma(s)``, the log of the continuous normaliser."""
    n = tables.log_width.shape[0] - 1
    gaps = jnp.arange(n + 1, dtype=tables.log_width.dtype)
    last = log_phi(tables.c, n - gaps, tables.nu[-1])
    return tables.offsets[-1] + jax.nn.logsumexp(tables.log_total[-1, : n + 1] + last)
