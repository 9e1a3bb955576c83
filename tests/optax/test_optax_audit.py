"""Statistical privacy audits of one dpjax.optax.dp_aggregate step on add/remove neighbors: the
batch with one worst-case example (gradient far above the clip norm) and the same batch with that
example removed (masked out). The claim audited is the step's own accounting, converted to (epsilon,
delta) by dp_accounting; a negative control (noise scaled by the wrong norm) must be caught.

Each audit has false-alarm probability <= alpha = 1e-3 with fixed keys (see dpjax.audit.procedure).
"""

import jax
import jax.numpy as jnp
import negative_controls
import numpy as np
import pytest
from dp_accounting import get_epsilon_gaussian

from dpjax import optax as dpo
from dpjax.audit import audit

SIGMA = 1.0
CLIP = 1.0
DELTA = 1e-3
# three ordinary examples (norms 0.3, 0.2, 0.5 < CLIP) and one far above the clip norm
GRADS = np.array([[0.3], [-0.2], [0.5], [10.0]], np.float32)
WITH = (GRADS, np.ones(4, bool))
WITHOUT = (GRADS, np.array([True, True, True, False]))


def one_step(strategy):
    tx = dpo.dp_aggregate(SIGMA, strategy, jax.random.key(0), expected_batch_size=4)

    def mechanism(key, data):
        grads, mask = data
        state = tx.init(None)._replace(key=key)
        updates, state = tx.update(jnp.asarray(grads), state, example_mask=mask)
        return jnp.concatenate([updates, state.clip_norm[None]])

    return mechanism


def claimed_epsilon(strategy):
    """The step's epsilon at DELTA: one unsampled step is the Gaussian of noise multiplier sigma_t."""
    ((_, sigma_t),) = [part for part in strategy.accounting_steps(SIGMA, 1) if part[0] > 0]
    return get_epsilon_gaussian(sigma_t, DELTA)


@pytest.mark.slow
def test_fixed_clip_step_passes_its_audit():
    strategy = dpo.fixed_clip(CLIP)
    result = audit(
        one_step(strategy), WITH, WITHOUT, epsilon=claimed_epsilon(strategy), delta=DELTA, trials=200_000
    )
    assert result.passed, str(result)


@pytest.mark.slow
def test_geometric_clip_step_passes_its_audit():
    """The released (update, next clip norm) are mapped back (post-processing with public constants) to
    the unit-variance noisy sum z1 and centred count z2, and reduced to the likelihood-ratio statistic
    of the joint Gaussian, z1/sigma - z2/z_b: the most powerful test of the claimed composition."""
    z_b, rate, gamma = 1.0, 0.2, 0.5
    strategy = dpo.geometric_clip(CLIP, quantile=gamma, learning_rate=rate, count_noise_multiplier=z_b)
    step = one_step(strategy)

    def statistic(key, data):
        update, clip_norm = step(key, data)
        z1 = update * 4 / (SIGMA * CLIP)
        count = gamma - jnp.log(clip_norm / CLIP) / rate  # the noisy b of Andrew et al.
        z2 = (count - 0.5) * 4 / (z_b / 2)
        return z1 / SIGMA - z2 / z_b

    epsilon = claimed_epsilon(strategy)
    result = audit(statistic, WITH, WITHOUT, epsilon=epsilon, delta=DELTA, trials=200_000)
    assert result.passed, str(result)
    assert result.epsilon_lower_bound > claimed_epsilon(dpo.fixed_clip(CLIP))  # the count is seen


@pytest.mark.slow
def test_quantile_clip_step_passes_its_audit():
    """The joint (update, next clip norm) of a step that runs the UQE estimate, against the GDP
    composition the accountant uses."""
    strategy = dpo.quantile_clip(CLIP, epsilon=1.0)
    result = audit(
        one_step(strategy), WITH, WITHOUT, epsilon=claimed_epsilon(strategy), delta=DELTA, trials=200_000
    )
    assert result.passed, str(result)


@pytest.mark.slow
def test_one_quantile_estimate_is_epsilon_dp_under_add_remove():
    """The clip estimate alone is pure epsilon-DP (Durfee 2023, Algorithm 4 as two calls with the
    fixed thresholds quantile * E and (1 - quantile) * E, each epsilon/2-DP by Lemma B.2), audited at
    delta = 0 on a batch with and without an example of norm 0, which moves every count of the
    upward call by one (and none of the downward call)."""
    epsilon = 1.0
    tx = dpo.dp_aggregate(
        SIGMA, dpo.quantile_clip(CLIP, epsilon=epsilon), jax.random.key(0), expected_batch_size=4
    )

    def estimate(key, data):
        grads, mask = data
        state = tx.init(None)._replace(key=key)
        return tx.update(jnp.asarray(grads), state, example_mask=mask)[1].clip_norm

    grads = np.array([[0.0], [0.4], [0.5], [0.6]], np.float32)
    with_zero, without_zero = (grads, np.ones(4, bool)), (grads, np.array([False, True, True, True]))
    result = audit(estimate, with_zero, without_zero, epsilon=epsilon, delta=0.0, trials=200_000)
    assert result.passed, str(result)
    # Lemma B.2 is tight for the upward call: the audit's lower bound (0.46 with these keys) reaches
    # 0.88 of that call's epsilon / 2
    assert result.epsilon_lower_bound > 0.88 * epsilon / 2


@pytest.mark.slow
def test_noise_scaled_by_the_wrong_norm_is_caught():
    def mechanism(key, data):
        grads, mask = data
        return negative_controls.dp_sum_noise_by_largest_norm(key, jnp.asarray(grads), mask, SIGMA, CLIP)

    epsilon = claimed_epsilon(dpo.fixed_clip(CLIP))
    result = audit(mechanism, WITH, WITHOUT, epsilon=epsilon, delta=DELTA, key=jax.random.key(7))
    assert not result.passed, str(result)
    assert result.p_value < result.alpha


@pytest.mark.slow
def test_dp_gradients_ghost_step_passes_its_audit():
    """The same DP-SGD step through dp_gradients' ghost path: the loss ``w . g`` has per-example
    gradient g (a dense layer, found in its jaxpr), so the neighbours are those of the cases above."""
    private = dpo.dp_gradients(
        lambda w, g: jnp.dot(w, g), SIGMA, CLIP, jax.random.key(0), expected_batch_size=4, method="ghost"
    )
    w = jnp.zeros(1)
    assert private.resolve(w, jnp.asarray(GRADS)) == "ghost"

    def mechanism(key, data):
        grads, mask = data
        state = private.init(w)._replace(key=key)
        return private(w, state, jnp.asarray(grads), example_mask=mask)[0]

    epsilon = claimed_epsilon(dpo.fixed_clip(CLIP))
    result = audit(mechanism, WITH, WITHOUT, epsilon=epsilon, delta=DELTA, trials=200_000)
    assert result.passed, str(result)
