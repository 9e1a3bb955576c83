"""A key-independent branch that stays a branch when ``vmap`` batches its predicate.

Many kernels pick between a fast path and a literal fallback with a ``lax.cond`` on a predicate
computed from the data and the parameters, never from the key (for example "the tail left out by
the fast path is negligible at this epsilon"). Under ``vmap`` over keys the predicate is unbatched
and the ``cond`` stays a real branch, taken once. But a ``vmap`` that batches a parameter (the
study runner's ``vmap`` over epsilon of ``vmap`` over keys) batches the predicate, and JAX then
turns the ``cond`` into a select that runs *both* branches for every lane: the literal fallback for
every release, even where no lane needs it.

:func:`cond` keeps the branch: each lane gets ``fast`` where its predicate holds and ``slow``
elsewhere (exactly its own branch, so each lane's output and law are those of ``lax.cond``), and a
branch runs only where some lane needs it. It asks :func:`all_lanes`, a
:func:`jax.custom_batching.custom_vmap` function (the mechanism of :mod:`dpjax._src.auto`) whose
``vmap`` rule reduces the batched predicate over the level's axis and binds itself again one level
out, so the answer is unbatched at every level: nested ``vmap`` (either order), ``jit`` inside or
outside, and concrete predicates alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap

__all__ = ["all_lanes", "cond"]


@custom_vmap
def _all(pred):
    return pred


@_all.def_vmap
def _all_rule(axis_size, in_batched, pred):
    del axis_size
    reduced = jnp.all(pred, axis=0) if in_batched[0] else pred
    return _all(reduced), False


def all_lanes(pred) -> jax.Array:
    """A scalar boolean ``pred`` reduced over every ``vmap`` level that batches it: unbatched, True
    where it holds in every lane (``pred`` itself outside ``vmap``). Not a per-lane function: use it
    only to skip work that no lane needs, as :func:`cond` does."""
    pred = jnp.asarray(pred, bool)
    if pred.ndim != 0:
        raise ValueError(f"all_lanes takes a scalar predicate, got shape {pred.shape}.")
    return _all(pred)


def cond(pred, fast: Callable, slow: Callable, *operands) -> Any:
    """``lax.cond(pred, fast, slow, *operands)`` for a scalar ``pred``, per lane under ``vmap``:
    ``fast`` runs only where some lane's ``pred`` holds and ``slow`` only where some lane's does
    not (each under a ``lax.cond`` on :func:`all_lanes`, unbatched), and each lane keeps the output
    of its own branch (a select of the two outputs, which match in structure, shapes and dtypes)."""
    pred = jnp.asarray(pred, bool)
    shapes = jax.eval_shape(fast, *operands)

    def nothing(*_):
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    taken = lax.cond(~all_lanes(~pred), fast, nothing, *operands)
    other = lax.cond(all_lanes(pred), nothing, slow, *operands)
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), taken, other)
