"""Study definitions, one module per mechanism family, and :func:`studies`, which imports them.

Every catalog study sweeps the total privacy parameter over ``EPSILONS`` by default (``dpjax study
--epsilon`` replaces it) and states, per metric, what it measures and in which unit. A catalog module
registers its studies with :func:`dpjax.studies.register`; the registry does not know the catalog
(so neither imports the other back).
"""

from __future__ import annotations

import importlib
import pkgutil

from dpjax._src.studies import registry
from dpjax._src.studies.definition import Study

__all__ = [
    "studies",
]

EPSILONS = (0.25, 1.0, 4.0)


def studies() -> dict[str, Study]:
    """Every registered study (the catalog's and the caller's), after importing each catalog module."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return registry.registered()
