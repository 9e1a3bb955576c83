"""The joint top-k under the study runner's shape, ``vmap`` over epsilon of ``vmap`` over keys
(dpjax._src.lanes): the literal sampler sits only in a branch that no lane taking the fast path runs,
and each epsilon lane draws exactly what the call at that epsilon alone draws, whichever of the four
samplers (head, small and wide histogram, literal tree) its epsilon needs."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_walk import branches

from dpjax import selection

K = 2
# d = 80: two top counts, 70 within 90 of the k-th, 8 far below it. With b = 2 / epsilon the head
# (64 items, U = c_(2) - c_(65) < 90) holds the law only at epsilon 50; the histogram's first window
# (1024 values) at epsilon 1; the traced epsilon's wide window (2048) at 0.25; at 0.02 none does
# and the literal tree runs (tail bounds of joint_head and joint_histogram, NEGLIGIBLE = 200).
COUNTS = np.concatenate([[3000, 2990], np.arange(2900, 2970), np.linspace(0, 500, 8).astype(int)])
EPSILONS = jnp.asarray([0.02, 0.25, 1.0, 50.0])
KEYS = jax.random.split(jax.random.key(4), 16)


def _release(key, counts, epsilon):
    return selection.joint_top_k(key, counts, K, epsilon, monotonic=True)


def _runner_shaped(counts):
    over_keys = jax.vmap(_release, in_axes=(0, None, None))
    return jax.vmap(over_keys, in_axes=(None, None, 0))(KEYS, counts, EPSILONS)


@functools.cache
def _traced(dtype):
    """The runner-shaped call traced once (its jaxpr, and its compiled form for the draws)."""
    return jax.jit(_runner_shaped).trace(jnp.asarray(COUNTS, dtype))


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.float32])
def test_the_literal_sort_runs_only_where_some_lane_needs_it(dtype):
    """The literal sampler's sort of the ``d k`` differences appears only inside the false branch of
    a ``cond`` on an unbatched predicate (not in a select that runs both branches for every lane)."""
    jaxpr = _traced(dtype).jaxpr.jaxpr
    sorts = [
        path
        for eqn, path in branches(jaxpr)
        if eqn.primitive.name == "sort" and eqn.invars[0].aval.shape[-1:] == (K * COUNTS.size,)
    ]
    assert sorts
    for path in sorts:
        assert any(index == 0 for _, index in path), path
        assert all(cond.invars[0].aval.shape == () for cond, _ in path), path


def test_each_lane_draws_what_its_epsilon_draws_alone():
    """Per lane, the runner-shaped draws equal ``jit(vmap over keys)`` at that epsilon alone (traced,
    the same path: at epsilon 0.02 the literal tree's draws)."""
    counts = jnp.asarray(COUNTS, jnp.int32)
    nested = np.asarray(_traced(jnp.int32).lower().compile()(counts))
    alone = jax.jit(jax.vmap(_release, in_axes=(0, None, None)))
    for lane, epsilon in enumerate(EPSILONS):
        np.testing.assert_array_equal(nested[lane], alone(KEYS, counts, epsilon))
