"""The implementation behind :mod:`dpjax.sharded` (its docstring states the mechanisms, their papers and
guarantees; this module's functions carry theirs)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from dpjax._src import partial_top_k

__all__ = [
    "auto_axes",
    "top_k",
]


def _last_axis_mesh_axes(x):
    """The explicit mesh axes that shard ``x``'s last axis (``None`` when it is not sharded)."""
    sharding = jax.typeof(x).sharding
    spec = getattr(sharding, "spec", None)
    if not spec or len(spec) < x.ndim or spec[-1] is None:
        return None
    return sharding, spec


def top_k(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """``lax.top_k(x, k)`` (values, int32 indices along the last axis), also for a last axis sharded
    over explicit mesh axes: per-shard top-k with ``shard_map``, then the top-k of the candidates.

    Ties go to the lower index as in ``lax.top_k``: the candidates are laid out shard by shard, each
    shard's in ``lax.top_k`` order, so equal values appear in increasing index order.
    """
    sharded = _last_axis_mesh_axes(x)
    if sharded is None:
        return partial_top_k.blocked_top_k(x, k)
    sharding, spec = sharded
    axes = spec[-1] if isinstance(spec[-1], tuple) else (spec[-1],)
    devices = 1
    for axis in axes:
        devices *= sharding.mesh.shape[axis]
    gathered = NamedSharding(sharding.mesh, PartitionSpec(*spec[:-1], None))
    if x.shape[-1] % devices:  # uneven shards: rank the gathered array
        return top_k(jax.sharding.reshard(x, gathered), k)
    block = x.shape[-1] // devices
    local_k = min(k, block)

    def shard_top_k(shard):
        values, positions = partial_top_k.blocked_top_k(shard, local_k)
        offset = lax.axis_index(axes) * block
        return values, (positions + offset).astype(jnp.int32)

    values, indices = jax.shard_map(
        shard_top_k, mesh=sharding.mesh, in_specs=spec, out_specs=(spec, spec), axis_names=set(axes)
    )(x)
    values, indices = jax.sharding.reshard(values, gathered), jax.sharding.reshard(indices, gathered)
    top, positions = lax.top_k(values, k)
    return top, jnp.take_along_axis(indices, positions, axis=-1)


def leading_axes(x) -> tuple | None:
    """``(mesh, axes)``: the mesh axes that shard ``x``'s leading axis into equal blocks, or ``None``.

    Read from the value's type for a traced value (mesh axes of explicit type only) and from its
    placement for a concrete array (explicit or automatic axes); ``None`` when the leading axis is
    not sharded, spans one device, or does not split evenly. Hashable: a static kernel option.
    """
    if isinstance(x, jax.core.Tracer):
        sharding = jax.typeof(x).sharding
    else:
        sharding = getattr(x, "sharding", None)
    spec = getattr(sharding, "spec", None)
    if not spec or spec[0] is None or jnp.ndim(x) == 0:
        return None
    mesh = sharding.mesh  # a sharding with a partition spec has a mesh
    axes = spec[0] if isinstance(spec[0], tuple) else (spec[0],)
    devices = 1
    for axis in axes:
        devices *= mesh.shape[axis]
    if devices == 1 or x.shape[0] % devices:
        return None
    return mesh, axes


def constrain_leading(x, layout):
    """``x`` laid out with its leading axis over ``layout``'s mesh axes (``reshard`` on explicit axes,
    a sharding constraint on automatic ones)."""
    mesh, axes = layout
    sharding = NamedSharding(mesh, PartitionSpec(axes))
    explicit = set(getattr(mesh, "explicit_axes", ()) or ())
    if explicit.issuperset(axes):
        return jax.sharding.reshard(x, sharding)
    return jax.lax.with_sharding_constraint(x, sharding)


def _staged_constants():
    """A context in which constants are staged into the graph being traced, not computed now.

    Under ``jax.ensure_compile_time_eval`` (concrete data binned once, now, even inside an outer
    ``jit``) JAX evaluates every operation without traced inputs eagerly, also inside the body of a
    ``shard_map`` being traced; there its result would be placed with the body's manual mesh axes,
    which jax 0.10 cannot do inside ``jax.set_mesh`` (a bare ``AssertionError`` from
    ``jnp.zeros``). Inside the body every value is traced anyway, so nothing is lost by staging.
    JAX exposes this switch only in ``jax._src.config`` (the one it uses itself for dispatch)."""
    from jax._src import config

    return config.eager_constant_folding(False)


def sum_over_shards(fn, layout, x, *replicated):
    """``fn(x, *replicated)`` for an ``fn`` additive over the leading axis of ``x`` (a histogram, a
    count): each device applies ``fn`` to its own block of ``x`` (``shard_map`` over ``layout``,
    :func:`leading_axes`) and the results are summed over the devices (``psum``; exact for integers,
    a different order of summation for floats). The result is replicated."""
    mesh, axes = layout

    def local(block, *rest):
        with _staged_constants():
            return jax.tree.map(lambda a: lax.psum(a, axes), fn(block, *rest))

    return jax.shard_map(
        local,
        mesh=mesh,
        in_specs=(PartitionSpec(axes), *(PartitionSpec(),) * len(replicated)),
        out_specs=PartitionSpec(),
        axis_names=set(axes),
        check_vma=False,  # also evaluated eagerly (ensure_compile_time_eval), where pvary cannot run
    )(constrain_leading(x, layout), *replicated)


def _explicit_mesh(tree):
    """The mesh and explicit axes of the first array leaf of ``tree`` placed on a mesh with explicit axes."""
    for leaf in jax.tree.leaves(tree):
        if not isinstance(leaf, jax.Array):
            continue
        mesh = getattr(jax.typeof(leaf).sharding, "mesh", None)
        axes = tuple(getattr(mesh, "explicit_axes", ()) or ())
        if axes:
            return mesh, axes
    return None, ()


Kernel = TypeVar("Kernel", bound=Callable)


def auto_axes(kernel: Kernel) -> Kernel:
    """Decorator (under ``jax.jit``) of a kernel whose array arguments may be sharded over explicit
    mesh axes (its other arguments, Python values, are static options): the kernel then runs under
    ``jax.sharding.auto_axes`` (XLA partitions it, as on a mesh with automatic axes) and its outputs
    are replicated. Without explicit axes it is called as is."""

    @functools.wraps(kernel)
    def wrapper(*args, **kwargs):
        mesh, axes = _explicit_mesh(args)
        if not axes:
            return kernel(*args, **kwargs)
        traced = [all(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(a)) for a in args]

        def run(*arrays):  # static arguments (strings, ints, callables) are closed over
            values = iter(arrays)
            return kernel(*(next(values) if t else a for a, t in zip(args, traced, strict=True)), **kwargs)

        with jax.sharding.use_abstract_mesh(mesh):
            return jax.sharding.auto_axes(run, axes=axes, out_sharding=PartitionSpec())(
                *(a for a, t in zip(args, traced, strict=True) if t)
            )

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps the kernel's signature
