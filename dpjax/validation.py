"""Input validation shared by every dpjax mechanism.

Every check raises a ``ValueError`` (``TypeError`` for a wrong kind of object) whose message names
the offending argument, and every mechanism calls these checks *before* it draws any randomness.

Under ``jax.jit`` array values are tracers and cannot be inspected: the checks then validate what is
static (shape, rank, dtype) and skip value checks, which is documented by each mechanism. Privacy
parameters (epsilon, delta, q, k, ...) are expected to be concrete Python or NumPy scalars; passing
them as tracers is refused, because a mechanism's guarantee must be known before it runs.
"""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np


def is_traced(x) -> bool:
    """True when ``x`` is a JAX tracer (inside ``jit``/``vmap``), whose values are unknown."""
    return isinstance(x, jax.core.Tracer)


def _concrete_scalar(name: str, value) -> float:
    if is_traced(value):
        raise TypeError(
            f"{name} must be a concrete number, not a traced value: privacy parameters are fixed "
            "before a mechanism runs (mark it static, e.g. with functools.partial)."
        )
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.ndarray | jax.Array):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    arr = np.asarray(value)
    if arr.ndim != 0:
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}.")
    return float(arr)


def check_epsilon(value, name: str = "epsilon", *, allow_zero: bool = False) -> float:
    """A privacy parameter: finite and > 0 (>= 0 with ``allow_zero``). Returns it as a float."""
    eps = _concrete_scalar(name, value)
    if not math.isfinite(eps):
        raise ValueError(f"{name} must be finite, got {eps}.")
    if eps < 0 or (eps == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {eps}.")
    return eps


def check_positive(value, name: str) -> float:
    """A finite, strictly positive real (a sensitivity, a scale, a budget)."""
    return check_epsilon(value, name)


def check_probability(value, name: str, *, open_low: bool = False, open_high: bool = False) -> float:
    """A probability in [0, 1]; ``open_low``/``open_high`` exclude the end points."""
    p = _concrete_scalar(name, value)
    low_ok = p > 0 if open_low else p >= 0
    high_ok = p < 1 if open_high else p <= 1
    if not (math.isfinite(p) and low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{name} must be in {interval}, got {p}.")
    return p


def check_int(value, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (Python or NumPy), optionally bounded, e.g. k with 1 <= k <= d."""
    if is_traced(value):
        raise TypeError(f"{name} must be a concrete integer, not a traced value.")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral | np.integer):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}.")
    n = int(value)
    if minimum is not None and n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {n}.")
    if maximum is not None and n > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {n}.")
    return n


def check_choice(value, name: str, choices) -> str:
    """One of a fixed set of option strings."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}.")
    return value


def check_array(
    x,
    name: str,
    *,
    ndim: int | tuple[int, ...] | None = None,
    allow_empty: bool = False,
    finite: bool = True,
    nonnegative: bool = False,
    kind: str = "real",
) -> jax.Array:
    """Validates a data array and returns it as a ``jax.Array``.

    Args:
        x: array-like data.
        name: the argument's name, used in messages.
        ndim: required rank (or tuple of allowed ranks).
        allow_empty: whether a zero-size array is acceptable.
        finite: reject NaN and +-inf (value check, skipped under ``jit``).
        nonnegative: reject negative entries (value check, skipped under ``jit``).
        kind: "real" accepts integer, boolean and float dtypes; "float" only floats; "int" only ints.

    Returns:
        ``x`` as a ``jax.Array`` (not copied when it already is one).
    """
    if isinstance(x, str | bytes) or x is None:
        raise TypeError(f"{name} must be an array of numbers, got {type(x).__name__}.")
    if not isinstance(x, jax.Array):
        try:
            host = np.asarray(x)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be an array of numbers: {err}") from None
        if host.dtype.kind not in "biuf":
            raise ValueError(f"{name} must have a real numeric dtype, got {host.dtype}.")
        x = jnp.asarray(host)
    arr = x
    dtype = arr.dtype
    if kind == "float" and not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"{name} must have a floating dtype, got {dtype}.")
    if kind == "int" and not jnp.issubdtype(dtype, jnp.integer):
        raise ValueError(f"{name} must have an integer dtype, got {dtype}.")
    if not (jnp.issubdtype(dtype, jnp.number) or dtype == jnp.bool_) or jnp.issubdtype(
        dtype, jnp.complexfloating
    ):
        raise ValueError(f"{name} must have a real numeric dtype, got {dtype}.")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            want = " or ".join(str(a) for a in allowed)
            raise ValueError(f"{name} must have rank {want}, got shape {arr.shape}.")
    if not allow_empty and arr.size == 0:
        raise ValueError(f"{name} must not be empty.")
    if is_traced(arr) or arr.size == 0:
        return arr
    # A concrete array closed over by a jitted function is still checked: evaluate eagerly.
    with jax.ensure_compile_time_eval():
        if finite and jnp.issubdtype(dtype, jnp.floating) and not bool(jnp.all(jnp.isfinite(arr))):
            bad = "NaN" if bool(jnp.any(jnp.isnan(arr))) else "infinite values"
            raise ValueError(f"{name} contains {bad}.")
        if nonnegative and not bool(jnp.all(arr >= 0)):
            raise ValueError(f"{name} must be non-negative.")
    return arr


def check_same_shape(a, a_name: str, b, b_name: str) -> None:
    """Two arrays that must line up element for element."""
    if jnp.shape(a) != jnp.shape(b):
        raise ValueError(
            f"{a_name} and {b_name} must have the same shape, got {jnp.shape(a)} and {jnp.shape(b)}."
        )
