"""The headline benchmark of every mechanism family: ``FAMILIES[name](scale)`` returns its cases."""

from __future__ import annotations

import importlib

__all__ = [
    "FAMILIES",
    "cases",
]

FAMILIES = ("noise", "selection", "svt", "quantiles", "aggregates", "topk", "budgeting", "training", "sota")


def cases(family: str, scale: float):
    """The :class:`~dpjax._src.tools.bench.case.Case` rows of ``family`` at ``scale`` x the headline sizes."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    return importlib.import_module(f"{__name__}.{family}").cases(scale)
