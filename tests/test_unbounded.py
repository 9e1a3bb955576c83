"""UQE (Durfee 2023, Alg. 2 and 4) and recursive multiple quantiles: exact binning (spec O13),
deterministic limit (O1), layout invariances (vmap, jit, shift O9), truncation, accuracy (O10),
guarantees (§3) and bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax.accounting import ZCDP, PureDP
from dpjax.quantiles import (
    fully_unbounded,
    fully_unbounded_guarantee,
    unbounded,
    unbounded_guarantee,
    unbounded_result,
)
from dpjax.quantiles.unbounded_bins import cumulative_counts, grid_edges, max_index, static_size
from dpjax.quantiles.unbounded_many import unbounded_many, unbounded_many_guarantee

BIG = 1e5  # epsilon at which the noise (scale 2e-5) cannot move a comparison with margin >= 0.1


def _brute_counts(x, lower, beta, size, dtype):
    z = np.asarray(x, dtype=dtype) - np.asarray(lower, dtype=dtype)
    edges = np.asarray(grid_edges(jnp.arange(size), beta, dtype))
    f = np.array([(z < e).sum() for e in edges])
    f[0] = (z < 0).sum()
    return f


def test_counts_match_brute_force_at_exact_edges(float_dtype):
    beta = 1.01
    edges = np.asarray(grid_edges(jnp.arange(40), beta, float_dtype))
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            edges[[1, 5, 5, 17, 39]],  # exactly at candidates: counted from the next query on
            np.nextafter(edges[[3, 20]], -np.inf, dtype=float_dtype),  # just below an edge
            [0.0, 0.0, -3.0, -np.inf, np.inf, np.inf],  # at / below the lower bound, +-inf
            rng.lognormal(-1.0, 1.0, 200),
        ]
    ).astype(float_dtype)
    cap = max_index(beta, float_dtype)
    size = static_size(x, 0.0, beta, cap)
    counts = cumulative_counts(jnp.asarray(x), lower=0.0, size=size, beta=beta, cap=cap, dtype=float_dtype)
    brute = _brute_counts(x, 0.0, beta, size, float_dtype)
    np.testing.assert_array_equal(np.asarray(counts.f), brute)
    assert int(counts.n_counted) == x.size - 2  # +inf is never counted
    assert np.all(np.diff(brute) >= 0)
    tail = int(counts.tail_start)
    assert brute[tail] == x.size - 2 and brute[tail - 1] < x.size - 2


def test_counts_with_a_lower_bound_and_integer_data(float_dtype):
    x = np.array([2, 3, 3, 7, 10, 10, 10, 1000, -5], dtype=np.int32)
    beta, lower = 1.5, 2.5
    cap = max_index(beta, float_dtype)
    counts = cumulative_counts(jnp.asarray(x), lower=lower, size=64, beta=beta, cap=cap, dtype=float_dtype)
    np.testing.assert_array_equal(np.asarray(counts.f), _brute_counts(x, lower, beta, 64, float_dtype))
    assert int(counts.f[0]) == 2  # -5 and 2 lie below the lower bound


def test_binning_agrees_in_float32_and_float64(x64):
    rng = np.random.default_rng(1)
    x = np.concatenate([np.arange(0, 300), np.round(rng.lognormal(3, 1.5, 2000), 2)]).astype(np.float32)
    out = []
    for dtype in (jnp.float32, jnp.float64):
        cap = max_index(1.001, jnp.float32)
        out.append(
            np.asarray(
                cumulative_counts(jnp.asarray(x), lower=0.0, size=16384, beta=1.001, cap=cap, dtype=dtype).f
            )
        )
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.parametrize("noise", ["exponential", "laplace", "gumbel"])
def test_deterministic_limit(noise):
    """O1: with negligible noise the release is beta^{k*} + lower - 1, k* = min{i >= 1: f_i >= qn}."""
    x = np.array([-1.0, 0.0, 0.0, 1.7, 3.2, 3.2, 8.9, 20.0, 55.5, 60.0])
    beta = 1.05
    for lower in (0.0, -2.0):
        for q in (0.15, 0.55, 0.75, 0.95):  # q*n is at least 0.5 away from every count
            f = _brute_counts(x, lower, beta, 200, np.float32)
            k_star = int(np.argmax((f >= q * x.size) & (np.arange(200) >= 1)))
            res = unbounded_result(jax.random.key(3), x, q, BIG, lower=lower, beta=beta, noise=noise)
            assert int(res.index) == k_star
            assert float(res.estimate) == pytest.approx(lower + beta**k_star - 1, rel=1e-5, abs=1e-5)
            assert not bool(res.truncated)


def test_vmap_and_traced_data_agree():
    """The concrete-data path (small table, binned once) and the traced-data path (table up to the
    cap, binned inside the kernel) give the same releases for the same keys."""
    x = jnp.asarray(np.random.default_rng(2).lognormal(2, 1, 500), jnp.float32)
    keys = jax.random.split(jax.random.key(4), 64)
    batched = np.asarray(jax.vmap(lambda k: unbounded(k, x, 0.9, 1.0, max_queries=8192))(keys))
    traced = np.asarray(
        jax.jit(jax.vmap(lambda k, data: unbounded(k, data, 0.9, 1.0, max_queries=8192), in_axes=(0, None)))(
            keys, x
        )
    )
    np.testing.assert_array_equal(batched, traced)
    assert len(np.unique(batched)) > 10


def test_shift_equivariance_at_the_bin_level():
    """O9: UQE(x + c; lower + c) halts at the same k as UQE(x; lower) (exact integer shift)."""
    x = np.random.default_rng(5).integers(0, 300, 400).astype(np.float32)
    for seed in range(3):
        key = jax.random.key(seed)
        a = unbounded_result(key, x, 0.7, 1.0, beta=1.01)
        b = unbounded_result(key, x + 1024, 0.7, 1.0, beta=1.01, lower=1024.0)
        assert int(a.index) == int(b.index)
        assert float(b.estimate) == pytest.approx(float(a.estimate) + 1024, abs=1e-3)


def test_truncation_is_flagged():
    x = np.full(10, 1e6)
    res = unbounded_result(jax.random.key(0), x, 0.5, BIG, max_queries=100)
    assert bool(res.truncated) and int(res.index) == 100
    assert float(res.estimate) == pytest.approx(1.001**100 - 1, rel=1e-5)
    # Closed-form tail: all data at the lower bound, q = 1, tiny epsilon: G has infinite mean.
    keys = jax.random.split(jax.random.key(1), 400)
    batch = jax.vmap(lambda k: unbounded_result(k, np.zeros(10), 1.0, 0.02, max_queries=100))(keys)
    truncated, index = np.asarray(batch.truncated), np.asarray(batch.index)
    assert 0 < truncated.mean() < 1
    assert np.all(index[truncated] == 100) and np.all(index[~truncated] <= 100)
    assert np.all(np.isfinite(np.asarray(batch.estimate)))


def test_default_cap_keeps_the_candidate_finite(float_dtype):
    for beta in (1.001, 1.01, 2.0):
        cap = max_index(beta, float_dtype)
        assert math.isfinite(float(grid_edges(cap, beta, float_dtype)))
    assert max_index(1.001, jnp.float32) > 87_000  # log(float32 max / 4) / log(1.001)


@pytest.mark.slow
def test_accuracy_on_dense_data():
    """O10: n = 1e5 from U[0, 1000], epsilon = 1: relative error > 0.5% in < 2% of trials."""
    x = jnp.asarray(np.random.default_rng(6).uniform(0, 1000, 100_000), jnp.float32)
    keys = jax.random.split(jax.random.key(7), 300)
    for q in (0.05, 0.5, 0.99):
        est = np.asarray(jax.vmap(lambda k, q=q: unbounded(k, x, q, 1.0))(keys))
        truth = np.quantile(np.asarray(x), q)
        assert np.mean(np.abs(est / truth - 1) > 0.005) < 0.02


def test_fully_unbounded_deterministic_limit_and_support():
    x = np.array([-40.0, -30.0, -12.0, -5.0, -1.0, 2.0, 9.0, 14.0, 33.0, 70.0])
    beta = 1.05
    for q, sign in ((0.15, -1), (0.35, -1), (0.65, 1), (0.95, 1)):
        out = float(fully_unbounded(jax.random.key(0), x, q, BIG, beta=beta))
        k = round(math.log(abs(out) + 1) / math.log(beta))
        assert out == pytest.approx(sign * (beta**k - 1), rel=1e-5)
        # The release brackets the q-quantile at the grid's resolution.
        below = (x < out).sum() if sign > 0 else (x > out).sum()
        target = q * x.size if sign > 0 else (1 - q) * x.size
        assert below >= target
    keys = jax.random.split(jax.random.key(1), 200)
    outs = np.asarray(jax.vmap(lambda k: fully_unbounded(k, x, 0.5, 0.5, beta=beta))(keys))
    k = np.round(np.log(np.abs(outs) + 1) / np.log(beta))
    np.testing.assert_allclose(np.abs(outs), beta**k - 1, rtol=1e-4, atol=1e-6)


def test_unbounded_many_near_truth_sorted_and_guarantee():
    x = np.arange(10_000.0)
    qs = [0.25, 0.5, 0.99]
    keys = jax.random.split(jax.random.key(8), 50)
    outs = np.asarray(jax.vmap(lambda k: unbounded_many(k, x, qs, 3.0))(keys))
    assert np.all(np.diff(outs, axis=1) >= 0)
    np.testing.assert_allclose(np.median(outs, axis=0), np.quantile(x, qs), rtol=0.01)
    assert unbounded_many_guarantee(6, 3.0) == PureDP(3.0)
    assert unbounded_many_guarantee(1, 2.0, split=0.25) == PureDP(2.0)
    with pytest.raises(ValueError, match="increasing"):
        unbounded_many(jax.random.key(0), x, [0.5, 0.5], 1.0)


def test_guarantees():
    assert unbounded_guarantee(1.0) == PureDP(1.0)
    assert unbounded_guarantee(1.0, split=0.3, notion="zcdp") == ZCDP(0.5 * (0.15 + 0.7) ** 2)
    assert unbounded_guarantee(1.0, q=0.99, neighbors="add_remove").epsilon == pytest.approx(0.995)
    assert unbounded_guarantee(1.0, q=0.5, neighbors="add_remove").epsilon == pytest.approx(0.75)
    # General split (Lemma B.1): max{(1-q) eps1, q eps1 + eps2}.
    assert unbounded_guarantee(1.0, q=0.1, split=0.9, neighbors="add_remove").epsilon == pytest.approx(0.81)
    assert fully_unbounded_guarantee(2.0) == PureDP(2.0)
    assert fully_unbounded_guarantee(2.0, notion="zcdp").rho == pytest.approx(2 * 0.5 * 0.75**2)
    with pytest.raises(ValueError, match="q is required"):
        unbounded_guarantee(1.0, neighbors="add_remove")
    with pytest.raises(ValueError, match="gumbel"):
        unbounded_guarantee(1.0, noise="gumbel", split=0.4)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(x=[1.0, np.nan]), "NaN"),
        (dict(x=[]), "empty"),
        (dict(x=[[1.0, 2.0]]), "rank"),
        (dict(q=0.0), "q"),
        (dict(q=1.5), "q"),
        (dict(beta=1.0), "beta"),
        (dict(beta=0.5), "beta"),
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(split=1.0), "split"),
        (dict(noise="gumbel", split=0.3), "gumbel"),
        (dict(noise="gaussian"), "noise"),
        (dict(neighbors="bounded"), "neighbors"),
        (dict(lower=np.inf), "lower"),
        (dict(max_queries=0), "max_queries"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(x=[1.0, 2.0, 3.0], q=0.5, epsilon=1.0)
    args.update(kwargs)
    x, q, epsilon = args.pop("x"), args.pop("q"), args.pop("epsilon")
    with pytest.raises(ValueError, match=match):
        unbounded(jax.random.key(0), x, q, epsilon, **args)
