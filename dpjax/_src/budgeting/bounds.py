"""The Gaussian tail radius lambda(d, beta) of Lemma 6.1 (Liang and Yi, [LM00, LY23]).

For ``Z ~ N(0, I_d)``, ``P(||Z|| > lambda(d, beta)) <= beta`` with

* ``d = 1``: ``sqrt(2 log(2/beta))`` (two-sided Gaussian tail);
* ``d = 2``: ``sqrt(2 log(1/beta))`` (exact chi-2 tail with 2 degrees of freedom);
* ``d > 2``: ``sqrt(d + 2 sqrt(d log(1/beta)) + 2 log(1/beta))`` (Laurent and Massart).

The paper states the general formula for d > 2 with these special forms (an erratum of the paper).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src.host_checks import check_int

__all__ = [
    "tail_radius",
]


def tail_radius_from_log(d: int, log_inv_beta):
    """``lambda(d, beta)`` given ``log(1/beta)`` (array or scalar; log space avoids underflow)."""
    d = check_int(d, "d", minimum=1)
    t = jnp.asarray(log_inv_beta)
    if d == 1:
        return jnp.sqrt(2 * (t + jnp.log(2.0).astype(t.dtype)))
    if d == 2:
        return jnp.sqrt(2 * t)
    return jnp.sqrt(d + 2 * jnp.sqrt(d * t) + 2 * t)


def tail_radius(d: int, beta: ArrayLike) -> jax.Array:
    """``lambda(d, beta)`` of Lemma 6.1: ``P(||Z|| > lambda) <= beta`` for ``Z ~ N(0, I_d)``.

    Example:
      >>> round(float(tail_radius(1, 0.05)), 4)
      2.7162
    """
    return tail_radius_from_log(d, -jnp.log(jnp.asarray(beta, dtype=float)))
