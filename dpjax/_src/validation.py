"""The traced half of :mod:`dpjax.validation` (its docstring states the contract): :class:`Checks`, which
records checks on traced values, and :func:`checkify_checks`. The host-side checks are in
:mod:`dpjax._src.host_checks`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
from jax.experimental import checkify
from jax.typing import ArrayLike, DTypeLike

from dpjax._src.host_checks import (
    check_array,
    check_epsilon,
    check_int,
    check_probability,
    check_real,
    float_dtype,
    is_boolean,
    is_traced,
    refuse_values,
)

__all__ = [
    "Checks",
    "checkify_checks",
]


_checkify = threading.local()

Output = TypeVar("Output")  # a mechanism's output pytree: Checks.guard keeps its structure


@contextlib.contextmanager
def checkify_checks(enabled: bool = True) -> Iterator[None]:
    """Within this context, traced checks are also :func:`~jax.experimental.checkify.debug_check`.

    Functions traced inside it and run under :func:`jax.experimental.checkify.checkify` report
    the first failing argument (``err.throw()`` raises it); under plain ``jit`` the checks stay
    no-ops. It is off by default because a ``debug_check`` takes a jitted call off JAX's fast
    dispatch path (benchmarks/README.md). It acts at trace time: a function already compiled
    outside the context is not re-traced.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jax.experimental import checkify
      >>> from dpjax.additive import laplace_mechanism
      >>> from dpjax.validation import checkify_checks
      >>> with checkify_checks():
      ...     release = jax.jit(checkify.checkify(lambda e: laplace_mechanism(jax.random.key(0), 1.0, e)))
      ...     err, _ = release(jnp.float32(-1))
      >>> err.get()[:28]
      'epsilon must be finite and >'
    """
    previous = getattr(_checkify, "enabled", False)
    _checkify.enabled = enabled
    try:
        yield
    finally:
        _checkify.enabled = previous


class Checks:
    """Validates a mechanism's inputs: eagerly when concrete, in the graph when traced.

    Use one per mechanism call::

        checks = Checks()
        eps = checks.epsilon(epsilon)                 # float if concrete, else a traced scalar
        x = checks.array(x, "x", ndim=1)
        ...
        return checks.guard(result)                   # NaN / -1 where a traced check failed

    When every checked value is concrete nothing is recorded and :meth:`guard` returns its
    argument unchanged (no cost). Inside :func:`checkify_checks` each recorded check is also a
    :func:`jax.experimental.checkify.debug_check`, so ``checkify.checkify(mechanism)`` reports
    the failing argument.
    """

    def __init__(self) -> None:
        self._valid: list[jax.Array] = []

    @property
    def traced(self) -> bool:
        """Whether any check was deferred to the graph."""
        return bool(self._valid)

    def record(self, valid: ArrayLike, message: str) -> None:
        """Records a traced boolean condition that must hold for the output to be meaningful."""
        valid = jnp.all(jnp.asarray(valid, bool))
        if getattr(_checkify, "enabled", False):
            checkify.debug_check(valid, message)
        self._valid.append(valid)

    def valid(self) -> jax.Array | bool:
        """The conjunction of the recorded conditions (``True`` when none was recorded)."""
        if not self._valid:
            return True
        return jnp.all(jnp.stack(self._valid))

    def _scalar(self, value, name: str, host_check, condition, requirement: str):
        if not is_traced(value):
            return host_check(value)
        if is_boolean(value):  # its dtype is known while tracing
            raise TypeError(f"{name} must be a real number, got a boolean.")
        value = jnp.asarray(value)
        if value.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got shape {value.shape}.")
        if not jnp.issubdtype(value.dtype, jnp.floating):
            value = value.astype(float_dtype())
        self.record(condition(value), f"{name} must be {requirement}.")
        return value

    def epsilon(
        self, value: ArrayLike, name: str = "epsilon", *, allow_zero: bool = False
    ) -> float | jax.Array:
        """A privacy parameter: finite and > 0 (>= 0 with ``allow_zero``)."""
        if allow_zero:
            return self._scalar(
                value, name, lambda v: check_epsilon(v, name, allow_zero=True),
                lambda v: jnp.isfinite(v) & (v >= 0), "finite and >= 0",
            )
        return self._scalar(
            value, name, lambda v: check_epsilon(v, name), lambda v: jnp.isfinite(v) & (v > 0),
            "finite and > 0",
        )

    def positive(self, value: ArrayLike, name: str) -> float | jax.Array:
        """A finite, strictly positive real (a sensitivity, a scale, a budget)."""
        return self.epsilon(value, name)

    def probability(
        self, value: ArrayLike, name: str, *, open_low: bool = False, open_high: bool = False
    ) -> float | jax.Array:
        """A probability in [0, 1]; ``open_low``/``open_high`` exclude the end points."""

        def condition(p):
            low = p > 0 if open_low else p >= 0
            high = p < 1 if open_high else p <= 1
            return low & high

        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        return self._scalar(
            value, name, lambda v: check_probability(v, name, open_low=open_low, open_high=open_high),
            condition, f"in {interval}",
        )

    def real(
        self, value: ArrayLike, name: str, *, minimum: float | None = None, open_minimum: bool = False
    ) -> float | jax.Array:
        """A finite real (a threshold, a bound), optionally ``>= minimum`` (``>`` if open)."""

        def host(v):
            v = check_real(v, name)
            if minimum is not None and (v <= minimum if open_minimum else v < minimum):
                raise ValueError(f"{name} must be {'>' if open_minimum else '>='} {minimum}, got {v}.")
            return v

        def condition(v):
            ok = jnp.isfinite(v)
            if minimum is not None:
                ok &= v > minimum if open_minimum else v >= minimum
            return ok

        requirement = "finite" if minimum is None else f"finite and {'>' if open_minimum else '>='} {minimum}"
        return self._scalar(value, name, host, condition, requirement)

    def integer(self, value: ArrayLike, name: str, dtype: DTypeLike, *, minimum: int = 1) -> jax.Array:
        """An integer-valued number ``>= minimum`` (a record count, a contribution bound) as a
        ``dtype`` scalar: a concrete one is checked eagerly (:func:`check_int`), a traced one (any
        real dtype) is recorded as finite, integer-valued and ``>= minimum``."""
        if not is_traced(value):
            return jnp.asarray(check_int(value, name, minimum=minimum), dtype)
        if is_boolean(value):
            raise TypeError(f"{name} must be an integer, got a boolean.")
        value = jnp.asarray(value).astype(dtype)
        if value.ndim != 0:
            raise ValueError(f"{name} must be a scalar, got shape {value.shape}.")
        self.record(
            jnp.isfinite(value) & (value >= minimum) & (value == jnp.round(value)),
            f"{name} must be an integer >= {minimum}.",
        )
        return value

    def array(self, x: object, name: str, **kwargs: Any) -> jax.Array:
        """A data array, as :func:`check_array` (same keyword arguments).

        Shape, rank and dtype are always checked eagerly; the value checks (``finite``,
        ``nonnegative``) are eager for concrete data and recorded for traced data. With
        ``finite=False`` NaN is still refused (infinities are allowed).
        """
        finite = kwargs.get("finite", True)
        with jax.ensure_compile_time_eval():
            arr = check_array(x, name, **{**kwargs, "finite": False, "nonnegative": False})
        if not is_traced(arr) or arr.size == 0:
            nonnegative = kwargs.get("nonnegative", False)
            refuse_values(arr, name, nan=True, infinite=finite, negative=nonnegative)
            return arr
        if jnp.issubdtype(arr.dtype, jnp.floating):
            if kwargs.get("finite", True):
                self.record(jnp.isfinite(arr), f"{name} must be finite (no NaN or infinity).")
            else:
                self.record(~jnp.isnan(arr), f"{name} must not contain NaN.")
        if kwargs.get("nonnegative", False):
            self.record(arr >= 0, f"{name} must be non-negative.")
        return arr

    def data(
        self, x: object, name: str = "x", *, allow_infinite: bool, allow_empty: bool = False
    ) -> jax.Array:
        """The one data contract: a 1-D real array without NaN, with +-inf allowed only if asked.

        ``allow_infinite`` has no default, so every mechanism states its contract: ``True`` where
        the mechanism is defined for infinite records (the unbounded-range quantiles and clipped
        aggregates clip or compare them), ``False`` where a record must be a finite number (the
        bounded quantile baselines). ``allow_empty`` accepts ``n = 0``. Values are checked as in
        :meth:`array`: eagerly for concrete data, recorded for traced data.
        """
        return self.array(x, name, ndim=1, allow_empty=allow_empty, finite=not allow_infinite)

    def guard(self, output: Output) -> Output:
        """``output`` with every floating leaf NaN and every integer leaf -1 if a check failed.

        Boolean leaves are left as they are: every mechanism whose output has a boolean leaf
        also returns an index or a float that carries the marker (documented per mechanism).
        """
        if not self._valid:
            return output
        valid = self.valid()

        def mark(leaf):
            leaf = jnp.asarray(leaf)
            if jnp.issubdtype(leaf.dtype, jnp.floating):
                return jnp.where(valid, leaf, jnp.asarray(jnp.nan, leaf.dtype))
            if jnp.issubdtype(leaf.dtype, jnp.integer):
                return jnp.where(valid, leaf, jnp.asarray(-1, leaf.dtype))
            return leaf

        return jax.tree.map(mark, output)
