"""The registry of the studies that ``dpjax study`` runs.

A mechanism family declares its studies in a module of :mod:`dpjax._src.studies.catalog` (one module per
family, so families never edit a shared file; :func:`dpjax.studies.studies` imports them all)
and registers each :class:`~dpjax.studies.Study`::

    register(Study("laplace_clipped_mean", mechanisms=[...], datasets={"normal": "normal"}, ...))

Datasets given by name are the built-in ones (:mod:`dpjax._src.datasets.builtin`), generated from the
run's seed.
"""

from __future__ import annotations

from dpjax._src.studies.definition import Study

__all__ = [
    "register",
    "registered",
]

_STUDIES: dict[str, Study] = {}


def register(study: Study) -> Study:
    """Registers ``study`` under its name (a second study with the same name is an error)."""
    if study.name in _STUDIES and _STUDIES[study.name] is not study:
        raise ValueError(f"a study named {study.name!r} is already registered.")
    _STUDIES[study.name] = study
    return study


def registered() -> dict[str, Study]:
    """The studies registered so far, by name (:func:`dpjax.studies.studies` imports the catalog first)."""
    return dict(sorted(_STUDIES.items()))
