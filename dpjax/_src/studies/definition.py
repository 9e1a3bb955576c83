"""What a study is made of: :class:`Mechanism` and :class:`Study` (see :mod:`dpjax.studies`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dpjax._src.studies.metrics import Metric

__all__ = ["Mechanism", "Study", "check_grid"]


@dataclasses.dataclass(frozen=True)
class Mechanism:
    """A mechanism under study.

    Attributes:
      name: its label in tables and figures.
      fn: ``fn(key, data, **params) -> release`` (a pytree of arrays), key first and pure.
      params: fixed keyword arguments (Python values, closed over: static).
      variants: if given, ``fn`` returns ``{variant: release}`` (several estimators from one
        release, e.g. a measurement and its post-processed improvement) and each variant is a
        mechanism of its own in the table, all from one compiled call.
      theory: per metric name (or ``(variant, metric name)``), ``theory(data, **params)`` with
        concrete parameters, returning a law or ``{statistic: value}`` (see
        :mod:`dpjax._src.studies.theory`).
      description: one line for listings.
    """

    name: str
    fn: Callable
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    variants: tuple[str, ...] = ()
    theory: Mapping[Any, Callable] = dataclasses.field(default_factory=dict)
    description: str = ""

    def __post_init__(self):
        object.__setattr__(self, "variants", tuple(self.variants))

    @property
    def labels(self) -> tuple[str, ...]:
        """The names its releases appear under in the table."""
        return self.variants or (self.name,)


@dataclasses.dataclass(frozen=True)
class Study:
    """A Monte Carlo study: mechanisms x datasets x parameter grid, measured by metrics.

    Attributes:
      name: the study's name (file names, the ``study`` column).
      mechanisms: :class:`Mechanism` objects, or a mapping ``{name: fn}``.
      datasets: ``{name: data}`` where data is an array or pytree of arrays, a :class:`Dataset`, or
        the name of a built-in dataset (see :mod:`dpjax._src.datasets.builtin`); or ``{name: (data,
        params)}`` with per-dataset fixed parameters (static) for ``fn``, ``truth`` and theory; a
        parameter given as a function is called with the (host) data, e.g. a threshold at a rank.
      metrics: what to measure (see :mod:`dpjax._src.studies.metrics`).
      grid: ``{parameter: values}``; the study runs on their product. Values may be traced.
      truth: ``truth(data, **params) -> pytree`` in JAX, what the metrics compare releases with
        (``None`` when no metric needs one). For mechanisms with variants, a truth dict with a key
        per variant gives each variant its own truth.
      static: grid parameters that must be concrete (they fix a shape): one compile per value.
      derived: ``{name: fn}``: parameters computed on the host from each grid point,
        ``fn(**grid point)``, and passed to ``fn``/``truth`` like grid values (traced). For host-side
        calibrations (e.g. a per-step epsilon found by bisection) that would otherwise make a
        mechanism refuse a traced grid. They get a column of their own in the table.
      description: one line for listings and figure titles.
      family: the mechanism family, for listings.
    """

    name: str
    mechanisms: Sequence[Mechanism] | Mapping[str, Callable]
    datasets: Mapping[str, Any]
    metrics: Sequence[Metric]
    grid: Mapping[str, Sequence] = dataclasses.field(default_factory=lambda: {"epsilon": (1.0,)})
    truth: Callable | None = None
    static: Sequence[str] = ()
    derived: Mapping[str, Callable] = dataclasses.field(default_factory=dict)
    description: str = ""
    family: str = "user"

    def __post_init__(self):
        mechanisms = self.mechanisms
        if isinstance(mechanisms, Mapping):
            mechanisms = [Mechanism(name, fn) for name, fn in mechanisms.items()]
        mechanisms = tuple(mechanisms)
        labels = [label for m in mechanisms for label in m.labels]
        if not mechanisms or len(set(labels)) != len(labels):
            raise ValueError(f"study {self.name!r}: mechanisms must be given, with distinct names.")
        metrics = tuple(self.metrics)
        if not metrics or len({m.name for m in metrics}) != len(metrics):
            raise ValueError(f"study {self.name!r}: metrics must be given, with distinct names.")
        if not self.datasets:
            raise ValueError(f"study {self.name!r}: give at least one dataset.")
        grid = check_grid(self.grid)
        static = tuple(self.static)
        unknown = sorted(set(static) - set(grid))
        if unknown:
            raise ValueError(f"study {self.name!r}: static parameters {unknown} are not in the grid.")
        derived = dict(self.derived)
        clash = sorted(set(derived) & set(grid))
        if clash:
            raise ValueError(f"study {self.name!r}: derived parameters {clash} are also grid parameters.")
        object.__setattr__(self, "derived", derived)
        object.__setattr__(self, "mechanisms", mechanisms)
        object.__setattr__(self, "metrics", metrics)
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "static", static)
        object.__setattr__(self, "datasets", dict(self.datasets))


def check_grid(grid: Mapping[str, Sequence]) -> dict[str, tuple]:
    checked = {}
    for name, values in grid.items():
        values = tuple(np.atleast_1d(np.asarray(values)).tolist())
        if not values:
            raise ValueError(f"grid parameter {name!r} has no values.")
        checked[name] = values
    return checked

