"""What JointExp's forward pass carries: its constants, the loop state over the rows, one row
before it is written, and the certified bound on the mass it leaves out
(``forward_tables``)."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src.quantiles.joint_exp_layout import UNIT, padded_width, sampling_block, window_span
from dpjax._src.quantiles.joint_exp_toeplitz import aligned_length
from dpjax._src.quantiles.joint_exp_weights import log_factorials, log_phi

__all__ = ["OMITTED_MASS", "Constants", "ForwardState", "Row", "forward_constants", "initial_state"]


class Row(NamedTuple):
    """One row of the forward pass, before it is written (every log value relative to ``D_{j-1}``).

    Attributes:
      new_first: the new runs ``log alpha(j, :, 1)``, shape ``(L,)``.
      total: ``log alphahat(j, :)``, shape ``(L,)``.
      top: ``max(total)`` (0 if not finite): ``D_j - D_{j-1}``.
      reference: ``max(new_first)``.
      weight: the kept run weights into row ``j`` (``-inf`` where omitted), shape ``(m,)``.
      log_omitted: the certificate with this row's omissions added.
      masses: the block masses of row ``j - 1`` (linear Toeplitz step only), shape ``(2, W / B)``.
      window: the first block of the row's window (0 when whole).
      windowed: whether the row is kept in a window.
    """

    new_first: jax.Array
    total: jax.Array
    top: jax.Array
    reference: jax.Array
    weight: jax.Array
    log_omitted: jax.Array
    masses: jax.Array
    window: jax.Array
    windowed: jax.Array


class ForwardState(NamedTuple):
    """The loop state of :func:`forward_tables` (one ``lax.while_loop`` over the rows).

    Attributes:
      row: ``j``, the next row to compute (int32; back to 0 on a restart).
      omit: whether negligible runs are still being omitted (false after a restart).
      windowed: whether row ``j - 1`` is kept in a window (and row ``j`` is tried in one).
      window: the first block (of ``LINEAR_BLOCKS[0]`` gaps) of row ``j - 1``'s window (int32).
      firsts: ``log alpha(l, :, 1) - D_l`` for the rows done, shape ``(m, L)``.
      log_total: ``log alphahat(l, :) - D_l`` for the rows done, shape ``(m, W)``.
      masses: the two block-mass tables of :func:`block_masses`, shape ``(2, m, W / B)``.
      first_max: ``max log alpha(l, :, 1) - D_l`` per row, shape ``(m,)``.
      offsets: ``D_l``, shape ``(m,)``.
      run_weight: the run weights of row ``l`` from each earlier row (``-inf`` when omitted or not
        yet computed), shape ``(m, m)``.
      log_omitted: the certificate's log-mass of the left-out sequences so far (scalar).
    """

    row: jax.Array
    omit: jax.Array
    windowed: jax.Array
    window: jax.Array
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


class Constants(NamedTuple):
    """What every row step of one forward pass reads: its static layout (Python values, fixed when
    :func:`forward_tables` is traced) and the per-call arrays, the same for every row.

    Attributes:
      method: the Toeplitz step, one of :data:`METHODS` (static).
      dtype: the working dtype (static).
      m: the number of levels, one row each (static).
      size: ``n + 1``, the number of gaps (static).
      length: the row length worked at, ``aligned_length(size)`` (static).
      width: the row length of ``log_total``, :func:`padded_width` (static).
      block: the sampler's block, :func:`sampling_block` (static).
      span: the window width in gaps, a multiple of ``LINEAR_BLOCKS[0]`` (static).
      windows: whether rows may be kept in windows (``"linear"`` and ``0 < span < length``; static).
      rows: ``0..m-1`` (NumPy).
      c: ``epsilon / (2 Delta)`` in the working dtype.
      nu: the targets ``nu_1..nu_{m+1}``, shape ``(m + 1,)``.
      run_gap: ``N_j - N_l = n (q_j - q_l)``, shape ``(m, m)``.
      run_len: ``j - l``, the number of copies less one (1 where ``l >= j``), shape ``(m, m)``.
      log_fact: ``log (j - l + 1)!``, shape ``(m, m)``.
      margin: the margin of each row's omissions, in nats, shape ``(m,)``.
      completion: ``log(n + 1)`` plus the log of the completion volume after each row, shape ``(m,)``.
      max_log_width: the largest ``log tau``.
      widths: ``log tau`` padded with ``-inf`` to ``length`` gaps.
      gaps: ``0..length-1`` in the working dtype.
      last_edge: ``log phi`` of the last step, from each gap to ``n`` toward ``nu_{m+1}``, shape
        ``(length,)``.
      block_widths: the largest ``log tau`` per block of ``LINEAR_BLOCKS[0]`` gaps (``None`` without
        windows).
      no_masses: zero block masses, shape ``(2, width / block)``.
      no_runs: ``-inf`` run weights, shape ``(m,)``.
    """

    method: str
    dtype: np.dtype
    m: int
    size: int
    length: int
    width: int
    block: int
    span: int
    windows: bool
    rows: np.ndarray
    c: jax.Array
    nu: jax.Array
    run_gap: jax.Array
    run_len: jax.Array
    log_fact: jax.Array
    margin: jax.Array
    completion: jax.Array
    max_log_width: jax.Array
    widths: jax.Array
    gaps: jax.Array
    last_edge: jax.Array
    block_widths: jax.Array | None
    no_masses: jax.Array
    no_runs: jax.Array


def forward_constants(log_width, levels, c, method: str, margin_nats, span: int | None) -> Constants:
    """The constants of :func:`forward_tables` (arguments as there)."""
    dtype = log_width.dtype
    levels = jnp.asarray(levels, dtype)
    size = log_width.shape[0]
    n = size - 1
    m = levels.shape[0]
    nu = jnp.diff(jnp.concatenate([jnp.zeros(1, dtype), levels, jnp.ones(1, dtype)])) * n
    rows = np.arange(m)
    # Run weights: run_gap[j, l] = N_j - N_l = n (q_j - q_l); run_len[j, l] = j - l = k - 1 (static).
    run_gap = (levels[:, None] - levels[None, :]) * n
    lengths = rows[:, None] - rows[None, :]
    log_fact = jnp.asarray(log_factorials(m + 1)[np.clip(lengths + 1, 0, m)], dtype)
    # Rows l >= j are masked by a -inf weight; a length of 1 there keeps 0 * -inf (NaN) out.
    run_len = jnp.asarray(np.maximum(lengths, 1), dtype)
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

    span = window_span(size) if span is None else span
    if span < 0 or span % UNIT:
        raise ValueError(f"span must be 0 (no windows) or a positive multiple of {UNIT} gaps, got {span}")
    windows = method == "linear" and 0 < span < length
    block = sampling_block(size)
    width = padded_width(size)
    no_masses = jnp.zeros((2, width // block), dtype)
    no_runs = jnp.full((m,), -jnp.inf, dtype)
    # The largest log width per block of ``UNIT`` gaps (for the windows' bounds), once per dataset.
    block_widths = jnp.max(widths.reshape(-1, UNIT), axis=1) if windows else None
    return Constants(
        method=method,
        dtype=dtype,
        m=m,
        size=size,
        length=length,
        width=width,
        block=block,
        span=span,
        windows=windows,
        rows=rows,
        c=c_arr,
        nu=nu,
        run_gap=run_gap,
        run_len=run_len,
        log_fact=log_fact,
        margin=margin,
        completion=completion,
        max_log_width=max_log_width,
        widths=widths,
        gaps=gaps,
        last_edge=last_edge,
        block_widths=block_widths,
        no_masses=no_masses,
        no_runs=no_runs,
    )


def initial_state(const: Constants) -> ForwardState:
    """The loop state before row 0: nothing computed, omission on, no window."""
    m, dtype = const.m, const.dtype
    return ForwardState(
        row=jnp.int32(0),
        omit=jnp.bool_(True),
        windowed=jnp.bool_(False),
        window=jnp.int32(0),
        firsts=jnp.full((m, const.length), -jnp.inf, dtype),
        log_total=jnp.full((m, const.width), -jnp.inf, dtype),
        masses=jnp.zeros((2, m, const.width // const.block), dtype),
        first_max=jnp.full((m,), -jnp.inf, dtype),
        offsets=jnp.zeros((m,), dtype),
        run_weight=jnp.full((m, m), -jnp.inf, dtype),
        log_omitted=jnp.asarray(-jnp.inf, dtype),
    )
