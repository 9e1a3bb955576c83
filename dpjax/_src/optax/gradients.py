"""``dp_gradients``: the privatized DP-SGD gradient of a batch straight from the one-example loss, with
ghost clipping (:mod:`dpjax._src.optax.ghost`) where the loss allows it, ready for any optax optimizer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeAlias, get_args

import jax
import jax.numpy as jnp
from jax import lax
from jax.typing import ArrayLike

from dpjax._src.host_checks import check_choice, check_int, float_dtype
from dpjax._src.optax import ghost
from dpjax._src.optax.clip import ClipStrategy
from dpjax._src.optax.grads import per_example_grads
from dpjax._src.optax.transform import (
    DPAggregateState,
    batch_size,
    checked_example_mask,
    clip_and_sum,
    clip_weights,
    private_step,
)

__all__ = [
    "DPGradients",
    "GradientMethod",
    "dp_gradients",
]

GradientMethod: TypeAlias = Literal["auto", "ghost", "vmap"]
"""How :func:`dp_gradients` clips: ghost clipping, ``vmap``-ed per-example gradients, or the best."""
_METHODS: tuple[GradientMethod, ...] = get_args(GradientMethod)


class DPGradients:
    """The privatized gradient of :func:`dp_gradients`: ``init(params) -> state`` and
    ``self(params, state, *batch, example_mask=None) -> (grads, state)``."""

    def __init__(self, init: Callable, apply: Callable, method: GradientMethod, loss_fn: Callable):
        self.init = init
        self.method = method
        self._apply = apply
        self._loss_fn = loss_fn

    def __call__(self, params, state: DPAggregateState, *batch, example_mask=None):
        """``(grads, state)``: the privatized mean gradient (the parameters' tree) and the next state."""
        return self._apply(params, state, batch, example_mask)

    def resolve(self, params: Any, *batch: Any) -> Literal["ghost", "vmap"]:
        """The path ``method="auto"`` takes for these parameters and batch (host-side, no compute)."""
        if self.method != "auto":
            return self.method
        return (
            "ghost" if ghost.analyze_batch(self._loss_fn, params, batch, per_example=True).layers else "vmap"
        )


def dp_gradients(
    loss_fn: Callable,
    noise_multiplier: ArrayLike,
    clip: ClipStrategy | ArrayLike,
    key: jax.Array | int,
    *,
    expected_batch_size: ArrayLike,
    method: GradientMethod = "auto",
    microbatch_size: int | None = None,
) -> DPGradients:
    """DP-SGD's privatized gradient (Abadi et al. 2016, Algorithm 1) of a batch, from the loss of one
    example, with ghost clipping where the loss allows it.

    ``loss_fn(params, *example) -> scalar`` is the one-example loss :func:`per_example_grads` takes.
    ``self(params, state, *batch, example_mask=None)`` returns ``(grads, state)``: ``grads`` is
    ``(sum_i w_i g_i + N(0, (sigma C_t)^2 I)) / expected_batch_size`` with ``g_i`` the gradient of
    example i, ``w_i = min(1, C_t / ||g_i||)`` (0 for padding, ``example_mask`` False, and for
    examples whose norm is not finite), and the state (a :class:`DPAggregateState`: the clip
    strategy's state, the key, the step) moves the clip norm as :func:`dp_aggregate` does.

    ``method``: ``"ghost"`` computes the norms and the clipped sum without per-example gradients for
    every parameter used once by a dense (``dot_general``), convolution or embedding (``gather``)
    operation, found in the jaxpr of the loss (nothing to annotate), and per-example gradients for
    the others, in the same backward pass (:mod:`dpjax._src.optax.ghost`: Li et al. 2022's ghost norm with
    Bu et al. 2023's book-keeping), each layer in its cheapest ghost form (Gram, direct, or the
    product of norms for one row); ``"vmap"`` is ``dp_aggregate`` on ``per_example_grads``.
    ``"auto"`` (default) decides per layer by a static cost model of the shapes of one example
    (:mod:`dpjax._src.optax.ghost_cost`: floating-point operations plus 16 per float moved to or from
    memory; no timing, no backend): a layer takes the least costly of its ghost forms and its
    per-example gradient materialized (``T K N`` operations for the gradient of ``T`` rows of ``K``
    inputs and ``N`` outputs, then ``2 K N`` for its norm and weighted sum, and ``3 K N`` floats
    moved), and when no layer is cheaper by a ghost form (all convolutions over many positions, or
    no supported layer) the whole step is vmap. Dense layers of one row per example always stay
    ghost (``K + N`` against ``K N``); convolutions over many positions with few channels are
    cheaper per example. ``"ghost"`` keeps every supported layer on a ghost form, whatever the
    cost (for comparison, or where the per-example gradients of a wide layer would not fit).

    Guarantee (add/remove one example, Poisson sampling): every method releases the law of
    ``dp_aggregate(per_example_grads(loss_fn))`` with the same strategy and key (the same noise;
    the norms and sums agree to float rounding), so the run is accounted by
    :func:`dpjax.optax.training_epsilon` exactly as that one is.

    Args:
      loss_fn: ``loss_fn(params, *example) -> scalar`` for one example.
      noise_multiplier: sigma, > 0 (may be traced).
      clip: a clip strategy (:func:`fixed_clip`, :func:`quantile_clip`, :func:`geometric_clip`) or a
        number (a fixed clip norm).
      key: a ``jax.random`` key or an int seed; the state carries it.
      expected_batch_size: the public denominator (sampling rate times dataset size), > 0 (may be traced).
      method: ``"auto"``, ``"ghost"`` or ``"vmap"`` (static).
      microbatch_size: examples per chunk, >= 1 (static): bounds the memory at that many examples'
        activations (ghost) or gradients (vmap); ``None`` processes the batch at once.

    Returns:
      A :class:`DPGradients`. On invalid traced parameters the gradients and the clip norm are NaN.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> loss = lambda w, x, y: (x @ w - y) ** 2
      >>> private_grad = dp_gradients(loss, 1.0, 1.0, jax.random.key(0), expected_batch_size=8)
      >>> w = jnp.zeros(3)
      >>> state = private_grad.init(w)
      >>> grads, state = private_grad(w, state, jnp.ones((8, 3)), jnp.ones(8))
    """
    method = check_choice(method, "method", _METHODS)
    if microbatch_size is not None:
        microbatch_size = check_int(microbatch_size, "microbatch_size", minimum=1)
    init_fn, privatize = private_step(noise_multiplier, clip, key, expected_batch_size)
    vmap_grads = per_example_grads(loss_fn, microbatch_size=microbatch_size)

    def apply(params, state, batch, example_mask):
        if not batch:
            raise ValueError("dp_gradients needs at least one batch argument.")
        mask = checked_example_mask(example_mask, batch_size(batch))
        analysis = None
        if method != "vmap":
            analysis = ghost.analyze_batch(loss_fn, params, batch, per_example=method == "auto")
            if method == "auto" and not analysis.layers:
                analysis = None
        if analysis is None:
            return privatize(state, mask, lambda c: clip_and_sum(vmap_grads(params, *batch), c, mask))
        return privatize(state, mask, lambda c: _ghost_sum(analysis, params, batch, mask, c, microbatch_size))

    return DPGradients(init_fn, apply, method, loss_fn)


def _ghost_sum(analysis, params, batch, mask, clip_norm, microbatch_size):
    """``(clipped sum as the parameters' tree, norms)`` by ghost clipping, ``microbatch_size``
    examples at a time when given (the batch padded with masked copies of its first examples)."""
    leaves, treedef = jax.tree.flatten(params)
    data = jax.tree.leaves(batch)
    dtype = float_dtype(*leaves)
    size = mask.shape[0]

    def chunk_sum(data, mask):
        return ghost.ghost_clipped_sum(
            analysis, leaves, data, lambda norms: clip_weights(norms, clip_norm, mask), dtype
        )

    if microbatch_size is None or microbatch_size >= size:
        sums, norms = chunk_sum(data, mask)
        return jax.tree.unflatten(treedef, sums), norms
    chunks = -(-size // microbatch_size)
    rows = jnp.arange(chunks * microbatch_size) % size
    padded = jnp.concatenate([mask, jnp.zeros((chunks * microbatch_size - size,), bool)])

    def split(a):
        return jnp.take(a, rows, axis=0).reshape(chunks, microbatch_size, *a.shape[1:])

    def body(total, chunk):
        sums, norms = chunk_sum(*chunk)
        return [t + s for t, s in zip(total, sums, strict=True)], norms

    zeros = [jnp.zeros(leaf.shape, leaf.dtype) for leaf in leaves]
    sums, norms = lax.scan(body, zeros, ([split(a) for a in data], padded.reshape(chunks, microbatch_size)))
    return jax.tree.unflatten(treedef, sums), norms.reshape(-1)[:size]
