"""The ``jax.random`` floor of a release: ``jax.random`` drawing the same number of variates.

A reference beside the limit (:mod:`dpjax._src.tools.bench.bound`), not a bound: a sampler that draws
fewer bits than ``jax.random`` would for the variates counted (two words per threefry hash, or an
O(log n) sampler that never draws the n variates) is faster than it.

Every benchmark row reports ``time / floor`` measured in the same run, on the same device, for the
  same number of variates: N for one release, ``releases x N`` in one call for a Monte Carlo batch
  (then per release). The floor is the plain ``jax.random`` sampler (32 random bits per variate);
  dpjax's tail-exact samplers (``dpjax.noise``, ``mode="high"``) spend 64 bits and two logarithms,
  so about 2x the floor is the price of exact tails (the ``noise`` family of ``dpjax bench``
  measures it).

The release's limit is in :mod:`dpjax._src.tools.bench.bound`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from dpjax._src.tools.bench.harness import Timing, time_jitted

__all__ = [
    "MAX_VARIATES",
    "SAMPLERS",
    "data_bytes",
    "floor_releases",
    "rng_floor",
    "variate_count",
]

SAMPLERS = {
    "laplace": jax.random.laplace,
    "gumbel": jax.random.gumbel,
    "exponential": jax.random.exponential,
    "gaussian": jax.random.normal,
    "uniform": jax.random.uniform,
}


MAX_VARIATES = 2**25  # per floor call: 128 MiB of float32, so the floor fits wherever the batch does


def floor_releases(variates: float, releases: int) -> int:
    """How many releases one floor call draws: ``releases``, fewer when that would exceed
    ``MAX_VARIATES`` (the per-release time of a draw this large is linear in its size)."""
    return max(1, min(releases, MAX_VARIATES // variate_count(variates)))


def variate_count(variates: float) -> int:
    """A (mean) number of variates as a whole count >= 1 (rounded up)."""
    if not math.isfinite(variates) or variates <= 0:
        raise ValueError(f"variates must be a positive finite number, got {variates}.")
    return max(1, math.ceil(variates))


def data_bytes(args) -> int:
    """Bytes of the arrays in ``args`` (any pytree): what one release must read at least once."""
    return sum(int(getattr(leaf, "nbytes", 0)) for leaf in jax.tree_util.tree_leaves(args))


def rng_floor(
    kind: str, variates: float, *, releases: int = 1, dtype=jnp.float32, repeats: int = 5
) -> Timing:
    """Seconds per release for ``jax.random`` to draw ``variates`` variates of ``kind`` per release.

    ``releases > 1`` draws ``releases x variates`` in one jitted call (what a Monte Carlo batch
    needs) and divides by ``releases``; pass ``floor_releases(variates, batch)`` to cap the draw.
    Compile time is excluded (and reported in the timing).
    """
    if kind not in SAMPLERS:
        raise ValueError(f"kind must be one of {sorted(SAMPLERS)}, got {kind!r}.")
    sampler = SAMPLERS[kind]
    shape = (releases, variate_count(variates)) if releases > 1 else (variate_count(variates),)
    timing, _ = time_jitted(lambda key: sampler(key, shape, dtype), jax.random.key(0), repeats=repeats)
    return timing.per(releases)
