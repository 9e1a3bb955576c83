"""Monte Carlo runner: T independent releases of a mechanism, ``vmap``-ed under ``jit`` in chunks.

Trial ``i`` always uses ``jax.random.fold_in(key, i)``, so the results for a given key do not depend
on the chunk size (nor on the number of trials: the first 100 trials of a 1,000-trial run are the
100-trial run). Each chunk is one call of a single compiled ``jit(vmap(f))``; the last chunk is
padded to the chunk size so nothing recompiles, and the padding is dropped. The compiled chunk
function takes the key and ``args`` as arguments and is kept for the last few ``f`` used, so calling
``monte_carlo`` again with the same ``f`` (another key, other data of the same shapes) does not
compile again.

Between chunks the runner checks :data:`dpjax.interrupt.STOP` (set by the first SIGINT or SIGTERM
of a ``dpjax`` command), so a stopped run ends within one chunk.

With a ``mesh``, each chunk's trials are split over the mesh's devices with ``shard_map`` (every
device runs ``chunk_size / devices`` trials on replicated ``args``): trial ``i`` still uses
``fold_in(key, i)``, so the results are those of one device, and the memory of a chunk per device
falls as 1/devices. The same call runs across hosts after ``jax.distributed.initialize`` with a
mesh over ``jax.devices()`` (every process gets the whole result).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from tqdm import tqdm

from dpjax import interrupt
from dpjax.validation import check_int

__all__ = [
    "monte_carlo",
    "trial_keys",
]

_DEFAULT_CHUNK_SIZE = 4096


def trial_keys(key, start: int, stop: int) -> jax.Array:
    """The keys of trials ``start, ..., stop-1``: ``fold_in(key, i)``, independent of chunking."""
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(start, stop, dtype=jnp.uint32))


@functools.lru_cache(maxsize=32)
def _chunk_runner(f: Callable, chunk_size: int, mesh: jax.sharding.Mesh | None = None):
    """The compiled ``chunk_size`` trials of ``f``, starting at trial ``start`` (one per ``f``),
    split over the devices of ``mesh`` (all its axes) when one is given."""
    n_devices = 1 if mesh is None else mesh.size
    block = chunk_size // n_devices  # trials per device

    def trials(key, start, args):  # trials start, ..., start + block - 1
        indices = start + jnp.arange(block, dtype=jnp.uint32)
        return jax.vmap(lambda i: f(jax.random.fold_in(key, i), *args))(indices)

    def device_trials(key, start, args):  # this device's block of the chunk
        device = jax.lax.axis_index(mesh.axis_names).astype(jnp.uint32)
        return trials(key, start + device * jnp.uint32(block), args)

    chunk = trials if mesh is None else jax.shard_map(
        device_trials, mesh=mesh, in_specs=jax.sharding.PartitionSpec(),
        out_specs=jax.sharding.PartitionSpec(mesh.axis_names), check_vma=False)
    return jax.jit(chunk)


def _host_array(a, n: int) -> np.ndarray:
    """The first ``n`` rows of ``a`` on this host (gathered from every process if ``a`` spans hosts)."""
    if not a.is_fully_addressable:
        from jax.experimental import multihost_utils

        a = multihost_utils.process_allgather(a, tiled=True)
    return np.asarray(a)[:n]


def monte_carlo(
    f: Callable,
    key,
    trials: int,
    *,
    args: tuple = (),
    chunk_size: int = _DEFAULT_CHUNK_SIZE,
    progress: bool | None = None,
    description: str = "trials",
    mesh: jax.sharding.Mesh | None = None,
):
    """Runs ``f(key_i, *args)`` for ``trials`` independent keys and stacks the outputs.

    Args:
      f: a mechanism call ``f(key, *args) -> pytree of arrays``. The data is held fixed, either by
        closure or, better for large arrays, in ``args``: closed-over arrays become compile-time
        constants that XLA may spend seconds folding, while ``args`` are passed to the compiled
        function as arguments (and other data of the same shapes reuses the compiled code). Either
        way, data work that does not depend on the key is done once.
      key: a ``jax.random`` key.
      trials: number of independent releases, >= 1.
      args: arrays (a tuple of pytrees) passed to ``f`` after the key, not batched.
      chunk_size: releases per compiled call; bounds peak memory.
      progress: show a progress bar; by default only on a terminal and for more than one chunk.
      description: label of the progress bar.
      mesh: a ``jax.sharding.Mesh`` (automatic or explicit axes, one or many hosts) over whose
        devices each chunk's trials are split (``chunk_size`` is rounded up to a multiple of its
        size); ``None`` runs on the default device. The results do not depend on it.

    Returns:
      The pytree of ``f``'s outputs, each leaf a NumPy array with a leading axis of size ``trials``.
    """
    trials = check_int(trials, "trials", minimum=1)
    chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    chunk_size = min(chunk_size, trials)
    if mesh is not None:
        chunk_size = -(-chunk_size // mesh.size) * mesh.size
    n_chunks = -(-trials // chunk_size)
    if progress is None:
        progress = n_chunks > 1 and sys.stderr.isatty()
    run_chunk = _chunk_runner(f, chunk_size, mesh)

    pieces = []
    with tqdm(total=trials, desc=description, disable=not progress, leave=False) as bar:
        for start in range(0, trials, chunk_size):
            interrupt.check()  # a command stopped by a signal ends here, between chunks
            stop = min(start + chunk_size, trials)
            out = run_chunk(key, jnp.uint32(start), tuple(args))
            pieces.append(jax.tree.map(lambda a, n=stop - start: _host_array(a, n), out))
            bar.update(stop - start)
    return jax.tree.map(lambda *leaves: np.concatenate(leaves, axis=0), *pieces)
