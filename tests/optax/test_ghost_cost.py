"""dpjax._src.optax.ghost_cost: the static cost model behind ``dp_gradients(method="auto")``. The shapes it
reads from a jaxpr are the layers' (dense, convolution, embedding); the form it picks is the least
costly by its formulas, checked against hand-computed costs on small synthetic shapes; ``analyze``
follows it (a layer cheaper per example is materialized, a model with no cheaper ghost layer falls
back to vmap); and the mixed plan releases exactly what the per-example path releases."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax import optax as dpo
from dpjax._src.optax import ghost
from dpjax._src.optax import ghost_cost as cost

CONV = ("NHWC", "HWIO", "NHWC")


def conv_loss(p, x):
    h = jax.lax.conv_general_dilated(
        x.reshape(1, 14, 14, 1), p["conv"], (1, 1), "SAME", dimension_numbers=CONV
    )
    return jnp.sum(jnp.tanh(h + p["bias"]))


def mixed_loss(p, x, ids):
    """A 3x3 convolution over 14x14 positions (cheaper per example), a dense layer of one row
    (outer), a 2-row dense layer (gram), an 8-row one (direct), a big embedding (ids) and a 3-row
    table read 64 times (cheaper per example)."""
    h = jax.lax.conv_general_dilated(
        x.reshape(1, 14, 14, 1), p["conv"], (2, 2), "SAME", dimension_numbers=CONV
    )
    h = jnp.tanh(h).reshape(-1) @ p["dense"]  # [392] @ [392, 2]
    wide = jnp.tanh(x[:128].reshape(2, 64) @ p["wide"])  # t = 2, k = n = 64
    narrow = x[:16].reshape(8, 2) @ p["narrow"]  # t = 8, k = n = 2
    e = jnp.sum(p["emb"][ids[:8]].sum(0) ** 2) + jnp.sum(jnp.tanh(p["small"][ids % 3]))
    return jnp.sum(h) * jnp.sum(wide) + jnp.sum(narrow**2) + e


def mixed_params():
    k = jax.random.split(jax.random.key(0), 6)
    shapes = dict(
        conv=(3, 3, 1, 8), dense=(392, 2), wide=(64, 64), narrow=(2, 2), emb=(1000, 4), small=(3, 2)
    )
    return {name: 0.1 * jax.random.normal(kk, s) for kk, (name, s) in zip(k, shapes.items(), strict=True)}


def layer_dims(loss, params, *example):
    """{parameter name: Dims} of every layer ``analyze`` finds (ghost forms only)."""
    analysis = ghost.analyze(loss, params, example)
    names = list(params)  # dict leaves are in sorted key order; the names here are already sorted
    return {names[l.leaf]: cost.dims(analysis.eqns[l.eqn].eqn, l.position) for l in analysis.layers}


def test_dims_read_from_the_jaxpr():
    params = dict(sorted(mixed_params().items()))
    got = layer_dims(mixed_loss, params, jnp.ones(196), jnp.arange(64))
    assert got == {
        "conv": cost.Dims("conv", 1, 49, 9, 8),
        "dense": cost.Dims("dense", 1, 1, 392, 2),
        "emb": cost.Dims("gather", 1, 8, 1, 4, 1000),
        "narrow": cost.Dims("dense", 1, 8, 2, 2),
        "small": cost.Dims("gather", 1, 64, 1, 2, 3),
        "wide": cost.Dims("dense", 1, 2, 64, 64),
    }


def test_costs_are_the_documented_formulas():
    """Hand-computed costs (flops + 16 per float moved) of two synthetic layers."""
    f = cost.FLOAT_COST
    assert f == 16
    # dense t = 8, k = n = 2: gradient 2 t k n = 64; transposition 64 + 16 * 8 * 4 = 576
    assert cost.costs(cost.Dims("dense", 1, 8, 2, 2)) == {
        "gram": (2 * 64 * 4 + 64) + 16 * (8 * 4 + 2 * 64) + 576,
        "direct": 64 + 16 * 2 * 4 + 576,
        "per_example": 64 + 16 * 8 * 4 + 4 * 4 + 16 * 3 * 4,
    }
    # embedding of 3 rows of 2, 64 ids: the transposition is a scatter of 64 x 2
    scatter = 128 + 16 * 2 * 128
    assert cost.costs(cost.Dims("gather", 1, 64, 1, 2, 3)) == {
        "ids": 2 * 64 * 64 * 2 + 64 * 64 + 16 * (128 + 2 * 64 * 64) + scatter,
        "table": 128 + 2 * 6 + 16 * (2 * 128 + 2 * 6) + scatter,
        "per_example": 128 + 4 * 6 + 16 * (2 * 128 + 3 * 6),
    }


@pytest.mark.parametrize(
    "d, ghost_form, auto_form",
    [
        (cost.Dims("dense", 1, 1, 392, 2), "outer", "outer"),
        (cost.Dims("dense", 3, 1, 5, 7), "outer", "outer"),
        (cost.Dims("dense", 1, 2, 64, 64), "gram", "gram"),
        (cost.Dims("dense", 1, 8, 2, 2), "direct", "direct"),
        (cost.Dims("dense", 1, 64, 3, 3), "direct", "per_example"),
        (cost.Dims("conv", 1, 49, 9, 8), "direct", "per_example"),
        (cost.Dims("conv", 1, 196, 9, 8), "direct", "per_example"),
        (cost.Dims("gather", 1, 8, 1, 4, 1000), "ids", "ids"),
        (cost.Dims("gather", 1, 64, 1, 2, 3), "table", "per_example"),
    ],
)
def test_cheapest_is_the_least_cost(d, ghost_form, auto_form):
    options = cost.costs(d)
    assert cost.cheapest(d, per_example=False) == ghost_form
    assert cost.cheapest(d, per_example=True) == auto_form
    assert options[auto_form] == min(options.values())
    assert options[ghost_form] == min(v for form, v in options.items() if form in cost.GHOST_FORMS)


def test_analyze_follows_the_cost_model():
    params = dict(sorted(mixed_params().items()))
    names = list(params)
    example = (jnp.ones(196), jnp.arange(64))
    for per_example in (False, True):
        analysis = ghost.analyze(mixed_loss, params, example, per_example=per_example)
        dims = {names[l.leaf]: cost.dims(analysis.eqns[l.eqn].eqn, l.position) for l in analysis.layers}
        for layer in analysis.layers:
            assert layer.form == cost.cheapest(dims[names[layer.leaf]], per_example)
    assert {names[l.leaf]: l.form for l in analysis.layers} == dict(
        dense="outer", emb="ids", narrow="direct", wide="gram"
    )
    assert [names[i] for i in analysis.materialized] == ["conv", "small"]


def test_auto_falls_back_to_vmap_when_no_layer_is_cheaper_by_ghost():
    params = {"bias": jnp.zeros(8), "conv": jnp.ones((3, 3, 1, 8))}
    batch = jnp.ones((4, 196))
    assert dpo.dp_gradients(conv_loss, 1.0, 1.0, 0, expected_batch_size=4).resolve(params, batch) == "vmap"
    forced = dpo.dp_gradients(conv_loss, 1.0, 1.0, 0, expected_batch_size=4, method="ghost")
    assert forced.resolve(params, batch) == "ghost"
    assert [l.form for l in ghost.analyze_batch(conv_loss, params, (batch,)).layers] == ["direct"]


def test_the_mixed_plan_releases_what_vmap_releases():
    """auto (ghost for some layers, per-example gradients for others) and vmap: the same release
    for the same key, with a masked example and one whose gradient is not finite."""
    params = mixed_params()
    k = jax.random.split(jax.random.key(1), 2)
    n = 5
    x = jax.random.normal(k[0], (n, 196)).at[3, 7].set(jnp.inf)
    ids = jax.random.randint(k[1], (n, 64), 0, 1000)
    mask = jnp.arange(n) != 1
    auto = dpo.dp_gradients(mixed_loss, 1.0, 0.5, 7, expected_batch_size=4.0)
    vmap = dpo.dp_gradients(mixed_loss, 1.0, 0.5, 7, expected_batch_size=4.0, method="vmap")
    assert auto.resolve(params, x, ids) == "ghost"
    state = auto.init(params)

    @jax.jit
    def both(params, state):
        return [f(params, state, x, ids, example_mask=mask)[0] for f in (auto, vmap)]

    got, want = both(params, state)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert bool(jnp.all(jnp.isfinite(a)))
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
