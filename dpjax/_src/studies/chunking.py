"""How many trials the Monte Carlo runner puts in one compiled call: sized from memory, not a fixed count.

The runner compiles a first chunk of :func:`first_size` trials (all the trials, up to
:data:`_MIN_CHUNKS` equal chunks of at least :data:`_MIN_CHUNK_TRIALS` trials each, so that a long
run reports its progress and rate), reads the executable's memory from XLA (``memory_analysis()``:
arguments, outputs and temporaries) and, if that exceeds :func:`memory_budget`, shrinks the chunk
(:func:`fitted_size`: the arguments' memory stays, the rest scales with the trials) and compiles
again. Where the backend reports no memory, the first size stands. A user's ``chunk_size`` is an
upper bound on all of this. Chunks are made equal (``ceil(trials / chunks)``) so the padding of the
last one is small. A run of at least ``_MIN_CHUNK_TRIALS`` trials that reports progress first runs a
probe (:func:`probe_size`: 1/64 of a chunk, compiled once and cached like the chunk), so the rate
and the time left show after a 64th of the first chunk's time instead of after the whole of it.
"""

from __future__ import annotations

import os

import jax

from dpjax._src.numerics import ceil_div

__all__: list[str] = []

_MIN_CHUNKS = 4  # a long run is cut into at least this many chunks (progress, rate, ETA) ...
_MIN_CHUNK_TRIALS = 2**17  # ... none smaller than this (the fixed cost of a call stays small)
_PROBE_SHARE = 64  # a long run first runs a probe of 1/64 of a chunk, to show its rate and ETA early
_DEVICE_SHARE = 0.5  # share of the free accelerator memory one chunk may use
_HOST_SHARE = 0.25  # share of the available host memory one chunk may use (CPU backend)
_FALLBACK_BUDGET = 2**30  # bytes, where neither the device nor the host reports its memory


def memory_budget(device=None) -> int:
    """Bytes one compiled chunk may use on ``device`` (default: this process's first device): half of what its
    allocator has free on GPU/TPU, a quarter of the host's available memory on CPU, else 1 GiB."""
    device = device or jax.local_devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and stats.get("bytes_limit"):
        return int(_DEVICE_SHARE * (stats["bytes_limit"] - stats.get("bytes_in_use", 0)))
    try:
        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_BUDGET
    return int(_HOST_SHARE * available)


def equal_chunks(trials: int, most: int, multiple: int = 1) -> int:
    """Trials per chunk: at most ``most`` (at least ``multiple``), in as few and as equal chunks as that
    allows, rounded up to a multiple of ``multiple`` (the devices of a mesh)."""
    most = max(most // multiple * multiple, multiple)
    size = ceil_div(trials, ceil_div(trials, most))
    return ceil_div(size, multiple) * multiple


def first_size(trials: int, chunk_size: int | None, multiple: int = 1) -> int:
    """The chunk compiled first: every trial, or ``_MIN_CHUNKS`` chunks of at least
    ``_MIN_CHUNK_TRIALS`` for a long run, at most ``chunk_size``."""
    most = max(ceil_div(trials, _MIN_CHUNKS), _MIN_CHUNK_TRIALS)
    if chunk_size is not None:
        most = min(most, chunk_size)
    return equal_chunks(trials, min(most, trials), multiple)


def fitted_size(trials: int, size: int, memory: int | None, budget: int, multiple: int = 1,
                fixed: int | None = None) -> int:
    """A chunk of ``size`` trials needs ``memory`` bytes, ``fixed`` of them (its arguments: the data)
    whatever its size: the size that fits ``budget`` (``size`` when it fits or the memory is unknown),
    the rest growing in proportion to the trials."""
    if memory is None or memory <= budget or size <= multiple:
        return size
    fixed = min(fixed or 0, memory - 1)
    return equal_chunks(trials, max(size * max(budget - fixed, 0) // (memory - fixed), 1), multiple)


def probe_size(trials: int, size: int, multiple: int = 1) -> int | None:
    """Trials of the probe run before the chunks of ``size``: ``size / _PROBE_SHARE`` (a multiple of
    ``multiple``); ``None`` for a run of fewer than ``_MIN_CHUNK_TRIALS`` trials, or of so many chunks
    that the first one ends within a 16th of the run."""
    if trials < _MIN_CHUNK_TRIALS or ceil_div(trials, size) >= 16 or size // _PROBE_SHARE < multiple:
        return None
    return size // _PROBE_SHARE // multiple * multiple
