"""The registry of every public mechanism, for the parametrized tests that iterate over it.

One :class:`Mechanism` entry per public mechanism: how to call it on small valid inputs, which of
its parameters may be traced (with a few valid values of each), and which are static (they fix an
output shape). A new mechanism is covered by the registry-driven tests by adding one entry to its
family's module here; ``tests/cross/test_mechanism_registry.py`` checks that no public mechanism is
missing.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Mechanism:
    """How the registry-driven tests call one public mechanism.

    Attributes:
      name: ``"module.function"`` (unique; used as the test id).
      fn: the mechanism, called as ``fn(key, **data, **params, **static)``.
      data: the data arguments (arrays), by name.
      params: the traceable parameters, by name, each with a tuple of at least two valid values;
        the first is the default used when another parameter is varied.
      static: the shape-fixing and option arguments (Python values), by name.
      privacy: the parameters among ``params`` that are privacy parameters (epsilon, rho, ...):
        an invalid traced value of each must make the whole output "invalid" (NaN / -1).
      nan_data: the float data arguments whose NaN entries must make the output invalid (default:
        every floating data argument).
      guarantee: the guarantee companion; it takes the mechanism's privacy arguments by the same
        names (``tests/cross/test_guarantees.py`` checks it).
      guarantee_args: the names (among params and static) passed to ``guarantee`` by keyword;
        default: every parameter of the companion that the entry registers (params or static).
      guarantee_grid: whether the companion reads an array of a privacy parameter as a grid (one
        guarantee per entry); ``False`` where an array means something else (per-user allotments).
      no_guarantee: for a mechanism without a companion, the documented reason why (required then).
      operand_scale: for a release that adds floats of larger magnitude and may cancel them (``value
        + noise``), their magnitude: its floats are compared within ``float_tolerance.MAX_ULP`` ulps
        of it, not of the release.
    """

    name: str
    fn: Callable
    data: Mapping[str, Any]
    params: Mapping[str, tuple]
    static: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    privacy: tuple[str, ...] = ("epsilon",)
    nan_data: tuple[str, ...] | None = None
    guarantee: Callable | None = None
    guarantee_args: tuple[str, ...] | None = None
    guarantee_grid: bool = True
    no_guarantee: str = ""
    operand_scale: float = 0.0

    def __post_init__(self):
        if (self.guarantee is None) == (not self.no_guarantee):
            raise ValueError(f"{self.name}: give a guarantee companion or the reason why there is none.")
        if self.guarantee is not None and self.guarantee_args is None:
            accepted = inspect.signature(self.guarantee).parameters
            names = tuple(name for name in accepted if name in {**self.params, **self.static})
            object.__setattr__(self, "guarantee_args", names)
        for name, values in self.params.items():
            if len(values) < 2:
                raise ValueError(f"{self.name}: give at least two valid values of {name}.")
        missing = set(self.privacy) - set(self.params)
        if missing:
            raise ValueError(f"{self.name}: privacy parameters {missing} are not in params.")

    @property
    def defaults(self) -> dict[str, Any]:
        return {name: values[0] for name, values in self.params.items()}

    def float_data(self) -> tuple[str, ...]:
        if self.nan_data is not None:
            return self.nan_data
        return tuple(
            name for name, value in self.data.items()
            if jnp.issubdtype(jnp.result_type(np.asarray(value)), jnp.floating)
        )

    def call(self, key, data=None, **params):
        """Calls the mechanism with the registered data (or ``data``) and defaults overridden."""
        data = self.data if data is None else data
        return self.fn(key, **data, **{**self.defaults, **params}, **self.static)

    def call_guarantee(self, **params):
        values = {**self.defaults, **self.static, **params}
        return self.guarantee(**{name: values[name] for name in self.guarantee_args})


def entry(module, name: str, **fields) -> Mechanism:
    """The entry of ``module``'s mechanism ``name`` (``"function"`` or ``"function[variant]"``).

    Named ``"<module path after dpjax.>.<name>"``; ``fn`` defaults to the module's function and
    ``guarantee`` to its ``<function>_guarantee`` companion (give either explicitly otherwise).
    """
    base = name.split("[")[0]
    fields.setdefault("fn", getattr(module, base))
    if "guarantee" not in fields and not fields.get("no_guarantee"):
        fields["guarantee"] = getattr(module, f"{base}_guarantee")
    return Mechanism(name=f"{module.__name__.removeprefix('dpjax.')}.{name}", **fields)


def all_mechanisms() -> list[Mechanism]:
    """Every registered mechanism: the ``MECHANISMS`` list of each module of this package."""
    package = importlib.import_module(__name__)
    entries = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
        entries.extend(importlib.import_module(f"{__name__}.{info.name}").MECHANISMS)
    return entries


_JITTED: dict[str, Callable] = {}


def jitted_call(mechanism: Mechanism) -> Callable:
    """``jax.jit(lambda key, data, params: mechanism.call(key, data, **params))``: the whole call with
    the data and every parameter as arguments, one object per mechanism, so that the tests of a
    worker that call it with the same shapes and dtypes share one compilation."""
    if mechanism.name not in _JITTED:
        _JITTED[mechanism.name] = jax.jit(lambda key, data, params: mechanism.call(key, data, **params))
    return _JITTED[mechanism.name]


def leaves(output) -> list[np.ndarray]:
    """The output's leaves as host arrays."""
    return [np.asarray(leaf) for leaf in jax.tree.leaves(output)]
