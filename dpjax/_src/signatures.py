"""Functions that take another function's arguments.

Several mechanisms come as a pair: one returning the full result (``aggregates.clipped_sum``,
``quantiles.unbounded_result``) and one returning the usual release derived from it
(``aggregates.sum`` and ``mean``, ``quantiles.unbounded``). :func:`arguments_of` writes the argument
list once, on the full function: the derived one forwards what it is given, and shows (to
``inspect.signature``, ``help`` and the guarantee tests) the full function's signature with its own
return annotation.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__: list[str] = []

Derived = TypeVar("Derived", bound=Callable[..., Any])


def arguments_of(full: Callable) -> Callable[[Derived], Derived]:
    """Decorates a function that forwards its arguments to ``full``, to carry ``full``'s signature.

    Args:
      full: the function whose parameters (names, order, kinds and defaults) the decorated one takes.

    Returns:
      A decorator that sets ``__signature__`` on the decorated function: ``full``'s parameters with
      the decorated function's return annotation. The function itself is returned unchanged (no
      wrapper, so ``jit`` and ``vmap`` see it as written).

    Example:
      >>> def full(key, x, *, scale=1.0):
      ...     return x * scale
      >>> @arguments_of(full)
      ... def doubled(key, x, **options):
      ...     return 2 * full(key, x, **options)
      >>> str(inspect.signature(doubled))
      '(key, x, *, scale=1.0)'
    """
    signature = inspect.signature(full)

    def decorate(derived: Derived) -> Derived:
        own = inspect.signature(derived).return_annotation
        # a function object takes any attribute; typing's Callable does not declare __signature__
        derived.__signature__ = signature.replace(return_annotation=own)  # type: ignore[attr-defined]
        return derived

    return decorate
