"""1-Lipschitz scores of the applications (Liang and Yi, eq. 11, Lemma 6.3, Appendices A and B).

* :func:`box_signed_distance`: ``Proj_Gamma`` for an axis-aligned box: negative exactly inside,
  ``-`` (distance to the boundary) inside and ``+`` (distance to the box) outside; 1-Lipschitz.
* :func:`rectangle_signed_distance`: the Appendix A routine for any rectangle given by its vertices
  ``u, v, w, z`` (uv || wz, uw || vz) in 2-D; equals the box version for axis-aligned boxes.
* :func:`distance_to`: ``len_p(x) = ||x - p||`` (KDE and kNN), by :func:`norm` (no overflow).
* :func:`eta_shift`: the distance-privatization threshold shift ``eta = -a gamma`` of Appendix B.

Every score has the signature ``score(points (m, d), params) -> (m,)`` used by
:func:`dpjax.budgeting.pie_ni` in point mode (params is a pytree of arrays, so it can be
``vmap``-ed over queries).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

__all__ = [
    "box_signed_distance",
    "distance_to",
    "eta_shift",
    "norm",
    "rectangle_signed_distance",
]


def norm(v: jax.Array) -> jax.Array:
    """The Euclidean norm of ``v`` along its last axis, finite whenever the norm is representable.

    ``sqrt(sum(v^2))`` as is where no square can overflow or underflow (largest ``|v_j|`` between
    ``sqrt(tiny)`` and ``sqrt(max / d)`` of the dtype: there dividing by 1 changes nothing, bit for
    bit); otherwise the vector is first divided by its largest entry and the norm multiplied back,
    so coordinates of 10^20 (whose squares overflow float32) or 10^-25 (whose squares underflow)
    give their distance to a few ulp instead of ``inf`` or 0."""
    finfo = jnp.finfo(v.dtype)
    largest = jnp.max(jnp.abs(v), axis=-1, keepdims=True)
    safe = (largest >= jnp.sqrt(finfo.tiny)) & (largest <= jnp.sqrt(finfo.max / v.shape[-1]))
    scale = jnp.where(safe | (largest == 0) | ~jnp.isfinite(largest), 1, largest).astype(v.dtype)
    return scale[..., 0] * jnp.sqrt(jnp.sum(jnp.square(v / scale), axis=-1))


def box_signed_distance(points: jax.Array, params: tuple[ArrayLike, ArrayLike]) -> jax.Array:
    """Signed distance to the boundary of the box ``params = (center (d,), half_widths (d,))``.

    Example:
      >>> box_signed_distance(jnp.array([[0.0, 0.0], [3.0, 0.0]]), (jnp.zeros(2), jnp.ones(2))).tolist()
      [-1.0, 2.0]
    """
    center, half = params
    q = jnp.abs(points - center) - half
    outside = norm(jnp.maximum(q, 0))
    return jnp.where(jnp.any(q > 0, axis=-1), outside, jnp.max(q, axis=-1))


def _segment_parameter(x, a, b):
    """a_{u,v} of Appendix A: the position of x's projection on the line through a and b (0 at b, 1 at a)."""
    ab = a - b
    return jnp.sum((x - b) * ab, axis=-1) / jnp.sum(ab * ab)


def rectangle_signed_distance(points: jax.Array, vertices: jax.Array) -> jax.Array:
    """Appendix A's Proj_Gamma for the 2-D rectangle with vertices ``(u, v, w, z)`` ((4, 2) array).

    Inside iff all four segment parameters lie in [0, 1]; the boundary distance is the minimum over
    the four edges of ``||c a + (1 - c) b - x||`` with ``c = clip(a_{a,b}, 0, 1)``.
    """
    u, v, w, z = vertices
    edges = ((u, v), (u, w), (v, z), (w, z))
    params = [_segment_parameter(points, a, b) for a, b in edges]
    inside = jnp.all(jnp.stack([(t >= 0) & (t <= 1) for t in params]), axis=0)
    dists = []
    for (a, b), t in zip(edges, params, strict=True):
        cc = jnp.clip(t, 0, 1)[..., None]
        dists.append(norm(cc * a + (1 - cc) * b - points))
    dist = jnp.min(jnp.stack(dists), axis=0)
    return jnp.where(inside, -dist, dist)


def distance_to(points: jax.Array, p: ArrayLike) -> jax.Array:
    """``len_p(x) = ||x - p||`` for points (m, d) and a query point p (d,); a direct difference
    (not the matmul expansion, which cancels badly in float32 for pixel data), and a :func:`norm`
    that does not overflow (finite for any finite points whose distance is representable)."""
    return norm(points - p)


def eta_shift(rho: ArrayLike, length: ArrayLike, width: ArrayLike) -> jax.Array:
    """The Appendix B shift ``eta(gamma) = -a gamma``, ``gamma = 1/sqrt(2 rho)``, for an l x w rectangle.

    ``a`` equalizes the areas of the bands just inside and just outside the boundary after shifting
    both inward by ``a gamma``:

    * ``l > 2 gamma`` and ``w > 2 gamma``: ``a = (4 gamma (l+w) - 4 gamma sqrt((l+w)^2 - 16 gamma^2)) /
      (16 gamma^2)``;
    * otherwise (inner rectangle empty): ``a = (8 gamma^2 + 2 gamma (l+w) - 2 gamma sqrt((l+w)^2 + 4 l w))
      / (8 gamma^2)``.

    Implemented as printed (an erratum of the paper): the case split is discontinuous at ``l = w = 2 gamma``
    (a jumps from 1 to 2 - sqrt(2) for squares), and case 1's area formula presumes
    ``l, w > 2 (1 + a) gamma``. ``a`` is clipped to [0, 1]. ``rho = 0`` gives ``eta = 0``.

    Example:
      >>> round(float(eta_shift(0.5, 10.0, 10.0)), 4)    # gamma = 1
      -0.101
    """
    rho = jnp.asarray(rho)
    safe = jnp.where(rho > 0, rho, 1.0)
    g = 1 / jnp.sqrt(2 * safe)
    s = length + width
    case1 = (4 * g * s - 4 * g * jnp.sqrt(jnp.maximum(s * s - 16 * g * g, 0))) / (16 * g * g)
    case2 = (8 * g * g + 2 * g * s - 2 * g * jnp.sqrt(s * s + 4 * length * width)) / (8 * g * g)
    a = jnp.clip(jnp.where((length > 2 * g) & (width > 2 * g), case1, case2), 0, 1)
    return jnp.where(rho > 0, -a * g, 0.0)
