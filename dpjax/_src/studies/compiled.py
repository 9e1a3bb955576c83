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

The data work is done once per call of the runner, not once per chunk: the chunk's jaxpr is split by
data dependence (JAX's partial evaluation, the machinery of ``jax.linearize``) into the part that
does not depend on the key or the first trial (sorting, binning, log-weights: anything computed
from the data alone), compiled as a ``prepare`` step whose results are handed to every chunk, and
the part that does. Where the split fails, the whole chunk runs as one (same results). With a
mesh, or several processes, the chunk is a plain ``jit`` (cached the same way; no memory analysis,
so its size is the first one).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np

__all__: list[str] = []

_CACHE_SIZE = 32  # compiled chunks kept (each holds its executable and the hoisted constants)
_cache: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()


class Chunk(NamedTuple):
    """A compiled chunk of ``trials`` trials: ``state = prepare(args)`` does the data work once, then
    ``run(state, key, start)`` gives the outputs of trials ``start, ..., start + trials - 1``."""

    prepare: Callable
    run: Callable
    trials: int
    memory: int | None  # bytes the executable needs (arguments, outputs, temporaries), if known
    argument_memory: int | None  # of which its arguments (the data: they do not grow with the trials)
    cached: bool  # taken from the cache: nothing was compiled
    executables: tuple = ()  # the compiled prepare step and chunk (their HLO holds no large constant)


def _leaf_signature(leaf) -> tuple:
    aval = jax.typeof(leaf) if isinstance(leaf, jax.Array) else jax.typeof(jnp.asarray(leaf))
    return aval.shape, str(aval.dtype), aval.weak_type, getattr(leaf, "sharding", None)


def signature(*trees) -> tuple:
    """What a compiled call depends on besides the function: the tree structure and each leaf's shape,
    dtype, weak type and sharding, and the precision mode."""
    leaves, treedef = jax.tree.flatten(trees)
    x64 = bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]  # jax's Config stub lacks the options
    return treedef, tuple(_leaf_signature(leaf) for leaf in leaves), x64


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


def _split(jaxpr, n_consts: int):
    """``(known, unknown)`` jaxprs: ``known(*consts, *args) -> residuals`` (the data work) and
    ``unknown(*residuals, key, start) -> outputs``; ``None`` where JAX cannot split it."""
    from jax._src.interpreters import partial_eval as pe  # not public: the split jax.linearize uses

    try:
        flat = pe.convert_constvars_jaxpr(jaxpr)  # inputs: consts, key, start, args
        unknowns = [False] * n_consts + [True, True] + [False] * (len(flat.invars) - n_consts - 2)
        closed = jax.extend.core.ClosedJaxpr(flat, ())
        known, unknown, _, _ = pe.partial_eval_jaxpr_nounits(closed, unknowns, True)
    except Exception:  # any failure of the split: the unsplit chunk is the same computation
        return None
    return known, unknown


def _compile(f: Callable, trials: int, mesh, key, args) -> Chunk:
    """Traces and compiles the chunk; the jaxpr's constants become arguments of the executable, and its
    data work a ``prepare`` step of its own."""
    chunk = _trials_function(f, trials, mesh)
    if mesh is not None or jax.process_count() > 1:  # a plain jit, as every process of a multi-host run
        # must run the same programs in the same order
        jitted = jax.jit(chunk)
        return Chunk(lambda args: args, lambda args, key, start: jitted(key, jnp.uint32(start), args),
                     trials, None, None, cached=False, executables=())
    start = jnp.uint32(0)
    closed, shapes = jax.make_jaxpr(chunk, return_shape=True)(key, start, args)
    out_tree = jax.tree.structure(shapes)
    consts = [np.asarray(c) if isinstance(c, np.generic) else c for c in closed.consts]
    split = _split(closed.jaxpr, len(consts))
    if split is None:
        def prepare_fn(consts, args):
            return consts, args

        def run_fn(state, key, start):
            flat = jax.core.eval_jaxpr(closed.jaxpr, state[0], key, start, *jax.tree.leaves(state[1]))
            return jax.tree.unflatten(out_tree, flat)
    else:
        known, unknown = split

        def prepare_fn(consts, args):
            return jax.extend.core.jaxpr_as_fun(known)(*consts, *jax.tree.leaves(args))

        def run_fn(state, key, start):
            return jax.tree.unflatten(out_tree, jax.extend.core.jaxpr_as_fun(unknown)(*state, key, start))

    prepare = jax.jit(prepare_fn).lower(consts, args).compile()
    state = (consts, args) if split is None else jax.eval_shape(prepare_fn, consts, args)
    compiled = jax.jit(run_fn).lower(state, key, start).compile()

    def run(state, key, start):
        return compiled(state, key, jnp.uint32(start))

    return Chunk(lambda args: prepare(consts, args), run, trials, *memory_bytes(compiled), cached=False,
                 executables=(prepare, compiled))


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
