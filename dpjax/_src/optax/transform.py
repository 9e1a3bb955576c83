"""``dp_aggregate``: the DP-SGD aggregation step (Abadi et al. 2016) as an optax transform, with a
clip norm that a clip strategy (:mod:`dpjax._src.optax.clip`) may move privately between steps.

One step, on per-example gradients ``g_j`` (leaves with a leading example axis) of a Poisson-sampled
batch padded to a fixed size:

1. ``n_j = ||g_j||_2`` over all leaves; ``w_j = min(1, C_t / n_j)`` (0 for padding and for examples
   whose norm is not finite, so a NaN or overflowing gradient never reaches the output);
2. release ``(sum_j w_j g_j + N(0, (sigma C_t)^2 I)) / expected_batch_size``;
3. ``C_{t+1}`` = the strategy's update from the ``n_j`` (same batch).

Guarantee (add/remove one example): step 2 is the Gaussian mechanism with L2 sensitivity ``C_t`` and
noise multiplier sigma; with step 3 the step is accounted by :func:`dpjax.optax.training_epsilon`
(see :mod:`dpjax._src.optax.accounting` for exactly what is claimed). The denominator is the public
expected batch size, not the sampled one.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import ArrayLike

from dpjax._src import noise
from dpjax._src.host_checks import float_dtype
from dpjax._src.optax.clip import ClipStrategy, as_strategy
from dpjax._src.validation import Checks

__all__ = [
    "DPAggregateState",
    "dp_aggregate",
    "example_norms",
]


class DPAggregateState(NamedTuple):
    """State of :func:`dp_aggregate` (a pytree).

    Attributes:
      key: the ``jax.random`` key of the next step.
      clip_norm: the clip norm the next step uses (float scalar; NaN if a traced check failed).
      step: number of steps run (int32); with ``noise_multiplier`` and ``clip`` it is what
        :func:`dpjax.optax.spent_epsilon` needs.
      noise_multiplier: sigma (a float array).
      clip: the clip strategy (its parameters are leaves: int32 and float arrays).
    """

    key: jax.Array
    clip_norm: jax.Array
    step: jax.Array
    noise_multiplier: Any
    clip: ClipStrategy


def example_norms(per_example_grads: Any) -> jax.Array:
    """The global L2 norm of each example's gradient (over every leaf), shape ``[batch]``."""
    leaves = jax.tree.leaves(per_example_grads)
    dtype = float_dtype(*leaves)
    squares = [jnp.sum(jnp.square(leaf.astype(dtype)).reshape(leaf.shape[0], -1), axis=1) for leaf in leaves]
    return jnp.sqrt(sum(squares))


def batch_size(per_example_grads) -> int:
    """The common leading (example) axis of every leaf; ``ValueError`` if they disagree."""
    leaves = jax.tree.leaves(per_example_grads)
    if not leaves:
        raise ValueError("per_example_grads has no leaves.")
    scalar = any(jnp.ndim(leaf) == 0 for leaf in leaves)
    sizes = {jnp.shape(leaf)[0] for leaf in leaves if jnp.ndim(leaf)}
    if scalar or len(sizes) != 1:
        shapes = [jnp.shape(leaf) for leaf in leaves]
        raise ValueError(
            f"every leaf of per_example_grads must have the same leading example axis, got shapes {shapes}."
        )
    return sizes.pop()


def clip_weights(norms, clip_norm, mask):
    """``(w, finite)``: ``w_j = min(1, clip_norm / n_j)`` for real examples with a finite norm, 0
    otherwise (step 1 of the module docstring), and which norms are finite."""
    finite = jnp.isfinite(norms)
    weights = jnp.where(mask & finite, jnp.minimum(1, clip_norm / norms), 0).astype(norms.dtype)
    return weights, finite


def clip_and_sum(per_example_grads, clip_norm, mask):
    """``(sum_j w_j g_j, norms)`` with the weights of :func:`clip_weights`."""
    norms = example_norms(per_example_grads)
    weights, finite = clip_weights(norms, clip_norm, mask)
    return weighted_sum(per_example_grads, weights, finite), norms


def weighted_sum(per_example_grads, weights, finite):
    """``sum_j w_j g_j`` over the rows with ``finite[j]`` (a row with a non-finite norm must not
    reach the sum: ``0 * NaN`` would poison it): one contraction per leaf of the weights with the
    leaf whose non-finite rows are selected to 0.

    The select is elementwise, so inside a jitted training step XLA fuses it into the computation
    of the per-example gradients that feeds the contraction: the step costs what the same step
    without it costs (``benchmarks/bench_training.py``). A ``lax.cond`` on the norms that ran the
    select only when a row is not finite made the per-example gradients an operand of the
    conditional, which XLA must then materialize apart from the contraction: a jitted MLP step took
    several times as long. On per-example gradients passed into a jitted aggregation the select is
    one pass over them beside the contraction."""

    def leaf_sum(leaf):
        rows = finite.reshape((-1,) + (1,) * (leaf.ndim - 1))
        return jnp.tensordot(weights.astype(leaf.dtype), jnp.where(rows, leaf, 0), axes=(0, 0))

    return jax.tree.map(leaf_sum, per_example_grads)


def _add_noise(key, tree, std, denominator):
    """``(leaf + N(0, std^2)) / denominator`` for every leaf: one draw of the whole parameter vector
    (in the leaves' common float dtype), sliced into the leaves."""
    leaves, treedef = jax.tree.flatten(tree)
    dtype = float_dtype(*leaves)
    flat = noise.gaussian(key, (sum(leaf.size for leaf in leaves),), jnp.asarray(std, dtype), dtype)
    offsets = np.cumsum([0] + [leaf.size for leaf in leaves])
    out = []
    for leaf, start, stop in zip(leaves, offsets[:-1], offsets[1:], strict=True):
        draw = flat[start:stop].reshape(leaf.shape).astype(leaf.dtype)
        out.append((leaf + draw) / jnp.asarray(denominator, leaf.dtype))
    return jax.tree.unflatten(treedef, out)


def _fixed_dtypes(tree, dtype):
    """Every leaf of ``tree`` as an array: integers int32, everything else ``dtype``. The state of
    :func:`dp_aggregate` is built this way from ``init`` on, so ``update`` returns leaves of the same
    types and shapes and a jitted step compiles once."""

    def cast(leaf):
        integer = jnp.issubdtype(jnp.result_type(leaf), jnp.integer)
        return jnp.asarray(leaf, jnp.int32 if integer else dtype)

    return jax.tree.map(cast, tree)


def dp_aggregate(
    noise_multiplier: ArrayLike,
    clip: ClipStrategy | ArrayLike,
    key: jax.Array | int,
    *,
    expected_batch_size: ArrayLike,
) -> optax.GradientTransformationExtraArgs:
    """DP-SGD aggregation of per-example gradients with a fixed or privately adapted clip norm.

    ``update(per_example_grads, state, params=None, *, example_mask=None)`` clips each example's
    global L2 norm to ``state.clip_norm``, sums, adds ``N(0, (noise_multiplier * clip_norm)^2)`` to
    every coordinate, divides by ``expected_batch_size`` and moves the clip norm with the strategy
    (see the module docstring). ``example_mask`` (bool ``[batch]``, default all True) marks the real
    examples of a padded batch; padding contributes nothing. The output has the parameters' shapes,
    so any optax optimizer can follow in ``optax.chain`` (this transform must come first). Everything
    runs inside the caller's ``jit``.

    Guarantee: see :func:`dpjax.optax.training_epsilon` (add/remove neighbors, Poisson sampling).

    Args:
      noise_multiplier: sigma, > 0 (may be traced).
      clip: a strategy from :func:`fixed_clip`, :func:`quantile_clip`, :func:`geometric_clip`, or
        a number (a fixed clip norm).
      key: a ``jax.random`` key (or an int seed); the state carries it, so a run is reproducible.
      expected_batch_size: the public denominator (sampling rate times dataset size), > 0 (may be
        traced).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` whose state is a :class:`DPAggregateState`. On
      invalid traced parameters the updates and the clip norm are NaN.

    Example:
      >>> import jax, jax.numpy as jnp, optax
      >>> tx = optax.chain(dp_aggregate(1.0, 1.0, jax.random.key(0), expected_batch_size=4), optax.sgd(0.1))
      >>> params = {"w": jnp.zeros(3)}
      >>> state = tx.init(params)
      >>> updates, state = tx.update({"w": jnp.ones((4, 3))}, state, params)
    """
    init_fn, privatize = private_step(noise_multiplier, clip, key, expected_batch_size)

    def update_fn(updates, state, params=None, *, example_mask=None, **extra_args):
        del params, extra_args
        mask = checked_example_mask(example_mask, batch_size(updates))
        return privatize(state, mask, lambda clip_norm: clip_and_sum(updates, clip_norm, mask))

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def checked_example_mask(example_mask, size: int):
    """``example_mask`` as bool ``[size]`` (all True when ``None``); ``ValueError`` on a wrong shape."""
    if example_mask is None:
        return jnp.ones((size,), bool)
    mask = jnp.asarray(example_mask)
    if mask.shape != (size,):
        raise ValueError(f"example_mask must have shape ({size},), got {mask.shape}.")
    return mask.astype(bool)


def private_step(noise_multiplier, clip, key, expected_batch_size):
    """``(init_fn, privatize)`` shared by :func:`dp_aggregate` and :func:`dpjax.optax.dp_gradients`.

    ``init_fn(params)`` is the :class:`DPAggregateState` of step 0. ``privatize(state, mask,
    clipped_sum)`` runs steps 2 and 3 of the module docstring on ``clipped_sum(clip_norm) -> (sum_j
    w_j g_j as the parameters' tree, norms [batch])`` and returns ``(released, next state)``. The
    parameters are checked eagerly here when concrete, and again (recorded, NaN outputs when invalid)
    when traced."""
    strategy = as_strategy(clip)
    checks = Checks()
    checks.positive(noise_multiplier, "noise_multiplier")
    checks.positive(expected_batch_size, "expected_batch_size")
    if isinstance(key, int):
        key = jax.random.key(key)

    def init_fn(params):
        del params
        dtype = float_dtype(strategy.initial_norm)
        clip_state = _fixed_dtypes(strategy, dtype)
        return DPAggregateState(
            key,
            clip_state.initial_norm,
            jnp.zeros((), jnp.int32),
            jnp.asarray(noise_multiplier, dtype),
            clip_state,
        )

    def privatize(state, mask, clipped_sum):
        checks = Checks()
        sigma = checks.positive(state.noise_multiplier, "noise_multiplier")
        denominator = checks.positive(expected_batch_size, "expected_batch_size")
        current = state.clip.validate(checks)
        clip_norm = state.clip_norm
        summed, norms = clipped_sum(clip_norm)
        key, step_key = jax.random.split(state.key)
        released = _add_noise(jax.random.fold_in(step_key, 0), summed, sigma * clip_norm, denominator)
        next_norm = current.next_norm(
            jax.random.fold_in(step_key, 1),
            clip_norm,
            norms,
            mask,
            expected_batch_size=denominator,
            step=state.step,
        )
        released, next_norm = checks.guard((released, next_norm))
        return released, DPAggregateState(key, next_norm, state.step + 1, state.noise_multiplier, state.clip)

    return init_fn, privatize
