"""The trial functions of :func:`~dpjax.studies.run_study`, kept across calls so their compiled chunks are.

The runner caches a compiled chunk under the trial function itself (``_compiled.py``).
``run_study`` builds a trial function per mechanism and fixed parameters; keeping it here, under what
it computes (the mechanism's function and variants, the metrics, the truth, the fixed parameters and
the grid points, arrays compared by content), means a second ``run_study`` of the same study with
data of the same shapes compiles nothing.
"""

from __future__ import annotations

import collections
import hashlib
import threading
from collections.abc import Mapping

import numpy as np

__all__: list[str] = []

_SIZE = 64


def content_key(value):
    """A hashable stand-in for ``value``: arrays by shape, dtype and a digest of their bytes, mappings
    and sequences by their items, anything else by itself (or its ``repr`` when unhashable)."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        array = np.asarray(value)
        return ("array", array.shape, str(array.dtype), hashlib.sha1(array.tobytes()).hexdigest())
    if isinstance(value, Mapping):
        return ("map", tuple(sorted((repr(k), content_key(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("seq", type(value).__name__, tuple(content_key(v) for v in value))
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return (type(value).__name__, value)


class TrialCache:
    """A small thread-safe LRU mapping (keys made with :func:`fingerprint`) of trial functions."""

    def __init__(self, size: int = _SIZE):
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._items

    def __getitem__(self, key):
        with self._lock:
            self._items.move_to_end(key)
            return self._items[key]

    def __setitem__(self, key, value) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)


TRIALS = TrialCache()
