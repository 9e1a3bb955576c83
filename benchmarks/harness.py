"""Common benchmark harness: timing of jitted calls, machine information, tables, the RNG floor.

``time_call`` excludes compilation (one warm-up call), blocks until the result is ready and returns
the median of ``repeats`` timed calls. ``rng_floor`` is the time ``jax.random`` needs just to draw
``n`` variates: a mechanism cannot be faster than the noise it draws, so "time / floor" says how
close to the limit a kernel is.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

_JAX_SAMPLERS = {
    "laplace": jax.random.laplace,
    "gumbel": jax.random.gumbel,
    "exponential": jax.random.exponential,
    "gaussian": jax.random.normal,
    "uniform": jax.random.uniform,
}


def time_call(fn: Callable, *args, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn(*args)``, compile excluded, blocking until ready."""
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_python(fn: Callable, *args, repeats: int = 3) -> float:
    """Median seconds of a plain Python/NumPy call (no JAX), for reference implementations."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    """CPU, core count, platform and the JAX backend the numbers were measured on."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": ", ".join(str(d) for d in jax.devices()),
        "x64": bool(jax.config.jax_enable_x64),
    }


def print_machine() -> None:
    print("machine: " + "; ".join(f"{k}={v}" for k, v in machine_info().items()))


def print_table(title: str, rows: Sequence[dict], columns: Sequence[str] | None = None) -> None:
    """Prints rows (dicts) as an aligned text table; floats get 4 significant digits."""
    if not rows:
        print(f"{title}: (no rows)")
        return
    columns = list(columns or dict.fromkeys(k for r in rows for k in r))

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    print(f"\n{title}")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def rng_floor(kind: str, n: int, dtype=jnp.float32, *, repeats: int = 5) -> float:
    """Seconds for ``jax.random`` (jitted) to draw ``n`` variates of ``kind``."""
    if kind not in _JAX_SAMPLERS:
        raise ValueError(f"kind must be one of {sorted(_JAX_SAMPLERS)}, got {kind!r}.")
    sampler = _JAX_SAMPLERS[kind]
    draw = jax.jit(lambda key: sampler(key, (n,), dtype), static_argnums=())
    return time_call(draw, jax.random.key(0), repeats=repeats)
