"""JointExp's forward pass: the dynamic-programming tables in ``O(m n)`` memory.

Gillenwater, Joseph, Kulesza (ICML 2021), Alg. 1 lines 5-13, with the paper's index typos fixed
(the recurrences below match brute-force enumeration, ``tests/quantiles/test_joint_exp.py``):
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
total-variation bound of :data:`OMITTED_MASS`, which removes the ``O(m^2 n)`` term at large ``n``,
and so are the entries of a row outside a window of about ``n / 16`` gaps around its mass when
they are provably negligible, which makes the Toeplitz steps ``O(n / 16 + n / 32)`` each
(:func:`forward_tables`). Each row is renormalised by its maximum
(``offsets``), which is exact for sampling and keeps float32 logs near 0; the offsets are kept so
the log normaliser is exact too. The levels may be traced (only their number ``m`` is static) and
are used in the working dtype: the targets and run costs are formed as ``nu_j = n (q_j - q_{j-1})``
and ``N_j - N_l = n (q_j - q_l)`` from the levels, never as differences of the large cumulative
sums ``N_j``, so float32 keeps their relative precision even at ``n = 10^6``.
"""

from __future__ import annotations

import functools
import math
from typing import Literal, NamedTuple, TypeAlias, get_args

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src.quantiles import joint_exp_rows
from dpjax._src.quantiles.joint_exp_layout import block_masses
from dpjax._src.quantiles.joint_exp_state import (
    OMITTED_MASS,
    Constants,
    ForwardState,
    Row,
    forward_constants,
    initial_state,
)
from dpjax._src.quantiles.joint_exp_weights import log_phi

__all__ = ["METHODS", "JointExpMethod", "Tables", "forward_tables", "log_normalizer"]

JointExpMethod: TypeAlias = Literal["linear", "scan", "fft"]
"""How JointExp's forward pass is computed (static)."""
METHODS: tuple[JointExpMethod, ...] = get_args(JointExpMethod)
"""The Toeplitz steps of the forward pass: linear-space block products with a certified exact
fallback (:mod:`dpjax._src.quantiles.joint_exp_linear`), exact log-space recurrences, and the paper's
max-shifted FFT (:mod:`dpjax._src.quantiles.joint_exp_toeplitz`)."""


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


def forward_tables(
    edges,
    log_width,
    levels,
    c,
    method: str,
    margin_nats=None,
    restart_above: float = OMITTED_MASS,
    span: int | None = None,
) -> Tables:
    """The forward tables for the levels ``levels`` (shape ``(m,)``, used in ``log_width``'s dtype),
    traceable in everything but ``m``, ``method``, ``span`` and the test knob ``restart_above``.
    Nothing in the omission or its certificate depends on ``c`` through Python control flow.

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
    normaliser ``Z' <= Z``.

    With the ``"linear"`` step, rows are also kept in windows of ``span`` gaps (static; by default
    :func:`window_span`, about a sixteenth of the row from ``2^15`` gaps on; 0 for none), the rest of
    the row ``-inf``: row 0 when its mass outside the window is below ``max - margin_0``, and row
    ``j`` from a windowed row ``j - 1`` when the same holds for a bound on it. The step then runs on
    the window alone (:func:`~dpjax._src.quantiles.joint_exp_linear.block_frames` and
    :func:`~dpjax._src.quantiles.joint_exp_linear.window_values`: ``O(span + n / 32)`` instead of
    ``O(n)``), and every new run in block ``b`` of 32 gaps is at most the block's frame
    ``+ log(98)`` plus its largest log width (plus a nat for rounding), which bounds the mass left
    out; the window is centred on the blocks whose bound is within ``margin_j`` of the largest. It
    needs the step certified with blocks of 32 and no kept run; otherwise the row is computed whole,
    and so are the rows after it.
    Left-out entries enter ``log_omitted`` like runs (the sequences whose first left-out choice is
    gap ``i`` of row ``j`` weigh at most that entry times the completion volume), so the tables
    describe exactly the mechanism restricted to sequences inside every window and without the
    omitted runs.

    If the certificate exceeds ``restart_above`` (e.g. data whose widths make runs likely), the pass
    restarts from row 0 with nothing omitted and whole rows: one ``lax.while_loop`` over the rows,
    so the tables are updated in place and the restart costs nothing unless taken. Each turn of the
    loop is :func:`_step`: one of the row steps :func:`first_row` (row 0), :func:`full_row` (a whole
    row) or :func:`windowed_row` (a row in a window), over the pass's :class:`Constants`.
    """
    const = forward_constants(log_width, levels, c, method, margin_nats, span)
    final = lax.while_loop(
        lambda state: state.row < const.m,
        functools.partial(_step, const, restart_above),
        initial_state(const),
    )
    return _tables(const, edges, log_width, final)


def _base(state: ForwardState):
    """``D_{j-1}`` (0 for row 0)."""
    return jnp.where(state.row == 0, 0, state.offsets[state.row - 1])


def _step(const: Constants, restart_above: float, state: ForwardState) -> ForwardState:
    """Computes row ``j`` (first, whole or windowed) and writes it into the tables in place; after
    the last row, certifies the omissions or restarts from row 0 without them."""
    j, m, block = state.row, const.m, const.block
    rows = joint_exp_rows
    first_row, full_row = (functools.partial(f, const) for f in (rows.first_row, rows.full_row))
    if const.windows:
        windowed_row, no_window = (functools.partial(f, const) for f in (rows.windowed_row, rows.no_window))
        fits, window = lax.cond(state.windowed & (j > 0), windowed_row, no_window, state)
        branches: tuple[functools.partial[Row], ...]
        branches = (first_row, full_row, functools.partial(rows.take_window, const))
        branch = jnp.where(j == 0, 0, jnp.where(fits, 2, 1))
    else:
        window, branches, branch = None, (first_row, full_row), jnp.where(j == 0, 0, 1)
    # The tables are only read in the branches and written below, in place.
    row = lax.switch(branch, branches, state, window)
    firsts = lax.dynamic_update_index_in_dim(state.firsts, row.new_first - row.top, j, 0)
    total = jnp.pad(row.total - row.top, (0, const.width - const.length), constant_values=-jnp.inf)
    log_total = lax.dynamic_update_index_in_dim(state.log_total, total, j, 0)
    if const.method == "linear":
        # Row j - 1's masses (row 0's, from row 1's step, overwrite these).
        masses = lax.dynamic_update_index_in_dim(state.masses, row.masses, jnp.maximum(j - 1, 0), 1)
    else:
        masses = lax.dynamic_update_index_in_dim(state.masses, block_masses(total, const.c, block), j, 1)
    offsets = state.offsets.at[j].set(_base(state) + row.top)
    # After the last row: certify (log_omitted relative to log Z') or restart without omitting.
    log_omitted = lax.cond(
        j == m - 1,
        lambda: row.log_omitted - offsets[j] - jax.nn.logsumexp(total[: const.length] + const.last_edge),
        lambda: row.log_omitted,
    )
    restart = (j == m - 1) & state.omit & (log_omitted > math.log(restart_above))
    return ForwardState(
        jnp.where(restart, 0, j + 1).astype(jnp.int32),
        state.omit & ~restart,
        row.windowed & ~restart,
        row.window,
        firsts,
        log_total,
        masses,
        state.first_max.at[j].set(row.reference - row.top),
        offsets,
        state.run_weight.at[j].set(row.weight),
        jnp.where(restart, -jnp.inf, log_omitted),
    )


def _tables(const: Constants, edges, log_width, final: ForwardState) -> Tables:
    """The :class:`Tables` from the loop's final state."""
    masses, offsets, rows = final.masses, final.offsets, const.rows
    if const.method == "linear":
        last = block_masses(final.log_total[const.m - 1], const.c, const.block)
        masses = masses.at[:, const.m - 1].set(last)
    kept = jnp.isfinite(final.run_weight) | (rows[:, None] == rows[None, :])
    run_shift = jnp.where(kept, offsets[None, :] - offsets[:, None] - const.c * const.run_gap, -jnp.inf)
    return Tables(
        edges,
        log_width,
        final.firsts,
        final.log_total,
        run_shift,
        offsets,
        const.c,
        const.nu,
        masses[0],
        masses[1],
        final.log_omitted,
    )


@jax.jit  # one compile per table shape, not one per eager operation
def log_normalizer(tables: Tables) -> jax.Array:
    """``log Z = log sum_s exp(c u(s)) prod tau / gamma(s)``, the log of the continuous normaliser."""
    n = tables.log_width.shape[0] - 1
    gaps = jnp.arange(n + 1, dtype=tables.log_width.dtype)
    last = log_phi(tables.c, n - gaps, tables.nu[-1])
    return tables.offsets[-1] + jax.nn.logsumexp(tables.log_total[-1, : n + 1] + last)
