"""Counting XLA compilations with ``jax.monitoring``, for study records and benchmarks."""

from __future__ import annotations

import threading

from jax import monitoring

__all__: list[str] = []

_BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"


class CompileCounter:
    """Counts the backend compilations made in this thread while the block runs, and how many of
    them were loaded from JAX's persistent compilation cache (``cache_hits``) instead of compiled.

    Example:
      >>> import jax
      >>> with CompileCounter() as compiles:
      ...     y = jax.jit(lambda x: x + 1)(1.0)
      >>> compiles.count
      1
    """

    def __init__(self):
        self.count = 0
        self.seconds = 0.0
        self.cache_hits = 0
        self._thread = threading.get_ident()

    def _listener(self, event: str, duration_secs: float, **_: str | int) -> None:
        if event == _BACKEND_COMPILE_EVENT and threading.get_ident() == self._thread:
            self.count += 1
            self.seconds += duration_secs

    def _hit_listener(self, event: str, **_) -> None:
        if event == _CACHE_HIT_EVENT and threading.get_ident() == self._thread:
            self.cache_hits += 1

    def __enter__(self) -> CompileCounter:
        self._thread = threading.get_ident()
        monitoring.register_event_duration_secs_listener(self._listener)
        monitoring.register_event_listener(self._hit_listener)
        return self

    def __exit__(self, *exc) -> None:
        monitoring.unregister_event_duration_listener(self._listener)
        monitoring.unregister_event_listener(self._hit_listener)
