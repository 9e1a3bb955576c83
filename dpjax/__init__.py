"""dpjax: differential-privacy mechanisms as jit-compiled, vmap-batched JAX kernels.

Float noise is for studies, training and benchmarks; dpjax is not a hardened release system.

The subpackages load on first use (PEP 562 module ``__getattr__``), so ``import dpjax`` and the
``dpjax`` command answer at once; ``dpjax.quantiles`` and ``from dpjax import quantiles`` work as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names the lazy loading below gives, spelled out for type checkers
    from dpjax import (  # noqa: F401
        accounting,
        additive,
        aggregates,
        audit,
        budgeting,
        noise,
        optax,
        postprocess,
        quantiles,
        selection,
        svt,
        topk,
        validation,
    )
    from dpjax.accounting import ZCDP, Accountant, ApproxDP, BudgetExceededError, PureDP, RangeBounded  # noqa: F401
    from dpjax.validation import TracedParameterError  # noqa: F401

__version__ = "0.1.0"

_SUBPACKAGES = (
    "accounting",
    "additive",
    "aggregates",
    "audit",
    "budgeting",
    "noise",
    "optax",
    "postprocess",
    "quantiles",
    "selection",
    "svt",
    "topk",
    "validation",
)
_FROM_ACCOUNTING = ("ZCDP", "Accountant", "ApproxDP", "BudgetExceededError", "PureDP", "RangeBounded")
_FROM_VALIDATION = ("TracedParameterError",)

__all__ = sorted(_FROM_ACCOUNTING + _FROM_VALIDATION + _SUBPACKAGES)


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"dpjax.{name}")
    if name in _FROM_ACCOUNTING:
        return getattr(importlib.import_module("dpjax.accounting"), name)
    if name in _FROM_VALIDATION:
        return getattr(importlib.import_module("dpjax.validation"), name)
    raise AttributeError(f"module 'dpjax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
