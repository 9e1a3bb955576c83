"""Private range counting in the local model (Liang and Yi, Sec. 6.2, Algorithm 6, Appendices A, B).

Query: ``C = sum_i 1{x_i in Gamma}`` for an axis-aligned box ``Gamma`` (centre, half-widths). The
score is ``Proj_Gamma`` (:func:`~dpjax.budgeting.box_signed_distance`), 1-Lipschitz and
negative exactly inside ``Gamma``.

* :func:`range_count` (PM0 / PM1): PIE-NI with ``nu_low = nu_high = 0``; the answer is ``|S_1|``
  plus the survivors classified from their full-budget mean (PM0: ``Proj(x-bar) < 0``, with the
  "< 0" the paper drops; PM1: ``y-bar < eta_i``).
* :func:`range_count_baseline` (BM0 / BM1): one release per user at its full ``rho_i``.

Modes: "point" releases noisy locations (d-dim); "distance" releases noisy ``Proj_Gamma(x_i)``
computed by the user, with the Appendix B shift ``eta_i`` (``shift=True``, 2-D only) or 0.

Privacy: each user ``i`` is ``rho_i``-CGP in the Euclidean metric (``D_alpha <= rho_i alpha
||x - x'||^2``); PM charges user ``i`` only ``rho_i cumfrac[e_i]``.
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
from dpjax._src.budgeting.common import Mode, baseline_release, check_mode, on_users, points
from dpjax._src.budgeting.geometry import box_signed_distance, eta_shift
from dpjax._src.budgeting.pie_kernel import ACTIVE, S1, PIEResult, check_plan, pie_kernel
from dpjax._src.budgeting.splits import Split
from dpjax._src.noise import NoiseMode
from dpjax._src.validation import Checks

__all__ = [
    "range_count",
    "range_count_baseline",
    "range_count_guarantee",
]


def _box(
    checks: Checks, x: ArrayLike, center: ArrayLike, half_widths: ArrayLike
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    x = points(checks, x)
    center = checks.array(center, "center", ndim=1).astype(x.dtype)
    half = checks.array(half_widths, "half_widths", ndim=1, nonnegative=True).astype(x.dtype)
    if center.shape != (x.shape[1],) or half.shape != (x.shape[1],):
        raise ValueError(f"center and half_widths must have shape ({x.shape[1]},) to match x.")
    return x, (center, half)


def _eta(r, box, shift: bool):
    d = box[0].shape[0]
    if not shift or d != 2:
        return jnp.zeros_like(r)
    return eta_shift(r, 2 * box[1][0], 2 * box[1][1]).astype(r.dtype)


@functools.partial(jax.jit, static_argnames=("point", "shift", "plan", "layout"))
def _count_kernel(key, x, r, box, beta0, *, point, shift, plan, layout):
    """Users sharded evenly over mesh axes (``layout``): PIE runs per shard (see
    :func:`dpjax._src.budgeting.pie.pie_kernel`) and the count is a sum over shards; otherwise XLA
    partitions the kernel (:func:`dpjax._src.budgeting.common.on_users`)."""
    body = functools.partial(_count, point=point, shift=shift, plan=plan)
    return on_users(body, layout, key, x, r, box, beta0)


def _count(key, x, r, box, beta0, *, point, shift, plan, layout):
    nu = jnp.zeros(2, x.dtype)
    if point:
        res = pie_kernel(
            key, x, r, nu, beta0, box, score_fn=box_signed_distance, plan=plan, layout=layout
        )
        inside = res.estimate < 0
    else:
        scores = box_signed_distance(x, box)
        res = pie_kernel(key, scores, r, nu, beta0, plan=plan, layout=layout)
        inside = res.mean < _eta(r, box, shift)
    count = jnp.sum(res.status == S1, dtype=jnp.int32) + jnp.sum(
        (res.status == ACTIVE) & inside, dtype=jnp.int32
    )
    return count, res


@functools.partial(jax.jit, static_argnames=("point", "shift", "noise_mode"))
def _baseline_kernel(key, x, r, box, *, point, shift, noise_mode):
    if point:
        inside = box_signed_distance(baseline_release(key, x, r, noise_mode), box) < 0
    else:
        inside = baseline_release(key, box_signed_distance(x, box), r, noise_mode) < _eta(r, box, shift)
    return jnp.sum(inside & (r > 0), dtype=jnp.int32)


def range_count(
    key: jax.Array,
    x: ArrayLike,
    rho: ArrayLike,
    center: ArrayLike,
    half_widths: ArrayLike,
    *,
    c: int,
    beta0: ArrayLike,
    mode: Mode = "point",
    shift: bool = True,
    split: Split = "even",
    chunk_size: int | None = None,
    noise_mode: NoiseMode = "high",
) -> tuple[jnp.ndarray, PIEResult]:
    """PM0 / PM1 range count via iterative elimination (Algorithm 6).

    ``rho``, ``center``, ``half_widths`` and ``beta0`` may be traced (e.g. ``jax.vmap`` over
    ranges); ``c``, ``mode``, ``shift``, ``split``, ``chunk_size`` and ``noise_mode`` are static.
    Concrete values are validated eagerly; an invalid traced value (see
    :func:`dpjax.budgeting.pie_ni`; NaN or infinite box, negative half-widths) or non-finite
    traced ``x`` makes the count ``-1`` and the result's fields NaN / ``-1``.

    Args:
      key: a ``jax.random`` key.
      x: (n, d) user locations (finite).
      rho: per-user allotment, a scalar > 0 or (n,) >= 0 (may be traced).
      center, half_widths: (d,) box (may be traced).
      c, beta0, split, chunk_size, noise_mode: as :func:`dpjax.budgeting.pie_ni`; Remark 6 uses
        ``beta0 = beta/4`` of an overall failure probability ``beta``.
      mode: "point" (PM0) or "distance" (PM1) (static).
      shift: PM1 only: the Appendix B threshold shift (2-D boxes) (static).

    Returns:
      ``(count, result)``: the int32 count (``-1`` on invalid traced input) and the
      :class:`~dpjax.budgeting.PIEResult` (charge user i ``rho_i cumfrac[result.rounds[i]]``).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.uniform(jax.random.key(1), (1000, 2), maxval=1000.0)
      >>> count, res = range_count(jax.random.key(0), x, 1e-3, jnp.array([500., 500.]),
      ...                          jnp.array([100., 100.]), c=4, beta0=0.025)
    """
    check_mode(mode)
    static = check_plan(c, split, chunk_size, noise_mode)
    checks = Checks()
    x, box = _box(checks, x, center, half_widths)
    beta0 = pie.check_beta0(checks, beta0, x.dtype)
    r = pie.check_allotments(checks, rho, x.shape[0], x.dtype)
    point, layout = mode == "point", sharded.leading_axes(x)
    result = _count_kernel(key, x, r, box, beta0, point=point, shift=shift, plan=static, layout=layout)
    return checks.guard(result)


def range_count_baseline(
    key: jax.Array,
    x: ArrayLike,
    rho: ArrayLike,
    center: ArrayLike,
    half_widths: ArrayLike,
    *,
    mode: Mode = "point",
    shift: bool = True,
    noise_mode: NoiseMode = "high",
) -> jnp.ndarray:
    """BM0 / BM1: every user releases once at its full ``rho_i`` (Sec. 6.2.1); returns the int32 count.

    Shares its noise with a c = 1 :func:`range_count` for the same key (then PM equals BM exactly).
    ``rho``, ``center`` and ``half_widths`` may be traced, ``mode``, ``shift`` and ``noise_mode``
    are static; invalid traced input (as :func:`range_count`) gives the count ``-1``.
    """
    check_mode(mode)
    checks = Checks()
    x, box = _box(checks, x, center, half_widths)
    r = pie.check_allotments(checks, rho, x.shape[0], x.dtype)
    result = _baseline_kernel(key, x, r, box, point=mode == "point", shift=shift, noise_mode=noise_mode)
    return checks.guard(result)


def range_count_guarantee(rho: ArrayLike) -> ZCDP | np.ndarray:
    """Per-user worst case of one query: ``max_i rho_i``-CGP (Euclidean metric), as ``ZCDP(rho)``.

    Eliminated users are charged less (``rho_i cumfrac[e_i]``); the ledger settles the actual cost.
    Host side, as :func:`dpjax.budgeting.pie_guarantee`.
    """
    return pie.pie_guarantee(rho)
