"""dpjax: differential-privacy mechanisms as jit-compiled, vmap-batched JAX kernels.

Float noise is for studies, training and benchmarks; dpjax is not a hardened release system.
"""

from dpjax import (
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
from dpjax.accounting import ZCDP, Accountant, ApproxDP, BudgetExceededError, PureDP, RangeBounded

__version__ = "0.1.0"

__all__ = [
    "ZCDP",
    "Accountant",
    "ApproxDP",
    "BudgetExceededError",
    "PureDP",
    "RangeBounded",
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
]
