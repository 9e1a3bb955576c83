"""Exact mechanisms on integer data: laws, guarantees (CKS20 Thm. 4 and Thm. 7), audits, bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax._src.additive import (
    discrete_gaussian_approx_dp,
    discrete_gaussian_delta,
    discrete_gaussian_guarantee,
    discrete_gaussian_mechanism,
    discrete_laplace_guarantee,
    discrete_laplace_mechanism,
)
from dpjax._src.selection import (
    discrete_peeling_top_k,
    discrete_peeling_top_k_guarantee,
    discrete_report_noisy_max,
    discrete_report_noisy_max_guarantee,
)
from dpjax.accounting import ZCDP, PureDP
from dpjax.audit import audit, neighbors
from dpjax.svt import discrete_above_threshold, discrete_above_threshold_guarantee

TRIALS = 50_000


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
    out = discrete_laplace_mechanism(jax.random.key(1), jnp.zeros(10**6, jnp.int32), 0.1)
    q = math.exp(-0.1)
    assert abs(float(jnp.var(out.astype(jnp.float32))) / (2 * q / (1 - q) ** 2) - 1) < 0.015


def test_release_clamped_into_range_is_exact_post_processing():
    big = (2**31 - 2) // 2
    out = discrete_laplace_mechanism(jax.random.key(2), jnp.full(4, big, jnp.int32), 1)
    assert int(out.max()) <= big and int(out.min()) >= big - 60


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_exact_mechanisms_pass_their_audits(kind):
    """Histogram neighbors under add/remove (one count differs by 1): the claimed epsilon is the
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


# --------------------------------------------------------------- AboveThreshold, noisy max, peeling top-k


def _dlap_pmf(scale, reach=200):
    z = np.arange(-reach, reach + 1)
    q = math.exp(-1 / scale)
    return z, (1 - q) / (1 + q) * q ** np.abs(z)


def _int(pair):
    return tuple(jnp.asarray(v, jnp.int32) for v in pair)


def test_discrete_above_threshold_exact_law():
    """queries (0, 2), threshold 1, scales 1 and 2: P(output) summed over the noise's PMFs."""
    z, p1 = _dlap_pmf(1.0)
    _, p2 = _dlap_pmf(2.0)
    cdf2 = np.cumsum(p2)  # P(nu <= z[i])

    def p_at_least(a):  # P(nu >= a) for integer arrays a
        idx = np.clip(a - z[0] - 1, -1, z.size - 1)
        return 1 - np.where(idx >= 0, cdf2[np.maximum(idx, 0)], 0.0)

    first = p_at_least(1 + z - 0)  # q_0 + nu_0 >= T + rho
    second = p_at_least(1 + z - 2)
    law = np.array([(p1 * first).sum(), (p1 * (1 - first) * second).sum()])
    law = np.append(law, 1 - law.sum())  # index 0, index 1, none (-1)
    queries = jnp.array([0, 2], jnp.int32)
    keys = jax.random.split(jax.random.key(4), 50_000)
    out = np.asarray(jax.jit(jax.vmap(lambda k: discrete_above_threshold(k, queries, 1, 1, (1, 2))))(keys))
    counts = [np.sum(out == 0), np.sum(out == 1), np.sum(out == -1)]
    assert stats.chisquare(counts, law * out.size).pvalue > 1e-4


def test_discrete_report_noisy_max_exact_law_with_ties():
    """counts (0, 1), monotonic, epsilon 1 (scale 1): index 0 wins iff z_0 >= 1 + z_1 (ties go to 0)."""
    z, p = _dlap_pmf(1.0)
    tail = 1 - np.cumsum(p) + p  # P(Z >= z[i])
    shifted = np.interp(z + 1, z, tail, right=0.0)  # P(z_0 >= z_1 + 1)
    p0 = float((p * shifted).sum())
    counts = jnp.array([0, 1], jnp.int32)
    keys = jax.random.split(jax.random.key(5), 50_000)
    release = jax.vmap(lambda k: discrete_report_noisy_max(k, counts, 1, monotonic=True))
    out = np.asarray(jax.jit(release)(keys))
    assert stats.binomtest(int(np.sum(out == 0)), out.size, p0).pvalue > 1e-4


def test_peeling_top_k_returns_distinct_indices_in_order():
    counts = jnp.array([0, 1000, 5, 990], jnp.int32)
    top = discrete_peeling_top_k(jax.random.key(6), counts, 2, 1)
    assert top.shape == (2,) and set(np.asarray(top).tolist()) == {1, 3}
    assert discrete_peeling_top_k_guarantee(2) == PureDP(2.0)
    with pytest.raises(ValueError, match="k must be <= 4"):
        discrete_peeling_top_k(jax.random.key(6), counts, 5, 1)


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
@pytest.mark.parametrize("name", ["above_threshold", "noisy_max", "noisy_max_monotonic", "peeling_top_k"])
def test_discrete_selection_passes_its_audit(name):
    if name == "above_threshold":
        x, x_prime = _int(neighbors.svt_worst_case(6))
        mechanism = lambda k, v: discrete_above_threshold(k, v, 0, (1, 2), (1, 2))  # noqa: E731
        claim = discrete_above_threshold_guarantee((1, 2), (1, 2))
    elif name.startswith("noisy_max"):
        monotonic = name.endswith("monotonic")
        x, x_prime = _int(neighbors.noisy_max_worst_case(monotonic=monotonic))
        mechanism = lambda k, v: discrete_report_noisy_max(k, v, 1, monotonic=monotonic)  # noqa: E731
        claim = discrete_report_noisy_max_guarantee(1, monotonic=monotonic)
    else:
        x, x_prime = _int((np.zeros(3), np.array([1.0, -1.0, 0.0])))
        mechanism = lambda k, v: discrete_peeling_top_k(k, v, 2, 1)  # noqa: E731
        claim = discrete_peeling_top_k_guarantee(1)
    result = audit(mechanism, x, x_prime, epsilon=claim.epsilon, trials=TRIALS)
    assert result.passed, result


def test_discrete_selection_bad_input():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="integer dtype"):
        discrete_report_noisy_max(key, jnp.array([1.0, 2.0]), 1)
    with pytest.raises(ValueError, match="integer dtype"):
        discrete_above_threshold(key, jnp.array([1, 2]), 0.5, 1, 1)
    with pytest.raises(ValueError, match="epsilon1 must be > 0"):
        discrete_above_threshold(key, jnp.array([1, 2]), 0, 0, 1)
    with pytest.raises(ValueError, match=r"counts must have shape \(n,\)"):
        discrete_report_noisy_max(key, jnp.zeros((2, 2), jnp.int32), 1)


def test_readme_release_mode_example_runs():
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = re.search(r"## Release mode\n.*?```python\n(.*?)```", readme, re.S)
    assert block, "README has no release mode example"
    namespace = {}
    exec(compile(block.group(1), "README release mode", "exec"), namespace)
    assert namespace["histogram"].dtype == jnp.int32 and namespace["top2"].shape == (2,)
