"""Private range counting in the local model (Liang and Yi, Sec. 6.2, Algorithm 6, Appendices A, B).

Query: ``C = sum_i 1{x_i in Gamma}`` for an axis-aligned box ``Gamma`` (centre, half-widths). The
score is ``Proj_Gamma`` (:func:`~dpjax.budgeting.geometry.box_signed_distance`), 1-Lipschitz and
negative exactly inside ``Gamma``.

* :func:`range_count` (PM0 / PM1): PIE-NI with ``nu_low = nu_high = 0``; the answer is ``|S_1|``
  plus the survivors classified from their full-budget mean (PM0: ``Proj(x-bar) < 0``, with the
  "< 0" the paper drops, spec erratum 5; PM1: ``y-bar < eta_i``).
* :func:`range_count_baseline` (BM0 / BM1): one release per user at its full ``rho_i``.

Modes: "point" releases noisy locations (d-dim); "distance" releases noisy ``Proj_Gamma(x_i)``
computed by the user, with the Appendix B shift ``eta_i`` (``shift=True``, 2-D only) or 0.

Privacy: each user ``i`` is ``rho_i``-CGP in the Euclidean metric (``D_alpha <= rho_i alpha
||x - x'||^2``); PM charges user ``i`` only ``rho_i cumfrac[e_i]``.
"""

from __future__ import annotations

import jax.numpy as jnp

from dpjax.budgeting._common import baseline_release, check_mode
from dpjax.budgeting.geometry import box_signed_distance, eta_shift
from dpjax.budgeting.pie import ACTIVE, S1, PIEResult, _per_user, pie_guarantee, pie_ni
from dpjax.validation import check_array


def _box(x, center, half_widths):
    x = check_array(x, "x", ndim=2)
    dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.result_type(float)
    center = check_array(center, "center", ndim=1).astype(dtype)
    half = check_array(half_widths, "half_widths", ndim=1, nonnegative=True).astype(dtype)
    if center.shape != (x.shape[1],) or half.shape != (x.shape[1],):
        raise ValueError(f"center and half_widths must have shape ({x.shape[1]},) to match x.")
    return x.astype(dtype), (center, half)


def _eta(r, box, shift: bool):
    d = box[0].shape[0]
    if not shift or d != 2:
        return jnp.zeros_like(r)
    return eta_shift(r, 2 * box[1][0], 2 * box[1][1]).astype(r.dtype)


def range_count(
    key,
    x,
    rho,
    center,
    half_widths,
    *,
    c: int,
    beta0: float,
    mode: str = "point",
    shift: bool = True,
    split: str = "even",
    chunk_size=None,
    noise_mode: str = "high",
) -> tuple[jnp.ndarray, PIEResult]:
    """PM0 / PM1 range count via iterative elimination (Algorithm 6).

    Args:
      key: a ``jax.random`` key.
      x: (n, d) user locations (finite).
      rho: per-user allotment, a scalar > 0 or (n,) >= 0.
      center, half_widths: (d,) box (may be traced, e.g. vmap over ranges).
      c, beta0, split, chunk_size, noise_mode: as :func:`dpjax.budgeting.pie.pie_ni`; Remark 6 uses
        ``beta0 = beta/4`` of an overall failure probability ``beta``.
      mode: "point" (PM0) or "distance" (PM1).
      shift: PM1 only: the Appendix B threshold shift (2-D boxes).

    Returns:
      ``(count, result)``: the int32 count and the :class:`~dpjax.budgeting.pie.PIEResult`
      (charge user i ``rho_i cumfrac[result.rounds[i]]``).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> x = jax.random.uniform(jax.random.key(1), (1000, 2), maxval=1000.0)
      >>> count, res = range_count(jax.random.key(0), x, 1e-3, jnp.array([500., 500.]),
      ...                          jnp.array([100., 100.]), c=4, beta0=0.025)
    """
    check_mode(mode)
    x, box = _box(x, center, half_widths)
    common = dict(
        c=c, beta0=beta0, nu_low=0.0, nu_high=0.0, split=split, chunk_size=chunk_size, noise_mode=noise_mode
    )
    if mode == "point":
        res = pie_ni(key, x, rho, score_fn=box_signed_distance, score_params=box, **common)
        inside = res.estimate < 0
    else:
        res = pie_ni(key, box_signed_distance(x, box), rho, **common)
        inside = res.mean < _eta(_per_user(rho, x.shape[0], x.dtype), box, shift)
    count = jnp.sum(res.status == S1, dtype=jnp.int32) + jnp.sum(
        (res.status == ACTIVE) & inside, dtype=jnp.int32
    )
    return count, res


def range_count_baseline(
    key, x, rho, center, half_widths, *, mode: str = "point", shift: bool = True, noise_mode: str = "high"
) -> jnp.ndarray:
    """BM0 / BM1: every user releases once at its full ``rho_i`` (Sec. 6.2.1); returns the int32 count.

    Shares its noise with a c = 1 :func:`range_count` for the same key (then PM equals BM exactly).
    """
    check_mode(mode)
    x, box = _box(x, center, half_widths)
    r = _per_user(rho, x.shape[0], x.dtype)
    if mode == "point":
        inside = box_signed_distance(baseline_release(key, x, r, noise_mode), box) < 0
    else:
        inside = baseline_release(key, box_signed_distance(x, box), r, noise_mode) < _eta(r, box, shift)
    return jnp.sum(inside & (r > 0), dtype=jnp.int32)


def range_count_guarantee(rho):
    """Per-user worst case of one query: ``max_i rho_i``-CGP (Euclidean metric), as ``ZCDP(rho)``.

    Eliminated users are charged less (``rho_i cumfrac[e_i]``); the ledger settles the actual cost.
    """
    return pie_guarantee(rho)
