"""Monte Carlo runner: T independent releases of a mechanism, ``vmap``-ed under ``jit`` in chunks.

Trial ``i`` always uses ``jax.random.fold_in(key, i)``, so the results for a given key do not depend
on the chunk size (nor on the number of trials: the first 100 trials of a 1,000-trial run are the
100-trial run). Each chunk is one call of a single compiled ``jit(vmap(f))``; the last chunk is
padded to the chunk size so nothing recompiles, and the padding is dropped. Chunks are sized from
the device's memory and XLA's memory analysis of the compiled chunk. The compiled chunk takes the
key, the first trial and ``args`` (and any array ``f`` closes over) as arguments and is cached, so
calling ``monte_carlo`` again with the same ``f`` (another key, other data of the same shapes)
compiles nothing.

Between chunks the runner checks :data:`dpjax._src.interrupt.STOP` (set by the first SIGINT or SIGTERM
of a ``dpjax`` command), so a stopped run ends within one chunk.

With a ``mesh``, each chunk's trials are split over the mesh's devices with ``shard_map`` (every
device runs ``chunk_size / devices`` trials on replicated ``args``): trial ``i`` still uses
``fold_in(key, i)``, so the results are those of one device, and the memory of a chunk per device
falls as 1/devices. The same call runs across hosts after ``jax.distributed.initialize`` with a
mesh over ``jax.devices()`` (every process gets the whole result).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpjax._src import interrupt
from dpjax._src.host_checks import check_int
from dpjax._src.studies import chunking
from dpjax._src.studies.compiled import compiled_chunk
from dpjax._src.studies.status import ChunkStatus, terminal_sink

__all__ = [
    "monte_carlo",
    "trial_keys",
]


def trial_keys(key: jax.Array, start: int, stop: int) -> jax.Array:
    """The keys of trials ``start, ..., stop-1``: ``fold_in(key, i)``, independent of chunking."""
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(start, stop, dtype=jnp.uint32))


def _host_array(a, n: int) -> np.ndarray:
    """The first ``n`` rows of ``a`` on this host (gathered from every process if ``a`` spans hosts)."""
    if not a.is_fully_addressable:
        from jax.experimental import multihost_utils

        a = multihost_utils.process_allgather(a, tiled=True)
    return np.asarray(a)[:n]


def _chunk(f, key, args, trials: int, chunk_size: int | None, mesh, status: ChunkStatus | None):
    """The compiled chunk for this run: ``_chunking.first_size`` trials, shrunk to the
    memory budget if XLA says it needs more (see ``_chunking.py``); and what was compiled."""
    multiple = 1 if mesh is None else mesh.size
    size = chunking.first_size(trials, chunk_size, multiple)
    compiled = []
    while True:
        announce = None if status is None else lambda size=size: status.compiling(f"{size:,} trials per call")
        chunk = compiled_chunk(f, size, key, args, mesh, on_compile=announce)
        compiled.append({"trials": size, "memory_bytes": chunk.memory, "cached": chunk.cached})
        if chunk.memory is None:  # not reported (or a mesh): the first size stands
            return chunk, compiled
        fitted = chunking.fitted_size(trials, size, chunk.memory, chunking.memory_budget(), multiple,
                                      chunk.argument_memory)
        if fitted >= size:
            return chunk, compiled
        size = fitted


class _Stacked:
    """The default fold of the chunks' outputs: every trial kept, stacked along the first axis."""

    def __init__(self):
        self.pieces = []

    def add(self, start: int, out) -> None:
        self.pieces.append(out)

    def result(self):
        pieces = self.pieces
        return pieces[0] if len(pieces) == 1 else jax.tree.map(
            lambda *leaves: np.concatenate(leaves, axis=0), *pieces)

    def record(self) -> dict:
        return {}


def _probe(f, key, args, trials: int, chunk, mesh, status: ChunkStatus | None):
    """The compiled probe: a chunk of ``_chunking.probe_size`` trials run first, so that a long run with
    a status shows its releases per second and ETA soon after compiling; ``None`` for a short run (or
    one without a status)."""
    multiple = 1 if mesh is None else mesh.size
    size = chunking.probe_size(trials, chunk.trials, multiple)
    if status is None or size is None:
        return None
    return compiled_chunk(f, size, key, args, mesh,
                          on_compile=lambda: status.compiling(f"a probe of {size:,} trials (for the rate)"))


def run(f, key, trials: int, args: tuple, chunk_size: int | None, mesh, status: ChunkStatus | None,
         fold=None):
    """:func:`monte_carlo`'s work; returns the outputs and the record of the compiled chunks. ``fold``
    (``add(start, outputs)``, ``result()``, ``record()``) receives each chunk's host outputs in turn
    (default: all kept and stacked)."""
    chunk, compiled = _chunk(f, key, args, trials, chunk_size, mesh, status)
    probe = _probe(f, key, args, trials, chunk, mesh, status)
    runs = [] if probe is None else [(probe, 0)]
    runs += [(chunk, start) for start in range(0 if probe is None else probe.trials, trials, chunk.trials)]
    if probe is not None:
        compiled.append({"trials": probe.trials, "memory_bytes": probe.memory, "cached": probe.cached,
                         "probe": True})
    n_chunks, pieces = len(runs), _Stacked() if fold is None else fold
    states = {id(c): c.prepare(args) for c in (chunk, probe) if c is not None}
    for index, (running, start) in enumerate(runs):
        interrupt.check()  # a command stopped by a signal ends here, between chunks
        stop = min(start + running.trials, trials)
        if status is not None:
            status.sampling(index + 1, n_chunks)
        out = running.run(states[id(running)], key, start)
        pieces.add(start, jax.tree.map(lambda a, n=stop - start: _host_array(a, n), out))
        if status is not None:
            status.chunk_done(stop - start)
    return pieces.result(), {"chunk_trials": chunk.trials, "chunks": n_chunks, "compiled": compiled,
                             **pieces.record()}


def monte_carlo(
    f: Callable,
    key: jax.Array,
    trials: int,
    *,
    args: tuple = (),
    chunk_size: int | None = None,
    progress: bool | None = None,
    description: str = "trials",
    mesh: jax.sharding.Mesh | None = None,
) -> Any:
    """Runs ``f(key_i, *args)`` for ``trials`` independent keys and stacks the outputs.

    Args:
      f: a mechanism call ``f(key, *args) -> pytree of arrays``. The data is held fixed, by closure
        or in ``args``; either way the work that does not depend on the key (sorting, binning) is
        split out of the chunks and done once per call of ``monte_carlo``. Closed-over arrays are
        passed to the compiled call as arguments (never embedded as constants that XLA would spend
        seconds folding), and a kernel sees them as concrete data (it may prepare them on the
        host). Data in ``args`` is traced instead, and other data of the same shapes reuses the
        compiled code.
      key: a ``jax.random`` key.
      trials: number of independent releases, >= 1.
      args: arrays (a tuple of pytrees) passed to ``f`` after the key, not batched.
      chunk_size: at most this many trials per compiled call (``None``: sized from the device's
        memory and the compiled chunk's: the studies guide, "What a study costs").
      progress: show what is compiling, then per chunk the releases done, releases per second and
        the time left (a long run first runs a small probe chunk so that these show early: the
        studies guide); by default only on a terminal.
      description: label of the progress line.
      mesh: a ``jax.sharding.Mesh`` (automatic or explicit axes, one or many hosts) over whose
        devices each chunk's trials are split (the chunk is rounded up to a multiple of its size);
        ``None`` runs on the default device. The results do not depend on it.

    Returns:
      The pytree of ``f``'s outputs, each leaf a NumPy array with a leading axis of size ``trials``.

    Example:
      >>> import jax
      >>> out = monte_carlo(lambda k: jax.random.normal(k), jax.random.key(0), 1000)
      >>> out.shape
      (1000,)
    """
    trials = check_int(trials, "trials", minimum=1)
    if chunk_size is not None:
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
    if progress is None:
        progress = sys.stderr.isatty()
    status = ChunkStatus(_sink(description), trials) if progress else None
    try:
        return run(f, key, trials, tuple(args), chunk_size, mesh, status)[0]
    finally:
        if status is not None:
            status.close()
            sys.stderr.write("\r\x1b[K" if sys.stderr.isatty() else "")


def _sink(label: str):
    """Where :func:`monte_carlo`'s progress goes: a line rewritten on a terminal, else lines."""
    if sys.stderr.isatty():
        return terminal_sink(label)
    return lambda text: print(f"{label}: {text}", file=sys.stderr, flush=True)
