"""Per-example gradients for :func:`dpjax.optax.dp_aggregate`: ``vmap(grad)``, optionally microbatched."""

from __future__ import annotations

from collections.abc import Callable

import jax

from dpjax._src.host_checks import check_int
from dpjax._src.optax.transform import batch_size

__all__ = [
    "per_example_grads",
]


def per_example_grads(loss_fn: Callable, *, microbatch_size: int | None = None) -> Callable:
    """Turns ``loss_fn(params, *example)`` into ``fn(params, *batch) -> per-example gradients``.

    ``loss_fn`` takes one example (its arguments without a batch axis) and returns a scalar. The
    returned function takes the batch (every leaf of every batch argument with the same leading
    example axis n) and returns the gradients with respect to ``params``, each leaf with a leading
    axis n: the input :func:`dpjax.optax.dp_aggregate` expects. With ``microbatch_size`` the batch is
    processed ``microbatch_size`` examples at a time (``lax.map`` over ``vmap``-ed chunks), which
    bounds memory at ``microbatch_size`` per-example gradients plus the output; the result is the
    same up to float rounding.

    Args:
      loss_fn: ``loss_fn(params, *example) -> scalar``.
      microbatch_size: examples per chunk, >= 1 (static); ``None`` processes the batch at once.

    Example:
      >>> import jax.numpy as jnp
      >>> grads = per_example_grads(lambda w, x, y: (x @ w - y) ** 2)
      >>> g = grads(jnp.zeros(3), jnp.ones((8, 3)), jnp.ones(8))  # shape (8, 3)
    """
    if microbatch_size is not None:
        microbatch_size = check_int(microbatch_size, "microbatch_size", minimum=1)
    single = jax.grad(loss_fn)

    def grads(params, *batch):
        if not batch:
            raise ValueError("per_example_grads needs at least one batch argument.")
        batch_size(batch)  # every leaf must share the leading example axis
        if microbatch_size is None:
            return jax.vmap(single, in_axes=(None,) + (0,) * len(batch))(params, *batch)
        return jax.lax.map(lambda example: single(params, *example), batch, batch_size=microbatch_size)

    return grads
