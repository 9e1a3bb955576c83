"""Kernels on data sharded over explicit mesh axes.

With automatic mesh axes XLA partitions every kernel by itself. With explicit axes
(``jax.make_mesh``'s default) several primitives refuse an input sharded along the axis they work
on (``top_k``, ``sort``, ``cumsum``, ``dynamic_update_slice``, scatters):

* :func:`top_k` ranks each shard (``shard_map``) and merges the shards' candidates: the k largest of
  the whole array are among the union of every shard's k largest, so the result is exact (never an
  approximate top-k), equal to ``lax.top_k`` on one device, ties to the lower index included; each ranking is
  :func:`dpjax._src.partial_top_k.blocked_top_k` (``lax.top_k``'s result by a blocked partial selection).
* :func:`auto_axes` runs a whole kernel with the explicit axes of its inputs switched to automatic,
  so XLA partitions it as it would on a mesh with automatic axes (same results as one device; the
  outputs come back replicated).
"""

from dpjax._src.sharded import (
    auto_axes,
    top_k,
)

__all__ = [
    "auto_axes",
    "top_k",
]
