"""The compiled chunk of the Monte Carlo runner, cached across calls, with closed-over constants hoisted.

A chunk is ``jit(vmap over trial keys of f)`` for a fixed number of trials. It is traced once
(``jax.make_jaxpr``) and compiled ahead of time, so the runner knows its memory before running it
(:func:`memory_bytes`, from XLA's ``memory_analysis()``) and caches the executable under the function,
the chunk size, the mesh and the shapes, dtypes and shardings of the key and ``args``: a second
``monte_carlo`` or ``run_study`` with the same mechanism and shapes compiles nothing.

Closed-over arrays are passed to the executable as arguments, never embedded: every array that the
traced function captures (the data a ``lambda`` closes over, tables a kernel computed on the host from
concrete data) is a constant of the jaxpr, and the executable takes the jaxpr's constants as
arguments. XLA therefore never sees a large constant, so it cannot spend seconds constant-folding
work on it (a sort of closed-over data, say), while a kernel still sees concrete data when it is
traced (and may do its data work on the host once).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__: list[str] = []

_CACHE_SIZE = 32  # compiled chunks kept (each holds its executable and the hoisted constants)
_cache: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()


class Chunk(NamedTuple):
    """A compiled chunk of ``trials`` trials: ``run(key, start, args)`` gives the outputs of trials
    ``start, ..., start + trials - 1`` (device arrays)."""

    run: Callable
    trials: int
    memory: int | None  # bytes the executable needs (arguments, outputs, temporaries), if known
    argument_memory: int | None  # of which its arguments (the data: they do not grow with the trials)
    cached: bool  # taken from the cache: nothing was compiled
    executable: Any = None  # the compiled executable (its HLO holds no large constant)


def _leaf_signature(leaf) -> tuple:
    aval = jax.typeof(leaf) if isinstance(leaf, jax.Array) else jax.typeof(jnp.asarray(leaf))
    return aval.shape, str(aval.dtype), aval.weak_type, getattr(leaf, "sharding", None)


def signature(*trees) -> tuple:
    """What a compiled call depends on besides the function: the tree structure and each leaf's shape,
    dtype, weak type and sharding, and the precision mode."""
    leaves, treedef = jax.tree.flatten(trees)
    return treedef, tuple(_leaf_signature(leaf) for leaf in leaves), bool(jax.config.jax_enable_x64)


def _trials_function(f: Callable, trials: int, mesh):
    """``chunk(key, start, args)``: ``f(fold_in(key, i), *args)`` for ``i = start, ..., start +
    trials - 1``, split over the devices of ``mesh`` (all its axes) when one is given."""
    block = trials // (1 if mesh is None else mesh.size)  # trials per device

    def trials_of(key, start, args):
        indices = start + jnp.arange(block, dtype=jnp.uint32)
        return jax.vmap(lambda i: f(jax.random.fold_in(key, i), *args))(indices)

    if mesh is None:
        return trials_of

    def device_trials(key, start, args):  # this device's block of the chunk
        device = jax.lax.axis_index(mesh.axis_names).astype(jnp.uint32)
        return trials_of(key, start + device * jnp.uint32(block), args)

    return jax.shard_map(device_trials, mesh=mesh, in_specs=jax.sharding.PartitionSpec(),
                         out_specs=jax.sharding.PartitionSpec(mesh.axis_names), check_vma=False)


def memory_bytes(compiled) -> tuple[int | None, int | None]:
    """Bytes a compiled executable needs (arguments + outputs + temporaries - aliased) and of which its
    arguments, from XLA's ``memory_analysis()``; ``None`` where the backend does not report them."""
    try:
        mem = compiled.memory_analysis()
    except (NotImplementedError, RuntimeError, AttributeError):
        return None, None
    if mem is None:
        return None, None
    total = (mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
             - mem.alias_size_in_bytes)
    return int(total), int(mem.argument_size_in_bytes)


def _compile(f: Callable, trials: int, mesh, key, args) -> Chunk:
    """Traces and compiles the chunk; the jaxpr's constants become arguments of the executable."""
    chunk = _trials_function(f, trials, mesh)
    start = jnp.uint32(0)
    closed, shapes = jax.make_jaxpr(chunk, return_shape=True)(key, start, args)
    out_tree = jax.tree.structure(shapes)
    jaxpr, consts = closed.jaxpr, [np.asarray(c) if isinstance(c, np.generic) else c for c in closed.consts]

    def hoisted(consts, key, start, args):
        flat = jax.core.eval_jaxpr(jaxpr, consts, key, start, *jax.tree.leaves(args))
        return jax.tree.unflatten(out_tree, flat)

    compiled = jax.jit(hoisted).lower(consts, key, start, args).compile()

    def run(key, start, args):
        return compiled(consts, key, jnp.uint32(start), args)

    return Chunk(run, trials, *memory_bytes(compiled), cached=False, executable=compiled)


def compiled_chunk(f: Callable, trials: int, key, args: tuple = (), mesh: Any = None, *,
                   on_compile: Callable[[], None] | None = None) -> Chunk:
    """The compiled chunk of ``trials`` trials of ``f`` for ``key`` and ``args`` of these shapes: from
    the cache (``cached=True``, nothing compiled) or compiled now (after calling ``on_compile``) and
    kept."""
    cache_key = (f, trials, mesh, signature(key, tuple(args)))
    with _lock:
        hit = _cache.get(cache_key)
        if hit is not None:
            _cache.move_to_end(cache_key)
            return hit._replace(cached=True)
    if on_compile is not None:
        on_compile()
    made = _compile(f, trials, mesh, key, tuple(args))
    with _lock:
        _cache[cache_key] = made
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return made
