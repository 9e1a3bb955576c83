"""The registry of the studies that ``dpjax study`` runs.

A mechanism family declares its studies in a module of :mod:`dpjax.studies.catalog` (one module per
family, so families never edit a shared file) and registers each :class:`~dpjax.studies.Study`::

    register(Study("laplace_clipped_mean", mechanisms=[...], datasets={"normal": "normal"}, ...))

Datasets given by name are the built-in ones (:mod:`dpjax.studies.datasets`), generated from the
run's seed.
"""

from __future__ import annotations

import importlib
import pkgutil

from dpjax.studies.study import Study

__all__ = [
    "register",
    "studies",
]

_STUDIES: dict[str, Study] = {}


def register(study: Study) -> Study:
    """Registers ``study`` under its name (a second study with the same name is an error)."""
    if study.name in _STUDIES and _STUDIES[study.name] is not study:
        raise ValueError(f"a study named {study.name!r} is already registered.")
    _STUDIES[study.name] = study
    return study


def studies() -> dict[str, Study]:
    """Every registered study, after importing each module of :mod:`dpjax.studies.catalog`."""
    from dpjax.studies import catalog

    for module in pkgutil.iter_modules(catalog.__path__):
        importlib.import_module(f"{catalog.__name__}.{module.name}")
    return dict(sorted(_STUDIES.items()))
