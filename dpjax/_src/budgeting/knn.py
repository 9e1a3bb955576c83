"""Private k nearest neighbors in the local model (Liang and Yi, Sec. 6.4, Algorithm 8).

Query: the indices of the k users closest to a point ``p``; score ``len_p(x) = ||x - p||``.

* :func:`knn` (PM0 / PM1): PIE-k; if exactly k users survive they are the answer (Cor 6.5: w.p.
  >= 1 - beta0 they are the true k nearest), otherwise the k survivors with the smallest final
  estimates (Lemmas 6.6 / 6.7 with ``lambda(., beta1/|G_c|)``).
* :func:`knn_baseline` (BM0 / BM1): the k smallest one-shot estimates (Lemmas 6.4 / 6.5).

Point mode (0) releases noisy points (distance error O(sqrt d)); distance mode (1) releases noisy
distances computed by the user (error O(1)). Privacy: user ``i`` is ``rho_i``-CGP (Euclidean
metric). Ties among estimates are broken by the lower index (``lax.top_k``, exact).
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
from dpjax._src.budgeting.pie_kernel import ACTIVE, PIEResult, check_plan, pie_kernel
from dpjax._src.budgeting.splits import Split
from dpjax._src.host_checks import check_int
from dpjax._src.noise import NoiseMode
from dpjax._src.validation import Checks

__all__ = [
    "knn",
    "knn_baseline",
    "knn_guarantee",
]


def _smallest(scores, eligible, k):
    """Indices of the k smallest eligible scores, ascending; -1 where fewer than k are eligible."""
    vals, idx = sharded.top_k(jnp.where(eligible, -scores, -jnp.inf), k)
    return jnp.where(vals > -jnp.inf, idx, -1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("point", "k", "plan", "layout"))
def _knn_kernel(key, x, r, p, beta0, *, point, k, plan, layout):
    """Users sharded evenly over mesh axes (``layout``): PIE-k runs per shard and the answer is an
    exact top-k over the sharded estimates (:func:`dpjax.sharded.top_k`,
    :func:`dpjax._src.budgeting.common.on_users`)."""
    return on_users(functools.partial(_knn, point=point, k=k, plan=plan), layout, key, x, r, p, beta0)


def _knn(key, x, r, p, beta0, *, point, k, plan, layout):
    nu = jnp.zeros(2, x.dtype)
    if point:
        res = pie_kernel(key, x, r, nu, beta0, p, score_fn=distance_to, k=k, plan=plan, layout=layout)
    else:
        res = pie_kernel(key, distance_to(x, p), r, nu, beta0, k=k, plan=plan, layout=layout)
    return _smallest(res.estimate, res.status == ACTIVE, k), res


@functools.partial(jax.jit, static_argnames=("point", "k", "noise_mode"))
def _baseline_kernel(key, x, r, p, *, point, k, noise_mode):
    if point:
        est = distance_to(baseline_release(key, x, r, noise_mode), p)
    else:
        est = baseline_release(key, distance_to(x, p), r, noise_mode)
    return _smallest(est, r > 0, k)


def knn(
    key: jax.Array,
    x: ArrayLike,
    rho: ArrayLike,
    p: ArrayLike,
    *,
    k: int,
    c: int,
    beta0: ArrayLike,
    mode: Mode = "distance",
    split: Split = "even",
    chunk_size: int | None = None,
    noise_mode: NoiseMode = "high",
) -> tuple[jnp.ndarray, PIEResult]:
    """PM0 / PM1 private kNN via iterative elimination (Algorithm 8).

    ``rho``, ``p`` and ``beta0`` may be traced; ``k``, ``c``, ``mode``, ``split``, ``chunk_size`` and
    ``noise_mode`` are static. Concrete values are validated eagerly; an invalid traced value (see
    :func:`dpjax.budgeting.pie_k`; a non-finite ``p``) or non-finite traced ``x`` makes every
    index ``-1`` and the result's fields NaN / ``-1``.

    Args:
      key: a ``jax.random`` key.
      x: (n, d) user points; p: (d,) query point (may be traced).
      rho: per-user allotment, scalar > 0 or (n,) >= 0 (may be traced).
      k: number of neighbors, 1 <= k <= n (static).
      c, beta0, split, chunk_size, noise_mode: as :func:`dpjax.budgeting.pie_k`.
      mode: "distance" (PM1, default) or "point" (PM0) (static).

    Returns:
      ``(indices, result)``: (k,) int32 user indices ordered by estimated distance (-1 padding when
      fewer than k users take part; all -1 on invalid traced input), and the
      :class:`~dpjax.budgeting.PIEResult`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.normal(jax.random.key(1), (500, 3))
      >>> idx, res = knn(jax.random.key(0), x, 10.0, jnp.zeros(3), k=5, c=8, beta0=0.025)
      >>> idx.shape
      (5,)
    """
    check_mode(mode)
    static = check_plan(c, split, chunk_size, noise_mode)
    checks = Checks()
    x = points(checks, x)
    p = query_point(checks, x, p)
    k = check_int(k, "k", minimum=1, maximum=x.shape[0])
    beta0 = pie.check_beta0(checks, beta0, x.dtype)
    r = pie.check_allotments(checks, rho, x.shape[0], x.dtype)
    point, layout = mode == "point", sharded.leading_axes(x)
    return checks.guard(_knn_kernel(key, x, r, p, beta0, point=point, k=k, plan=static, layout=layout))


def knn_baseline(
    key: jax.Array,
    x: ArrayLike,
    rho: ArrayLike,
    p: ArrayLike,
    *,
    k: int,
    mode: Mode = "distance",
    noise_mode: NoiseMode = "high",
) -> jax.Array:
    """BM0 / BM1: the k users with the smallest one-shot estimated distance; (k,) int32 indices.

    Shares its noise with a c = 1 :func:`knn` for the same key (equal sets for uniform rho).
    ``rho`` and ``p`` may be traced, ``k``, ``mode`` and ``noise_mode`` are static; invalid traced
    input (as :func:`knn`) makes every index ``-1``.
    """
    check_mode(mode)
    checks = Checks()
    x = points(checks, x)
    p = query_point(checks, x, p)
    k = check_int(k, "k", minimum=1, maximum=x.shape[0])
    r = pie.check_allotments(checks, rho, x.shape[0], x.dtype)
    return checks.guard(_baseline_kernel(key, x, r, p, point=mode == "point", k=k, noise_mode=noise_mode))


def knn_guarantee(rho: ArrayLike) -> ZCDP | np.ndarray:
    """Per-user worst case of one query: ``max_i rho_i``-CGP (Euclidean metric), as ``ZCDP(rho)``.

    Eliminated users are charged less (``rho_i cumfrac[e_i]``); the ledger settles the actual cost.
    Host side, as :func:`dpjax.budgeting.pie_guarantee`.
    """
    return pie.pie_guarantee(rho)
