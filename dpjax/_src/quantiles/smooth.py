"""CSmooth: quantiles by smooth sensitivity with Laplace log-normal noise (concentrated DP).

Gillenwater, Joseph, Kulesza (ICML 2021), Sec. 5.1 baseline, after Bun and Steinke (NeurIPS 2019),
"Average-case averages", Sec. 3.1.1, with the smooth sensitivity of an order statistic of Nissim,
Raskhodnikova, Smith (STOC 2007), Sec. 3.1. For the order statistic ``x_(r)``,
``r = floor((n - 1) q)`` (0-based, sentinels ``x_(-1) = a``, ``x_(n) = b``):

    S_t(X) = max_{-1 <= i <= r <= j <= n} exp(-t max(j - i - 1, 0)) (x_(j) - x_(i)),

and the release is ``x_(r) + S_t(X) Z / s`` with ``Z = Lap(0, 1) exp(sigma N(0, 1))`` (Laplace
log-normal), ``sigma`` the positive root of ``(5 eps'/t) sigma^3 - 5 sigma^2 - 1 = 0`` and
``s = exp(-1.5 sigma^2) (eps' - t/sigma)``: each quantile is ``eps'^2/2``-zCDP under swap. With
``eps' = sqrt(2 rho / m)`` the ``m`` quantiles are ``rho``-zCDP together. The mechanism takes the
zCDP ``rho`` it guarantees; the paper's comparison with pure ``epsilon``-DP mechanisms uses
``rho = epsilon^2/2``, the zCDP that ``epsilon``-DP implies. Outputs are clipped to the bounds and
sorted (post-processing).

``t`` is a tuning parameter; like the paper, :func:`csmooth_default_t` tunes it on N(0, 1) data of
the same size (never on the private data): for each quantile the ``t`` of a 50-point log grid on
``[0.01, 1]`` with the smallest noise variance ``2 S_t^2 / (e^{-5 sigma^2} (eps' - t/sigma)^2)``,
averaged over 2 synthetic datasets (the
authors' code uses 2 by default, 5 for the paper's runs).

Every parameter but the number of quantiles may be traced (rho, the levels, the bounds, ``t``):
``sigma`` is found by Newton's method in the graph, and the tuning runs in the graph when the levels
or bounds are traced (``O(m n^2)`` on the synthetic data; for concrete levels and bounds it is
computed once on the host and cached). All of it is in the working dtype, whichever path is taken.

``S_t`` is an ``O(n^2)`` masked maximum (rows in batches), computed once per dataset under ``vmap``
over keys; fine for the paper's n = 1000 and up to a few 10^4.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.typing import ArrayLike, DTypeLike

from dpjax._src import noise, sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import ZCDP
from dpjax._src.host_checks import check_epsilon, float_dtype, is_traced
from dpjax._src.quantiles.intervals import check_inputs, sorted_gaps
from dpjax._src.validation import Checks

_T_GRID = np.logspace(-2, 0, 50)
_TUNING_DATASETS = 2
_NEWTON_STEPS = 12


@jax.jit
def _log_smooth_sensitivity(edges, rank, t) -> jax.Array:
    """``log S_t`` of the order statistic ``rank`` (0-based) from ``edges = [a, x_(0..n-1), b]``.

    ``t`` may be an array (the result then has its shape): the pairs are scanned once for all t.
    ``rank`` and ``t`` may be traced.
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


def _lln_parameters(epsilon_each, t):
    """``(sigma, log s)`` of the Laplace log-normal release for ``eps'`` and ``t`` (BS19, Sec. 3.1.1).

    Elementwise and traceable, in the arrays' dtype. ``sigma`` is the positive root of
    ``a sigma^3 - 5 sigma^2 - 1``, ``a = 5 eps'/t``, by Newton's method from
    ``max(10/a, (2/a)^(1/3))``, where the cubic is positive and convex and which is within a factor
    2 of the root: the iterates decrease to it, and :data:`_NEWTON_STEPS` is more than the 8 steps
    float64 needs anywhere on ``a`` in ``[1e-4, 1e7]``.
    """
    a = 5 * epsilon_each / t

    def newton(_, sigma):
        return sigma - (a * sigma**3 - 5 * sigma**2 - 1) / (3 * a * sigma**2 - 10 * sigma)

    sigma = lax.fori_loop(0, _NEWTON_STEPS, newton, jnp.maximum(10 / a, jnp.cbrt(2 / a)))
    # The cubic is -1 at sigma = t/eps' and increasing beyond, so its root has eps' > t/sigma.
    return sigma, -1.5 * sigma**2 + jnp.log(epsilon_each - t / sigma)


def _ranks(n: int, levels) -> jax.Array:
    """The 0-based order statistics ``floor((n - 1) q)`` (clipped to ``[0, n - 1]``)."""
    return jnp.clip(jnp.floor((n - 1) * levels), 0, n - 1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("n", "dtype"))
def _tuning_log_sensitivity(n: int, levels, lower, upper, dtype) -> jax.Array:
    """``log S_t`` on the synthetic N(0, 1) datasets for every level and grid ``t``: shape
    ``(_TUNING_DATASETS, m, len(_T_GRID))``."""
    rng = np.random.default_rng(0)
    grid = jnp.asarray(_T_GRID, dtype)
    ranks = _ranks(n, jnp.asarray(levels, dtype))
    out = []
    for _ in range(_TUNING_DATASETS):
        edges, _ = sorted_gaps(jnp.asarray(rng.normal(0.0, 1.0, n), dtype), lower, upper)
        out.append(jnp.stack([_log_smooth_sensitivity(edges, rank, grid) for rank in ranks]))
    return jnp.stack(out)


@functools.cache
def _cached_tuning_log_sensitivity(n: int, levels: tuple, lower: float, upper: float, dtype) -> jax.Array:
    with jax.ensure_compile_time_eval():  # concrete even when csmooth is being traced
        return _tuning_log_sensitivity(n, np.asarray(levels), lower, upper, dtype)


def _tuning(n: int, levels, lower, upper, dtype) -> jax.Array:
    """:func:`_tuning_log_sensitivity`, computed once per concrete (levels, bounds), else in the graph."""
    if any(is_traced(v) for v in (levels, lower, upper)):
        return _tuning_log_sensitivity(n, levels, lower, upper, dtype)
    levels = tuple(float(q) for q in np.asarray(levels, np.float64).reshape(-1))
    return _cached_tuning_log_sensitivity(n, levels, float(lower), float(upper), np.dtype(dtype))


@jax.jit
def _tuned_t(log_sens, epsilon_each) -> jax.Array:
    """Per quantile, the grid ``t`` of least noise variance, averaged over the synthetic datasets."""
    grid = jnp.asarray(_T_GRID, log_sens.dtype)
    sigmas, log_s = _lln_parameters(jnp.asarray(epsilon_each, log_sens.dtype), grid)
    log_var = 2 * log_sens + 2 * sigmas**2 - 2 * log_s  # log(S^2 e^{2 sigma^2} / s^2) + log 2
    return jnp.mean(grid[jnp.argmin(log_var, axis=-1)], axis=0)


def csmooth_default_t(
    n: int,
    levels: ArrayLike | Sequence[float],
    epsilon_each: ArrayLike,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    dtype: DTypeLike | None = None,
) -> jax.Array:
    """Per-quantile ``t`` tuned on N(0, 1) data (data independent; see the module docstring).

    ``n`` (static) is the data size; ``levels``, ``epsilon_each`` and ``bounds`` may be traced (the
    tuning then runs in the graph; concrete levels and bounds are tuned once and cached). Computed
    in ``dtype`` (default: the default float). Returns shape ``(m,)``.
    """
    dtype = float_dtype() if dtype is None else np.dtype(dtype)
    lower, upper = bounds
    return _tuned_t(_tuning(n, levels, lower, upper, dtype), epsilon_each)


def _check_t(checks: Checks, t, m: int):
    """A scalar or per-quantile (shape ``(m,)``) smoothing parameter, finite and > 0 (may be traced)."""
    if is_traced(t):
        t = jnp.asarray(t)
        if t.shape not in ((), (m,)):
            raise ValueError(f"t must be a scalar or have shape ({m},), got shape {t.shape}.")
        checks.record(jnp.isfinite(t) & (t > 0), "t must be finite and > 0.")
        return t
    host = np.asarray(t, np.float64)
    if host.shape not in ((), (m,)):
        raise ValueError(f"t must be a scalar or have shape ({m},), got shape {host.shape}.")
    if not np.all(np.isfinite(host) & (host > 0)):
        raise ValueError(f"t must be finite and > 0, got {t}.")
    return host


def csmooth(
    key: jax.Array,
    x: ArrayLike,
    qs: ArrayLike | Sequence[float],
    rho: ArrayLike,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | jax.Array | np.ndarray,
    t: ArrayLike | None = None,
) -> jax.Array:
    """CSmooth quantiles (Gillenwater et al. 2021, Sec. 5.1; Bun and Steinke 2019, Sec. 3.1.1).

    Neighboring relation: swap (smooth sensitivity is defined for swap neighbors). Guarantee:
    ``rho``-zCDP for all ``m`` quantiles together (:func:`csmooth_guarantee`), each released with
    ``eps' = sqrt(2 rho / m)``.

    Args:
      key: a ``jax.random`` key.
      x: data, shape ``(n,)`` with ``n >= 1`` (static); clamped to ``bounds``.
      qs: ``m`` strictly increasing levels in [0, 1] (may be traced; ``m`` is static).
      rho: the zCDP parameter, > 0 (may be traced); ``epsilon^2/2`` compares with ``epsilon``-DP.
      bounds: ``(a, b)`` with ``a < b`` (may be traced).
      t: smoothing parameter, > 0, a scalar or one per quantile (may be traced); by default
        :func:`csmooth_default_t` (tuned on N(0, 1) data of the same size).

    Returns:
      As :func:`~dpjax.quantiles.ind_exp`: shape ``(m,)``, sorted, in ``[a, b]``; NaN on invalid
      traced input or non-finite traced data.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (100,))
      >>> quartiles = csmooth(jax.random.key(0), x, [0.25, 0.5, 0.75], 0.5, bounds=(-10, 10))
    """
    checks = Checks()
    x, levels, rho, lower, upper = check_inputs(checks, x, qs, rho, bounds, name="rho")
    n, m = x.shape[0], levels.shape[0]
    if n == 0:
        raise ValueError("x must not be empty for CSmooth (the order statistic is undefined).")
    if t is None:
        t, tuning = None, _tuning(n, levels, lower, upper, float_dtype(x))
    else:
        t, tuning = _check_t(checks, t, m), None
    return checks.guard(_csmooth(key, x, levels, rho, lower, upper, t, tuning))


@jax.jit
@sharded.auto_axes
def _csmooth(key, x, levels, rho, lower, upper, t, tuning) -> jax.Array:
    """CSmooth after validation, with ``t`` given or (``t = None``) tuned from ``tuning``.

    Compiled, so that an eager call runs the same fused arithmetic as a call inside ``jit``.
    """
    dtype = float_dtype(x)
    n, m = x.shape[0], levels.shape[0]
    epsilon_each = jnp.sqrt(2 * jnp.asarray(rho, dtype) / jnp.asarray(m, dtype))
    ts = _tuned_t(tuning, epsilon_each) if t is None else jnp.broadcast_to(jnp.asarray(t, dtype), (m,))
    sigma, log_s = _lln_parameters(epsilon_each, ts)
    edges, _ = sorted_gaps(x, lower, upper)
    ranks = _ranks(n, jnp.asarray(levels, dtype))
    log_sens = jnp.stack([_log_smooth_sensitivity(edges, ranks[j], ts[j]) for j in range(m)])
    laplace_key, normal_key = jax.random.split(key)
    lap = noise.laplace(laplace_key, (m,), 1.0, dtype)
    gauss = noise.gaussian(normal_key, (m,), 1.0, dtype)
    magnitude = jnp.exp(log_sens - log_s + jnp.log(jnp.abs(lap)) + sigma * gauss)
    releases = edges[ranks + 1] + jnp.sign(lap) * magnitude
    return jnp.sort(jnp.clip(releases, edges[0], edges[-1]))


@elementwise("rho")
def csmooth_guarantee(rho: float) -> ZCDP:
    """CSmooth's guarantee: ``rho``-zCDP under swap (``m`` releases of ``eps'^2/2 = rho/m`` each;
    Bun and Steinke 2019, Sec. 3.1.1, composed by Lemma 2.3 of Bun and Steinke 2016)."""
    return ZCDP(check_epsilon(rho, "rho"))


__all__ = [
    "csmooth",
    "csmooth_default_t",
    "csmooth_guarantee",
]
