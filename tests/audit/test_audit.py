"""Tests of the audit machinery: Clopper–Pearson bounds, events, the procedure's false-alarm rate and
power, neighbor generators and the reference mechanisms (exact laws)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st

from dpjax._src.additive import laplace_mechanism
from dpjax.audit import (
    Event,
    audit,
    candidate_events,
    clopper_pearson,
    features,
    loss_p_value,
    neighbors,
    privacy_loss_lower_bound,
    reference,
)

# ---------------------------------------------------------------- Clopper–Pearson against SciPy


def test_clopper_pearson_matches_scipy_beta_quantiles():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 2_000_000, 40)
    k = np.floor(rng.uniform(0, 1, 40) ** 3 * (n + 1)).astype(int).clip(0, n)
    k[:3], k[3:6] = 0, n[3:6]
    level = 10.0 ** rng.uniform(-8, -0.5, 40)
    lower, upper = clopper_pearson(k, n, level)
    want_lower = np.where(k > 0, st.beta.ppf(level, np.maximum(k, 1), n - k + 1), 0.0)
    want_upper = np.where(k < n, st.beta.ppf(1 - level, k + 1, np.maximum(n - k, 1)), 1.0)
    np.testing.assert_allclose(lower, want_lower, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(upper, want_upper, rtol=1e-6, atol=1e-12)


def test_clopper_pearson_textbook_value_and_bad_input():
    lower, upper = clopper_pearson(5, 100, 0.025)
    assert lower == pytest.approx(0.016431879, rel=1e-6)
    assert upper == pytest.approx(0.112834909, rel=1e-6)
    with pytest.raises(ValueError, match="successes"):
        clopper_pearson(5, 4, 0.1)
    with pytest.raises(ValueError, match="level"):
        clopper_pearson(1, 4, 0.0)


def test_loss_bound_formula_and_p_value_consistency():
    k_p, k_q, n = np.array([2700, 900, 400]), np.array([1000, 100, 0]), 10_000
    level = 1e-4
    bound = privacy_loss_lower_bound(k_p, n, k_q, n, level, 0.01)
    p_low = st.beta.ppf(level, k_p, n - k_p + 1)
    q_high = st.beta.ppf(1 - level, k_q + 1, n - k_q)
    np.testing.assert_allclose(bound, np.log((p_low - 0.01) / q_high), rtol=1e-6)
    # The p-value of "loss <= bound" is the level at which the bound equals it.
    p = loss_p_value(k_p, n, k_q, n, bound, 0.01)
    np.testing.assert_allclose(p, 2 * level, rtol=1e-4)
    assert privacy_loss_lower_bound(5, 100, 0, 100, 0.01, 0.2) == -np.inf  # P_low below delta
    assert loss_p_value(0, 100, 0, 100, 0.0) == 1.0


# ---------------------------------------------------------------- events


def test_features_flatten_pytrees_in_order():
    out = (np.array([1, 2]), {"a": np.ones((2, 2, 3)), "b": np.array([True, False])})
    y = features(out)
    assert y.shape == (2, 1 + 6 + 1) and y.dtype == np.float64
    np.testing.assert_array_equal(y[:, 0], [1, 2])
    np.testing.assert_array_equal(y[:, -1], [1, 0])


def test_candidate_counts_match_event_indicators():
    rng = np.random.default_rng(1)
    y_x = np.stack([rng.integers(0, 3, 500), rng.normal(0, 1, 500)], 1)
    y_xp = np.stack([rng.integers(0, 3, 500), rng.normal(0.5, 1, 500)], 1)
    y_x[rng.uniform(size=500) < 0.2, 1] = np.nan  # an "absent" value makes a second stratum
    family = candidate_events(y_x, y_xp)
    cx, cxp = family.count_x, family.count_x_prime
    assert cx.size > 1000
    for i in rng.choice(cx.size, 60, replace=False):
        event = family.event(int(i))
        assert event(y_x).sum() == cx[i], event.description
        assert event(y_xp).sum() == cxp[i], event.description


def test_event_must_return_one_flag_per_trial():
    with pytest.raises(ValueError, match="one boolean per trial"):
        Event("bad", lambda out: np.ones((3, 2), bool))(np.zeros(3))


# ---------------------------------------------------------------- procedure


def _laplace(key, value):
    return laplace_mechanism(key, value, 1.0)


def _rr(key, bit):
    return reference.randomized_response(key, bit, 1.0)


def test_audit_finds_exact_loss_of_randomized_response_and_laplace():
    """Power: at 2e5 trials the bound is within 0.1 of the exact loss (1.0) and below it."""
    for mechanism, x, x_prime in ((_rr, True, False), (_laplace, 0.0, 1.0)):
        result = audit(mechanism, x, x_prime, epsilon=1.0, trials=200_000, key=jax.random.key(3))
        assert result.passed, result
        assert 0.9 < result.epsilon_lower_bound <= 1.0, result
        wrong = audit(mechanism, x, x_prime, epsilon=0.8, trials=200_000, key=jax.random.key(3))
        assert not wrong.passed and wrong.p_value < 1e-3, wrong


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
@pytest.mark.slow
@pytest.mark.parametrize("mechanism,x,x_prime,repeats", [(_rr, True, False, 200), (_laplace, 0.0, 1.0, 100)])
def test_false_alarm_rate_is_at_most_alpha(mechanism, x, x_prime, repeats):
    """At the exact epsilon, the audit fails with probability <= alpha (here alpha = 0.2).

    Binomial(repeats, 0.2) exceeds the threshold below with probability < 1e-4.
    """
    alpha = 0.2
    failures = sum(
        not audit(
            mechanism, x, x_prime, epsilon=1.0, trials=2000, alpha=alpha, key=jax.random.key(100 + i)
        ).passed
        for i in range(repeats)
    )
    assert failures <= st.binom.ppf(1 - 1e-4, repeats, alpha), failures


def test_user_events_are_all_tested_without_selection():
    events = [Event("y > 1", lambda y: y > 1.0), lambda y: y < -1.0]
    result = audit(_laplace, 0.0, 1.0, epsilon=1.0, events=events, trials=20_000)
    assert len(result.tested) == 4 and result.n == 20_000
    assert {t.direction for t in result.tested} == {"x", "x_prime"}
    assert result.passed and result.event.description in {"y > 1", "<lambda>"}


def test_audit_pytree_outputs_and_add_remove_shapes():
    """Outputs may be pytrees and the neighbors may differ in shape (add/remove)."""

    def mean_and_count(key, data):
        k1, k2 = jax.random.split(key)
        return {
            "sum": jnp.sum(data) + 2.0 * jax.random.laplace(k1),
            "count": data.size + 2.0 * jax.random.laplace(k2),
        }

    x = np.array([0.2, 0.5, 0.9])
    result = audit(mean_and_count, x, neighbors.add(x, 1.0), epsilon=1.0, trials=20_000)
    assert result.passed and result.epsilon_lower_bound > 0.1


def test_audit_in_x64(x64):
    result = audit(_laplace, 0.0, 1.0, epsilon=1.0, trials=20_000)
    assert result.passed and result.epsilon_lower_bound > 0.5


def test_audit_rejects_bad_arguments():
    with pytest.raises(ValueError, match="epsilon"):
        audit(_laplace, 0.0, 1.0, epsilon=-1.0)
    with pytest.raises(ValueError, match="delta"):
        audit(_laplace, 0.0, 1.0, epsilon=1.0, delta=1.0)
    with pytest.raises(ValueError, match="trials"):
        audit(_laplace, 0.0, 1.0, epsilon=1.0, trials=10)
    with pytest.raises(ValueError, match="alpha"):
        audit(_laplace, 0.0, 1.0, epsilon=1.0, alpha=0.0)
    with pytest.raises(ValueError, match="events"):
        audit(_laplace, 0.0, 1.0, epsilon=1.0, events=[])
    with pytest.raises(TypeError, match="callable"):
        audit(None, 0.0, 1.0, epsilon=1.0)
    with pytest.raises(ValueError, match="same structure and shapes"):
        audit(_laplace, np.zeros(2), np.zeros(3), epsilon=1.0, trials=200)


# ---------------------------------------------------------------- neighbors


def test_neighbor_generators():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(neighbors.swap(x, 0, 9.0), [9.0, 2.0, 3.0])
    np.testing.assert_array_equal(neighbors.add(x, 4.0), [1, 2, 3, 4])
    np.testing.assert_array_equal(neighbors.remove(x, 1), [1.0, 3.0])
    np.testing.assert_array_equal(neighbors.histogram_add(np.zeros(4), [1, 3, 3]), [0, 1, 0, 1])
    q, q_prime = neighbors.svt_worst_case(4)
    assert np.max(np.abs(q - q_prime)) == 1 and q_prime[-1] == -1
    a, b = neighbors.quantile_worst_case(5, 0.0, 10.0)
    assert np.sum(a != b) == 1 and b.max() == 10.0
    h, h_prime = neighbors.histogram_worst_case(5, 2)
    np.testing.assert_array_equal(h_prime - h, [0, 0, 1, 0, 0])
    with pytest.raises(ValueError, match="index"):
        neighbors.swap(x, 3, 0.0)
    with pytest.raises(ValueError, match="cells"):
        neighbors.histogram_add(x, [5])


# ---------------------------------------------------------------- reference mechanisms (exact laws)


def _runs(f, trials, key=0):
    return jax.vmap(f)(jax.random.split(jax.random.key(key), trials))


def test_randomized_response_keeps_with_probability_sigmoid_epsilon():
    kept = np.asarray(_runs(lambda k: reference.randomized_response(k, True, 1.5), 100_000))
    assert st.binomtest(int(kept.sum()), kept.size, 1 / (1 + np.exp(-1.5))).pvalue > 1e-4


def test_noisy_max_with_gap_law_for_two_queries():
    """seed-002 §2.1.4: P(j = 0, g >= t) = S(t - Δ), S the tail of a Laplace difference."""
    b, delta_q = 2.0, 1.0
    idx, gap = _runs(lambda k: reference.noisy_max_with_gap(k, jnp.array([delta_q, 0.0]), 1.0), 200_000)
    idx, gap = np.asarray(idx), np.asarray(gap)
    for t in (0.0, 1.0, 4.0):
        u = t - delta_q
        tail = (2 + abs(u) / b) / 4 * np.exp(-abs(u) / b)
        expected = tail if u >= 0 else 1 - tail
        assert st.binomtest(int(np.sum((idx == 0) & (gap >= t))), idx.size, expected).pvalue > 1e-4


def test_limit_domain_bottom_probability():
    """seed-003 §9.3 item 4: P(⊥) = w_⊥ / (w_⊥ + Σ w_i) with weights exp(eps * score)."""
    h = jnp.array([3.0, 2.0, 2.0, 0.0, 0.0])
    eps, delta, kbar = 1.0, 0.1, 2
    out = np.asarray(_runs(lambda k: reference.limit_domain_top1(k, h, eps, delta, kbar=kbar), 100_000))
    w = np.exp(eps * np.array([3.0, 2.0, 2.0 + 1 + np.log(kbar / delta) / eps]))
    assert set(np.unique(out)) <= {-1, 0, 1}
    assert st.binomtest(int(np.sum(out == -1)), out.size, w[2] / w.sum()).pvalue > 1e-4


def test_sparse_vector_stops_after_cutoff():
    q = jnp.array([5.0, -5.0, 5.0, 5.0, 5.0])
    out = np.asarray(_runs(lambda k: reference.sparse_vector(k, q, 1.0, 0.0, c=2), 2000))
    tops = np.cumsum(out == 1, axis=1)
    assert np.all(tops[:, -1] <= 2)
    assert np.all((out == -1) == (np.concatenate([np.zeros((2000, 1)), tops[:, :-1]], 1) >= 2))
