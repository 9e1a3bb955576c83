"""dpjax._src.postprocess.topk_gap: Theorem 3's BLUE against its matrix form, its invariants and its
error ratio (Corollary 1) by Monte Carlo, and the gap confidence bound's radius and coverage."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float_tolerance import assert_close_ulp
from laws import laplace_difference_tail, sample
from scipy import stats

from dpjax import selection
from dpjax._src.additive import laplace_mechanism
from dpjax.postprocess import topk_gap


def blue_matrix_form(alpha, gaps, lam):
    """Theorem 3 literally: beta = (X alpha + Y g) / ((1 + lam) k), X = J + lam k I, Y = A - B."""
    k = len(alpha)
    x = np.ones((k, k)) + lam * k * np.eye(k)
    a = np.tile(np.arange(k - 1, 0, -1, dtype=float), (k, 1))
    b = np.array([[k if c < i else 0 for c in range(k - 1)] for i in range(k)], dtype=float)
    return (x @ alpha + (a - b) @ gaps[: k - 1]) / ((1 + lam) * k)


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0, 4.0, 37.0])
@pytest.mark.parametrize("k", [1, 2, 5, 10])
def test_blue_equals_matrix_form(k, lam, x64):
    rng = np.random.default_rng(k)
    alpha, gaps = rng.normal(0, 50, k), rng.exponential(10, k)
    beta = topk_gap.blue_estimate(jnp.asarray(alpha), jnp.asarray(gaps), lam)
    np.testing.assert_allclose(beta, blue_matrix_form(alpha, gaps, lam), rtol=0, atol=1e-10)
    # The gaps may also be given without g_k, which is never used.
    np.testing.assert_array_equal(
        topk_gap.blue_estimate(jnp.asarray(alpha), jnp.asarray(gaps[: k - 1]), lam), beta
    )


def test_blue_invariants(float_dtype):
    rng = np.random.default_rng(0)
    k, lam = 8, 1.7
    q = np.sort(rng.normal(0, 100, k))[::-1]
    alpha = jnp.asarray(q + rng.normal(0, 5, k), float_dtype)
    gaps = jnp.asarray(-np.diff(np.r_[q, q[-1] - 3]) + rng.normal(0, 5, k), float_dtype)
    beta = topk_gap.blue_estimate(alpha, gaps, lam)
    assert beta.dtype == float_dtype and beta.shape == (k,)
    tol = 1e-3 if float_dtype == jnp.float32 else 1e-9
    # The gaps carry no information about the overall level.
    np.testing.assert_allclose(beta.sum(), alpha.sum(), rtol=0, atol=tol * 10)
    # Each difference is the inverse-variance combination of the measured difference and the gap.
    np.testing.assert_allclose(
        beta[:-1] - beta[1:], (lam * (alpha[:-1] - alpha[1:]) + gaps[:-1]) / (1 + lam), rtol=0, atol=tol
    )
    # Noise-free inputs are reproduced; lam -> infinity ignores the gaps; k = 1 is the measurement.
    exact = topk_gap.blue_estimate(
        jnp.asarray(q, float_dtype), jnp.asarray(-np.diff(np.r_[q, 0.0]), float_dtype), lam
    )
    np.testing.assert_allclose(exact, q, rtol=1e-5)
    np.testing.assert_allclose(topk_gap.blue_estimate(alpha, gaps, 1e12), alpha, rtol=1e-5)
    np.testing.assert_array_equal(topk_gap.blue_estimate(alpha[:1], gaps[:1], lam), alpha[:1])


def test_blue_batches_under_jit_and_vmap():
    rng = np.random.default_rng(1)
    alpha, gaps = jnp.asarray(rng.normal(0, 9, (6, 4))), jnp.asarray(rng.exponential(3, (6, 4)))
    lams = jnp.asarray([0.0, 0.5, 1.0, 2.0, 4.0, 8.0])
    batched = jax.jit(jax.vmap(topk_gap.blue_estimate))(alpha, gaps, lams)
    for i in range(6):
        np.testing.assert_allclose(
            batched[i], topk_gap.blue_estimate(alpha[i], gaps[i], float(lams[i])), rtol=1e-5
        )
    # Leading axes broadcast with a scalar lam.
    np.testing.assert_allclose(
        topk_gap.blue_estimate(alpha, gaps, 2.0)[3], topk_gap.blue_estimate(alpha[3], gaps[3], 2.0)
    )


def test_theoretical_ratios():
    assert topk_gap.blue_mse_ratio(10, 1.0) == pytest.approx(0.55)
    assert topk_gap.blue_mse_ratio(10, 4.0) == pytest.approx(0.82)
    assert topk_gap.blue_mse_ratio(2, 1.0) == pytest.approx(0.75)
    assert topk_gap.blue_mse_ratio(1, 3.0) == 1.0
    assert topk_gap.variance_ratio(20.0, 10.0) == 4.0
    # Var Gumbel(b) = pi^2 b^2 / 6 against Var Lap(b) = 2 b^2.
    assert topk_gap.variance_ratio(20.0, 10.0, noise="gumbel") == pytest.approx(4 * np.pi**2 / 12)


def measured_trial(key, scores, k, epsilon, monotonic, noise="laplace"):
    """The paper's protocol (§5.2): half the budget selects with gaps, half measures Lap(k/(epsilon/2))."""
    select_key, measure_key = jax.random.split(key)
    idx, gaps = selection.noisy_top_k_with_gap(
        select_key, scores, k, epsilon / 2, monotonic=monotonic, noise=noise
    )
    truth = scores[idx]
    alpha = laplace_mechanism(measure_key, truth, epsilon / 2, sensitivity=k)
    lam = topk_gap.variance_ratio(
        selection.noisy_top_k_with_gap_scale(k, epsilon / 2, monotonic=monotonic),
        k / (epsilon / 2),
        noise=noise,
    )
    beta = topk_gap.blue_estimate(alpha, gaps, lam)
    return idx, alpha - truth, beta - truth


@pytest.mark.slow
@pytest.mark.parametrize(
    ("monotonic", "lam", "noise"),
    [(True, 1.0, "laplace"), (False, 4.0, "laplace"), (True, np.pi**2 / 12, "gumbel")],
)
def test_blue_error_ratio_and_unbiasedness_on_separated_scores(monotonic, lam, noise, x64):
    """Corollary 1: MSE(beta)/MSE(alpha) = (1 + lam k)/(k + lam k) = 0.55 (monotone) or 0.82 (general);
    with Gumbel selection noise (Gauss-Markov: only lam changes) 0.51 at lam = pi^2/12."""
    k, epsilon, trials = 10, 0.7, 20_000
    scores = jnp.asarray(2_000.0 * np.arange(30, 0, -1))  # separated by ~35 noise scales
    idx, err_alpha, err_beta = sample(
        measured_trial, scores, trials, 40, k=k, epsilon=epsilon, monotonic=monotonic, noise=noise
    )
    assert (idx == np.arange(k)).all()
    ratio = (err_beta**2).mean() / (err_alpha**2).mean()
    assert abs(ratio - topk_gap.blue_mse_ratio(k, lam)) < 0.03
    se = err_beta.std(axis=0) / np.sqrt(trials)
    assert np.all(np.abs(err_beta.mean(axis=0)) < 4.5 * se)


def test_confidence_radius_solves_the_tail_equation(x64):
    for b in (0.5, 1.0, 28.6):
        for confidence in (0.5, 0.8, 0.95, 0.999, 1 - 1e-12):
            t = float(topk_gap.gap_confidence_radius(b, confidence))
            assert laplace_difference_tail(t, b) == pytest.approx(1 - confidence, rel=1e-10, abs=1e-15)
            assert float(topk_gap.gap_confidence_radius(b, 1 - confidence)) == pytest.approx(-t)
        t = float(topk_gap.gap_confidence_radius(b, 1e-300))  # far in the lower tail
        assert laplace_difference_tail(-t, b) == pytest.approx(1e-300, rel=1e-10)
    assert float(topk_gap.gap_confidence_radius(1.0, 0.95)) == pytest.approx(3.27181206, rel=1e-8)
    assert float(topk_gap.gap_confidence_radius(3.0, 0.95)) == pytest.approx(3 * 3.27181206, rel=1e-8)


def test_gumbel_confidence_radius_is_the_logistic_quantile(x64):
    """The difference of two iid Gumbel(b) variables is Logistic(b)."""
    for b in (0.5, 28.6):
        for confidence in (0.5, 0.95, 1 - 1e-12, 1e-300):
            t = float(topk_gap.gap_confidence_radius(b, confidence, noise="gumbel"))
            assert stats.logistic(scale=b).cdf(t) == pytest.approx(confidence, rel=1e-10)
    x = stats.gumbel_r.rvs(size=(2, 200_000), random_state=np.random.default_rng(5))
    t = float(topk_gap.gap_confidence_radius(1.0, 0.9, noise="gumbel"))
    assert abs((x[0] - x[1] <= t).mean() - 0.9) < 4.5 * np.sqrt(0.09 / 200_000)


def test_confidence_radius_in_float32():
    radius = topk_gap.gap_confidence_radius(1.0, 0.95)
    assert radius.dtype == jnp.float32 and float(radius) == pytest.approx(3.27181206, rel=3e-7)


def test_gap_estimators_take_traced_parameters():
    """vmap over epsilon through the scale, lam and the confidence equals separate calls; an invalid
    traced value gives NaN."""
    gaps = jnp.asarray([12.0, 3.5])
    epsilons = [0.5, 1.0, 2.0]

    def bounds(epsilon, confidence):
        scale = selection.noisy_top_k_with_gap_scale(2, epsilon)
        return topk_gap.gap_lower_confidence_bound(gaps, scale, confidence)

    swept = jax.jit(jax.vmap(bounds, in_axes=(0, None)))(jnp.asarray(epsilons), 0.9)
    for got, epsilon in zip(np.asarray(swept), epsilons, strict=True):
        assert_close_ulp(got, bounds(epsilon, 0.9))
    assert np.isnan(np.asarray(jax.jit(bounds)(-1.0, 0.9))).all()
    assert np.isnan(np.asarray(jax.jit(bounds)(1.0, jnp.nan))).all()
    alpha, lams = jnp.asarray([105.0, 88.0, 71.0]), [0.0, 1.0, 4.0]
    betas = jax.jit(jax.vmap(topk_gap.blue_estimate, in_axes=(None, None, 0)))(alpha, gaps, jnp.asarray(lams))
    for got, lam in zip(np.asarray(betas), lams, strict=True):
        assert_close_ulp(got, topk_gap.blue_estimate(alpha, gaps, lam))
    assert np.isnan(np.asarray(jax.jit(topk_gap.blue_estimate)(alpha, gaps, -1.0))).all()
    ratio = jax.jit(topk_gap.variance_ratio)
    assert float(ratio(20.0, 10.0)) == 4.0 and np.isnan(ratio(20.0, 0.0))
    assert float(jax.jit(lambda lam: topk_gap.blue_mse_ratio(10, lam))(1.0)) == pytest.approx(0.55)


@pytest.mark.slow
@pytest.mark.parametrize("noise", ["laplace", "gumbel"])
def test_gap_lower_bound_coverage_on_separated_scores(noise):
    k, epsilon, trials = 5, 1.0, 20_000
    scores = jnp.asarray([1000.0, 800.0, 600.0, 350.0, 150.0, -100.0, -300.0])  # gaps >= 20 noise scales
    b = selection.noisy_top_k_with_gap_scale(k, epsilon, noise=noise)
    idx, gaps = sample(selection.noisy_top_k_with_gap, scores, trials, 41, k=k, epsilon=epsilon, noise=noise)
    assert (idx == np.arange(k)).all()
    true_gaps = -np.diff(np.asarray(scores))[:k]
    lower = np.asarray(topk_gap.gap_lower_confidence_bound(jnp.asarray(gaps), b, 0.95, noise=noise))
    np.testing.assert_allclose((true_gaps >= lower).mean(axis=0), 0.95, atol=0.01)
    # The same radius bounds any pairwise difference, e.g. q_1 - q_3 from g_1 + g_2.
    pair_lower = gaps[:, 0] + gaps[:, 1] - topk_gap.gap_confidence_radius(b, 0.95, noise=noise)
    assert abs((true_gaps[0] + true_gaps[1] >= pair_lower).mean() - 0.95) < 0.01


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: topk_gap.blue_estimate(jnp.zeros(3), jnp.zeros(3), -1.0), "lam"),
        (lambda: topk_gap.blue_estimate(jnp.zeros(3), jnp.zeros(5), 1.0), "gaps"),
        (lambda: topk_gap.blue_estimate(jnp.zeros((2, 3)), jnp.zeros((3, 3)), 1.0), "gaps"),
        (lambda: topk_gap.blue_estimate(jnp.asarray([1.0, jnp.nan]), jnp.zeros(2), 1.0), "NaN"),
        (lambda: topk_gap.blue_estimate(jnp.asarray(1.0), jnp.zeros(1), 1.0), "measurements"),
        (lambda: topk_gap.blue_estimate(jnp.zeros(0), jnp.zeros(0), 1.0), "empty"),
        (lambda: topk_gap.blue_mse_ratio(0, 1.0), "k"),
        (lambda: topk_gap.gap_confidence_radius(0.0), "scale"),
        (lambda: topk_gap.gap_confidence_radius(1.0, 1.0), "confidence"),
        (lambda: topk_gap.gap_lower_confidence_bound(jnp.ones(2), 1.0, 0.0), "confidence"),
        (lambda: topk_gap.variance_ratio(1.0, -2.0), "measurement_scale"),
        (lambda: topk_gap.variance_ratio(1.0, 2.0, noise="exponential"), "noise"),
        (lambda: topk_gap.gap_lower_confidence_bound(jnp.ones(2), 1.0, noise="exponential"), "noise"),
    ],
)
def test_bad_input_is_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
