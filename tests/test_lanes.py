"""dpjax._src.lanes: a branch whose predicate ``vmap`` batches stays a branch (an unbatched ``cond``),
runs only what some lane needs, and gives each lane its own branch's output, at every nesting."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_walk import equations

from dpjax._src import lanes

PREDS = jnp.asarray([[True, False, True], [True, True, True]])


def _branch(pred, x):
    return lanes.cond(pred, lambda y: (y + 1.0, jnp.int32(1)), lambda y: (y * 10.0, jnp.int32(2)), x)


@pytest.mark.parametrize("jit", [False, True])
def test_each_lane_gets_its_own_branch_at_every_nesting(jit):
    x = jnp.asarray([1.0, 2.0, 3.0])
    inner = jax.jit(jax.vmap(_branch)) if jit else jax.vmap(_branch)
    values, which = jax.vmap(inner, in_axes=(0, None))(PREDS, x)
    np.testing.assert_array_equal(which, np.where(PREDS, 1, 2))
    np.testing.assert_array_equal(values, np.where(PREDS, x + 1.0, x * 10.0))
    swapped = jax.vmap(jax.vmap(_branch, in_axes=(0, None)), in_axes=(1, 0))(PREDS, x)[1]
    np.testing.assert_array_equal(swapped, np.where(PREDS.T, 1, 2))
    assert _branch(jnp.asarray(False), 1.0) == (10.0, 2)  # concrete, outside vmap


def test_all_lanes_is_unbatched():
    out = jax.vmap(jax.vmap(lambda p: lanes.all_lanes(p)))(PREDS)
    assert not np.any(out)
    assert np.all(jax.vmap(lanes.all_lanes)(PREDS[1]))
    with pytest.raises(ValueError, match="scalar"):
        lanes.all_lanes(PREDS)


def test_batched_predicate_keeps_unbatched_conds():
    """Under ``vmap`` of the predicate the two branches are ``cond``s on scalar predicates (JAX
    would otherwise turn a batched ``cond`` into a select that runs both for every lane)."""
    jaxpr = jax.make_jaxpr(jax.vmap(_branch, in_axes=(0, None)))(PREDS[0], 1.0).jaxpr
    conds = [eqn for eqn in equations(jaxpr) if eqn.primitive.name == "cond"]
    assert len(conds) == 2 and all(eqn.invars[0].aval.shape == () for eqn in conds)
