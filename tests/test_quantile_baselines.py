"""The JointExp baselines against the math: EMQ/IndExp, AppIndExp's composition, CSmooth, AggTree."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax.accounting import ZCDP, ApproxDP, PureDP
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
    optimal_composition_epsilon,
)
from dpjax.quantiles.agg_tree import honaker
from dpjax.quantiles.app_ind_exp import composition_delta
from dpjax.quantiles.exp_mech import gap_logits
from dpjax.quantiles.intervals import gaps
from dpjax.quantiles.smooth import log_smooth_sensitivity


def test_emq_sampled_gaps_match_pmf():
    x = jnp.asarray([0.3, -1.2, 0.7, 0.7, 2.0, -0.1])
    edges = np.asarray(gaps(x, -2.0, 2.0)[0])
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
                edges, log_width = gaps(jnp.asarray(data, jnp.float32), -1.0, 1.0)
                logits = np.asarray(gap_logits(log_width, q, eps, neighbors), np.float64)
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


def test_optimal_composition_matches_paper_grid_and_is_valid():
    table = {1: 1.0, 2: 0.5, 3: 0.343333, 5: 0.23, 10: 0.15, 20: 0.10, 29: 0.0844828}
    for k, want in table.items():
        assert abs(optimal_composition_epsilon(1.0, 1e-6, k, grid=True) - want) < 1e-5
        best = optimal_composition_epsilon(1.0, 1e-6, k)
        assert best >= want - 1e-9 and best <= want + 0.011
        assert composition_delta(best, 1.0, k) <= 1e-6


def test_app_ind_exp_output_and_guarantee():
    x = jax.random.normal(jax.random.key(4), (300,))
    out = app_ind_exp(jax.random.key(5), x, [0.25, 0.5, 0.75], 1.0, bounds=(-10, 10))
    assert out.shape == (3,) and bool(jnp.all(jnp.diff(out) >= 0))
    assert app_ind_exp_guarantee(1.0) == ApproxDP(1.0, 1e-6)


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
            got = float(log_smooth_sensitivity(jnp.asarray(edges, jnp.float32), rank, t))
            assert abs(got - math.log(want)) < 1e-5


def test_csmooth_output_and_guarantee():
    x = np.sort(np.random.default_rng(7).normal(0, 1, 200))
    out = csmooth(jax.random.key(8), x, [0.25, 0.5, 0.75], 1.0, bounds=(-10, 10), t=0.1)
    assert out.shape == (3,) and bool(jnp.all(jnp.diff(out) >= 0)) and bool(jnp.all(jnp.abs(out) <= 10))
    assert csmooth_guarantee(1.0) == ZCDP(0.5)


def test_honaker_exact_counts_are_fixed_point():
    counts = [jnp.asarray([3.0, 5.0]), jnp.asarray([1.0, 2.0, 4.0, 1.0])]
    combined = honaker(counts, jnp.asarray(8.0), 0.0, 2.0, 2)
    for got, want in zip(combined, counts, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_agg_tree_nearly_noiseless_is_accurate():
    x = jnp.linspace(-0.999, 0.999, 1001)
    out = agg_tree(jax.random.key(9), x, [0.1, 0.5, 0.9], 1e7, bounds=(-1, 1))
    np.testing.assert_allclose(out, [-0.8, 0.0, 0.8], atol=2 / 8**3 + 1e-3)
    assert agg_tree_guarantee(2.0) == PureDP(2.0) and emq_guarantee(1.0) == PureDP(1.0)


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
