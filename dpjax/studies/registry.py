"""The registry of Monte Carlo accuracy studies run by ``dpjax study``.

A mechanism family registers its studies in a module of :mod:`dpjax.studies.catalog` (one module per
family, so families never edit a shared file)::

    @register("laplace_clipped_mean", family="additive", datasets=("normal", "uniform"),
              description="clipped mean + Laplace noise")
    def _study(key, data, epsilon, trials):
        ...
        return [accuracy_row("mean", estimates, truth)]

A study function takes a key, a :class:`~dpjax.studies.datasets.Dataset`, the total epsilon and
the number of trials, and returns a list of rows (dicts); :func:`accuracy_row` builds the standard
error columns. The runner adds the study, dataset, epsilon, trials and timing columns.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable

from dpjax.studies.summary import summarize_errors


@dataclasses.dataclass(frozen=True)
class Study:
    name: str
    family: str
    datasets: tuple[str, ...]
    description: str
    run: Callable


_STUDIES: dict[str, Study] = {}


def register(name: str, *, family: str, datasets: tuple[str, ...], description: str):
    """Decorator that registers a study function under ``name``."""

    def decorator(fn):
        if name in _STUDIES and _STUDIES[name].run is not fn:
            raise ValueError(f"a study named {name!r} is already registered.")
        _STUDIES[name] = Study(name, family, tuple(datasets), description, fn)
        return fn

    return decorator


def studies() -> dict[str, Study]:
    """Every registered study, after importing each module of :mod:`dpjax.studies.catalog`."""
    from dpjax.studies import catalog

    for module in pkgutil.iter_modules(catalog.__path__):
        importlib.import_module(f"{catalog.__name__}.{module.name}")
    return dict(sorted(_STUDIES.items()))


def accuracy_row(statistic: str, estimates, truth, **extra) -> dict:
    """A result row: the statistic's name, its truth and the error summary of ``estimates``."""
    row = {"statistic": statistic, "truth": float(truth)}
    row.update(summarize_errors(estimates, truth).as_dict())
    row.update(extra)
    return row
