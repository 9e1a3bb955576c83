"""The JointExp baselines against the math: EMQ/IndExp, AppIndExp's composition, CSmooth, AggTree."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from float_tolerance import assert_close_ulp
from scipy import stats

from dpjax._src.quantiles.agg_tree import (
    _agg_tree_sensitivity,
    _descend,
    _honaker,
    _level_counts,
    _noisy_levels,
)
from dpjax._src.quantiles.exp_mech import _gap_logits
from dpjax._src.quantiles.intervals import sorted_gaps
from dpjax._src.quantiles.smooth import _lln_parameters, _log_smooth_sensitivity
from dpjax.accounting import ZCDP, ApproxDP, PureDP, RangeBounded
from dpjax.quantiles import (
    agg_tree,
    agg_tree_guarantee,
    app_ind_exp,
    app_ind_exp_guarantee,
    csmooth,
    csmooth_guarantee,
    emq,
    emq_guarantee,
    ind_exp,
)


def test_emq_sampled_gaps_match_pmf():
    x = jnp.asarray([0.3, -1.2, 0.7, 0.7, 2.0, -0.1])
    edges = np.asarray(sorted_gaps(x, -2.0, 2.0)[0])
    out = np.asarray(
        jax.vmap(lambda k: emq(k, x, 0.4, 1.3, bounds=(-2, 2)))(jax.random.split(jax.random.key(0), 20000))
    )
    index = np.searchsorted(edges, out, side="right") - 1
    index = np.minimum(index, 6)
    pmf = np.array([0.117558, 0.309633, 0.215678, 0.189386, 0, 0.167745, 0])
    counts = np.bincount(index, minlength=7)
    assert counts[4] == 0 and counts[6] == 0
    keep = pmf > 0
    assert stats.chisquare(counts[keep], pmf[keep] / pmf[keep].sum() * 20000).pvalue > 1e-4


def test_emq_density_ratio_privacy():
    rng = np.random.default_rng(1)
    worst = 0.0
    for neighbors in ("swap", "add_remove"):
        for _ in range(20):
            x = rng.uniform(-1, 1, 6)
            y = x.copy()
            y[rng.integers(6)] = rng.uniform(-1, 1)
            if neighbors == "add_remove":
                y = np.append(x, rng.uniform(-1, 1))
            q, eps = float(rng.uniform(0, 1)), float(rng.uniform(0.1, 3))
            grid = np.linspace(-0.999, 0.999, 301)

            def log_density(data, q=q, eps=eps, neighbors=neighbors, grid=grid):
                edges, log_width = sorted_gaps(jnp.asarray(data, jnp.float32), -1.0, 1.0)
                logits = np.asarray(_gap_logits(log_width, q, eps, neighbors), np.float64)
                log_z = np.log(np.sum(np.exp(logits - logits.max()))) + logits.max()
                index = np.searchsorted(np.asarray(edges), grid, side="right") - 1
                return logits[index] - np.asarray(log_width, np.float64)[index] - log_z

            worst = max(worst, np.max(np.abs(log_density(x) - log_density(y))) / eps)
    assert worst <= 1 + 1e-5


def test_ind_exp_is_emq_per_quantile():
    x = jax.random.normal(jax.random.key(2), (200,))
    key = jax.random.key(3)
    assert float(ind_exp(key, x, [0.3], 0.8, bounds=(-5, 5))[0]) == float(
        emq(key, x, 0.3, 0.8, bounds=(-5, 5))
    )
    out = ind_exp(key, x, [0.1, 0.5, 0.9], 3.0, bounds=(-5, 5))
    assert out.shape == (3,) and bool(jnp.all(jnp.diff(out) >= 0))


def test_app_ind_exp_output_and_guarantee():
    x = jax.random.normal(jax.random.key(4), (300,))
    out = app_ind_exp(jax.random.key(5), x, [0.25, 0.5, 0.75], 1.0, bounds=(-10, 10))
    assert out.shape == (3,) and bool(jnp.all(jnp.diff(out) >= 0))
    # Three 0.3503-range-bounded releases (DDR20 Thm. 3 at (1, 1e-6)): (1, 1e-6)-DP as the paper states.
    g = app_ind_exp_guarantee([0.25, 0.5, 0.75], 1.0)
    assert g.approx == ApproxDP(1.0, 1e-6) and g.to_approx_dp(1e-6) == ApproxDP(1.0, 1e-6)
    per_release = 0.35034  # the largest eps0 with 3 eps0-range-bounded releases (1, 1e-6)-DP (DDR20 Thm. 3)
    assert g.epsilon == pytest.approx(3 * per_release, abs=3e-5)
    assert g.rho == pytest.approx(3 * g.epsilon**2 / 9 / 8, rel=1e-12)  # Cesar-Rogers: eps0^2/8 each


def test_smooth_sensitivity_brute_force():
    rng = np.random.default_rng(6)
    x = np.sort(rng.normal(0, 1, 30))
    edges = np.concatenate([[-5.0], x, [5.0]])
    for rank in (0, 7, 15, 29):
        for t in (0.05, 0.5):
            want = max(
                math.exp(-t * max(j - i - 1, 0)) * (edges[j] - edges[i])
                for i in range(rank + 2)
                for j in range(rank + 1, 32)
                if edges[j] > edges[i]
            )
            got = float(_log_smooth_sensitivity(jnp.asarray(edges, jnp.float32), rank, t))
            assert abs(got - math.log(want)) < 1e-5


@pytest.mark.parametrize("x64", [False, True])
def test_lln_sigma_is_the_root_of_the_cubic(x64):
    with jax.enable_x64(x64):
        dtype, tol = (jnp.float64, 1e-12) if x64 else (jnp.float32, 1e-6)
        for epsilon_each in (0.02, 0.5, 3.0, 40.0):
            for t in (0.01, 0.1, 1.0):
                sigma, log_s = _lln_parameters(jnp.asarray(epsilon_each, dtype), jnp.asarray(t, dtype))
                roots = np.roots([5 * epsilon_each / t, -5.0, 0.0, -1.0])
                root = max(r.real for r in roots if abs(r.imag) < 1e-9 and r.real > 0)
                assert abs(float(sigma) - root) <= tol * root
                want = -1.5 * root**2 + math.log(epsilon_each - t / root)
                assert abs(float(log_s) - want) <= 1e3 * tol * max(1.0, abs(want))


def test_csmooth_takes_a_traced_smoothing_parameter():
    x = jnp.asarray(np.random.default_rng(15).normal(0, 1, 50), jnp.float32)
    key = jax.random.key(16)

    def release(t):
        return csmooth(key, x, [0.25, 0.75], 1.0, bounds=(-4, 4), t=t)

    ts = [0.05, 0.2, np.array([0.05, 0.3]), np.nan, -0.1, np.array([0.1, 0.0])]
    swept = [jax.jit(release)(jnp.asarray(t, jnp.float32)) for t in ts]
    for t, got in zip(ts[:3], swept[:3], strict=True):
        assert_close_ulp(got, release(t))
    for t, got in zip(ts[3:], swept[3:], strict=True):
        assert np.isnan(np.asarray(got)).all()
        with pytest.raises(ValueError, match="t must be"):
            release(t)


def test_csmooth_output_and_guarantee():
    x = np.sort(np.random.default_rng(7).normal(0, 1, 200))
    out = csmooth(jax.random.key(8), x, [0.25, 0.5, 0.75], 1.0, bounds=(-10, 10), t=0.1)
    assert out.shape == (3,) and bool(jnp.all(jnp.diff(out) >= 0)) and bool(jnp.all(jnp.abs(out) <= 10))
    assert csmooth_guarantee(0.5) == ZCDP(0.5)


def test_honaker_exact_counts_are_fixed_point():
    counts = [jnp.asarray([3.0, 5.0]), jnp.asarray([1.0, 2.0, 4.0, 1.0])]
    combined = _honaker(counts, jnp.asarray(8.0), 0.0, 2.0, 2)
    for got, want in zip(combined, counts, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)


def _level_matrices(branching, height):
    """0/1 matrices mapping the leaf counts to the counts of levels 1..h."""
    return [
        np.kron(np.eye(branching**level), np.ones((1, branching ** (height - level))))
        for level in range(1, height + 1)
    ]


def _honaker_closed_form_variances(var, root_var, branching, height):
    """Honaker (2015) variances of t* per level 1..h (spec §7.7 formulas, written independently)."""
    below = [var]
    for _ in range(height - 1):
        below.insert(0, 1 / (1 / var + 1 / (branching * below[0])))
    above, star = root_var, []
    for level in range(height):
        outside = above + (branching - 1) * below[level]
        star.append(1 / (1 / below[level] + 1 / outside))
        above = 1 / (1 / var + 1 / outside)
    return star


@pytest.mark.parametrize("neighbors", ["swap", "add_remove"])
def test_honaker_is_the_least_squares_consistent_tree(neighbors):
    # Honaker's two passes give the least-squares fit A x of a consistent tree to the noisy counts
    # (n fixed under swap, the noisy root one more equally weighted observation under add/remove).
    branching, height = 3, 3
    rng = np.random.default_rng(11)
    A = _level_matrices(branching, height)
    leaves = rng.integers(0, 10, branching**height).astype(float)
    noisy = [a @ leaves + rng.laplace(0, 2.0, a.shape[0]) for a in A]
    stacked, y = np.vstack(A), np.concatenate(noisy)
    ones = np.ones((1, branching**height))
    if neighbors == "swap":
        root, root_var = leaves.sum(), 0.0
        kkt = np.block([[stacked.T @ stacked, ones.T], [ones, np.zeros((1, 1))]])
        fit = np.linalg.solve(kkt, np.concatenate([stacked.T @ y, [root]]))[:-1]
    else:
        root, root_var = leaves.sum() + rng.laplace(0, 2.0), 8.0
        design = np.vstack([ones, stacked])
        fit = np.linalg.lstsq(design, np.concatenate([[root], y]), rcond=None)[0]
    combined = _honaker([jnp.asarray(v) for v in noisy], jnp.asarray(root), root_var, 8.0, branching)
    for got, a in zip(combined, A, strict=True):
        np.testing.assert_allclose(got, a @ fit, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(("neighbors", "branching", "height"), [("swap", 4, 3), ("add_remove", 2, 4)])
def test_honaker_unbiased_with_closed_form_variance(neighbors, branching, height):
    # t* is linear in the noise and exact counts are a fixed point, so E t* = t; its covariance is
    # var * J J^T with J the Jacobian wrt the noisy counts (and the noisy root under add/remove).
    var = 2.0
    root_var = 0.0 if neighbors == "swap" else var
    sizes = [branching**level for level in range(1, height + 1)]

    def flat_estimates(flat):
        root = flat[0] if neighbors == "add_remove" else jnp.asarray(0.0)
        levels = jnp.split(flat[1:], np.cumsum(sizes)[:-1])
        return jnp.concatenate(_honaker(list(levels), root, root_var, var, branching))

    jacobian = np.asarray(jax.jacfwd(flat_estimates)(jnp.zeros(1 + sum(sizes))), np.float64)
    if neighbors == "swap":
        jacobian = jacobian[:, 1:]
    variance = var * np.sum(jacobian**2, axis=1)
    want = _honaker_closed_form_variances(var, root_var, branching, height)
    np.testing.assert_allclose(variance, np.repeat(want, sizes), rtol=1e-5)


@pytest.mark.slow
def test_agg_tree_noise_scale_matches_budget_split():
    # Every node of every level gets Laplace noise of scale (swap sensitivity 2h) / epsilon:
    # epsilon / h per level, and a swap moves at most 2 counts per level by 1.
    branching, height, epsilon = 3, 3, 0.7
    counts = _level_counts(jnp.asarray([0.1, 0.5, 0.52, 0.9]), 0.0, 1.0, branching, height, jnp.float32)
    scale = _agg_tree_sensitivity(height) / epsilon
    assert scale == 2 * height / epsilon
    keys = jax.random.split(jax.random.key(12), (4000, height))
    draws = jax.vmap(lambda k: _noisy_levels(k, counts, scale))(keys)
    for level, (noisy, exact) in enumerate(zip(draws, counts, strict=True)):
        residual = np.asarray(noisy - exact).ravel()
        assert residual.size == 4000 * branching ** (level + 1)
        assert stats.kstest(residual, stats.laplace(scale=scale).cdf).pvalue > 1e-4


def test_agg_tree_sensitivity_brute_force():
    branching, height = 3, 2
    x = np.array([0.05, 0.2, 0.21, 0.6, 0.97])
    grid = (np.arange(branching**height) + 0.5) / branching**height

    def flat(data):
        levels = _level_counts(jnp.asarray(data, jnp.float32), 0.0, 1.0, branching, height, jnp.float32)
        return np.concatenate([[len(data)], *map(np.asarray, levels)])

    base = flat(x)
    swaps = [np.abs(flat(np.where(np.arange(5) == i, v, x)) - base).sum() for i in range(5) for v in grid]
    removes = [np.abs(flat(np.delete(x, i)) - base).sum() for i in range(5)]
    assert max(swaps) == _agg_tree_sensitivity(height, "swap") == 2 * height
    assert max(removes) == _agg_tree_sensitivity(height, "add_remove") == height + 1


def test_descend_exact_counts_gives_interpolated_quantile():
    # With exact counts the descent inverts the leaf histogram's piecewise-linear CDF: first leaf
    # whose cumulative count reaches q n, then linear interpolation inside it.
    branching, height, lower, upper = 4, 3, -2.0, 2.0
    x = np.random.default_rng(13).normal(0, 0.6, 500)
    levels = _level_counts(jnp.asarray(x, jnp.float32), lower, upper, branching, height, jnp.float32)
    leaves = np.asarray(levels[-1], np.float64)
    cumulative, width = np.cumsum(leaves), (upper - lower) / branching**height
    for q in np.linspace(0.013, 0.987, 37):
        leaf = int(np.argmax(cumulative >= q * x.size))
        before = cumulative[leaf] - leaves[leaf]
        want = lower + width * (leaf + (q * x.size - before) / leaves[leaf])
        assert abs(float(_descend(levels, q, lower, upper, branching)) - want) < 1e-4


@pytest.mark.slow
def test_agg_tree_high_quantile_stays_with_concentrated_data():
    # Durfee (2023) Table 1 regime: all n points in the first leaf of [0, 10^4] with b = 10, h = 3.
    # The t* are consistent and n is public (swap), so on the first node of every level the descent
    # targets q n exactly and enters the first child unless its t* < q n: the release leaves the
    # first leaf with probability <= sum_l Var(t*_l) / ((1 - q) n)^2 by Chebyshev (about 0.07).
    # Clipping the counts at 0 before the descent moved it out of the first leaf in 97% of draws.
    n, q, epsilon, branching, height = 1000, 0.95, 1.0, 10, 3
    x = jnp.linspace(3.0, 4.5, n)
    keys = jax.random.split(jax.random.key(14), 1000)
    out = np.asarray(
        jax.vmap(
            lambda k: agg_tree(k, x, [q], epsilon, bounds=(0, 10_000), branching=branching, height=height)
        )(keys)
    )
    var = 2 * (_agg_tree_sensitivity(height) / epsilon) ** 2
    bound = sum(_honaker_closed_form_variances(var, 0.0, branching, height)) / ((1 - q) * n) ** 2
    assert np.mean(out > 10) <= bound + 3 * math.sqrt(bound / keys.shape[0])


def test_agg_tree_nearly_noiseless_is_accurate():
    x = jnp.linspace(-0.999, 0.999, 1001)
    out = agg_tree(jax.random.key(9), x, [0.1, 0.5, 0.9], 1e7, bounds=(-1, 1))
    np.testing.assert_allclose(out, [-0.8, 0.0, 0.8], atol=2 / 8**3 + 1e-3)
    assert agg_tree_guarantee(2.0) == PureDP(2.0) and emq_guarantee(1.0) == RangeBounded(1.0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda k, x: emq(k, x, 0.5, -1.0, bounds=(0, 1)), "epsilon"),
        (lambda k, x: emq(k, x, 1.5, 1.0, bounds=(0, 1)), "q"),
        (lambda k, x: ind_exp(k, x, [0.5, 0.4], 1.0, bounds=(0, 1)), "increasing"),
        (lambda k, x: agg_tree(k, x, [0.5], 0.0, bounds=(0, 1)), "epsilon"),
        (lambda k, x: agg_tree(k, x, [0.5], 1.0, bounds=(1, 0)), "a < b"),
        (lambda k, x: app_ind_exp(k, x, [0.5], 1.0, bounds=(0, 1), delta=2.0), "delta"),
        (lambda k, x: emq(k, [np.nan], 0.5, 1.0, bounds=(0, 1)), "NaN"),
        (lambda k, x: csmooth(k, x[:0], [0.5], 1.0, bounds=(0, 1)), "empty"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call(jax.random.key(0), jnp.asarray([0.2, 0.4]))
