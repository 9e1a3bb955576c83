"""Private Gaussian kernel density at a point in the local model (Liang and Yi, Sec. 6.3, Algorithm 7).

Query: ``A = (1/n) sum_i exp(-||x_i - p||^2 / (2 b^2))``; score ``len_p(x) = ||x - p||``.

* :func:`kde` (PM0 / PM1): PIE-NI with ``phi = len_p`` (the paper's listing passes ``Proj_Gamma``,
  spec erratum 6), ``nu_low = -inf`` and ``nu_high = 6 b``. Eliminated users (``S_0``) have
  ``len_p >= 6b`` w.p. >= 1 - beta0 and contribute at most ``e^{-18}/n`` each; the answer is
  ``(sum_{survivors} exp(-est^2/(2b^2)) + |S_0| e^{-18}) / n``, or 0 when nobody survives (Cor 6.4).
* :func:`kde_baseline` (BM0 / BM1): one release per user at its full ``rho_i``.

Point mode (0) releases noisy points and uses ``||x-bar - p||``; distance mode (1) releases noisy
``||x_i - p||`` computed by the user. Privacy: user ``i`` is ``rho_i``-CGP (Euclidean metric).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax.budgeting._common import baseline_release, check_mode
from dpjax.budgeting.geometry import distance_to
from dpjax.budgeting.pie import ACTIVE, S0, PIEResult, _per_user, pie_guarantee, pie_ni
from dpjax.validation import check_array, check_positive

ELIMINATED_BIAS = float(np.exp(-18.0))  # exp(-(6b)^2 / (2 b^2))


def _points(x, p):
    x = check_array(x, "x", ndim=2)
    dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.result_type(float)
    p = check_array(p, "p", ndim=1).astype(dtype)
    if p.shape != (x.shape[1],):
        raise ValueError(f"p must have shape ({x.shape[1]},) to match x, got {p.shape}.")
    return x.astype(dtype), p


def _kernel(dist, b):
    return jnp.exp(-jnp.square(dist) / (2 * b * b))


def kde(
    key,
    x,
    rho,
    p,
    *,
    bandwidth: float,
    c: int,
    beta0: float,
    mode: str = "point",
    split: str = "even",
    chunk_size=None,
    noise_mode: str = "high",
) -> tuple[jnp.ndarray, PIEResult]:
    """PM0 / PM1 Gaussian KDE at ``p`` via iterative elimination (Algorithm 7).

    Args:
      key: a ``jax.random`` key.
      x: (n, d) user points; p: (d,) query point (may be traced).
      rho: per-user allotment, scalar > 0 or (n,) >= 0.
      bandwidth: the kernel bandwidth b > 0 (elimination threshold 6b).
      c, beta0, split, chunk_size, noise_mode: as :func:`dpjax.budgeting.pie.pie_ni`.
      mode: "point" (PM0) or "distance" (PM1).

    Returns:
      ``(estimate, result)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (1000, 2)) * 100
      >>> a, res = kde(jax.random.key(0), x, 1e-2, jnp.zeros(2), bandwidth=50.0, c=4, beta0=0.025)
    """
    check_mode(mode)
    b = check_positive(bandwidth, "bandwidth")
    x, p = _points(x, p)
    common = dict(c=c, beta0=beta0, nu_high=6 * b, split=split, chunk_size=chunk_size, noise_mode=noise_mode)
    if mode == "point":
        res = pie_ni(key, x, rho, score_fn=distance_to, score_params=p, **common)
        dist = res.estimate
    else:
        res = pie_ni(key, distance_to(x, p), rho, **common)
        dist = res.mean
    survivors = res.status == ACTIVE
    total = jnp.sum(jnp.where(survivors, _kernel(dist, b), 0)) + ELIMINATED_BIAS * jnp.sum(res.status == S0)
    estimate = jnp.where(jnp.any(survivors), total / x.shape[0], 0.0)
    return estimate, res


def kde_baseline(key, x, rho, p, *, bandwidth: float, mode: str = "point", noise_mode: str = "high"):
    """BM0 / BM1 Gaussian KDE at ``p``: every user releases once at its full ``rho_i`` (Sec. 6.3).

    Shares its noise with a c = 1 :func:`kde` for the same key (then ``|PM - BM| <= e^{-18}``).
    """
    check_mode(mode)
    b = check_positive(bandwidth, "bandwidth")
    x, p = _points(x, p)
    r = _per_user(rho, x.shape[0], x.dtype)
    if mode == "point":
        dist = distance_to(baseline_release(key, x, r, noise_mode), p)
    else:
        dist = baseline_release(key, distance_to(x, p), r, noise_mode)
    return jnp.sum(jnp.where(r > 0, _kernel(dist, b), 0)) / x.shape[0]


def kde_guarantee(rho):
    """Per-user worst case of one query: ``max_i rho_i``-CGP (Euclidean metric), as ``ZCDP(rho)``.

    Eliminated users are charged less (``rho_i cumfrac[e_i]``); the ledger settles the actual cost.
    """
    return pie_guarantee(rho)
