"""Kernels on data sharded over explicit mesh axes.

With automatic mesh axes XLA partitions every kernel by itself. With explicit axes
(``jax.make_mesh``'s default) several primitives refuse an input sharded along the axis they work
on (``top_k``, ``sort``, ``cumsum``, ``dynamic_update_slice``, scatters):

* :func:`top_k` ranks each shard (``shard_map``) and merges the shards' candidates: the k largest of
  the whole array are among the union of every shard's k largest, so the result is exact (never an
  approximate top-k), equal to ``lax.top_k`` on one device, ties to the lower index included.
* :func:`auto_axes` runs a whole kernel with the explicit axes of its inputs switched to automatic,
  so XLA partitions it as it would on a mesh with automatic axes (same results as one device; the
  outputs come back replicated).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec


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
        values, indices = lax.top_k(x, k)
        return values, indices.astype(jnp.int32)
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
        values, positions = lax.top_k(shard, local_k)
        offset = lax.axis_index(axes) * block
        return values, (positions + offset).astype(jnp.int32)

    values, indices = jax.shard_map(
        shard_top_k, mesh=sharding.mesh, in_specs=spec, out_specs=(spec, spec), axis_names=set(axes)
    )(x)
    values, indices = jax.sharding.reshard(values, gathered), jax.sharding.reshard(indices, gathered)
    top, positions = lax.top_k(values, k)
    return top, jnp.take_along_axis(indices, positions, axis=-1)


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


def auto_axes(kernel):
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

    return wrapper
