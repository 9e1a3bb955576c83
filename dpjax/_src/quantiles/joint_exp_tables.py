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
import numpy as np
from jax import lax

from dpjax._src.numerics import ceil_div
from dpjax._src.quantiles.joint_exp_linear import (
    LINEAR_BLOCKS,
    block_frames,
    sampler_masses,
    toeplitz_linear,
    toeplitz_linear_with_masses,
    window_values,
)
from dpjax._src.quantiles.joint_exp_toeplitz import aligned_length, safe_max, toeplitz_fft, toeplitz_scan

__all__ = [
    "JointExpMethod",
    "Tables",
]

JointExpMethod: TypeAlias = Literal["linear", "scan", "fft"]
"""How JointExp's forward pass is computed (static)."""
METHODS: tuple[JointExpMethod, ...] = get_args(JointExpMethod)
"""The Toeplitz steps of the forward pass: linear-space block products with a certified exact
fallback (:mod:`dpjax.quantiles.joint_exp_linear`), exact log-space recurrences, and the paper's
max-shifted FFT (:mod:`dpjax.quantiles.joint_exp_toeplitz`)."""


def _toeplitz(method: str, x, c, nu):
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


def _sampling_block(size: int) -> int:
    """Gaps per block of the backward sampler: about ``sqrt(n)``, so a step costs ``O(sqrt(n))``;
    a multiple of every :data:`~dpjax.quantiles.joint_exp_linear.LINEAR_BLOCKS` size (so the block
    masses follow from the linear step's block summaries, and their loops vectorize: see
    ``BLOCK_ALIGN``)."""
    unit = LINEAR_BLOCKS[0]
    return ceil_div(max(unit, math.isqrt(max(size - 1, 0)) + 1), unit) * unit


def log_factorials(m: int) -> np.ndarray:
    """``log k!`` for ``k = 0..m``."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, m + 1, dtype=np.float64)))])


class _Row(NamedTuple):
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


class _ForwardState(NamedTuple):
    """The loop state of :func:`forward_tables` (one ``lax.while_loop`` over the rows).

    Attributes:
      row: ``j``, the next row to compute (int32; back to 0 on a restart).
      omit: whether negligible runs are still being omitted (false after a restart).
      windowed: whether row ``j - 1`` is kept in a window (and row ``j`` is tried in one).
      window: the first block (of ``LINEAR_BLOCKS[0]`` gaps) of row ``j - 1``'s window (int32).
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
    windowed: jax.Array
    window: jax.Array
    firsts: jax.Array
    log_total: jax.Array
    masses: jax.Array
    first_max: jax.Array
    offsets: jax.Array
    run_weight: jax.Array
    log_omitted: jax.Array


_OMITTED_MASS = 2.0**-64
"""Certified upper bound on the probability of the gap sequences that the forward pass leaves out
(:func:`forward_tables`), so a release's law is within this total variation of the exact one."""


def forward_tables(
    edges,
    log_width,
    levels,
    c,
    method: str,
    margin_nats=None,
    restart_above: float = _OMITTED_MASS,
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
    the window alone (:func:`~dpjax.quantiles.joint_exp_linear.block_frames` and
    :func:`~dpjax.quantiles.joint_exp_linear.window_values`: ``O(span + n / 32)`` instead of
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
    loop is :func:`_step`: one of the row steps :func:`_first_row` (row 0), :func:`_full_row` (a whole
    row) or :func:`_windowed_row` (a row in a window), over the pass's :class:`_Constants`.
    """
    const = _constants(log_width, levels, c, method, margin_nats, span)
    final = lax.while_loop(
        lambda state: state.row < const.m,
        functools.partial(_step, const, restart_above),
        _initial_state(const),
    )
    return _tables(const, edges, log_width, final)


class _Constants(NamedTuple):
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


_UNIT = LINEAR_BLOCKS[0]
"""Gaps per block of the windows (their placement, bounds and certificate)."""


def _constants(log_width, levels, c, method: str, margin_nats, span: int | None) -> _Constants:
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
        margin = -math.log(_OMITTED_MASS) + math.log(m * size) + later * jnp.maximum(log_range - typical, 0)
    else:
        margin = jnp.full((m,), margin_nats, dtype)
    max_log_width = jnp.max(log_width)
    # Rows are worked at the aligned length (zero-width gaps past n, so every entry there is -inf).
    length = aligned_length(size)
    widths = jnp.pad(log_width, (0, length - size), constant_values=-jnp.inf)
    gaps = jnp.arange(length, dtype=dtype)
    last_edge = log_phi(c_arr, n - gaps, nu[-1])

    span = _window_span(size) if span is None else span
    if span < 0 or span % _UNIT:
        raise ValueError(f"span must be 0 (no windows) or a positive multiple of {_UNIT} gaps, got {span}")
    windows = method == "linear" and 0 < span < length
    block = _sampling_block(size)
    width = _padded_width(size)
    no_masses = jnp.zeros((2, width // block), dtype)
    no_runs = jnp.full((m,), -jnp.inf, dtype)
    # The largest log width per block of ``_UNIT`` gaps (for the windows' bounds), once per dataset.
    block_widths = jnp.max(widths.reshape(-1, _UNIT), axis=1) if windows else None
    return _Constants(
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


def _initial_state(const: _Constants) -> _ForwardState:
    """The loop state before row 0: nothing computed, omission on, no window."""
    m, dtype = const.m, const.dtype
    return _ForwardState(
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


def _base(state: _ForwardState):
    """``D_{j-1}`` (0 for row 0)."""
    return jnp.where(state.row == 0, 0, state.offsets[state.row - 1])


def _runs(const: _Constants, state: _ForwardState, reference):
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


def _first_row(const: _Constants, state: _ForwardState, window) -> _Row:
    """Row 0, kept in a window when its mass outside is negligible (the test for runs)."""
    c, span, margin = const.c, const.span, const.margin
    first = const.widths + log_phi(c, const.gaps, const.nu[0])
    top = safe_max(first)
    start, windowed, log_omitted = jnp.int32(0), jnp.bool_(False), state.log_omitted
    if const.windows:
        start = _place_window(jnp.max(first.reshape(-1, _UNIT), axis=1), margin[0], span // _UNIT)
        outside = _outside_window(jnp.arange(const.length), start * _UNIT, span)
        left_out = jax.nn.logsumexp(jnp.where(outside, first, -jnp.inf))
        # Windows are tried only where the windowed step can certify: its explicit kernel
        # blocks span up to c (2 B - 2) nats, and float32 certifies ~66. (Else a windowed row 0
        # would only give the whole rows after it a steep left edge, which blocks of 16
        # certify less often than the smooth tail of a whole row 0.)
        info = jnp.finfo(const.dtype)
        kernel_fits = c * (2 * _UNIT - 2) < math.log(info.eps / info.tiny)
        windowed = state.omit & kernel_fits & (left_out < top - margin[0])
        log_omitted = jnp.where(
            windowed, jnp.logaddexp(log_omitted, left_out + const.completion[0]), log_omitted
        )
        first = jnp.where(windowed & outside, -jnp.inf, first)
    no_runs, no_masses = const.no_runs, const.no_masses
    return _Row(first, first, top, jnp.max(first), no_runs, log_omitted, no_masses, start, windowed)


def _full_row(const: _Constants, state: _ForwardState, window) -> _Row:
    """Row ``j >= 1`` whole: new runs by the Toeplitz step from row ``j - 1``, plus kept runs."""
    j, c = state.row, const.c
    previous_row = lax.dynamic_index_in_dim(state.log_total, j - 1, 0, keepdims=False)
    previous = previous_row[: const.length]
    masses = const.no_masses
    if const.method == "linear":
        # The linear step also gives the block masses of the previous row.
        stepped, masses = toeplitz_linear_with_masses(
            previous, c, const.nu[j], const.block, lambda: _block_masses(previous_row, c, const.block)
        )
    else:
        stepped = _toeplitz(const.method, previous, c, const.nu[j])
    new_first = jnp.where(const.gaps == 0, -jnp.inf, const.widths + stepped)
    reference = jnp.max(new_first)
    weight, _, log_omitted = _runs(const, state, reference)
    total, top = _logsumexp_recent_rows(new_first, reference, state.firsts, weight, const.widths, j, const.m)
    return _Row(new_first, total, top, reference, weight, log_omitted, masses, jnp.int32(0), jnp.bool_(False))


class _Window(NamedTuple):
    """Row ``j`` in a window (:func:`_windowed_row`): ``start``, its first block (of ``_UNIT``
    gaps); ``new_first``, the new runs there (shape ``(span,)``); and the :class:`Row` fields
    ``reference``, ``weight``, ``log_omitted`` and ``masses``."""

    start: jax.Array
    new_first: jax.Array
    reference: jax.Array
    weight: jax.Array
    log_omitted: jax.Array
    masses: jax.Array


def _windowed_row(const: _Constants, state: _ForwardState) -> tuple[jax.Array, _Window]:
    """Row ``j >= 1`` from a windowed row ``j - 1``, in a window of ``span`` gaps placed by a
    bound on every block: ``(fits, window)``, where ``fits`` holds when the linear step with
    blocks of ``_UNIT`` is certified there, no run is kept and the bound on the row's mass
    outside is negligible (the test for runs), and ``window`` is the row there."""
    j, c, span, margin = state.row, const.c, const.span, const.margin
    previous = lax.dynamic_slice_in_dim(state.log_total[j - 1], state.window * _UNIT, span)
    frames = block_frames(previous, state.window, const.length, c, const.nu[j], _UNIT)
    # Every new run in block b is at most its frame + log(3 B + 2) + its largest width (plus one
    # nat for the rounding of the frame's log-space sums, ~0.1 nat at |frame| ~ 10^5 in float32).
    upper = frames.frame + (math.log(3 * _UNIT + 2) + 1) + const.block_widths
    start = _place_window(upper, margin[j], span // _UNIT)
    stepped, certified = window_values(frames, start, span, const.size)
    at = start * _UNIT + jnp.arange(span)
    new_first = lax.dynamic_slice_in_dim(const.widths, start * _UNIT, span) + stepped.reshape(-1)
    new_first = jnp.where(at == 0, -jnp.inf, new_first)
    reference = jnp.max(new_first)
    weight, kept, log_omitted = _runs(const, state, reference)
    outside = _outside_window(jnp.arange(upper.shape[0]), start, span // _UNIT)
    outside = jax.nn.logsumexp(jnp.where(outside, upper, -jnp.inf)) + math.log(_UNIT)
    fits = certified & frames.certified & ~jnp.any(kept) & (outside < reference - margin[j])
    log_omitted = jnp.logaddexp(log_omitted, state.offsets[j - 1] + outside + const.completion[j])
    masses = sampler_masses(frames.left, frames.right, c, _UNIT, const.block)
    return fits, _Window(start, new_first, reference, weight, log_omitted, masses)


def _no_window(const: _Constants, state: _ForwardState) -> tuple[jax.Array, _Window]:
    """:func:`_windowed_row`'s shapes, not fitting."""
    zero = jnp.asarray(0, const.dtype)
    new_first = jnp.zeros((const.span,), const.dtype)
    return jnp.bool_(False), _Window(jnp.int32(0), new_first, zero, const.no_runs, zero, const.no_masses)


def _take_window(const: _Constants, state: _ForwardState, window: _Window) -> _Row:
    """The row of a fitting window, ``-inf`` outside it."""
    row = jnp.full((const.length,), -jnp.inf, const.dtype)
    row = lax.dynamic_update_slice(row, window.new_first, (window.start * _UNIT,))
    top, weight, log_omitted = window.reference, window.weight, window.log_omitted
    return _Row(row, row, top, top, weight, log_omitted, window.masses, window.start, jnp.bool_(True))


def _step(const: _Constants, restart_above: float, state: _ForwardState) -> _ForwardState:
    """Computes row ``j`` (first, whole or windowed) and writes it into the tables in place; after
    the last row, certifies the omissions or restarts from row 0 without them."""
    j, m, block = state.row, const.m, const.block
    first_row, full_row = functools.partial(_first_row, const), functools.partial(_full_row, const)
    if const.windows:
        windowed_row, no_window = (functools.partial(f, const) for f in (_windowed_row, _no_window))
        fits, window = lax.cond(state.windowed & (j > 0), windowed_row, no_window, state)
        branches = (first_row, full_row, functools.partial(_take_window, const))
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
        masses = lax.dynamic_update_index_in_dim(state.masses, _block_masses(total, const.c, block), j, 1)
    offsets = state.offsets.at[j].set(_base(state) + row.top)
    # After the last row: certify (log_omitted relative to log Z') or restart without omitting.
    log_omitted = lax.cond(
        j == m - 1,
        lambda: row.log_omitted - offsets[j] - jax.nn.logsumexp(total[: const.length] + const.last_edge),
        lambda: row.log_omitted,
    )
    restart = (j == m - 1) & state.omit & (log_omitted > math.log(restart_above))
    return _ForwardState(
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


def _tables(const: _Constants, edges, log_width, final: _ForwardState) -> Tables:
    """The :class:`Tables` from the loop's final state."""
    masses, offsets, rows = final.masses, final.offsets, const.rows
    if const.method == "linear":
        last = _block_masses(final.log_total[const.m - 1], const.c, const.block)
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


_WINDOW_FRACTION = 16
"""The forward pass keeps a row in a window of about this fraction of the row when the rest is
negligible (:func:`forward_tables`)."""

_MIN_WINDOW = 2048
"""No windows narrower than this many gaps: below, a whole row costs little more than a window."""


def _window_span(size: int) -> int:
    """The static window width (gaps) of the forward pass for rows of ``size`` gaps: about
    ``1 / WINDOW_FRACTION`` of the row at its aligned length, or 0 (no windows) below
    :data:`MIN_WINDOW`."""
    span = aligned_length(ceil_div(aligned_length(size), _WINDOW_FRACTION))
    return span if span >= _MIN_WINDOW else 0


def _place_window(upper, margin, rows: int):
    """The first block of a window of ``rows`` blocks centred on the blocks whose bound ``upper`` is
    within ``max(margin, 0)`` of the largest (clamped into the row)."""
    index = jnp.arange(upper.shape[0], dtype=jnp.int32)
    above = upper >= jnp.max(upper) - jnp.maximum(margin, 0)
    low = jnp.min(jnp.where(above, index, upper.shape[0]))
    high = jnp.max(jnp.where(above, index, -1))
    return jnp.clip((low + high + 1 - rows) // 2, 0, upper.shape[0] - rows).astype(jnp.int32)


def _outside_window(index, start, width: int):
    """Whether each of ``index`` lies outside ``[start, start + width)``."""
    return (index < start) | (index >= start + width)


_ROW_CHUNK = 4


def _logsumexp_recent_rows(first, first_max, firsts, weight, log_width, j, m: int):
    """``(total, safe_max(total))`` for the elementwise
    ``total = LSE(first, firsts[l] + weight[l] + (j - l) log_width)`` over rows ``l < j``
    (``first_max = max(first)``, which is the maximum when no row is live).

    Rows are visited backwards from ``l = j - 1`` in chunks of :data:`ROW_CHUNK` (offsets
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


def _padded_width(size: int) -> int:
    """The row length ``aligned_length(size)`` rounded up to a whole number of :func:`sampling_block`
    blocks."""
    block = _sampling_block(size)
    return ceil_div(aligned_length(size), block) * block


def _block_masses(row, c, block: int):
    """Per block of ``block`` gaps of a padded row, ``LSE row + c t`` and ``LSE row - c t`` (stacked)."""
    padded = row.reshape(-1, block)
    ramp = c * jnp.arange(block, dtype=row.dtype)
    return jnp.stack([jax.nn.logsumexp(padded + ramp, axis=1), jax.nn.logsumexp(padded - ramp, axis=1)])


@jax.jit  # one compile per table shape, not one per eager operation
def log_normalizer(tables: Tables) -> jax.Array:
    """``log Z = log sum_s exp(c u(s)) prod tau / gamma(s)``, the log of the continuous normaliser."""
    n = tables.log_width.shape[0] - 1
    gaps = jnp.arange(n + 1, dtype=tables.log_width.dtype)
    last = log_phi(tables.c, n - gaps, tables.nu[-1])
    return tables.offsets[-1] + jax.nn.logsumexp(tables.log_total[-1, : n + 1] + last)
