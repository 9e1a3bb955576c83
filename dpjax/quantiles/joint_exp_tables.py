"""JointExp's forward pass: the dynamic-programming tables in ``O(m n)`` memory.

Gillenwater, Joseph, Kulesza (ICML 2021), Alg. 1 lines 5-13, with the paper's typos fixed (spec
seed-001 Sec. 3): ``alpha(j, i, k)`` is the mass of the length-``j`` prefixes ending with exactly
``k`` copies of gap ``i``,

    alpha(1, i, 1) = phi_1(i) tau(i)
    alpha(j, i, 1) = tau(i) sum_{i' < i} phi_j(i - i') alphahat(j - 1, i')      (Toeplitz step)
    alpha(j, i, k) = tau(i) phi_j(0) alpha(j - 1, i, k - 1) / k                  (k = 2..j)
    alphahat(j, i) = sum_k alpha(j, i, k),

with ``phi_j(g) = exp(-c |g - nu_j|)``, ``nu_j = (q_j - q_{j-1}) n``. Instead of the paper's
``m x (n+1) x m`` table, a ``lax.scan`` over ``j`` carries the current ``alpha(j, :, 1..m)`` and
emits two ``m x (n+1)`` tables, ``log alpha(j, :, 1)`` and ``log alphahat(j, :)``. Any
``alpha(j, i, k)`` is recovered from the first by the closed form (spec Sec. 4.3)

    log alpha(j, i, k) = log alpha(j-k+1, i, 1) + (k-1) log tau(i) - c (N_j - N_{j-k+1}) - log k!

(``N_l = nu_1 + ... + nu_l``), which is what the backward sampler needs. Each row is renormalised
by its maximum (``offsets``), which is exact for sampling and keeps float32 logs near 0; the
offsets are kept so the log normaliser is exact too.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax.quantiles.joint_exp_toeplitz import toeplitz


class Tables(NamedTuple):
    """The forward tables of one dataset (every log array is renormalised per row).

    Attributes:
      edges: gap end points ``[a, x_1, ..., x_n, b]``, shape ``(n + 2,)``.
      log_width: ``log tau``, shape ``(n + 1,)``.
      log_first: ``log alpha(j, :, 1) - D_j``, shape ``(m, n + 1)``.
      log_total: ``log alphahat(j, :) - D_j``, shape ``(m, n + 1)``.
      shift: ``G_j = D_j + c N_j``, shape ``(m,)`` (the closed form's per-row constant).
      offsets: ``D_j``, the cumulative renormalisation, shape ``(m,)``.
      c: ``epsilon / (2 Delta)``.
      nu: the targets ``nu_1..nu_{m+1}``, shape ``(m + 1,)``.
    """

    edges: jax.Array
    log_width: jax.Array
    log_first: jax.Array
    log_total: jax.Array
    shift: jax.Array
    offsets: jax.Array
    c: jax.Array
    nu: jax.Array


def log_phi(c, gap, nu):
    """``log phi(g) = -c |g - nu|`` (the edge weight of a step of ``g`` gaps toward target ``nu``)."""
    return -c * jnp.abs(gap - nu)


def _normalise(state, total):
    top = jnp.max(total)
    top = jnp.where(jnp.isfinite(top), top, jnp.zeros_like(top))
    return state - top, total - top, top


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
    nu = jnp.asarray(nu_np, dtype)
    c_arr = jnp.asarray(c, dtype)
    gaps = jnp.arange(size, dtype=dtype)
    log_run = jnp.asarray(np.log(np.arange(2, m + 1, dtype=np.float64)), dtype)[:, None]  # log k, k >= 2

    first = log_width + log_phi(c_arr, gaps, nu[0])
    state = jnp.full((m, size), -jnp.inf, dtype).at[0].set(first)
    state, total, top = _normalise(state, first)

    def step(carry, nu_j):
        state, total, offset = carry
        new_first = (log_width + toeplitz(method, total, c_arr, nu_j)).at[0].set(-jnp.inf)
        repeat = log_width - c_arr * nu_j
        longer = jnp.where(jnp.isfinite(repeat), state[:-1] + repeat - log_run, -jnp.inf)
        state = jnp.concatenate([new_first[None], longer])
        state, total, top = _normalise(state, jax.nn.logsumexp(state, axis=0))
        offset = offset + top
        return (state, total, offset), (state[0], total, offset)

    _, (firsts, totals, offsets) = lax.scan(step, (state, total, top), nu[1:m])
    log_first = jnp.concatenate([state[:1], firsts])
    log_total = jnp.concatenate([total[None], totals])
    offsets = jnp.concatenate([top[None], offsets])
    shift = offsets + c_arr * jnp.asarray(np.cumsum(nu_np[:m]), dtype)
    return Tables(edges, log_width, log_first, log_total, shift, offsets, c_arr, nu)


def log_normalizer(tables: Tables) -> jax.Array:
    """``log Z = log sum_s exp(c u(s)) prod tau / gamma(s)``, the log of the continuous normaliser."""
    n = tables.log_width.shape[0] - 1
    gaps = jnp.arange(n + 1, dtype=tables.log_width.dtype)
    last = log_phi(tables.c, n - gaps, tables.nu[-1])
    return tables.offsets[-1] + jax.nn.logsumexp(tables.log_total[-1] + last)
