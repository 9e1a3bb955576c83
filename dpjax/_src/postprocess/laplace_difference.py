"""The difference of two independent Laplace variables: its tail and its quantiles.

``Z = X - Y`` with ``X ~ Lap(1/a)``, ``Y ~ Lap(1/b)`` (rates ``a``, ``b`` > 0, the inverse scales) is
symmetric, and for ``t >= 0`` (Ding, Wang, Zhang, Kifer, PVLDB 2019, Lemma 5)

    P(Z >= t) = (a^2 e^{-b t} - b^2 e^{-a t}) / (2 (a^2 - b^2)),

which tends to ``(2 + a t)/4 e^{-a t}`` as ``b -> a`` (the difference of two iid Laplace variables,
used by Noisy-Top-K-with-Gap, and by sparse vector with gap when both rates agree). Both estimators
of :mod:`dpjax.postprocess` (the sparse-vector margin and the top-k radius) solve this tail.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src.numerics import bisect, resolution_steps

__all__ = [
    "laplace_difference_quantile",
    "laplace_difference_tail",
]


def laplace_difference_tail(t: ArrayLike, a: ArrayLike, b: ArrayLike) -> jax.Array:
    """``P(X - Y >= t)`` for ``t >= 0``, ``X ~ Lap(1/a)``, ``Y ~ Lap(1/b)`` independent (Lemma 5).

    Written without cancellation and without a special case for ``a == b``:
    ``e^{-a t}/2 + a^2 t/(2 (a + b)) e^{-min(a, b) t} r(-|a - b| t)``, ``r(z) = expm1(z)/z``.
    Broadcasts; in the dtype of the (JAX) arguments; every argument may be traced.
    """
    # The ignores: ArrayLike admits NumPy bools, which NumPy's stubs (rightly) give no - (rates are reals).
    z = -jnp.abs(a - b) * t  # type: ignore[operator]
    safe_z = jnp.where(z == 0, -1, z)
    r = jnp.where(z == 0, 1, jnp.expm1(safe_z) / safe_z)
    head = jnp.exp(-a * t) / 2  # type: ignore[operator]
    return head + a**2 * t / (2 * (a + b)) * jnp.exp(-jnp.minimum(a, b) * t) * r


def laplace_difference_quantile(
    p: ArrayLike, a: ArrayLike, b: ArrayLike, steps: int | None = None
) -> jax.Array:
    """The ``t >= 0`` with ``P(X - Y >= t) = p`` for ``p`` in ``(0, 1/2]``, by
    :func:`dpjax._src.numerics.bisect`.

    The bracket is ``[0, min(sqrt(Var Z/(2 p)), 2 log(1/p)/min(a, b))]``: Chebyshev with the symmetry
    of ``Z``, and ``P(Z >= t) <= P(X >= t/2) + P(-Y >= t/2) <= e^{-min(a, b) t/2}``. The upper end is
    within a factor of about 2 of the root once ``p <= 1/4``, so the default ``steps``,
    :func:`~dpjax._src.numerics.resolution_steps` of the dtype (static), gives the root to the dtype's
    relative precision there (an absolute ``2^-steps`` of the bracket for ``p`` near 1/2, where the root is
    near 0). Returns the bracket's midpoint, in the dtype of the (JAX) arguments, which may be traced.
    """
    hi = jnp.minimum(jnp.sqrt((1 / a**2 + 1 / b**2) / p), 2 * jnp.log(1 / p) / jnp.minimum(a, b))
    lo = jnp.zeros_like(hi)
    steps = resolution_steps(hi.dtype) if steps is None else steps
    lo, hi = bisect(lambda t: laplace_difference_tail(t, a, b) > p, lo, hi, steps)
    return (lo + hi) / 2
