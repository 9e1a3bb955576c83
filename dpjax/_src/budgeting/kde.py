"""Private Gaussian kernel density at a point in the local model (Liang and Yi, Sec. 6.3, Algorithm 7).

Query: ``A = (1/n) sum_i exp(-||x_i - p||^2 / (2 b^2))``; score ``len_p(x) = ||x - p||``.

* :func:`kde` (PM0 / PM1): PIE-NI with ``phi = len_p`` (the paper's listing passes ``Proj_Gamma``,
  an erratum), ``nu_low = -inf`` and ``nu_high = 6 b``. Eliminated users (``S_0``) have
  ``len_p >= 6b`` w.p. >= 1 - beta0 and contribute at most ``e^{-18}/n`` each; the answer is
  ``(sum_{survivors} exp(-est^2/(2b^2)) + |S_0| e^{-18}) / n``, or 0 when nobody survives (Cor 6.4).
* :func:`kde_baseline` (BM0 / BM1): one release per user at its full ``rho_i``.

Point mode (0) releases noisy points and uses ``||x-bar - p||``; distance mode (1) releases noisy
``||x_i - p||`` computed by the user. Privacy: user ``i`` is ``rho_i``-CGP (Euclidean metric).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from dpjax._src import sharded
from dpjax._src.accounting.guarantees import ZCDP
from dpjax._src.budgeting import pie
from dpjax._src.budgeting.common import Mode, baseline_release, check_mode, on_users, points, query_point
from dpjax._src.budgeting.geometry import distance_to
from dpjax._src.budgeting.pie_kernel import ACTIVE, S0, PIEResult, check_plan, pie_kernel
from dpjax._src.budgeting.splits import Split
from dpjax._src.noise import NoiseMode
from dpjax._src.validation import Checks

__all__ = [
    "kde",
    "kde_baseline",
    "kde_guarantee",
]

_ELIMINATED_BIAS = float(np.exp(-18.0))  # exp(-(6b)^2 / (2 b^2))


def _inputs(
    checks: Checks, x: ArrayLike, p: ArrayLike, bandwidth: ArrayLike
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(x, p, b): the points, the query point and the bandwidth, in the points' dtype."""
    b = checks.positive(bandwidth, "bandwidth")
    x = points(checks, x)
    return x, query_point(checks, x, p), jnp.asarray(b, x.dtype)


def _kernel(dist, b):
    return jnp.exp(-jnp.square(dist) / (2 * b * b))


@functools.partial(jax.jit, static_argnames=("point", "plan", "layout"))
def _kde_kernel(key, x, r, p, b, beta0, *, point, plan, layout):
    """Users sharded evenly over mesh axes (``layout``): PIE runs per shard and the estimate is a
    sum over the sharded per-user kernel values (:func:`dpjax._src.budgeting.common.on_users`; per-device
    partial sums: another order of summation than on one device)."""
    return on_users(functools.partial(_kde, point=point, plan=plan), layout, key, x, r, p, b, beta0)


def _kde(key, x, r, p, b, beta0, *, point, plan, layout):
    nu = jnp.stack([jnp.asarray(-jnp.inf, x.dtype), 6 * b])  # S_0: len_p > 6b
    if point:
        res = pie_kernel(key, x, r, nu, beta0, p, score_fn=distance_to, plan=plan, layout=layout)
        dist = res.estimate
    else:
        res = pie_kernel(key, distance_to(x, p), r, nu, beta0, plan=plan, layout=layout)
        dist = res.mean
    survivors = res.status == ACTIVE
    total = jnp.sum(jnp.where(survivors, _kernel(dist, b), 0)) + _ELIMINATED_BIAS * jnp.sum(
        res.status == S0
    )
    return jnp.where(jnp.any(survivors), total / x.shape[0], 0.0), res


@functools.partial(jax.jit, static_argnames=("point", "noise_mode"))
def _baseline_kernel(key, x, r, p, b, *, point, noise_mode):
    if point:
        dist = distance_to(baseline_release(key, x, r, noise_mode), p)
    else:
        dist = baseline_release(key, distance_to(x, p), r, noise_mode)
    return jnp.sum(jnp.where(r > 0, _kernel(dist, b), 0)) / x.shape[0]


def kde(
    key: jax.Array,
    x: ArrayLike,
    rho: ArrayLike,
    p: ArrayLike,
    *,
    bandwidth: ArrayLike,
    c: int,
    beta0: ArrayLike,
    mode: Mode = "point",
    split: Split = "even",
    chunk_size: int | None = None,
    noise_mode: NoiseMode = "high",
) -> tuple[jnp.ndarray, PIEResult]:
    """PM0 / PM1 Gaussian KDE at ``p`` via iterative elimination (Algorithm 7).

    ``rho``, ``p``, ``bandwidth`` and ``beta0`` may be traced; ``c``, ``mode``, ``split``,
    ``chunk_size`` and ``noise_mode`` are static. Concrete values are validated eagerly; an invalid
    traced value (see :func:`dpjax.budgeting.pie_ni`; ``bandwidth`` not > 0, a non-finite
    ``p``) or non-finite traced ``x`` makes the estimate NaN and the result's fields NaN / ``-1``.

    Args:
      key: a ``jax.random`` key.
      x: (n, d) user points; p: (d,) query point (may be traced).
      rho: per-user allotment, scalar > 0 or (n,) >= 0 (may be traced).
      bandwidth: the kernel bandwidth b > 0 (elimination threshold 6b) (may be traced).
      c, beta0, split, chunk_size, noise_mode: as :func:`dpjax.budgeting.pie_ni`.
      mode: "point" (PM0) or "distance" (PM1) (static).

    Returns:
      ``(estimate, result)`` (NaN estimate on invalid traced input).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000, 2)) * 100
      >>> a, res = kde(jax.random.key(0), x, 1e-2, jnp.zeros(2), bandwidth=50.0, c=4, beta0=0.025)
    """
    check_mode(mode)
    static = check_plan(c, split, chunk_size, noise_mode)
    checks = Checks()
    x, p, b = _inputs(checks, x, p, bandwidth)
    beta0 = pie.check_beta0(checks, beta0, x.dtype)
    r = pie.check_allotments(checks, rho, x.shape[0], x.dtype)
    layout = sharded.leading_axes(x)
    result = _kde_kernel(key, x, r, p, b, beta0, point=mode == "point", plan=static, layout=layout)
    return checks.guard(result)


def kde_baseline(
    key: jax.Array,
    x: ArrayLike,
    rho: ArrayLike,
    p: ArrayLike,
    *,
    bandwidth: ArrayLike,
    mode: Mode = "point",
    noise_mode: NoiseMode = "high",
) -> jax.Array:
    """BM0 / BM1 Gaussian KDE at ``p``: every user releases once at its full ``rho_i`` (Sec. 6.3).

    Shares its noise with a c = 1 :func:`kde` for the same key (then ``|PM - BM| <= e^{-18}``).
    ``rho``, ``p`` and ``bandwidth`` may be traced, ``mode`` and ``noise_mode`` are static; invalid
    traced input (as :func:`kde`) gives a NaN estimate.
    """
    check_mode(mode)
    checks = Checks()
    x, p, b = _inputs(checks, x, p, bandwidth)
    r = pie.check_allotments(checks, rho, x.shape[0], x.dtype)
    return checks.guard(_baseline_kernel(key, x, r, p, b, point=mode == "point", noise_mode=noise_mode))


def kde_guarantee(rho: ArrayLike) -> ZCDP | np.ndarray:
    """Per-user worst case of one query: ``max_i rho_i``-CGP (Euclidean metric), as ``ZCDP(rho)``.

    Eliminated users are charged less (``rho_i cumfrac[e_i]``); the ledger settles the actual cost.
    Host side, as :func:`dpjax.budgeting.pie_guarantee`.
    """
    return pie.pie_guarantee(rho)
