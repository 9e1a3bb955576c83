"""The host-side checks of dpjax (see :mod:`dpjax.validation`): concrete numbers, dtypes and arrays
checked eagerly, a ``ValueError`` naming the argument (``TypeError`` for a wrong kind of object,
:class:`TracedParameterError` for a traced value where a concrete one is needed). The guarantee
companions use them directly; mechanisms use them through :class:`~dpjax.validation.Checks`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from fractions import Fraction
from typing import TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike, DTypeLike

__all__ = [
    "TracedParameterError",
    "check_array",
    "check_choice",
    "check_epsilon",
    "check_exact_integers",
    "check_flag",
    "check_int",
    "check_positive",
    "check_probability",
    "check_rational",
    "check_real",
    "check_same_shape",
    "exact_integer_dtype",
    "float_dtype",
    "is_boolean",
    "is_traced",
    "refuse_values",
    "release_bound",
]

Choice = TypeVar("Choice", bound=str)  # an option string (often a Literal alias), returned as given


class TracedParameterError(TypeError):
    """A traced value (inside ``jit``, ``vmap``, ``scan``) where a concrete one is needed.

    Raised by guarantee companions (computed on the host for the accountant), by shape-fixing
    arguments (``k``, ``m``, caps, sizes) and by the exact samplers, whose parameters are exact
    rationals on the host. A ``TypeError``, so ``except TypeError`` still catches it; the study
    runner catches it to fall back to one compile per grid point.
    """


def is_traced(x: object) -> bool:
    """True when ``x`` is a JAX tracer (inside ``jit``/``vmap``), whose values are unknown."""
    return isinstance(x, jax.core.Tracer)


def _concrete_scalar(name: str, value) -> float:
    if is_traced(value):
        raise TracedParameterError(
            f"{name} must be a concrete number, not a traced value: guarantees are computed on "
            "the host for the accountant (pass numbers, or an array of them for a grid)."
        )
    if is_boolean(value) or not isinstance(value, numbers.Real | np.ndarray | jax.Array):
        raise TypeError(f"{name} must be a real number, got {_kind(value)}.")
    arr = np.asarray(value)
    if arr.ndim != 0:
        raise ValueError(f"{name} must be a scalar, got shape {arr.shape}.")
    return float(arr)


def is_boolean(value) -> bool:
    """A boolean of any kind: ``bool``, ``np.bool_``, or an array (any shape) of dtype bool."""
    dtype = getattr(value, "dtype", None)
    return isinstance(value, bool | np.bool_) or (dtype is not None and np.dtype(dtype) == np.bool_)


def _kind(value) -> str:
    return "a boolean" if is_boolean(value) else type(value).__name__


def check_flag(value: object, name: str) -> bool:
    """A static on/off option (``monotonic``, ...): a Python ``bool`` only. A string such as
    ``"False"`` (truthy!), a number or an array is refused with a ``TypeError``."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__}).")
    return value


def check_rational(value: object, name: str) -> Fraction:
    """An exact positive rational on the host: the parameter of an exact (integer) mechanism.

    Accepts a Python or NumPy integer (exactly, at any size), a float (its exact binary value: ``0.1``
    is ``3602879701896397/2**55``), a ``Fraction``, a 0-d integer or float array, or a
    ``(numerator, denominator)`` pair of integers. Refuses booleans of every kind (``True``,
    ``np.bool_``, bool arrays: a ``TypeError``), traced values (:class:`TracedParameterError`),
    NaN, infinities and values <= 0 (``ValueError``).
    """
    if is_traced(value):
        raise TracedParameterError(
            f"{name} must be a concrete number, not a traced value: the exact samplers need it as an "
            "exact rational on the host (a Python number, a Fraction or a (numerator, denominator) pair)."
        )
    if isinstance(value, tuple):
        integers = all(isinstance(v, numbers.Integral) and not is_boolean(v) for v in value)
        if len(value) != 2 or not integers:
            raise TypeError(f"{name} as a pair must be (numerator, denominator) of ints, got {value!r}.")
        if value[1] == 0:
            raise ValueError(f"{name} has a zero denominator.")
        fraction = Fraction(int(value[0]), int(value[1]))
    elif is_boolean(value) or not isinstance(value, numbers.Real | np.ndarray | jax.Array):
        raise TypeError(f"{name} must be a real number, a Fraction or a pair of ints, got {_kind(value)}.")
    else:  # the ignores: typeshed's numbers.Real has no __int__ and none of the protocols NumPy's stubs take
        if np.ndim(value) != 0:  # type: ignore[arg-type]
            shape = np.shape(value)  # type: ignore[arg-type]
            raise ValueError(f"{name} must be a scalar, got shape {shape}.")
        scalar: Fraction | int | float
        if isinstance(value, Fraction):
            scalar = value
        elif isinstance(value, numbers.Integral) or np.issubdtype(np.asarray(value).dtype, np.integer):
            # exact, also for NumPy integer arrays and Python ints beyond int64 (an object array)
            scalar = int(value)  # type: ignore[arg-type]
        else:
            scalar = float(value)
        if isinstance(scalar, float) and not math.isfinite(scalar):
            raise ValueError(f"{name} must be finite, got {scalar}.")
        fraction = Fraction(scalar)
    if fraction <= 0:
        raise ValueError(f"{name} must be > 0, got {fraction}.")
    return fraction


def check_epsilon(value: ArrayLike, name: str = "epsilon", *, allow_zero: bool = False) -> float:
    """A privacy parameter: finite and > 0 (>= 0 with ``allow_zero``). Returns it as a float."""
    eps = _concrete_scalar(name, value)
    if not math.isfinite(eps):
        raise ValueError(f"{name} must be finite, got {eps}.")
    if eps < 0 or (eps == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {eps}.")
    return eps


def check_positive(value: ArrayLike, name: str) -> float:
    """A finite, strictly positive real (a sensitivity, a scale, a budget)."""
    return check_epsilon(value, name)


def check_probability(
    value: ArrayLike, name: str, *, open_low: bool = False, open_high: bool = False
) -> float:
    """A probability in [0, 1]; ``open_low``/``open_high`` exclude the end points."""
    p = _concrete_scalar(name, value)
    low_ok = p > 0 if open_low else p >= 0
    high_ok = p < 1 if open_high else p <= 1
    if not (math.isfinite(p) and low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{name} must be in {interval}, got {p}.")
    return p


def check_int(value: object, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (Python or NumPy), optionally bounded, e.g. k with 1 <= k <= d."""
    if is_traced(value):
        raise TracedParameterError(f"{name} must be a concrete integer, not a traced value.")
    if is_boolean(value) or not isinstance(value, numbers.Integral | np.integer):
        raise TypeError(f"{name} must be an integer, got {_kind(value)}.")
    n = int(value)
    if minimum is not None and n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {n}.")
    if maximum is not None and n > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {n}.")
    return n


def check_choice(value: Choice, name: str, choices: Collection[str]) -> Choice:
    """One of a fixed set of option strings."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}.")
    return value


def check_array(
    x: object,
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
    refuse_values(arr, name, nan=finite, infinite=finite, negative=nonnegative)
    return arr


@jax.jit
def _value_flags(x) -> jax.Array:
    """``[any NaN, any infinity, any negative]`` of ``x``: one compiled pass over the data."""
    if jnp.issubdtype(x.dtype, jnp.floating):
        nan, infinite = jnp.any(jnp.isnan(x)), jnp.any(jnp.isinf(x))
    else:
        nan = infinite = jnp.asarray(False)
    negative = jnp.any(x < 0) if x.dtype != jnp.bool_ else jnp.asarray(False)
    return jnp.stack([nan, infinite, negative])


def refuse_values(arr: jax.Array, name: str, *, nan: bool, infinite: bool, negative: bool) -> None:
    """Raises a ``ValueError`` naming ``name`` if the concrete ``arr`` holds a refused value (NaN,
    an infinity, a negative entry): the eager data check of every mechanism, one compiled pass
    (evaluated eagerly, also for a concrete array closed over by a jitted function)."""
    if not (nan or infinite or negative) or arr.size == 0:
        return
    with jax.ensure_compile_time_eval():
        has_nan, has_inf, has_negative = (bool(flag) for flag in np.asarray(_value_flags(arr)))
    if nan and has_nan:
        raise ValueError(f"{name} contains NaN.")
    if infinite and has_inf:
        raise ValueError(f"{name} contains infinite values.")
    if negative and has_negative:
        raise ValueError(f"{name} must be non-negative.")


def exact_integer_dtype(dtype: DTypeLike) -> np.dtype:
    """The dtype an exact mechanism computes in for integer data of ``dtype``: int64 under
    ``jax_enable_x64`` for 64-bit data and for uint32 (whose range int32 cannot hold), else int32
    (without ``jax_enable_x64`` JAX has no 64-bit integers: such data must fit int32's release range)."""
    dtype = np.dtype(dtype)
    x64 = jax.config.jax_enable_x64  # type: ignore[attr-defined]  # jax's Config stub lacks the options
    wide = x64 and (dtype.itemsize == 8 or dtype == np.uint32)
    return np.dtype(np.int64 if wide else np.int32)


def release_bound(dtype: DTypeLike) -> int:
    """``B = (L - 1) // 2``, ``L`` the maximum of the integer ``dtype``: exact mechanisms keep data and
    releases in ``[-B, B]``, so ``value + noise`` (noise saturating at ``+-L``) is formed without
    overflow and saturates at ``+-B`` (a post-processing) instead of wrapping."""
    return (int(np.iinfo(dtype).max) - 1) // 2


def _exact_extremes(data: np.ndarray | jax.Array) -> tuple[int, int]:
    """The exact minimum and maximum of concrete integer data, as Python ints (no overflow)."""
    if isinstance(data, np.ndarray):
        return int(data.min()), int(data.max())
    with jax.ensure_compile_time_eval():
        return int(jnp.min(data)), int(jnp.max(data))


def check_exact_integers(value: ArrayLike, name: str) -> jax.Array:
    """Integer data for an exact mechanism, in :func:`exact_integer_dtype`, every value unchanged.

    Any integer dtype is accepted (int8 to int64, uint8 to uint64, NumPy or JAX, Python ints);
    booleans, floats and wider-than-64-bit integers are refused with a ``ValueError``. Concrete data
    must lie in ``[-B, B]`` (:func:`release_bound` of the dtype computed in), checked exactly in the
    data's own dtype (the most negative value included); otherwise a ``ValueError`` says so (and
    names ``jax_enable_x64`` when 64-bit integers would hold the data): nothing is truncated or
    wrapped. Traced data, whose values are unknown, is clamped to ``[-B, B]`` in its own dtype before
    the cast (1-Lipschitz per entry: sensitivities do not grow).
    """
    if isinstance(value, str | bytes) or value is None:
        raise TypeError(f"{name} must be an array of integers, got {type(value).__name__}.")
    if isinstance(value, jax.Array):
        data: np.ndarray | jax.Array = value
    else:
        try:
            data = np.asarray(value)  # on the host
        except (OverflowError, TypeError, ValueError) as err:
            raise ValueError(f"{name} must be an array of integers: {err}") from None
    dtype = np.dtype(data.dtype)
    if dtype.kind not in "iu":
        raise ValueError(
            f"{name} must have an integer dtype (int8 to int64 or uint8 to uint64), got {dtype}: the exact "
            "mechanisms add integer noise to integer queries (round or scale a real query first, and "
            "account for it)."
        )
    work = exact_integer_dtype(dtype)
    bound = release_bound(work)
    if not is_traced(value) and np.size(value):
        low, high = _exact_extremes(data)
        if low < -bound or high > bound:
            wider = release_bound(np.int64)
            fits64 = work == np.int32 and -wider <= low and high <= wider
            hint = " (enable jax_enable_x64 for int64 data)" if fits64 else ""
            raise ValueError(
                f"{name} must lie in [-{bound}, {bound}] (half the range of {work.name}, so that value + "
                f"noise cannot overflow), got values in [{low}, {high}]{hint}."
            )
    if isinstance(data, np.ndarray):
        return jnp.asarray(data.astype(work))
    info = np.iinfo(dtype)
    low, high = max(-bound, int(info.min)), min(bound, int(info.max))
    if is_traced(data) and (low > info.min or high < info.max):
        data = jnp.clip(data, np.asarray(low, dtype), np.asarray(high, dtype))
    return data.astype(work)


def check_same_shape(a: ArrayLike, a_name: str, b: ArrayLike, b_name: str) -> None:
    """Two arrays that must line up element for element."""
    if jnp.shape(a) != jnp.shape(b):
        raise ValueError(
            f"{a_name} and {b_name} must have the same shape, got {jnp.shape(a)} and {jnp.shape(b)}."
        )


def float_dtype(*arrays: ArrayLike | DTypeLike) -> np.dtype:
    """The floating dtype a mechanism computes in: that of its floating inputs, at least float32.

    With no floating input it is the default float (float32, or float64 under
    ``jax_enable_x64``). This is the one dtype rule of the library.
    """
    floats = [jnp.result_type(a) for a in arrays if jnp.issubdtype(jnp.result_type(a), jnp.floating)]
    dtype = jnp.result_type(*floats) if floats else jax.dtypes.canonicalize_dtype(jnp.dtype(float))
    return np.dtype(jnp.promote_types(dtype, jnp.float32))


def check_real(value: ArrayLike, name: str) -> float:
    """A finite real number (a threshold, a bound). Returns it as a float."""
    v = _concrete_scalar(name, value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}.")
    return v
