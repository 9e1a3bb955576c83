"""The one bisection of the library (the switch point of a monotone predicate), and integer ceiling
division (:func:`ceil_div`).

Every hand-written search for a monotone crossing (a calibrated budget, a quantile, a confidence
margin) goes through :func:`bisect`, on the host (NumPy) or in the graph (JAX), with the same
contract and a stated tolerance:

* ``predicate`` is monotone on ``[lo, hi]``: ``True`` up to the switch point and ``False`` after it,
  and ``predicate(lo)`` holds while ``predicate(hi)`` does not (the caller picks such a bracket);
* each step evaluates ``predicate`` at the midpoint and keeps the half that still brackets the
  switch, so after ``steps`` steps the bracket is ``(hi - lo) / 2**steps`` wide and its ends keep
  their sides: the returned ``lo`` satisfies the predicate (a budget found this way never overspends)
  and ``hi`` does not;
* once the bracket reaches adjacent floats the midpoint rounds to an end and the bracket stops
  shrinking, so extra steps are harmless. After :func:`resolution_steps` halvings (``nmant + 2``:
  25 in float32, 54 in float64) the width is below one ulp of ``M = max(|lo|, |hi|)`` of the initial
  bracket (half an ulp when ``lo = 0``), so a root within a factor of 2 of ``M`` is found to about
  an ulp of itself: the dtype's resolution. Brackets spanning many binades (a root near 0 in
  ``[0, 1]``) need more steps for a relative tolerance; callers that need that say how many and why.

Host calls (NumPy or Python numbers) loop in Python in float64; calls with a ``jax.Array`` or a
tracer run one ``lax.fori_loop`` in the bracket's dtype, so every argument of the predicate may be
traced and ``vmap`` gives what separate calls give. Both broadcast: ``lo`` and ``hi`` may be arrays
of brackets searched at once.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax._src.host_checks import float_dtype

__all__: list[str] = []


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for integers and ``b > 0``, exact at any size (no float division): ``-(-a // b)``."""
    return -(-a // b)


def resolution_steps(dtype) -> int:
    """Halvings that shrink a bracket ``[0, hi]`` below half an ulp of ``hi`` in ``dtype``: ``nmant + 2``."""
    return int(jnp.finfo(dtype).nmant) + 2


def bisect(predicate: Callable, lo, hi, steps: int):
    """The bracket ``(lo, hi)`` of the point where a monotone ``predicate`` turns from True to False.

    Args:
      predicate: elementwise boolean function, True at ``lo`` and False at ``hi``, monotone between.
      lo, hi: the initial bracket (broadcast together); NumPy/Python values search on the host in
        float64, JAX values (possibly traced) in the graph in their dtype.
      steps: number of halvings (static); see the module docstring for the tolerance it gives.

    Returns:
      ``(lo, hi)``: ``predicate(lo)`` True, ``predicate(hi)`` False, width ``(hi - lo) / 2**steps``
      (or adjacent floats). Host calls return float64 NumPy values (0-d arrays for scalars).
    """

    def step(bracket):
        low, high = bracket
        mid = 0.5 * (low + high)
        ok = predicate(mid)
        where = jnp.where if isinstance(mid, jax.Array) else np.where
        return where(ok, mid, low), where(ok, high, mid)

    if isinstance(lo, jax.Array) or isinstance(hi, jax.Array):
        dtype = float_dtype(lo, hi)
        lo, hi = jnp.broadcast_arrays(jnp.asarray(lo, dtype), jnp.asarray(hi, dtype))
        return lax.fori_loop(0, steps, lambda _, bracket: step(bracket), (lo, hi))
    bracket = np.broadcast_arrays(np.asarray(lo, np.float64), np.asarray(hi, np.float64))
    for _ in range(steps):
        bracket = step(bracket)
    return bracket
