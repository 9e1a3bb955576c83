"""dpjax.optax.dp_gradients: ghost clipping (norms and clipped sums from each layer's inputs and
output cotangents) equals the per-example path (``per_example_grads`` + dp_aggregate's clipping) to
float rounding on dense, convolution (padding, strides, dilation), embedding and attention layers,
with masks, non-finite examples, every clip strategy, float32 and x64; parameters it does not
support fall back to per-example gradients exactly; and it releases dp_aggregate's law (the same
noise for the same key)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpjax import optax as dpo
from dpjax._src.optax import ghost
from dpjax._src.optax.transform import clip_and_sum, clip_weights

KEY = jax.random.key(3)
N = 6
CLIP = 0.5


def mlp_loss(p, x, y):
    h = jnp.tanh(x @ p[0][0] + p[0][1])
    return optax.softmax_cross_entropy_with_integer_labels(h @ p[1][0] + p[1][1], y)


def cnn_loss(p, x, y):
    h = x.reshape(1, 9, 9, 2)
    dims = ("NHWC", "HWIO", "NHWC")
    h = jax.lax.conv_general_dilated(h, p[0], (2, 2), ((1, 2), (0, 1)), dimension_numbers=dims)
    h = jnp.tanh(h + p[1])
    h = jax.lax.conv_general_dilated(h, p[2], (1, 1), "VALID", rhs_dilation=(2, 1), dimension_numbers=dims)
    return optax.softmax_cross_entropy_with_integer_labels(h.reshape(-1) @ p[3], y)


def attention_loss(p, ids, y):
    """An embedding, one attention head (Gram form: 5 positions) and a transposed output layer."""
    e = p["emb"][ids]
    q, k, v = e @ p["wq"], e @ p["wk"], jnp.einsum("td,de->te", e, p["wv"])
    h = (jax.nn.softmax(q @ k.T / 2.0, axis=-1) @ v).mean(0)
    return optax.softmax_cross_entropy_with_integer_labels(p["out"].T @ h + p["b"], y)


def tied_loss(p, x, y):
    """A weight used twice and a scale used elementwise: neither is a ghost layer."""
    h = jnp.tanh(x @ p["w"]) * p["scale"]
    return optax.softmax_cross_entropy_with_integer_labels(h @ p["w"].T @ p["head"], y)


def model(name, dtype=jnp.float32):
    k = jax.random.split(jax.random.key(0), 8)
    normal = lambda i, shape: jax.random.normal(k[i], shape, dtype)  # noqa: E731
    labels = jnp.arange(N) % 3
    if name == "mlp":
        params = [(normal(0, (5, 4)), normal(4, (4,))), (normal(1, (4, 3)), jnp.zeros(3, dtype))]
        return mlp_loss, params, (normal(2, (N, 5)), labels), 2
    if name == "cnn":
        params = [normal(0, (3, 3, 2, 4)), normal(4, (4,)), normal(1, (2, 2, 4, 3)), normal(3, (27, 3))]
        return cnn_loss, params, (normal(2, (N, 162)), labels), 3
    if name == "attention":
        names = ("emb", "wq", "wk", "wv")
        params = {n: normal(i, (7, 4) if n == "emb" else (4, 4)) for i, n in enumerate(names)}
        params.update(out=normal(4, (4, 3)), b=jnp.zeros(3, dtype))
        return attention_loss, params, (jax.random.randint(k[5], (N, 5), 0, 7), labels), 5
    params = dict(w=normal(0, (5, 5)), scale=normal(1, (5,)), head=normal(2, (5, 3)))
    return tied_loss, params, (normal(3, (N, 5)), labels), 1


def both_paths(loss, params, batch, mask):
    """(ghost sums, ghost norms), (per-example sums, per-example norms), jitted."""
    analysis = ghost.analyze_batch(loss, params, batch)
    leaves = jax.tree.leaves(params)
    dtype = leaves[0].dtype

    def run(leaves, batch, mask):
        weights = lambda norms: clip_weights(norms, jnp.asarray(CLIP, dtype), mask)  # noqa: E731
        ghosted = ghost.ghost_clipped_sum(analysis, leaves, jax.tree.leaves(batch), weights, dtype)
        params_ = jax.tree.unflatten(jax.tree.structure(params), leaves)
        grads = dpo.per_example_grads(loss)(params_, *batch)
        summed, norms = clip_and_sum(grads, jnp.asarray(CLIP, dtype), mask)
        return ghosted, (jax.tree.leaves(summed), norms)

    return analysis, jax.jit(run)(leaves, batch, mask)


def assert_same(ghosted, reference, rtol):
    (sums, norms), (ref_sums, ref_norms) = ghosted, reference
    np.testing.assert_allclose(norms, ref_norms, rtol=rtol)
    for got, want in zip(sums, ref_sums, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(jnp.max(jnp.abs(want))))


@pytest.mark.parametrize("name", ["mlp", "cnn", "attention", "tied"])
def test_ghost_norms_and_clipped_sums_equal_the_per_example_path(name):
    loss, params, batch, layers = model(name)
    mask = jnp.arange(N) != 2
    x = batch[0]
    if jnp.issubdtype(x.dtype, jnp.floating):  # a non-finite example (masked in, norm NaN: weight 0)
        batch = (x.at[4, 0].set(jnp.nan), batch[1])
    analysis, (ghosted, reference) = both_paths(loss, params, batch, mask)
    assert len(analysis.layers) == layers
    if name == "tied":  # "scale" and the tied "w" fall back to per-example gradients; "head" is a layer
        assert analysis.materialized == (1, 2)
    assert_same(ghosted, reference, rtol=2e-5)
    assert all(bool(jnp.all(jnp.isfinite(s))) for s in ghosted[0])
    if name != "attention":
        assert not np.isfinite(ghosted[1][4])


def test_ghost_equals_per_example_in_x64(x64):
    loss, params, batch, _ = model("cnn", jnp.float64)
    _, (ghosted, reference) = both_paths(loss, params, batch, jnp.arange(N) != 1)
    assert ghosted[1].dtype == jnp.float64
    assert_same(ghosted, reference, rtol=1e-12)


@pytest.mark.parametrize(
    "clip",
    [
        dpo.fixed_clip(CLIP),
        dpo.quantile_clip(CLIP, epsilon=1.0, every=1),
        dpo.geometric_clip(CLIP, count_noise_multiplier=2.0),
    ],
    ids=["fixed", "quantile", "geometric"],
)
def test_dp_gradients_releases_what_dp_aggregate_releases(clip):
    """Same key, same strategy: ghost, vmap and dp_aggregate(per_example_grads) release the same
    gradients (the noise is the same draw) and move the clip norm the same way."""
    loss, params, batch, _ = model("mlp")
    mask = jnp.arange(N) < 5
    ghosted = dpo.dp_gradients(loss, 1.3, clip, KEY, expected_batch_size=5.0, method="ghost")
    vmapped = dpo.dp_gradients(loss, 1.3, clip, KEY, expected_batch_size=5.0, method="vmap")
    tx = dpo.dp_aggregate(1.3, clip, KEY, expected_batch_size=5.0)

    @jax.jit
    def releases(state):
        grads = dpo.per_example_grads(loss)(params, *batch)
        return [
            ghosted(params, state, *batch, example_mask=mask),
            vmapped(params, state, *batch, example_mask=mask),
            tx.update(grads, state, example_mask=mask),
        ]

    (first, state), *others = releases(ghosted.init(params))
    for grads, other_state in others:
        np.testing.assert_allclose(state.clip_norm, other_state.clip_norm, rtol=1e-5)
        for g, w in zip(jax.tree.leaves(first), jax.tree.leaves(grads), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert ghosted.resolve(params, *batch) == "ghost"


def test_microbatches_give_the_same_release():
    loss, params, batch, _ = model("cnn")
    mask = jnp.arange(N) != 0
    full = dpo.dp_gradients(loss, 1.0, CLIP, KEY, expected_batch_size=4.0, method="ghost")
    chunked = dpo.dp_gradients(loss, 1.0, CLIP, KEY, expected_batch_size=4.0, microbatch_size=4)
    state = full.init(params)
    (a, sa), (b, sb) = (jax.jit(f)(params, state, *batch, example_mask=mask) for f in (full, chunked))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert int(sb.step) == 1 and float(sa.clip_norm) == float(sb.clip_norm)


def test_auto_takes_vmap_when_no_parameter_is_a_layer():
    def loss(p, x):
        return jnp.sum((x * p["scale"] + p["shift"]) ** 2)

    params = {"scale": jnp.ones(3), "shift": jnp.zeros(3)}
    private = dpo.dp_gradients(loss, 1.0, 1.0, KEY, expected_batch_size=4)
    assert private.resolve(params, jnp.ones((4, 3))) == "vmap"
    grads, state = jax.jit(private)(params, private.init(params), jnp.ones((4, 3)))
    assert jax.tree.structure(grads) == jax.tree.structure(params) and int(state.step) == 1


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: dpo.dp_gradients(mlp_loss, 1.0, 1.0, KEY, expected_batch_size=4, method="fast"), "method"),
        (lambda: dpo.dp_gradients(mlp_loss, 1, 1, KEY, expected_batch_size=4, microbatch_size=0), "batch"),
        (lambda: dpo.dp_gradients(mlp_loss, 0.0, 1.0, KEY, expected_batch_size=4), "noise_multiplier"),
        (lambda: dpo.dp_gradients(mlp_loss, 1.0, -1.0, KEY, expected_batch_size=4), "initial_norm"),
        (lambda: dpo.dp_gradients(mlp_loss, 1.0, 1.0, KEY, expected_batch_size=0), "expected_batch_size"),
    ],
)
def test_bad_parameters_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_batches_raise():
    loss, params, batch, _ = model("mlp")
    private = dpo.dp_gradients(loss, 1.0, 1.0, KEY, expected_batch_size=4)
    state = private.init(params)
    with pytest.raises(ValueError, match="at least one batch"):
        private(params, state)
    with pytest.raises(ValueError, match="example_mask"):
        private(params, state, *batch, example_mask=jnp.ones(N + 1, bool))
    with pytest.raises(ValueError, match="leading example axis"):
        private(params, state, batch[0], batch[1][:3])
    vector = dpo.dp_gradients(lambda w, x: x * w, 1.0, 1.0, KEY, expected_batch_size=4, method="ghost")
    with pytest.raises(ValueError, match="scalar"):
        vector(jnp.ones(3), vector.init(None), jnp.ones((4, 3)))
