"""JointExp's forward pass: the dynamic-programming tables in ``O(m n)`` memory.

Gillenwater, Joseph, Kulesza (ICML 2021), Alg. 1 lines 5-13, with the paper's typos fixed (spec
seed-001 Sec. 3): ``alpha(j, i, k)`` is the mass of the length-``j`` prefixes ending with exactly
``k`` copies of gap ``i``,

    alpha(1, i, 1) = phi_1(i) tau(i)
    alpha(j, i, 1) = tau(i) sum_{i' < i} phi_j(i - i') alphahat(j - 1, i')      (Toeplitz step)
    alpha(j, i, k) = tau(i) phi_j(0) alpha(j - 1, i, k - 1) / k                  (k = 2..j)
    alphahat(j, i) = sum_k alpha(j, i, k),

with ``phi_j(g) = exp(-c |g - nu_j|)``, ``nu_j = (q_j - q_{j-1}) n``. Instead of the paper's
``m x (n+1) x m`` table, only two ``m x (n+1)`` tables are kept, ``log alpha(j, :, 1)`` and
``log alphahat(j, :)``: any ``alpha(j, i, k)`` follows from the first by the closed form (spec
Sec. 4.3)

    log alpha(j, i, k) = log alpha(j-k+1, i, 1) + (k-1) log tau(i) - c (N_j - N_{j-k+1}) - log k!

(``N_l = nu_1 + ... + nu_l``), which gives ``alphahat(j, :)`` as one fused log-sum-exp over the
earlier rows of the first table (``O(m n)`` reads per step, ``O(m^2 n)`` in all, no ``m x (n+1)``
run-length state) and is what the backward sampler uses. Each row is renormalised by its maximum
(``offsets``), which is exact for sampling and keeps float32 logs near 0; the offsets are kept so
the log normaliser is exact too. The differences ``N_j - N_l`` are formed in float64 before the
cast, so float32 keeps their relative precision even at ``n = 10^6``.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax.quantiles.joint_exp_toeplitz import safe_max, toeplitz


class Tables(NamedTuple):
    """The forward tables of one dataset (every log array is renormalised per row).

    Attributes:
      edges: gap end points ``[a, x_1, ..., x_n, b]``, shape ``(n + 2,)``.
      log_width: ``log tau``, shape ``(n + 1,)``.
      log_first: ``log alpha(j, :, 1) - D_j``, shape ``(m, n + 1)``.
      log_total: ``log alphahat(j, :) - D_j``, shape ``(m, n + 1)``.
      run_shift: ``S[j, l] = D_l - D_j - c (N_j - N_l)`` for ``l <= j`` (the closed form's constant
        for a run of ``j - l + 1`` copies ending at row ``j``), shape ``(m, m)``.
      offsets: ``D_j``, the cumulative renormalisation, shape ``(m,)``.
      c: ``epsilon / (2 Delta)``.
      nu: the targets ``nu_1..nu_{m+1}``, shape ``(m + 1,)``.
      block_left: ``LSE_{t < B} log_total[j, bB + t] + c t``, shape ``(m, blocks)``.
      block_right: ``LSE_{t < B} log_total[j, bB + t] - c t``, shape ``(m, blocks)``; with
        ``block_left`` these give the mass of a whole block of gaps under the backward edge
        weight ``exp(-c |hi - i - nu|)`` in ``O(1)`` (see :func:`sampling_block`).
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


def log_phi(c, gap, nu):
    """``log phi(g) = -c |g - nu|`` (the edge weight of a step of ``g`` gaps toward target ``nu``)."""
    return -c * jnp.abs(gap - nu)


def sampling_block(size: int) -> int:
    """Gaps per block of the backward sampler: about ``sqrt(n)``, so a step costs ``O(sqrt(n))``."""
    return max(8, math.isqrt(max(size - 1, 0)) + 1)


def log_factorials(m: int) -> np.ndarray:
    """``log k!`` for ``k = 0..m``."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, m + 1, dtype=np.float64)))])


def forward(edges, log_width, levels: np.ndarray, c: float, method: str) -> Tables:
    """Runs the forward pass for the concrete levels ``levels`` (shape ``(m,)``), compiled once per
    (levels, method, shapes); ``c`` may be traced."""
    return _forward(edges, log_width, tuple(float(q) for q in levels), c, method)


@functools.partial(jax.jit, static_argnames=("levels", "method"))
def _forward(edges, log_width, levels: tuple, c, method: str) -> Tables:
    levels = np.asarray(levels, np.float64)
    dtype = log_width.dtype
    size = log_width.shape[0]
    n = size - 1
    m = levels.size
    nu_np = np.diff(np.concatenate([[0.0], levels, [1.0]])) * n
    cum_nu = np.concatenate([[0.0], np.cumsum(nu_np[:m])])  # N_0..N_m (float64, exact differences)
    rows = np.arange(m)
    # Static part of the run weights: run_gap[j, l] = N_j - N_l, run_len[j, l] = j - l = k - 1.
    run_gap = jnp.asarray(cum_nu[rows + 1, None] - cum_nu[None, rows + 1], dtype)
    run_len = rows[:, None] - rows[None, :]
    log_fact = jnp.asarray(log_factorials(m + 1)[np.clip(run_len + 1, 0, m)], dtype)
    # Rows l >= j are masked by a -inf weight; a length of 1 there keeps 0 * -inf (NaN) out.
    run_len = jnp.asarray(np.maximum(run_len, 1), dtype)
    nu = jnp.asarray(nu_np, dtype)
    c_arr = jnp.asarray(c, dtype)
    gaps = jnp.arange(size, dtype=dtype)

    first = log_width + log_phi(c_arr, gaps, nu[0])
    top = safe_max(first)
    firsts = jnp.full((m, size), -jnp.inf, dtype).at[0].set(first - top)
    offsets = jnp.zeros((m,), dtype).at[0].set(top)

    def step(carry, j):
        firsts, total, offsets = carry
        # New runs: Toeplitz step from the previous row (relative to D_{j-1}), none at gap 0.
        new_first = jnp.where(gaps == 0, -jnp.inf, log_width + toeplitz(method, total, c_arr, nu[j]))
        # Runs of k = j - l + 1 >= 2 copies of gap i (closed form, spec Sec. 4.3), relative to D_{j-1}.
        weight = offsets - offsets[j - 1] - c_arr * run_gap[j] - log_fact[j]
        weight = jnp.where(rows < j, weight, -jnp.inf)
        total = _logsumexp_earlier_rows(
            new_first, lambda l: firsts[l] + weight[l] + run_len[j, l] * log_width, j, m
        )
        top = safe_max(total)
        firsts = lax.dynamic_update_index_in_dim(firsts, new_first - top, j, 0)
        offsets = offsets.at[j].set(offsets[j - 1] + top)
        return (firsts, total - top, offsets), total - top

    (firsts, _, offsets), totals = lax.scan(step, (firsts, firsts[0], offsets), jnp.arange(1, m))
    log_total = jnp.concatenate([firsts[:1], totals])
    run_shift = offsets[None, :] - offsets[:, None] - c_arr * run_gap
    block_left, block_right = _block_masses(log_total, c_arr)
    return Tables(edges, log_width, firsts, log_total, run_shift, offsets, c_arr, nu, block_left, block_right)


ROW_CHUNK = 8


def _logsumexp_earlier_rows(first, row, j, m: int):
    """Elementwise ``LSE(first, row(0), ..., row(j - 1))`` for a traced ``j <= m``.

    Written as unrolled elementwise max and exp-sum chains, which XLA CPU fuses into one pass per
    row (several times faster than a reduction over a stacked ``(m, n)`` array), over chunks of
    :data:`ROW_CHUNK` rows; a chunk that starts at or after row ``j`` (all ``-inf``) is skipped by
    ``lax.cond``, so step ``j`` reads about ``j`` rows rather than ``m``."""
    chunks = [range(start, min(start + ROW_CHUNK, m)) for start in range(0, m, ROW_CHUNK)]

    def over_chunks(value, combine):
        for chunk in chunks:

            def fold(value, chunk=chunk):
                for l in chunk:
                    value = combine(value, row(l))
                return value

            value = lax.cond(chunk[0] < j, fold, lambda value: value, value)
        return value

    top = over_chunks(first, jnp.maximum)
    top = jnp.where(jnp.isfinite(top), top, 0)
    total = over_chunks(jnp.exp(first - top), lambda acc, r: acc + jnp.exp(r - top))
    return top + jnp.log(total)


def pad_to_blocks(log_total):
    """``log_total`` padded with ``-inf`` to whole blocks of :func:`sampling_block` gaps."""
    size = log_total.shape[1]
    block = sampling_block(size)
    width = -(-size // block) * block
    return jnp.pad(log_total, ((0, 0), (0, width - size)), constant_values=-jnp.inf)


def _block_masses(log_total, c):
    """Per block of :func:`sampling_block` gaps, ``LSE log_total + c t`` and ``LSE log_total - c t``."""
    block = sampling_block(log_total.shape[1])
    padded = pad_to_blocks(log_total)
    padded = padded.reshape(padded.shape[0], -1, block)
    ramp = c * jnp.arange(block, dtype=log_total.dtype)
    return jax.nn.logsumexp(padded + ramp, axis=2), jax.nn.logsumexp(padded - ramp, axis=2)


def log_normalizer(tables: Tables) -> jax.Array:
    """``log Z = log sum_s exp(c u(s)) prod tau / gamma(s)``, the log of the continuous normaliser."""
    n = tables.log_width.shape[0] - 1
    gaps = jnp.arange(n + 1, dtype=tables.log_width.dtype)
    last = log_phi(tables.c, n - gaps, tables.nu[-1])
    return tables.offsets[-1] + jax.nn.logsumexp(tables.log_total[-1] + last)
