"""The row steps of JointExp's forward pass: row 0, a whole row (the Toeplitz step plus the kept
runs) and a row in a window (``forward_tables``)."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpjax._src.quantiles.joint_exp_layout import UNIT, block_masses, outside_window, place_window
from dpjax._src.quantiles.joint_exp_linear import (
    block_frames,
    sampler_masses,
    toeplitz_linear,
    toeplitz_linear_with_masses,
    window_values,
)
from dpjax._src.quantiles.joint_exp_state import Constants, ForwardState, Row
from dpjax._src.quantiles.joint_exp_toeplitz import safe_max, toeplitz_fft, toeplitz_scan
from dpjax._src.quantiles.joint_exp_weights import log_phi

__all__ = ["first_row", "full_row", "no_window", "take_window", "windowed_row"]


def _toeplitz(method: str, x, c, nu):
    """Dispatches the Toeplitz step to ``"linear"``, ``"scan"`` or ``"fft"``."""
    return {"linear": toeplitz_linear, "scan": toeplitz_scan, "fft": toeplitz_fft}[method](x, c, nu)


def _runs(const: Constants, state: ForwardState, reference):
    """``(weight, kept, log_omitted)``: the run weights into row ``j >= 1`` (relative to
    ``D_{j-1}``; ``-inf`` where omitted), which are kept, and the certificate with the omitted
    ones added, given ``reference = max(new runs of row j)``."""
    j, offsets, rows = state.row, state.offsets, const.rows
    # Runs of k = j - l + 1 >= 2 copies of gap i (the closed form above), relative to D_{j-1}.
    weight = offsets - offsets[j - 1] - const.c * const.run_gap[j] - const.log_fact[j]
    bound = weight + state.first_max + const.run_len[j] * const.max_log_width
    kept = (rows < j) & ~(state.omit & (bound < reference - const.margin[j]))
    dropped = jnp.where((rows < j) & ~kept, offsets[j - 1] + bound, -jnp.inf)
    log_omitted = jnp.logaddexp(state.log_omitted, jax.nn.logsumexp(dropped) + const.completion[j])
    return jnp.where(kept, weight, -jnp.inf), kept, log_omitted


def first_row(const: Constants, state: ForwardState, window) -> Row:
    """Row 0, kept in a window when its mass outside is negligible (the test for runs)."""
    c, span, margin = const.c, const.span, const.margin
    first = const.widths + log_phi(c, const.gaps, const.nu[0])
    top = safe_max(first)
    start, windowed, log_omitted = jnp.int32(0), jnp.bool_(False), state.log_omitted
    if const.windows:
        start = place_window(jnp.max(first.reshape(-1, UNIT), axis=1), margin[0], span // UNIT)
        outside = outside_window(jnp.arange(const.length), start * UNIT, span)
        left_out = jax.nn.logsumexp(jnp.where(outside, first, -jnp.inf))
        # Windows are tried only where the windowed step can certify: its explicit kernel
        # blocks span up to c (2 B - 2) nats, and float32 certifies ~66. (Else a windowed row 0
        # would only give the whole rows after it a steep left edge, which blocks of 16
        # certify less often than the smooth tail of a whole row 0.)
        info = jnp.finfo(const.dtype)
        kernel_fits = c * (2 * UNIT - 2) < math.log(info.eps / info.tiny)
        windowed = state.omit & kernel_fits & (left_out < top - margin[0])
        log_omitted = jnp.where(
            windowed, jnp.logaddexp(log_omitted, left_out + const.completion[0]), log_omitted
        )
        first = jnp.where(windowed & outside, -jnp.inf, first)
    no_runs, no_masses = const.no_runs, const.no_masses
    return Row(first, first, top, jnp.max(first), no_runs, log_omitted, no_masses, start, windowed)


def full_row(const: Constants, state: ForwardState, window) -> Row:
    """Row ``j >= 1`` whole: new runs by the Toeplitz step from row ``j - 1``, plus kept runs."""
    j, c = state.row, const.c
    previous_row = lax.dynamic_index_in_dim(state.log_total, j - 1, 0, keepdims=False)
    previous = previous_row[: const.length]
    masses = const.no_masses
    if const.method == "linear":
        # The linear step also gives the block masses of the previous row.
        stepped, masses = toeplitz_linear_with_masses(
            previous, c, const.nu[j], const.block, lambda: block_masses(previous_row, c, const.block)
        )
    else:
        stepped = _toeplitz(const.method, previous, c, const.nu[j])
    new_first = jnp.where(const.gaps == 0, -jnp.inf, const.widths + stepped)
    reference = jnp.max(new_first)
    weight, _, log_omitted = _runs(const, state, reference)
    total, top = _logsumexp_recent_rows(new_first, reference, state.firsts, weight, const.widths, j, const.m)
    return Row(new_first, total, top, reference, weight, log_omitted, masses, jnp.int32(0), jnp.bool_(False))


class _Window(NamedTuple):
    """Row ``j`` in a window (:func:`windowed_row`): ``start``, its first block (of ``UNIT``
    gaps); ``new_first``, the new runs there (shape ``(span,)``); and the :class:`Row` fields
    ``reference``, ``weight``, ``log_omitted`` and ``masses``."""

    start: jax.Array
    new_first: jax.Array
    reference: jax.Array
    weight: jax.Array
    log_omitted: jax.Array
    masses: jax.Array


def windowed_row(const: Constants, state: ForwardState) -> tuple[jax.Array, _Window]:
    """Row ``j >= 1`` from a windowed row ``j - 1``, in a window of ``span`` gaps placed by a
    bound on every block: ``(fits, window)``, where ``fits`` holds when the linear step with
    blocks of ``UNIT`` is certified there, no run is kept and the bound on the row's mass
    outside is negligible (the test for runs), and ``window`` is the row there."""
    j, c, span, margin = state.row, const.c, const.span, const.margin
    assert const.block_widths is not None  # kept whenever const.windows (forward_constants)
    previous = lax.dynamic_slice_in_dim(state.log_total[j - 1], state.window * UNIT, span)
    frames = block_frames(previous, state.window, const.length, c, const.nu[j], UNIT)
    # Every new run in block b is at most its frame + log(3 B + 2) + its largest width (plus one
    # nat for the rounding of the frame's log-space sums, ~0.1 nat at |frame| ~ 10^5 in float32).
    upper = frames.frame + (math.log(3 * UNIT + 2) + 1) + const.block_widths
    start = place_window(upper, margin[j], span // UNIT)
    stepped, certified = window_values(frames, start, span, const.size)
    at = start * UNIT + jnp.arange(span)
    new_first = lax.dynamic_slice_in_dim(const.widths, start * UNIT, span) + stepped.reshape(-1)
    new_first = jnp.where(at == 0, -jnp.inf, new_first)
    reference = jnp.max(new_first)
    weight, kept, log_omitted = _runs(const, state, reference)
    outside = outside_window(jnp.arange(upper.shape[0]), start, span // UNIT)
    outside = jax.nn.logsumexp(jnp.where(outside, upper, -jnp.inf)) + math.log(UNIT)
    fits = certified & frames.certified & ~jnp.any(kept) & (outside < reference - margin[j])
    log_omitted = jnp.logaddexp(log_omitted, state.offsets[j - 1] + outside + const.completion[j])
    masses = sampler_masses(frames.left, frames.right, c, UNIT, const.block)
    return fits, _Window(start, new_first, reference, weight, log_omitted, masses)


def no_window(const: Constants, state: ForwardState) -> tuple[jax.Array, _Window]:
    """:func:`windowed_row`'s shapes, not fitting."""
    zero = jnp.asarray(0, const.dtype)
    new_first = jnp.zeros((const.span,), const.dtype)
    return jnp.bool_(False), _Window(jnp.int32(0), new_first, zero, const.no_runs, zero, const.no_masses)


def take_window(const: Constants, state: ForwardState, window: _Window) -> Row:
    """The row of a fitting window, ``-inf`` outside it."""
    row = jnp.full((const.length,), -jnp.inf, const.dtype)
    row = lax.dynamic_update_slice(row, window.new_first, (window.start * UNIT,))
    top, weight, log_omitted = window.reference, window.weight, window.log_omitted
    return Row(row, row, top, top, weight, log_omitted, window.masses, window.start, jnp.bool_(True))


_ROW_CHUNK = 4


def _logsumexp_recent_rows(first, first_max, firsts, weight, log_width, j, m: int):
    """``(total, safe_max(total))`` for the elementwise
    ``total = LSE(first, firsts[l] + weight[l] + (j - l) log_width)`` over rows ``l < j``
    (``first_max = max(first)``, which is the maximum when no row is live).

    Rows are visited backwards from ``l = j - 1`` in chunks of :data:`_ROW_CHUNK` (offsets
    ``t = j - 1 - l`` are static, so each chunk is an unrolled elementwise max and exp-sum chain that
    XLA CPU fuses into one pass); a chunk whose rows all have ``-inf`` weight (omitted, or before
    row 0) is skipped by ``lax.cond``, and so is the whole pass when every row is."""
    chunks = [range(start, min(start + _ROW_CHUNK, m - 1)) for start in range(0, m - 1, _ROW_CHUNK)]
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
