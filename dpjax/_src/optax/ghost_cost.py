"""The static cost model of :mod:`dpjax._src.optax.ghost`: for each layer, the exact form of its norm and
clipped sum that costs least, from the shapes of one example's jaxpr alone (no timing, no backend).

A layer ``y = op(x, W)`` of one example has ``b`` independent blocks (a ``dot_general``'s own batch
dimensions), each with ``t`` rows of ``x`` (sequence positions, a convolution's output positions)
of ``k`` features and ``t`` rows of the cotangent ``dy`` of ``n`` features; ``W`` has ``b k n``
entries. An embedding (``gather``) reads ``t`` rows of ``n`` entries from a table of ``v`` rows.

The cost of a form is its floating-point operations plus :data:`FLOAT_COST` per float it writes to
or reads from memory (per example; every form is run over the same batch). The forms:

* ``outer`` (``t = 1``): ``||G||^2 = ||x||^2 ||dy||^2``;
* ``gram``: ``<x x^T, dy dy^T>``, ``t^2 (k + n)`` multiply-adds and two ``t x t`` matrices;
* ``direct``: ``||x^T dy||^2``, the example's gradient formed and reduced (``t k n``);
* ``ids`` (embedding): ``sum_{s,u} [id_s = id_u] dy_s . dy_u``, ``t^2 n``;
* ``table`` (embedding): the example's ``v x n`` gradient table, then its squares;
* ``per_example``: the layer's per-example gradient materialized (as ``per_example_grads`` does),
  its norm and its weighted sum taken from it: ``t k n`` for the gradient, ``2 k n`` and ``3 k n``
  floats moved for the norm and the sum.

Every form but ``per_example`` adds the clipped sum by the layer's transposition on the batch (one
weight-gradient contraction, ``t k n`` multiply-adds per example, as in non-private training).
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = [
    "FLOAT_COST",
    "GHOST_FORMS",
    "Dims",
    "cheapest",
    "costs",
    "dims",
]

FLOAT_COST = 16
"""Flops one float moved to or from memory costs: the order of a core's (or a GPU's) flops per
float of memory bandwidth (tens), so that a form that streams a per-example tensor through memory
pays for it against one that stays in registers."""

GHOST_FORMS = frozenset({"outer", "gram", "direct", "ids", "table"})
"""The forms that do not materialize the layer's per-example gradients."""


class Dims(NamedTuple):
    """A layer's shapes for one example (see the module docstring); ``v`` is 0 but for a gather."""

    kind: str  # "dense", "conv" or "gather"
    b: int
    t: int
    k: int
    n: int
    v: int = 0


def dims(eqn, position: int) -> Dims:
    """The :class:`Dims` of the layer whose parameter is operand ``position`` of ``eqn``."""
    name = eqn.primitive.name
    weight = eqn.invars[position].aval
    if name == "gather":
        ids = eqn.invars[1].aval
        return Dims("gather", 1, math.prod(ids.shape[:-1]), 1, math.prod(weight.shape[1:]), weight.shape[0])
    if name == "conv_general_dilated":
        _, rhs_spec, _ = eqn.params["dimension_numbers"]
        n = weight.shape[rhs_spec[0]]
        return Dims("conv", 1, eqn.outvars[0].aval.size // n, weight.size // n, n)
    x = eqn.invars[1 - position].aval
    (contract, batch) = eqn.params["dimension_numbers"]
    own_contract, own_batch = contract[1 - position], batch[1 - position]
    b = math.prod(x.shape[d] for d in own_batch)
    k = math.prod(x.shape[d] for d in own_contract)
    t = x.size // (b * k) if b * k else 0
    return Dims("dense", b, t, k, weight.size // (b * k) if b * k else 0)


def costs(d: Dims) -> dict[str, int]:
    """The cost (flops plus :data:`FLOAT_COST` per float moved) of each exact form of the layer."""
    f, b, t, k, n, v = FLOAT_COST, d.b, d.t, d.k, d.n, d.v
    if d.kind == "gather":
        transposed = t * n + f * 2 * t * n  # the batch's scatter-add into the table
        return {
            "ids": 2 * t * t * n + t * t + f * (t * n + 2 * t * t) + transposed,
            "table": t * n + 2 * v * n + f * (2 * t * n + 2 * v * n) + transposed,
            "per_example": t * n + 4 * v * n + f * (2 * t * n + 3 * v * n),
        }
    gradient = 2 * b * t * k * n  # the weight gradient: per example, or once on the batch
    transposed = gradient + f * b * t * (k + n)
    out = {
        "gram": b * (2 * t * t * (k + n) + t * t) + f * b * (t * (k + n) + 2 * t * t) + transposed,
        "direct": gradient + f * 2 * b * k * n + transposed,
        "per_example": gradient + f * b * t * (k + n) + 4 * b * k * n + f * 3 * b * k * n,
    }
    if t == 1:
        out["outer"] = 2 * b * (k + n) + f * b * (k + n) + transposed
    return out


def cheapest(d: Dims, per_example: bool) -> str:
    """The least costly form of :func:`costs` (ties to the first listed), among the ghost forms
    only unless ``per_example``."""
    options = {form: cost for form, cost in costs(d).items() if per_example or form in GHOST_FORMS}
    return min(options, key=options.__getitem__)
