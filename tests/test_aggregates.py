"""DP sum and mean with a UQE clipping bound (Durfee 2023, §6.3; spec §2.9 and oracle O16)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax import aggregates
from dpjax.accounting import ZCDP

X = np.concatenate(
    [
        np.random.default_rng(0).lognormal(3.0, 1.0, 2000),
        [-4.0, -0.5, 0.0, 0.0, 7.0, 7.0, np.inf],  # below the lower bound, ties, +inf
    ]
).astype(np.float32)
KEYS = jax.random.split(jax.random.key(0), 4000)


def _clipped(x, lower, bound):
    return np.clip(np.asarray(x, np.float64), lower, bound).sum()


def test_clipped_sum_is_exact_without_noise():
    """With negligible Laplace noise the release is sum(clip(x, lower, bound)) at the released bound."""
    for lower, q in ((0.0, 0.99), (0.0, 0.5), (-2.0, 0.9), (10.0, 0.75)):
        res = aggregates.clipped_sum(jax.random.key(1), X, 1e7, q=q, lower=lower)
        bound = float(res.bound)
        assert np.quantile(X[np.isfinite(X)], q) * 0.95 < bound < np.quantile(X[np.isfinite(X)], q) * 1.05
        assert float(res.value) == pytest.approx(_clipped(X, lower, bound), rel=2e-6)


def test_noise_is_centred_laplace_at_the_bound():
    """O16: E[noisy - clipped] = 0 and |noisy - clipped| ~ Exp(mean (bound - lower)/epsilon_rest)."""
    epsilon, fraction = 1.0, 0.4
    res = jax.vmap(lambda k: aggregates.clipped_sum(k, X, epsilon, clip_fraction=fraction))(KEYS)
    bounds, values = np.asarray(res.bound, np.float64), np.asarray(res.value, np.float64)
    assert len(np.unique(bounds)) > 5  # the bound is itself random
    clipped = np.array([_clipped(X, 0.0, b) for b in bounds])
    standardized = (values - clipped) * (1 - fraction) * epsilon / bounds  # ~ Lap(1)
    assert stats.kstest(standardized, stats.laplace.cdf).pvalue > 1e-4
    assert not np.asarray(res.truncated).any()


def test_mean_is_sum_over_n_and_integer_data():
    x = np.arange(1000, dtype=np.int32)
    key = jax.random.key(2)
    total = aggregates.sum(key, x, 2.0)
    assert float(aggregates.mean(key, x, 2.0)) == pytest.approx(float(total) / 1000, rel=1e-6)
    assert jnp.issubdtype(total.dtype, jnp.floating)


def test_sum_matches_float64(x64):
    beta = 1 + 2**-10  # exact in float32: both dtypes use the same grid
    res32 = aggregates.clipped_sum(jax.random.key(3), X, 1e7, q=0.9, beta=beta)
    res64 = aggregates.clipped_sum(jax.random.key(3), X.astype(np.float64), 1e7, q=0.9, beta=beta)
    assert res64.value.dtype == jnp.float64
    assert float(res64.value) == pytest.approx(_clipped(X, 0.0, float(res64.bound)), rel=1e-8)
    assert float(res32.bound) == pytest.approx(float(res64.bound), rel=1e-5)


def test_swap_sensitivity_of_the_clipped_sum():
    """Changing one record moves sum(clip(x, lower, b)) by at most b - lower (why we clip below)."""
    rng = np.random.default_rng(4)
    for _ in range(200):
        x = rng.normal(0, 50, 30)
        neighbor = x.copy()
        neighbor[rng.integers(30)] = rng.normal(0, 500)
        lower, bound = -5.0, float(rng.uniform(-5, 100))
        assert abs(_clipped(x, lower, bound) - _clipped(neighbor, lower, bound)) <= bound - lower + 1e-9


def test_guarantees():
    assert aggregates.sum_guarantee(2.0).epsilon == 2.0
    assert aggregates.mean_guarantee(1.0, clip_fraction=0.3).epsilon == 1.0
    rho = aggregates.sum_guarantee(2.0).to_zcdp()
    assert rho == ZCDP(0.5 * (0.25 + 0.5) ** 2 + 0.5 * 1.0**2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(clip_fraction=1.0), "clip_fraction"),
        (dict(clip_fraction=0.0), "clip_fraction"),
        (dict(q=0.0), "q"),
        (dict(beta=1.0), "beta"),
        (dict(x=[1.0, np.nan]), "NaN"),
        (dict(x=[]), "empty"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(x=[1.0, 2.0], epsilon=1.0)
    args.update(kwargs)
    x, epsilon = args.pop("x"), args.pop("epsilon")
    with pytest.raises(ValueError, match=match):
        aggregates.sum(jax.random.key(0), x, epsilon, **args)
