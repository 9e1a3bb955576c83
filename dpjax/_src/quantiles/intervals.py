"""The discretization shared by the bounded exponential-mechanism quantiles (IndExp, JointExp).

The data are clamped to user bounds ``[a, b]`` and sorted, ``x_1 <= ... <= x_n``; with ``x_0 = a``
and ``x_{n+1} = b`` the real line inside the bounds splits into the ``n + 1`` gaps
``[x_i, x_{i+1}]``, ``i = 0..n`` (Smith 2011; Gillenwater, Joseph, Kulesza 2021, Sec. 3). Every
output inside gap ``i`` has exactly ``i`` data points below it, so the utilities are constant on a
gap, and a gap is chosen with weight ``width * exp(score)``: ``log width = -inf`` for the zero-width
gaps of duplicates (and of points clamped onto a bound), which therefore have probability 0.

This module also holds the input checks those mechanisms share (bounds, quantile levels, the
data). Each records traced values in the mechanism's
:class:`~dpjax.validation.Checks` (so an invalid traced value makes the output NaN) and validates
concrete ones eagerly, before any randomness is drawn.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpjax._src import noise
from dpjax._src.host_checks import float_dtype, is_traced
from dpjax._src.validation import Checks

__all__: list[str] = []


def _traced_scalar(value) -> jax.Array:
    value = jnp.asarray(value)
    return value if jnp.issubdtype(value.dtype, jnp.floating) else value.astype(float_dtype())


def check_bounds(checks: Checks, bounds):
    """``bounds = (a, b)``: finite numbers with ``a < b`` (may be traced).

    Concrete bounds are validated eagerly and returned as two floats. When either end is traced
    (or ``bounds`` is a traced array of shape ``(2,)``) they are returned as traced scalars and the
    condition is recorded in ``checks``.
    """
    lower: float | jax.Array  # two floats when concrete, two scalars when traced
    upper: float | jax.Array
    if is_traced(bounds):
        if jnp.shape(bounds) != (2,):
            raise ValueError(f"bounds must be a pair (a, b) of numbers, got shape {jnp.shape(bounds)}.")
        items = [bounds[0], bounds[1]]
    else:
        try:
            items = list(bounds)
        except TypeError:
            items = []
    if len(items) == 2 and any(is_traced(v) for v in items):
        lower, upper = (_traced_scalar(v) for v in items)
        if lower.ndim or upper.ndim:
            raise ValueError(f"bounds must be two scalars, got shapes {lower.shape} and {upper.shape}.")
        checks.record(
            jnp.isfinite(lower) & jnp.isfinite(upper) & (lower < upper), "bounds must be finite with a < b."
        )
        return lower, upper
    try:
        lower, upper = (float(v) for v in items)
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be a pair (a, b) of numbers, got {bounds!r}.") from None
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ValueError(f"bounds must be finite, got {(lower, upper)}.")
    if not lower < upper:
        raise ValueError(f"bounds (a, b) must satisfy a < b, got {(lower, upper)}.")
    return lower, upper


def _check_quantiles(checks: Checks, qs, name: str = "qs"):
    """Quantile levels: a non-empty 1-D, strictly increasing sequence in [0, 1] (may be traced).

    Their number ``m`` fixes the output shape and is static. Concrete levels are validated eagerly
    and returned as a float64 NumPy array; traced levels are returned as a traced array with the
    condition recorded in ``checks``.
    """
    levels: jax.Array | np.ndarray
    if is_traced(qs):
        levels = _traced_scalar(qs)
        levels = levels[None] if levels.ndim == 0 else levels
        if levels.ndim != 1 or levels.size == 0:
            raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {levels.shape}.")
        checks.record(
            jnp.all((levels >= 0) & (levels <= 1)) & jnp.all(jnp.diff(levels) > 0),
            f"{name} must lie in [0, 1] and be strictly increasing.",
        )
        return levels
    levels = np.asarray(qs, dtype=np.float64)
    if levels.ndim == 0:
        levels = levels[None]
    if levels.ndim != 1 or levels.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {levels.shape}.")
    if not np.all(np.isfinite(levels)) or np.any(levels < 0) or np.any(levels > 1):
        raise ValueError(f"{name} must lie in [0, 1], got {levels}.")
    if np.any(np.diff(levels) <= 0):
        raise ValueError(f"{name} must be strictly increasing, got {levels}.")
    return levels


class _BoundedInputs(NamedTuple):
    """The validated inputs shared by the bounded-range quantile mechanisms."""

    x: jax.Array
    levels: jax.Array
    epsilon: jax.Array | float
    lower: jax.Array | float
    upper: jax.Array | float


def check_inputs(
    checks: Checks, x, qs, epsilon, bounds, *, allow_zero: bool = False, name: str = "epsilon"
) -> _BoundedInputs:
    """Validates ``bounds``, the levels ``qs``, the privacy parameter ``epsilon`` (named ``name`` in
    errors; > 0, >= 0 with ``allow_zero``) and the data, in that order: finite records (no +-inf:
    they lie outside every bounded range), possibly none. Concrete values raise eagerly, traced ones
    are recorded in ``checks``."""
    lower, upper = check_bounds(checks, bounds)
    levels = _check_quantiles(checks, qs)
    epsilon = checks.epsilon(epsilon, name, allow_zero=allow_zero)
    x = checks.data(x, allow_infinite=False, allow_empty=True)
    return _BoundedInputs(x, levels, epsilon, lower, upper)


def _sort_floats(x) -> jax.Array:
    """``jnp.sort`` of a 1-D float array without NaN, sorted as integer keys (same result).

    Flipping the magnitude bits of negative floats makes their bit patterns, read as signed
    integers, increase with the value; the map is exact, so the result is the same on every backend.
    It is also the faster form on every backend, so no backend check is needed: ``jnp.sort`` of
    floats compares with a total-order comparator (zeros and NaNs canonicalized inside it), while the
    integer sort's comparator is a single ``compare LT`` of its two operands, which XLA CPU sorts
    faster (figures in benchmarks/README.md); XLA GPU rewrites
    only such single-compare sorts into CUB's radix sort (``SortRewriter``; the float comparator
    keeps the generic sort kernel); TPU's comparison sort does less work per comparison.
    ``tests/cross/test_backends.py`` checks the lowered comparator.
    """
    int_dtype = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[x.dtype.itemsize]
    magnitude = jnp.asarray(jnp.iinfo(int_dtype).max, int_dtype)

    def flip(bits):
        return jnp.where(bits < 0, bits ^ magnitude, bits)

    keys = lax.sort(flip(lax.bitcast_convert_type(x, int_dtype)), is_stable=False)
    return lax.bitcast_convert_type(flip(keys), x.dtype)


def sorted_gaps(x, lower, upper):
    """Gap end points and log widths of the clamped sorted data (the bounds may be traced).

    Returns:
      ``(edges, log_width)``: ``edges`` of shape ``(n + 2,)`` is ``[a, x_1, ..., x_n, b]`` and
      ``log_width[i] = log(edges[i + 1] - edges[i])`` (``-inf`` for a zero-width gap), shape ``(n + 1,)``.
    """
    dtype = float_dtype(x)
    lower, upper = jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    data = _sort_floats(jnp.clip(x.astype(dtype), lower, upper))
    edges = jnp.concatenate([lower[None], data, upper[None]])
    with jax.numpy_dtype_promotion("standard"):
        log_width = jnp.log(jnp.diff(edges))
    return edges, log_width


def uniform_in_gaps(key, edges, index) -> jax.Array:
    """One uniform draw inside each chosen gap ``[edges[i], edges[i + 1]]`` (``index`` any shape)."""
    left, right = edges[index], edges[index + 1]
    u = jax.random.uniform(key, jnp.shape(index), edges.dtype)
    # Clip: left + u * (right - left) may round above right.
    return jnp.minimum(left + u * (right - left), right)


def gumbel_argmax(key, logits, axis: int = -1) -> jax.Array:
    """Index of ``argmax(logits + Gumbel)``: an exact draw from ``softmax(logits)`` ("racing")."""
    return jnp.argmax(logits + noise.gumbel(key, logits.shape, 1.0, logits.dtype), axis=axis)
