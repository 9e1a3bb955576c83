"""Exact mechanisms on integer data: laws, guarantees (CKS20 Thm. 4 and Thm. 7), audits, bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax.accounting import ZCDP, PureDP
from dpjax.additive import (
    discrete_gaussian_approx_dp,
    discrete_gaussian_delta,
    discrete_gaussian_guarantee,
    discrete_gaussian_mechanism,
    discrete_laplace_guarantee,
    discrete_laplace_mechanism,
)
from dpjax.audit import audit

TRIALS = 100_000


def test_discrete_laplace_mechanism_law_and_guarantee():
    counts = jnp.array([5, -3, 0, 40], jnp.int32)
    keys = jax.random.split(jax.random.key(0), 20_000)
    release = jax.vmap(lambda k: discrete_laplace_mechanism(k, counts, 1, sensitivity=2))
    out = np.asarray(jax.jit(release)(keys))
    assert out.dtype == np.int32 and out.shape == (20_000, 4)
    q = math.exp(-0.5)
    noise = (out - np.asarray(counts)).ravel()
    assert stats.binomtest(int(np.sum(noise == 0)), noise.size, (1 - q) / (1 + q)).pvalue > 1e-4
    assert abs(noise.var() / (2 * q / (1 - q) ** 2) - 1) < 0.05
    assert discrete_laplace_guarantee(1, sensitivity=2) == PureDP(1.0)
    assert discrete_laplace_guarantee((1, 3)) == PureDP(1 / 3)


def test_discrete_gaussian_guarantees():
    assert discrete_gaussian_guarantee(2) == ZCDP(0.125)
    assert discrete_gaussian_guarantee(3, sensitivity=2) == ZCDP(4 / 18)
    # CKS20 Thm. 7 at epsilon = 0 is the total variation distance: P[Y = 0] for sensitivity 1.
    norm = sum(math.exp(-(y**2) / 2) for y in range(-60, 61))
    assert discrete_gaussian_delta(1, 0.0) == pytest.approx(1 / norm, rel=1e-12)
    for sigma in (1, 3, 10):
        exact = discrete_gaussian_approx_dp(sigma, 1e-6)
        assert exact.epsilon < discrete_gaussian_guarantee(sigma).to_approx_dp(1e-6).epsilon
        assert discrete_gaussian_delta(sigma, exact.epsilon) <= 1e-6 * (1 + 1e-9)


def test_gaussian_delta_matches_the_privacy_loss_distribution():
    """delta(eps) = E[max(0, 1 - e^(eps - L))] over the privacy loss L of N_Z(0, s^2) vs N_Z(1, s^2)."""
    s2, eps = 4.0, 0.6
    y = np.arange(-200, 201)
    p = np.exp(-(y**2) / (2 * s2))
    p /= p.sum()
    loss = ((y - 1.0) ** 2 - y**2) / (2 * s2)
    direct = np.sum(p * np.maximum(0, 1 - np.exp(eps - loss)))
    assert discrete_gaussian_delta(2, eps) == pytest.approx(direct, rel=1e-9)


def test_float_data_and_bad_parameters_are_refused_eagerly():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="integer dtype"):
        discrete_laplace_mechanism(key, jnp.array([1.0, 2.0]), 1)
    with pytest.raises(ValueError, match="integer dtype"):
        jax.jit(lambda v: discrete_gaussian_mechanism(key, v, 3))(jnp.array([1.0]))
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        discrete_laplace_mechanism(key, jnp.array([1]), 0)
    with pytest.raises(ValueError, match="sigma must be > 0"):
        discrete_gaussian_mechanism(key, jnp.array([1]), -2)
    with pytest.raises(TypeError, match="traced"):
        jax.jit(lambda e: discrete_laplace_mechanism(key, jnp.array([1]), e))(1.0)
    with pytest.raises(ValueError, match=r"value must lie in"):
        discrete_laplace_mechanism(key, jnp.array([2**30], jnp.int32), 1)


def test_scale_is_rounded_up_when_the_fraction_is_too_long():
    """epsilon = 0.1 (a float: 3602879701896397/2^55) gives a scale t/2^j >= 10, not a refusal."""
    out = discrete_laplace_mechanism(jax.random.key(1), jnp.zeros(50_000, jnp.int32), 0.1)
    q = math.exp(-0.1)
    assert abs(float(jnp.var(out.astype(jnp.float32))) / (2 * q / (1 - q) ** 2) - 1) < 0.05


def test_release_clamped_into_range_is_exact_post_processing():
    big = (2**31 - 2) // 2
    out = discrete_laplace_mechanism(jax.random.key(2), jnp.full(1000, big, jnp.int32), 1)
    assert int(out.max()) <= big and int(out.min()) >= big - 40


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_exact_mechanisms_pass_their_audits(kind):
    """Histogram neighbours under add/remove (one count differs by 1): the claimed epsilon is the
    companion's (pure for Laplace, CKS20 Thm. 7 at delta 1e-3 for the Gaussian)."""
    x = jnp.array([3, 0, 1], jnp.int32)
    x_prime = jnp.array([4, 0, 1], jnp.int32)
    if kind == "laplace":
        mechanism = lambda k, v: discrete_laplace_mechanism(k, v, 1)  # noqa: E731
        epsilon, delta = discrete_laplace_guarantee(1).epsilon, 0.0
    else:
        mechanism = lambda k, v: discrete_gaussian_mechanism(k, v, 2)  # noqa: E731
        claim = discrete_gaussian_approx_dp(2, 1e-3)
        epsilon, delta = claim.epsilon, claim.delta
    result = audit(mechanism, x, x_prime, epsilon=epsilon, delta=delta, trials=TRIALS)
    assert result.passed, result
    assert result.epsilon_lower_bound > 0.5 * epsilon  # the audit sees most of the loss


def test_audit_catches_too_little_discrete_noise():
    """Negative control: claiming epsilon = 1 for noise of scale 1/3 (epsilon 3) is refuted."""
    x, x_prime = jnp.array([0], jnp.int32), jnp.array([1], jnp.int32)
    result = audit(lambda k, v: discrete_laplace_mechanism(k, v, 3), x, x_prime, epsilon=1.0, trials=TRIALS)
    assert not result.passed
