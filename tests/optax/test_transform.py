"""dpjax.optax.dp_aggregate: clipping and noise against their closed forms, padding, compilation,
reproducibility, microbatching, optax composition and bad input."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from dpjax import optax as dpo
from dpjax._src.optax.transform import clip_and_sum

KEY = jax.random.key(0)


def grads_tree(rng, batch):
    return {
        "w": jnp.asarray(rng.normal(size=(batch, 3, 2)), jnp.float32),
        "b": jnp.asarray(rng.normal(size=(batch, 2)), jnp.float32),
    }


def test_clipped_sum_is_the_sum_of_globally_clipped_examples():
    rng = np.random.default_rng(1)
    tree = grads_tree(rng, 6)
    clip = 1.3
    flat = np.concatenate([np.asarray(tree["w"]).reshape(6, -1), np.asarray(tree["b"])], axis=1).astype(
        np.float64
    )
    norms = np.linalg.norm(flat, axis=1)
    mask = np.array([1, 1, 1, 0, 1, 1], bool)
    factors = np.minimum(1.0, clip / norms) * mask
    summed, got_norms = clip_and_sum(tree, jnp.float32(clip), jnp.asarray(mask))
    np.testing.assert_allclose(got_norms, norms, rtol=1e-6)
    np.testing.assert_allclose(summed["w"], np.einsum("i,ijk->jk", factors, np.asarray(tree["w"])), rtol=1e-5)
    np.testing.assert_allclose(summed["b"], factors @ np.asarray(tree["b"]), rtol=1e-5)


def test_noise_is_gaussian_with_std_sigma_times_clip_over_batch():
    """Zero gradients: the update is N(0, (sigma C / E)^2) per coordinate. Two-sided chi-square test on
    the sample variance and a Kolmogorov-Smirnov test of normality, each at level 1e-5."""
    sigma, clip, batch = 1.7, 0.6, 8.0
    tx = dpo.dp_aggregate(sigma, clip, KEY, expected_batch_size=batch)
    zeros = {"w": jnp.zeros((4, 5))}

    def one(key):
        state = tx.init(None)._replace(key=key)
        return tx.update(zeros, state)[0]["w"]

    draws = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(KEY, 4000))).ravel() / (sigma * clip / batch)
    n = draws.size
    statistic = np.sum(draws**2)  # chi-square with n degrees of freedom (known mean 0)
    assert stats.chi2.sf(statistic, n) > 5e-6 and stats.chi2.cdf(statistic, n) > 5e-6
    assert stats.kstest(draws, "norm").pvalue > 1e-5


def test_padding_and_non_finite_examples_contribute_nothing():
    rng = np.random.default_rng(2)
    tree = grads_tree(rng, 5)
    padded = jax.tree.map(lambda a: jnp.concatenate([a, jnp.full((3, *a.shape[1:]), jnp.nan)]), tree)
    padded["w"] = padded["w"].at[5].set(1e30)  # overflowing norm, but a padding row
    mask = jnp.arange(8) < 5
    tx = dpo.dp_aggregate(1.0, 1.0, KEY, expected_batch_size=5)
    update = jax.jit(tx.update)
    expected = update(tree, tx.init(None))[0]
    got = update(padded, tx.init(None), example_mask=mask)[0]
    chex.assert_trees_all_equal(expected, got)
    # a real example with a NaN gradient is dropped, not propagated
    with_nan = jax.tree.map(lambda a: a.at[0].set(jnp.nan), tree)
    without = jax.tree.map(lambda a: a.at[0].set(0.0), tree)
    chex.assert_trees_all_equal(update(with_nan, tx.init(None))[0], update(without, tx.init(None))[0])


def test_non_finite_rows_are_dropped_in_bfloat16_and_under_vmap():
    """Non-finite rows selected to 0 before the contraction against the same rows zeroed by hand:
    the same bits for bfloat16 leaves, the same up to rounding under ``vmap``."""
    tree = grads_tree(np.random.default_rng(4), 40)
    with_nan = jax.tree.map(lambda a: a.at[7].set(jnp.nan).at[30].set(jnp.inf), tree)
    without = jax.tree.map(lambda a: a.at[7].set(0.0).at[30].set(0.0), tree)
    tx = dpo.dp_aggregate(1.0, 1.0, KEY, expected_batch_size=40)

    def update(grads, key):
        return tx.update(grads, tx.init(None)._replace(key=key))[0]

    def bf16(grads):
        return jax.tree.map(lambda a: a.astype(jnp.bfloat16), grads)

    def stacked(grads):
        return jax.tree.map(lambda a: jnp.stack([a, 2 * a, -a]), grads)

    chex.assert_trees_all_equal(jax.jit(update)(bf16(with_nan), KEY), jax.jit(update)(bf16(without), KEY))
    keys = jax.random.split(KEY, 3)
    batched = jax.jit(jax.vmap(update))
    chex.assert_trees_all_close(batched(stacked(with_nan), keys), batched(stacked(without), keys), rtol=1e-6)


def test_non_finite_rows_computed_in_the_step_are_dropped():
    """Per-example gradients computed inside the jitted step (where XLA fuses the select into their
    computation): an example whose loss is NaN or infinite contributes nothing, alone and under
    ``vmap``; the update equals the one of the batch with those examples masked out."""

    def loss(w, x):
        return jnp.log(x[0]) * jnp.sum(w * x)  # x[0] = 0: infinite; x[0] < 0: NaN

    x = jax.random.uniform(jax.random.key(2), (24, 3), minval=0.5, maxval=2.0)
    bad = x.at[3, 0].set(0.0).at[20, 0].set(-1.0)
    tx = dpo.dp_aggregate(1.0, 1.0, KEY, expected_batch_size=24)
    grads = dpo.per_example_grads(loss)
    masked = jnp.ones(24, bool).at[3].set(False).at[20].set(False)

    def update(x, key, mask=None):
        return tx.update(grads(jnp.ones(3), x), tx.init(None)._replace(key=key), example_mask=mask)[0]

    keys = jax.random.split(KEY, 2)
    got = jax.jit(update)(bad, KEY), jax.jit(jax.vmap(update))(jnp.stack([bad, 2 * bad]), keys)
    want = jax.jit(update)(x, KEY, masked), jax.jit(jax.vmap(lambda x, k: update(x, k, masked)))(
        jnp.stack([x, 2 * x]), keys
    )
    chex.assert_trees_all_close(got, want, rtol=1e-6)
    assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(got))


@pytest.mark.parametrize(
    "clip",
    [
        dpo.fixed_clip(1.0),
        dpo.geometric_clip(1.0, count_noise_multiplier=2.0),
        dpo.quantile_clip(1.0, epsilon=1.0, every=2),
    ],
    ids=["fixed", "geometric", "quantile"],
)
def test_train_step_compiles_once_and_is_reproducible_per_key(clip):
    traces = []

    def loss(params, x, y):
        return (x @ params["w"] + params["b"] - y) ** 2

    grads_fn = dpo.per_example_grads(loss)

    def run(key):
        tx = optax.chain(dpo.dp_aggregate(1.0, clip, key, expected_batch_size=16), optax.adam(0.1))
        params = {"w": jnp.zeros(3), "b": jnp.zeros(())}
        return params, tx, tx.init(params)

    @jax.jit
    def step(params, state, x, y, mask):
        traces.append(1)
        _, tx, _ = run(KEY)
        grads = grads_fn(params, x, y)
        updates, state = tx.update(grads, state, params, example_mask=mask)
        return optax.apply_updates(params, updates), state

    rng = np.random.default_rng(3)
    x, y = jnp.asarray(rng.normal(size=(20, 3)), jnp.float32), jnp.asarray(rng.normal(size=20), jnp.float32)
    mask = jnp.arange(20) < 16

    def trajectory(key):
        params, _, state = run(key)
        for _ in range(3):
            params, state = step(params, state, x, y, mask)
        return params, state

    first, second, other = trajectory(KEY), trajectory(KEY), trajectory(jax.random.key(1))
    assert len(traces) == 1
    chex.assert_trees_all_equal(first[0], second[0])
    assert not np.array_equal(first[0]["w"], other[0]["w"])
    assert int(first[1][0].step) == 3


def test_results_do_not_depend_on_microbatch_size():
    def loss(params, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(jnp.tanh(x @ params["w1"]) @ params["w2"], y)

    rng = np.random.default_rng(4)
    params = {
        "w1": jnp.asarray(rng.normal(size=(6, 5)), jnp.float32),
        "w2": jnp.asarray(rng.normal(size=(5, 3)), jnp.float32),
    }
    x, y = jnp.asarray(rng.normal(size=(10, 6)), jnp.float32), jnp.asarray(rng.integers(0, 3, 10), jnp.int32)
    tx = dpo.dp_aggregate(
        1.0, dpo.geometric_clip(0.5, count_noise_multiplier=3.0), KEY, expected_batch_size=10
    )
    results = []
    update = jax.jit(tx.update)
    for micro in (None, 1, 3, 10):
        grads = jax.jit(dpo.per_example_grads(loss, microbatch_size=micro))(params, x, y)
        results.append((grads, update(grads, tx.init(params))))
    for grads, (updates, state) in results[1:]:
        chex.assert_trees_all_close(results[0][0], grads, rtol=1e-5, atol=1e-6)
        chex.assert_trees_all_close(results[0][1][0], updates, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(results[0][1][1].clip_norm, state.clip_norm, rtol=1e-6)


def test_spent_epsilon_reads_the_state():
    strategy = dpo.geometric_clip(1.0, count_noise_multiplier=5.0)
    tx = optax.chain(dpo.dp_aggregate(1.3, strategy, KEY, expected_batch_size=4), optax.sgd(0.1))
    params = jnp.zeros(2)
    state = tx.init(params)
    update = jax.jit(tx.update)
    for _ in range(5):
        _, state = update(jnp.ones((4, 2)), state, params)
    expected = dpo.training_epsilon(1e-5, steps=5, sampling_rate=0.02, noise_multiplier=1.3, clip=strategy)
    assert dpo.spent_epsilon(state[0], 1e-5, sampling_rate=0.02) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: dpo.dp_aggregate(0.0, 1.0, KEY, expected_batch_size=4), "noise_multiplier"),
        (lambda: dpo.dp_aggregate(-1.0, 1.0, KEY, expected_batch_size=4), "noise_multiplier"),
        (lambda: dpo.dp_aggregate(1.0, 1.0, KEY, expected_batch_size=0), "expected_batch_size"),
        (lambda: dpo.fixed_clip(0.0), "initial_norm"),
        (lambda: dpo.fixed_clip(-2.0), "initial_norm"),
        (lambda: dpo.quantile_clip(1.0, quantile=1.0, epsilon=1.0), "quantile"),
        (lambda: dpo.quantile_clip(1.0, quantile=0.0, epsilon=1.0), "quantile"),
        (lambda: dpo.quantile_clip(1.0, epsilon=0.0), "epsilon"),
        (lambda: dpo.quantile_clip(1.0, epsilon=1.0, every=0), "every"),
        (lambda: dpo.quantile_clip(1.0, epsilon=1.0, beta=1.0), "beta"),
        (lambda: dpo.geometric_clip(1.0, quantile=1.5, count_noise_multiplier=1.0), "quantile"),
        (lambda: dpo.geometric_clip(1.0, count_noise_multiplier=0.0), "count_noise_multiplier"),
        (lambda: dpo.geometric_clip(1.0, learning_rate=-0.1, count_noise_multiplier=1.0), "learning_rate"),
    ],
)
def test_bad_parameters_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_mismatched_example_axes_raise():
    tx = dpo.dp_aggregate(1.0, 1.0, KEY, expected_batch_size=4)
    state = tx.init(None)
    with pytest.raises(ValueError, match="same leading example axis"):
        tx.update({"a": jnp.ones((4, 2)), "b": jnp.ones((3, 2))}, state)
    with pytest.raises(ValueError, match="example_mask must have shape"):
        tx.update({"a": jnp.ones((4, 2))}, state, example_mask=jnp.ones(3, bool))
    with pytest.raises(ValueError, match="same leading example axis"):
        dpo.per_example_grads(lambda w, x, y: x @ w - y)(jnp.zeros(2), jnp.ones((4, 2)), jnp.ones(5))


def test_invalid_traced_parameters_give_nan():
    tx = dpo.dp_aggregate(
        1.0, dpo.geometric_clip(1.0, count_noise_multiplier=2.0), KEY, expected_batch_size=4
    )
    state = tx.init(None)
    update = jax.jit(tx.update)
    bad_sigma = state._replace(noise_multiplier=-1.0)
    bad_quantile = state._replace(clip=state.clip.__class__(1.0, 1.5, 0.2, 2.0))
    for bad in (bad_sigma, bad_quantile):
        updates, new_state = update(jnp.ones((4, 2)), bad)
        assert np.all(np.isnan(updates)) and np.isnan(new_state.clip_norm)
    updates, new_state = update(jnp.ones((4, 2)), state)
    chex.assert_tree_all_finite((updates, new_state.clip_norm))


@pytest.mark.parametrize(
    "clip",
    [dpo.geometric_clip(1.0, count_noise_multiplier=2.0), dpo.quantile_clip(1.0, epsilon=1.0)],
    ids=["geometric", "quantile"],
)
def test_one_step_in_each_float_dtype(float_dtype, clip):
    tx = dpo.dp_aggregate(1.0, clip, KEY, expected_batch_size=4)
    grads = jnp.asarray(np.random.default_rng(5).normal(size=(4, 3)), float_dtype)
    updates, state = jax.jit(tx.update)(grads, tx.init(None))
    chex.assert_shape(updates, (3,))
    chex.assert_type(updates, float_dtype)
    chex.assert_tree_all_finite((updates, state.clip_norm))
    assert state.clip_norm > 0
    assert dpo.spent_epsilon(state, 1e-5, sampling_rate=0.01) > 0


STRATEGIES = {
    "fixed": dpo.fixed_clip(1.0),
    "geometric": dpo.geometric_clip(1.0, count_noise_multiplier=2.0),
    "quantile": dpo.quantile_clip(1.0, epsilon=1.0, every=2),
}


@pytest.mark.parametrize("name", STRATEGIES)
def test_jitted_step_compiles_once_from_init(name):
    """The state from ``init`` has arrays of fixed dtypes as leaves, so a jitted step called on it and
    then on its own output (four steps, an estimation step and a kept one for the quantile clip)
    compiles once: the jitted function's cache holds one executable."""
    tx = optax.chain(dpo.dp_aggregate(1.0, STRATEGIES[name], KEY, expected_batch_size=4), optax.sgd(0.1))

    @jax.jit
    def step(params, state, grads):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    params = jnp.zeros(3)
    state = tx.init(params)
    for leaf in jax.tree.leaves(state[0]):
        assert isinstance(leaf, jax.Array), leaf
        assert jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key) or not leaf.weak_type, leaf
    for _ in range(4):
        params, state = step(params, state, jnp.ones((4, 3)))
    assert step._cache_size() == 1
