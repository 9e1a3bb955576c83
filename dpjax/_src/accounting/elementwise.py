"""Guarantee companions over a grid of parameters.

A study that sweeps epsilon runs the whole grid in one compiled call (the mechanism takes a traced
epsilon); its accounting must not need a Python loop per point either. :func:`elementwise` lets a
companion take an array for any of its named numeric parameters and return one guarantee per
entry, as a NumPy object array of the broadcast shape. Scalars pass through unchanged, so the
single-release call returns a single guarantee as before.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import numpy as np

from dpjax._src.host_checks import TracedParameterError, is_traced

__all__: list[str] = []


def elementwise(*names: str) -> Callable[[Callable], Callable]:
    """Decorates a guarantee companion so that the parameters ``names`` may be arrays.

    Args:
      *names: the parameters (by name) that may be given as arrays of numbers.

    Returns:
      A decorator. The decorated companion returns its usual guarantee when every parameter in
      ``names`` is a scalar, and otherwise an object array (the broadcast shape of the array
      arguments) whose entries are the guarantees for each combination. Traced values are
      refused: guarantees are host-side numbers for the accountant.

    Example:
      >>> from dpjax.additive import laplace_guarantee
      >>> [g.epsilon for g in laplace_guarantee(np.array([0.5, 1.0]))]
      [0.5, 1.0]
    """

    def decorate(companion: Callable) -> Callable:
        signature = inspect.signature(companion)
        unknown = set(names) - set(signature.parameters)
        if unknown:
            raise TypeError(f"{companion.__name__} has no parameter(s) {sorted(unknown)}.")

        @functools.wraps(companion)
        def wrapper(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            grids = {}
            for name in names:
                if name not in bound.arguments:
                    continue
                value = bound.arguments[name]
                if is_traced(value):
                    raise TracedParameterError(
                        f"{name} must be a concrete number (or an array of numbers), not a traced "
                        "value: guarantees are computed on the host for the accountant."
                    )
                if isinstance(value, np.ndarray | list | tuple) or hasattr(value, "__array__"):
                    array = np.asarray(value)
                    if array.ndim > 0:
                        grids[name] = array
            if not grids:
                return companion(*args, **kwargs)
            shape = np.broadcast_shapes(*(grid.shape for grid in grids.values()))
            grids = {name: np.broadcast_to(grid, shape) for name, grid in grids.items()}
            out = np.empty(shape, dtype=object)
            for index in np.ndindex(shape):
                for name, grid in grids.items():
                    bound.arguments[name] = grid[index].item()
                out[index] = companion(*bound.args, **bound.kwargs)
            return out

        return wrapper

    return decorate
