"""dpjax.optax checkpoints: a DP-SGD run saved mid-way (npz + JSON, no pickle) and restored into a
fresh process's template resumes bit for bit, without a recompile, with its accounting; a checkpoint
that does not match its template or whose arrays were altered is refused."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpjax import optax as dpo
from dpjax._src.studies.compiles import CompileCounter

N = 8


def loss(p, x, y):
    return optax.softmax_cross_entropy_with_integer_labels(jnp.tanh(x @ p["w"]) @ p["v"] + p["b"], y)


def setup(strategy):
    private = dpo.dp_gradients(loss, 1.1, strategy, jax.random.key(5), expected_batch_size=6.0)
    opt = optax.adam(0.1)
    k = jax.random.split(jax.random.key(0), 3)
    params = {"w": jax.random.normal(k[0], (4, 5)), "v": jax.random.normal(k[1], (5, 3)), "b": jnp.zeros(3)}
    x, y = jax.random.normal(k[2], (N, 4)), jnp.arange(N) % 3

    @jax.jit
    def step(carry):
        params, state, opt_state, key = carry
        key, sample_key = jax.random.split(key)
        idx, mask, _ = dpo.poisson_sample(sample_key, N, 0.75, N)
        grads, state = private(params, state, x[idx], y[idx], example_mask=mask)
        updates, opt_state = opt.update(grads, opt_state)
        return optax.apply_updates(params, updates), state, opt_state, key

    return (params, private.init(params), opt.init(params), jax.random.key(9)), step


def test_a_restored_run_resumes_bit_for_bit_without_a_recompile(tmp_path):
    """Geometric clipping: the clip norm moves every step, so the clip state is exercised."""
    template, step = setup(dpo.geometric_clip(2.0, count_noise_multiplier=3.0))
    carry = template
    for _ in range(2):
        carry = step(carry)
    dpo.save_checkpoint(tmp_path / "ckpt", carry, metadata={"sampling_rate": 0.75})
    straight = step(step(carry))
    assert not list(tmp_path.glob("ckpt/*.pkl")) and sorted(
        p.name for p in (tmp_path / "ckpt").iterdir()
    ) == [
        "arrays.npz",
        "checkpoint.json",
    ]
    restored, facts = dpo.load_checkpoint(tmp_path / "ckpt", template)  # a fresh run's template
    assert facts == {"sampling_rate": 0.75}
    with CompileCounter() as compiles:
        resumed = step(step(restored))
    assert compiles.count == 0
    for a, b in zip(jax.tree.leaves(straight), jax.tree.leaves(resumed), strict=True):
        if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        np.testing.assert_array_equal(a, b)
    state = resumed[1]
    assert int(state.step) == 4
    assert dpo.spent_epsilon(state, 1e-5, sampling_rate=0.75) == dpo.spent_epsilon(
        straight[1], 1e-5, sampling_rate=0.75
    )


def test_mismatched_or_altered_checkpoints_are_refused(tmp_path):
    template, _ = setup(dpo.fixed_clip(1.0))
    where = dpo.save_checkpoint(tmp_path / "ckpt", template)
    other = (template[0], template[1], optax.sgd(0.1).init(template[0]), template[3])
    with pytest.raises(dpo.CheckpointError, match="tree"):
        dpo.load_checkpoint(where, other)
    wider = ({**template[0], "b": jnp.zeros(4)}, *template[1:])
    with pytest.raises(dpo.CheckpointError, match="leaf"):
        dpo.load_checkpoint(where, wider)
    x64 = (template[0], template[1]._replace(clip_norm=np.float64(1.0)), *template[2:])
    with pytest.raises(dpo.CheckpointError, match="float64"):
        dpo.load_checkpoint(where, x64)
    description = json.loads((where / "checkpoint.json").read_text())
    arrays = dict(np.load(where / "arrays.npz"))
    arrays["leaf_0"] = arrays["leaf_0"] + 1
    np.savez(where / "arrays.npz", **arrays)
    with pytest.raises(dpo.CheckpointError, match="sha256"):
        dpo.load_checkpoint(where, template)
    (where / "checkpoint.json").write_text(json.dumps(dict(description, format="pickle")))
    with pytest.raises(dpo.CheckpointError, match="not a version-1"):
        dpo.load_checkpoint(where, template)
