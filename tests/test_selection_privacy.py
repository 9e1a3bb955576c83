"""Privacy of dpjax.selection: exact density ratios of the laws (enumeration), statistical ratio checks of
the samplers on neighboring inputs, and negative controls that the checks must detect."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from laws import laplace_difference_tail, plackett_luce, sample

from dpjax import selection

N = 200_000


def log_ratio_bounds(count_x, count_xp, trials):
    """log(p/p') and a 4.5-standard-error radius (delta method), for outcome counts out of ``trials``."""
    p, pp = count_x / trials, count_xp / trials
    radius = 4.5 * np.sqrt((1 - p) / count_x + (1 - pp) / count_xp)
    return np.log(p / pp), radius


def assert_ratios_within(counts_x, counts_xp, epsilon, trials, min_count=2_000):
    """Every outcome seen often enough on both inputs has |log(p/p')| <= epsilon up to sampling error."""
    counts_x, counts_xp = np.asarray(counts_x, float), np.asarray(counts_xp, float)
    keep = (counts_x >= min_count) & (counts_xp >= min_count)
    assert keep.sum() >= 2
    log_ratio, radius = log_ratio_bounds(counts_x[keep], counts_xp[keep], trials)
    assert np.all(np.abs(log_ratio) - radius <= epsilon), (log_ratio, radius)


def neighbors(d, monotonic):
    """All shifts of a d-vector with every coordinate moving by at most 1 (same direction if monotonic)."""
    if monotonic:
        ups = [np.array(s) for s in itertools.product((0, 1), repeat=d)]
        return ups + [-s for s in ups]
    return [np.array(s) for s in itertools.product((-1, 0, 1), repeat=d)]


# --------------------------------------------------------------------- exact ratios by enumeration


@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize("k", [1, 2])
def test_peeling_law_is_private_and_range_bounded_exactly(k, monotonic):
    """The law gumbel_top_k samples (checked by chi-square in test_selection) has density ratios within
    e^(k epsilon) on every neighbor of a 4-candidate input; each selection is epsilon-range-bounded."""
    epsilon = 0.8
    scale = (1 if monotonic else 2) / epsilon
    scores = np.array([3.0, 1.0, 2.0, 0.0])
    _, p = plackett_luce(scores, k, scale)
    for shift in neighbors(4, monotonic):
        _, p_shifted = plackett_luce(scores + shift, k, scale)
        log_ratio = np.log(p / p_shifted)
        assert np.abs(log_ratio).max() <= k * epsilon + 1e-12
        if k == 1:
            assert log_ratio.max() - log_ratio.min() <= epsilon + 1e-12


def test_monotone_scale_on_non_monotone_neighbors_breaks_the_exact_bound():
    """Negative control of the enumeration: scale 1/epsilon with scores moving in both directions."""
    epsilon, d = 1.0, 20
    scores = np.zeros(d)
    shifted = np.r_[1.0, -np.ones(d - 1)]
    _, p = plackett_luce(scores, 1, 1 / epsilon)
    _, p_shifted = plackett_luce(shifted, 1, 1 / epsilon)
    assert p_shifted[0] / p[0] > np.exp(epsilon) * 2  # about 5.6 > e


# ---------------------------------------------------------------- statistical checks of the samplers

STATISTICAL_CASES = {
    "exponential_mechanism": (selection.exponential_mechanism, {}, 1),
    "rnm_gumbel_monotone": (selection.report_noisy_max, {"noise": "gumbel", "monotonic": True}, 1),
    "rnm_exponential": (selection.report_noisy_max, {"noise": "exponential"}, 1),
    "rnm_exponential_monotone": (selection.report_noisy_max, {"noise": "exponential", "monotonic": True}, 1),
    "rnm_laplace": (selection.report_noisy_max, {"noise": "laplace"}, 1),
    "rnm_laplace_monotone": (selection.report_noisy_max, {"noise": "laplace", "monotonic": True}, 1),
    "gumbel_top_2": (selection.gumbel_top_k, {"k": 2}, 2),
    "gumbel_top_2_monotone": (selection.gumbel_top_k, {"k": 2, "monotonic": True}, 2),
}


def outcome_codes(draws, d):
    draws = np.atleast_2d(np.asarray(draws).T).T
    return (draws * d ** np.arange(draws.shape[1])).sum(axis=1)


@pytest.mark.parametrize("case", sorted(STATISTICAL_CASES))
def test_sampled_outcome_ratios_stay_within_e_epsilon(case):
    mechanism, options, k = STATISTICAL_CASES[case]
    epsilon = 1.0
    scores = jnp.asarray([1.0, 0.0, 0.5, 0.0])
    # Worst-case-like neighbors: the leader up, the others down (monotone: the others up).
    step = np.array([0.0, 1.0, 1.0, 1.0]) if options.get("monotonic") else np.array([1.0, -1.0, -1.0, -1.0])
    draws_x = sample(mechanism, scores, N, 20, epsilon=epsilon, **options)
    draws_xp = sample(mechanism, scores + step, N, 21, epsilon=epsilon, **options)
    size = 4**k
    counts_x = np.bincount(outcome_codes(draws_x, 4), minlength=size)
    counts_xp = np.bincount(outcome_codes(draws_xp, 4), minlength=size)
    assert_ratios_within(counts_x, counts_xp, k * epsilon, N)


def test_statistical_check_detects_the_monotone_scale_on_non_monotone_neighbors():
    epsilon, d = 1.0, 20
    scores = jnp.zeros(d)
    draws_x = sample(selection.exponential_mechanism, scores, N, 22, epsilon=epsilon, monotonic=True)
    draws_xp = sample(
        selection.exponential_mechanism,
        scores.at[1:].set(-1.0).at[0].set(1.0),
        N,
        23,
        epsilon=epsilon,
        monotonic=True,
    )
    log_ratio, radius = log_ratio_bounds((draws_xp == 0).sum(), (draws_x == 0).sum(), N)
    assert log_ratio - radius > epsilon


def test_exponential_noise_max_is_not_range_bounded_but_gumbel_is():
    """Scores (0, 0) vs (1, -1), general scale 2/epsilon: with Exponential noise the privacy loss spans
    log(2 - e^-1) - log(e^-1) = 1.49 > epsilon = 1 (so no range-bounded guarantee); with Gumbel noise it
    spans exactly epsilon."""
    epsilon = 1.0
    x, xp = jnp.asarray([0.0, 0.0]), jnp.asarray([1.0, -1.0])
    spans = {}
    for noise in ("exponential", "gumbel"):
        wins_x = sample(selection.report_noisy_max, x, N, 24, epsilon=epsilon, noise=noise) == 0
        wins_xp = sample(selection.report_noisy_max, xp, N, 25, epsilon=epsilon, noise=noise) == 0
        up, r_up = log_ratio_bounds(wins_xp.sum(), wins_x.sum(), N)
        down, r_down = log_ratio_bounds(N - wins_xp.sum(), N - wins_x.sum(), N)
        spans[noise] = (up - down, r_up + r_down)
    exact = np.log(2 - np.exp(-1)) + 1
    assert abs(spans["exponential"][0] - exact) < spans["exponential"][1]
    assert spans["exponential"][0] - spans["exponential"][1] > epsilon
    assert abs(spans["gumbel"][0] - epsilon) < spans["gumbel"][1]
    assert selection.report_noisy_max_guarantee(epsilon, noise="exponential").to_zcdp().rho == epsilon**2 / 2


# ------------------------------------------------------- noisy max with gap: events {j = 0, g >= t}


def gap_event_ratio(monotonic, shifted, epsilon=1.0, seed=26):
    """Monte Carlo P'(E)/P(E) for E = {j_1 = 0, g_1 >= t}, t = 2, 6, with its log-scale error radius."""
    x = jnp.asarray([0.0, 0.0])
    out = []
    index_x, gap_x = sample(
        selection.noisy_max_with_gap, x, 5 * N, seed, epsilon=epsilon, monotonic=monotonic
    )
    index_xp, gap_xp = sample(
        selection.noisy_max_with_gap,
        jnp.asarray(shifted),
        5 * N,
        seed + 1,
        epsilon=epsilon,
        monotonic=monotonic,
    )
    for t in (2.0, 6.0):
        hits_x = ((index_x == 0) & (gap_x >= t)).sum()
        hits_xp = ((index_xp == 0) & (gap_xp >= t)).sum()
        out.append(log_ratio_bounds(hits_xp, hits_x, 5 * N))
    return out


@pytest.mark.slow
def test_noisy_max_with_gap_negative_control():
    """Spec seed-002 O9: the monotone scale 1/epsilon on non-monotone neighbors (0,0) vs (1,-1) gives
    P'(E)/P(E) = S(t-2)/S(t) = 3.69 at t = 2 (> e); the correct scale 2/epsilon gives 1.81."""
    for monotonic, b in ((True, 1.0), (False, 2.0)):
        for t, (log_ratio, radius) in zip((2.0, 6.0), gap_event_ratio(monotonic, [1.0, -1.0]), strict=True):
            exact = np.log(laplace_difference_tail(t - 2, b) / laplace_difference_tail(t, b))
            assert abs(log_ratio - exact) < radius
            if monotonic:
                assert log_ratio - radius > 1.0  # detected: above epsilon
            else:
                assert log_ratio + radius < 1.0 + 0.05 and exact < 1.0
    # Monotone neighbors with the monotone scale stay within e^epsilon.
    for t, (log_ratio, radius) in zip((2.0, 6.0), gap_event_ratio(True, [1.0, 0.0], seed=30), strict=True):
        exact = np.log(laplace_difference_tail(t - 1, 1.0) / laplace_difference_tail(t, 1.0))
        assert exact < 1.0 and abs(log_ratio - exact) < radius
