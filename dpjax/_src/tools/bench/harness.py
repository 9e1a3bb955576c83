"""The one timing method of every dpjax benchmark.

* JAX functions (:func:`time_jitted`): lowered and compiled first (the compile time is reported
  separately), run once to warm up (allocation, page faults), then timed ``repeats`` times (more for
  calls shorter than ``MIN_SECONDS / repeats``), each call ending with ``jax.block_until_ready`` so
  asynchronous dispatch cannot hide device time.
* Eager entry points (:func:`time_eager`): mechanisms whose public call does host work before its
  kernels (UQE bins concrete data once per call, then runs a cached compiled kernel). The first call
  traces and compiles; its excess over the median is reported as the compile time.
* Host code (:func:`time_host`): peers (OpenDP, diffprivlib, python-dp) and NumPy loops, after one
  warm-up call.

A :class:`Timing` keeps every repeat, so the median and the spread (min, max) are both reported.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import time
from collections.abc import Callable

import jax

__all__ = [
    "MAX_REPEATS",
    "MIN_SECONDS",
    "Timing",
    "device_memory",
    "device_peak_memory",
    "load_average",
    "machine_info",
    "time_eager",
    "time_host",
    "time_jitted",
]


@dataclasses.dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of one call, over ``len(times)`` repeats.

    Attributes:
      times: seconds of each timed call (compile and warm-up excluded).
      compile: seconds spent compiling (``None`` for host code).
      memory: bytes XLA's compiled memory analysis reports for the call (arguments + outputs +
        temporaries, minus aliased buffers); ``None`` where unavailable (eager or host code).
    """

    times: tuple[float, ...]
    compile: float | None = None
    memory: int | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def low(self) -> float:
        return min(self.times)

    @property
    def high(self) -> float:
        return max(self.times)

    @property
    def spread(self) -> float:
        """``(max - min) / median`` of the repeats: how much the machine moved during the timing."""
        return (self.high - self.low) / self.median if self.median > 0 else 0.0

    def per(self, count: int) -> Timing:
        """The same timing divided by ``count`` (e.g. per release of a batched call)."""
        return Timing(tuple(t / count for t in self.times), self.compile, self.memory)


MIN_SECONDS, MAX_REPEATS = 0.2, 100


def _repeat(call: Callable[[], object], repeats: int) -> tuple[float, ...]:
    """At least ``repeats`` timed calls, more (up to ``MAX_REPEATS``) until ``MIN_SECONDS`` have been
    spent: a short call timed only a few times on a busy machine can land on a scheduler stall."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}.")
    times: list[float] = []
    while len(times) < repeats or (sum(times) < MIN_SECONDS and len(times) < MAX_REPEATS):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return tuple(times)


def _memory(compiled) -> int | None:
    try:
        mem = compiled.memory_analysis()
    except (NotImplementedError, RuntimeError):
        return None
    if mem is None:
        return None
    return int(
        mem.argument_size_in_bytes
        + mem.output_size_in_bytes
        + mem.temp_size_in_bytes
        - mem.alias_size_in_bytes
    )


def time_jitted(fn: Callable, *args, repeats: int = 5) -> tuple[Timing, object]:
    """Compiles ``jax.jit(fn)`` for ``args``, then times ``repeats`` calls of the jitted function,
    as a user calls it (its dispatch reuses the executable compiled here and is faster per call
    than calling the ``Compiled`` object; benchmarks/README.md).

    Returns ``(timing, output)``, the output of the warm-up call (for checks and variate counts).
    """
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    compile_seconds = time.perf_counter() - start
    output = jax.block_until_ready(jitted(*args))
    times = _repeat(lambda: jitted(*args), repeats)
    return Timing(times, compile_seconds, _memory(compiled)), output


def time_eager(fn: Callable, *args, repeats: int = 5) -> tuple[Timing, object]:
    """Times an eager call whose own jitted pieces compile on the first call (reported as compile)."""
    start = time.perf_counter()
    output = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    times = _repeat(lambda: fn(*args), repeats)
    return Timing(times, max(first - statistics.median(times), 0.0)), output


def time_host(fn: Callable, *args, repeats: int = 3) -> Timing:
    """Times a host (NumPy / peer library) call after one warm-up call."""
    fn(*args)
    return Timing(_repeat(lambda: fn(*args), repeats))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def device_memory(device=None) -> int | None:
    """Bytes of memory of ``device`` (default: the first device): the allocator's limit on GPU/TPU,
    the host's physical memory on CPU (where arrays live in host memory)."""
    device = device or jax.devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    return _host_memory() if device.platform == "cpu" else None


def device_peak_memory(device=None) -> int | None:
    """Peak bytes the device allocator has held in this process (GPU/TPU; ``None`` on CPU)."""
    device = device or jax.devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    return int(stats["peak_bytes_in_use"]) if stats and "peak_bytes_in_use" in stats else None


def load_average() -> list[float] | None:
    """The host's 1, 5 and 15 minute load averages (timings on a shared machine depend on them)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict:
    """The machine and device the numbers were measured on."""
    device = jax.devices()[0]
    return {
        "backend": jax.default_backend(),
        "device": getattr(device, "device_kind", str(device)),
        "device_count": jax.device_count(),
        "device_memory_bytes": device_memory(device),
        "host_cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "host_memory_bytes": _host_memory(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": _jaxlib_version(),
        "x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]  # jax's Config stub lacks the options
    }


def _jaxlib_version() -> str | None:
    try:
        import jaxlib

        return jaxlib.__version__
    except (ImportError, AttributeError):
        return None
