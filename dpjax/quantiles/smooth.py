"""CSmooth: quantiles by smooth sensitivity with Laplace log-normal noise (concentrated DP).

Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1 baseline, after Bun and Steinke (NeurIPS 2019),
"Average-case averages", Sec. 3.1.1, with the smooth sensitivity of an order statistic of Nissim,
Raskhodnikova, Smith (STOC 2007), Sec. 3.1. For the order statistic ``x_(r)``,
``r = floor((n - 1) q)`` (0-based, sentinels ``x_(-1) = a``, ``x_(n) = b``):

    S_t(X) = max_{-1 <= i <= r <= j <= n} exp(-t max(j - i - 1, 0)) (x_(j) - x_(i)),

and the release is ``x_(r) + S_t(X) Z / s`` with ``Z = Lap(0, 1) exp(sigma N(0, 1))`` (Laplace
log-normal), ``sigma`` the positive root of ``(5 eps'/t) sigma^3 - 5 sigma^2 - 1 = 0`` and
``s = exp(-1.5 sigma^2) (eps' - t/sigma)``: each quantile is ``eps'^2/2``-zCDP under swap. With
``eps' = epsilon / sqrt(m)`` the ``m`` quantiles are ``epsilon^2/2``-zCDP together (the same zCDP
that pure ``epsilon``-DP implies, the paper's comparison). Outputs are clipped to the bounds and
sorted (post-processing).

``t`` is a tuning parameter; like the paper, :func:`csmooth_default_t` tunes it on N(0, 1) data of
the same size (never on the private data): for each quantile the ``t`` of a 50-point log grid on
``[0.01, 1]`` with the smallest noise variance ``2 S_t^2 / (e^{-5 sigma^2} (eps' - t/sigma)^2)``,
averaged over 2 synthetic datasets (the
authors' code uses 2 by default, 5 for the paper's runs).

``S_t`` is an ``O(n^2)`` masked maximum (rows in batches), computed once per dataset under ``vmap``
over keys; fine for the paper's n = 1000 and up to a few 10^4.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax import noise
from dpjax.accounting import ZCDP
from dpjax.quantiles.intervals import check_bounds, check_data, check_quantiles, gaps
from dpjax.validation import check_epsilon

T_GRID = np.logspace(-2, 0, 50)
TUNING_DATASETS = 2


@jax.jit
def log_smooth_sensitivity(edges, rank, t) -> jax.Array:
    """``log S_t`` of the order statistic ``rank`` (0-based) from ``edges = [a, x_(0..n-1), b]``.

    ``t`` may be an array (the result then has its shape): the pairs are scanned once for all t.
    """
    size = edges.shape[0]  # n + 2; padded index = data index + 1
    t = jnp.asarray(t, edges.dtype)
    index = jnp.arange(size)
    pivot = rank + 1

    def row(i):
        spread = edges - edges[i]
        valid = (index >= pivot) & (spread > 0) & (i <= pivot)
        log_spread = jnp.log(jnp.where(valid, spread, 1))
        distance = jnp.maximum(index - i - 1, 0).astype(edges.dtype)
        values = log_spread - t[..., None] * distance
        return jnp.max(jnp.where(valid, values, -jnp.inf), axis=-1)

    return jnp.max(lax.map(row, index, batch_size=64), axis=0)


def lln_parameters(epsilon_each: float, t: float) -> tuple[float, float]:
    """``(sigma, log s)`` of the Laplace log-normal release for ``eps'`` and ``t`` (BS19, Sec. 3.1.1)."""
    # The cubic is -1 at sigma = t/eps' and increasing beyond, so its real root has eps' > t/sigma.
    roots = np.roots([5 * epsilon_each / t, -5.0, 0.0, -1.0])
    sigma = float(max(r.real for r in roots if abs(r.imag) < 1e-9 and r.real > 0))
    return sigma, -1.5 * sigma**2 + math.log(epsilon_each - t / sigma)


@functools.cache
def csmooth_default_t(n: int, qs: tuple[float, ...], epsilon_each: float, bounds: tuple[float, float]):
    """Per-quantile ``t`` tuned on N(0, 1) data (data independent; see the module docstring)."""
    sigmas, log_s = np.array([lln_parameters(epsilon_each, t) for t in T_GRID]).T
    with jax.ensure_compile_time_eval():  # concrete even when csmooth is being traced
        return _tune(n, qs, sigmas, log_s, bounds)


def _tune(n, qs, sigmas, log_s, bounds):
    rng = np.random.default_rng(0)
    chosen = np.zeros(len(qs))
    for _ in range(TUNING_DATASETS):
        edges, _ = gaps(jnp.asarray(rng.normal(0.0, 1.0, n)), *bounds)
        for index, q in enumerate(qs):
            log_sens = np.asarray(log_smooth_sensitivity(edges, math.floor((n - 1) * q), T_GRID), np.float64)
            log_var = 2 * log_sens + 2 * sigmas**2 - 2 * log_s  # log(S^2 e^{2 sigma^2} / s^2) + log 2
            chosen[index] += T_GRID[np.argmin(log_var)] / TUNING_DATASETS
    return tuple(float(t) for t in chosen)


def csmooth(key, x, qs, epsilon: float, *, bounds, t=None) -> jax.Array:
    """CSmooth quantiles (Gillenwater et al. 2021, Sec. 5.1; Bun and Steinke 2019, Sec. 3.1.1).

    Neighbouring relation: swap (smooth sensitivity is defined for swap neighbours). Guarantee:
    ``epsilon^2/2``-zCDP for all ``m`` quantiles together (:func:`csmooth_guarantee`), each
    released with ``eps' = epsilon / sqrt(m)``.

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` with ``n >= 1``; clamped to ``bounds``.
      qs: ``m`` strictly increasing levels in [0, 1].
      epsilon: privacy parameter (of the zCDP ``rho = epsilon^2/2``), > 0.
      bounds: ``(a, b)`` with ``a < b``.
      t: smoothing parameter, a scalar or one per quantile, in ``(0, eps' sigma)``; by default
        :func:`csmooth_default_t` (tuned on N(0, 1) data of the same size).

    Returns:
      Shape ``(m,)``, sorted, in ``[a, b]``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000,))
      >>> quartiles = csmooth(jax.random.key(0), x, [0.25, 0.5, 0.75], 1.0, bounds=(-10, 10))
    """
    bounds = check_bounds(bounds)
    qs = check_quantiles(qs)
    epsilon = check_epsilon(epsilon)
    x = check_data(x)
    n = x.shape[0]
    if n == 0:
        raise ValueError("x must not be empty for CSmooth (the order statistic is undefined).")
    epsilon_each = epsilon / math.sqrt(qs.size)
    if t is None:
        t = csmooth_default_t(n, tuple(float(q) for q in qs), epsilon_each, bounds)
    ts = np.broadcast_to(np.asarray(t, np.float64), qs.shape)
    params = [lln_parameters(epsilon_each, float(tj)) for tj in ts]
    edges, _ = gaps(x, *bounds)
    dtype = edges.dtype
    laplace_key, normal_key = jax.random.split(key)
    lap = noise.laplace(laplace_key, qs.shape, 1.0, dtype)
    gauss = noise.gaussian(normal_key, qs.shape, 1.0, dtype)
    releases = []
    for index, (q, tj, (sigma, log_s)) in enumerate(zip(qs, ts, params, strict=True)):
        rank = math.floor((n - 1) * q)
        log_scale = log_smooth_sensitivity(edges, rank, float(tj)) - log_s
        magnitude = jnp.exp(log_scale + jnp.log(jnp.abs(lap[index])) + sigma * gauss[index])
        releases.append(edges[rank + 1] + jnp.sign(lap[index]) * magnitude)
    return jnp.sort(jnp.clip(jnp.stack(releases), bounds[0], bounds[1]))


def csmooth_guarantee(epsilon: float) -> ZCDP:
    """CSmooth's guarantee: ``epsilon^2/2``-zCDP (``m`` releases of ``(epsilon/sqrt(m))^2/2``)."""
    return ZCDP(check_epsilon(epsilon) ** 2 / 2)


__all__ = ["csmooth", "csmooth_default_t", "csmooth_guarantee"]
