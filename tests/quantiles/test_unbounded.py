"""UQE (Durfee 2023, Alg. 2 and 4) and recursive multiple quantiles: exact binning (spec O13),
deterministic limit (O1), layout invariances (vmap, jit, shift O9), truncation, accuracy (O10),
guarantees (§3) and bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax._src.quantiles.unbounded_bins import (
    INDEX_LIMIT,
    cumulative_counts,
    grid_edges,
    log_beta,
    query_cap,
    static_size,
)
from dpjax._src.quantiles.unbounded_many import unbounded_many, unbounded_many_guarantee
from dpjax.accounting import ZCDP, Neighbors, PureDP
from dpjax.quantiles import (
    fully_unbounded,
    fully_unbounded_guarantee,
    unbounded,
    unbounded_guarantee,
    unbounded_result,
)

BIG = 1e5  # epsilon at which the noise (scale 2e-5) cannot move a comparison with margin >= 0.1


def _cap(beta, dtype):
    return int(query_cap(log_beta(beta, dtype), INDEX_LIMIT, dtype))


def _counts(x, lower, beta, size, dtype):
    return cumulative_counts(
        jnp.asarray(x), lower, log_beta(beta, dtype), _cap(beta, dtype), size=size, dtype=dtype
    )


def _brute_counts(x, lower, beta, size, dtype):
    z = np.asarray(x, dtype=dtype) - np.asarray(lower, dtype=dtype)
    edges = np.asarray(grid_edges(jnp.arange(size), log_beta(beta, dtype)))
    f = np.array([(z < e).sum() for e in edges])
    f[0] = (z < 0).sum()
    return f


def test_counts_match_brute_force_at_exact_edges(float_dtype):
    beta = 1.01
    edges = np.asarray(grid_edges(jnp.arange(40), log_beta(beta, float_dtype)))
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            edges[[1, 5, 5, 17, 39]],  # exactly at candidates: counted from the next query on
            np.nextafter(edges[[3, 20]], -np.inf, dtype=float_dtype),  # just below an edge
            [0.0, 0.0, -3.0, -np.inf, np.inf, np.inf],  # at / below the lower bound, +-inf
            rng.lognormal(-1.0, 1.0, 200),
        ]
    ).astype(float_dtype)
    size = static_size(x, 0.0, beta, _cap(beta, float_dtype), float_dtype)
    counts = _counts(x, 0.0, beta, size, float_dtype)
    brute = _brute_counts(x, 0.0, beta, size, float_dtype)
    np.testing.assert_array_equal(np.asarray(counts.f), brute)
    assert int(counts.n_counted) == x.size - 2  # +inf is never counted
    assert np.all(np.diff(brute) >= 0)
    tail = int(counts.tail_start)
    assert brute[tail] == x.size - 2 and brute[tail - 1] < x.size - 2


def test_static_size_reaches_past_the_data_maximum():
    """The table sized by one compiled reduction of the data reaches past the bin of the largest
    finite point (a power of two, at most 4x that bin), for float data with infinities, integers,
    ``negate`` (the negatives of Algorithm 4) and data all below ``lower`` (the minimum size)."""
    beta, dtype = 1.001, np.float32
    cap = _cap(beta, dtype)
    rng = np.random.default_rng(5)
    floats = np.concatenate([rng.lognormal(3, 1.5, 500), [np.inf, -np.inf, -4.0]]).astype(dtype)
    ints = np.array([0, 7, 2**20, -(2**31), 2**31 - 1, -12], np.int32)
    cases = ((floats, 0.0, False), (floats, 1.5, True), (ints, -3.0, False), (ints, 0.0, True))
    for x, lower, negate in cases:
        size = static_size(x, lower, beta, cap, dtype, negate=negate)
        assert size >= 64 and size & (size - 1) == 0
        z = (-1.0 if negate else 1.0) * x.astype(np.float64) - lower
        top_bin = math.floor(math.log1p(z[np.isfinite(z)].max()) / math.log(beta))
        assert top_bin + 2 < size <= 4 * (top_bin + 2)  # past the top bin (+-1 for the grid's rounding)
    assert static_size(np.full(9, -2.0, dtype), 0.0, beta, cap, dtype) == 64


def test_counts_with_a_lower_bound_and_integer_data(float_dtype):
    x = np.array([2, 3, 3, 7, 10, 10, 10, 1000, -5], dtype=np.int32)
    beta, lower = 1.5, 2.5
    counts = _counts(x, lower, beta, 64, float_dtype)
    np.testing.assert_array_equal(np.asarray(counts.f), _brute_counts(x, lower, beta, 64, float_dtype))
    assert int(counts.f[0]) == 2  # -5 and 2 lie below the lower bound


def test_binning_agrees_in_float32_and_float64(x64):
    """The grid is that of beta rounded to the working dtype: with a beta exact in float32 both
    dtypes bin the same data alike."""
    rng = np.random.default_rng(1)
    x = np.concatenate([np.arange(0, 300), np.round(rng.lognormal(3, 1.5, 2000), 2)]).astype(np.float32)
    out = []
    for dtype in (jnp.float32, jnp.float64):
        out.append(np.asarray(_counts(x, 0.0, 1 + 2**-10, 16384, dtype).f))
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
    """The concrete-data path (small table, binned once), the traced-data path (table up to the
    cap, binned inside the kernel) and a fully traced call (data, q, epsilon, lower, beta, as in a
    training step) give the same releases for the same keys; points beyond the cap count nowhere."""
    x = np.random.default_rng(2).lognormal(2, 1, 500).astype(np.float32)
    x[:3] = 1e30  # beyond the cap of 8192 queries at beta = 1.001
    keys = jax.random.split(jax.random.key(4), 64)
    batched = np.asarray(jax.vmap(lambda k: unbounded(k, x, 0.9, 1.0, max_queries=8192))(keys))
    traced = jax.jit(
        jax.vmap(lambda k, data: unbounded(k, data, 0.9, 1.0, max_queries=8192), in_axes=(0, None))
    )(keys, x)
    np.testing.assert_array_equal(batched, np.asarray(traced))
    step = jax.jit(
        jax.vmap(
            lambda k, data, p: unbounded(
                k, data, p["q"], p["epsilon"], lower=p["lower"], beta=p["beta"], max_queries=8192
            ),
            in_axes=(0, None, None),
        )
    )
    params = {name: jnp.float32(v) for name, v in dict(q=0.9, epsilon=1.0, lower=0.0, beta=1.001).items()}
    np.testing.assert_array_equal(batched, np.asarray(step(keys, x, params)))
    assert len(np.unique(batched)) > 10


@pytest.mark.parametrize(
    ("kwargs", "values"),
    [
        (dict(), dict(q=(0.5, 0.0, 1.5, math.nan))),
        (dict(), dict(beta=(1.01, 1.0, 0.5, math.nan, math.inf, 1 + 1e-9))),
        (dict(), dict(lower=(-1.0, math.inf, math.nan))),
        (dict(noise="gumbel"), dict(split=(0.5, 0.3))),
    ],
    ids=["q", "beta", "lower", "gumbel_split"],
)
def test_invalid_traced_parameter_marks_the_output(kwargs, values):
    """A traced q, beta, lower (or a Gumbel split other than 1/2) that is invalid gives NaN / -1; the
    valid lane gives the concrete call's release."""
    x = np.random.default_rng(3).lognormal(2, 1, 200).astype(np.float32)
    ((name, grid),) = values.items()
    key = jax.random.key(5)
    args = {"q": 0.5, "epsilon": 1.0, "beta": 1.01, **kwargs}
    out = jax.jit(jax.vmap(lambda v: unbounded_result(key, x, **{**args, name: v})))(
        jnp.asarray(np.asarray(grid, np.float64), jnp.float32)
    )
    want = unbounded_result(key, x, **{**args, name: grid[0]})
    assert int(out.index[0]) == int(want.index) and float(out.estimate[0]) == float(want.estimate)
    assert np.all(np.asarray(out.index[1:]) == -1) and np.all(np.isnan(np.asarray(out.estimate[1:])))


def test_invalid_traced_levels_mark_unbounded_many():
    x = np.arange(1000.0, dtype=np.float32)
    levels = jnp.asarray([[0.25, 0.5, 0.75], [0.5, 0.25, 0.75], [0.0, 0.5, 0.75], [0.25, 0.5, 1.5]])
    out = np.asarray(jax.jit(jax.vmap(lambda qs: unbounded_many(jax.random.key(0), x, qs, 3.0)))(levels))
    want = np.asarray(unbounded_many(jax.random.key(0), x, [0.25, 0.5, 0.75], 3.0))
    np.testing.assert_array_equal(out[0], want)
    assert np.isnan(out[1:]).all()


def test_cap_is_the_finite_limit_for_a_traced_beta():
    """With beta = 2 the candidates overflow float32 long before max_queries: the cap in force is the
    largest finite one, for a traced beta as for a concrete one, and +inf data truncate there."""
    x = np.full(5, np.inf, np.float32)
    betas = (2.0, 1.5)
    out = jax.jit(
        jax.vmap(lambda b: unbounded_result(jax.random.key(0), x, 0.5, BIG, beta=b, max_queries=4096))
    )(jnp.asarray(betas, jnp.float32))
    for i, beta in enumerate(betas):
        want = unbounded_result(jax.random.key(0), x, 0.5, BIG, beta=beta, max_queries=4096)
        limit = math.log(float(jnp.finfo(jnp.float32).max) / 8) / math.log(beta)
        assert abs(int(want.index) - limit) < 1 and bool(want.truncated)
        assert math.isfinite(float(want.estimate))
        assert int(out.index[i]) == int(want.index) and float(out.estimate[i]) == float(want.estimate)


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
    # The grid is that of beta rounded to the working dtype (float32 here).
    assert float(res.estimate) == pytest.approx(float(np.float32(1.001)) ** 100 - 1, rel=1e-5)
    # Closed-form tail: all data at the lower bound, q = 1, tiny epsilon: G has infinite mean.
    keys = jax.random.split(jax.random.key(1), 400)
    batch = jax.vmap(lambda k: unbounded_result(k, np.zeros(10), 1.0, 0.02, max_queries=100))(keys)
    truncated, index = np.asarray(batch.truncated), np.asarray(batch.index)
    assert 0 < truncated.mean() < 1
    assert np.all(index[truncated] == 100) and np.all(index[~truncated] <= 100)
    assert np.all(np.isfinite(np.asarray(batch.estimate)))


def test_default_cap_keeps_the_candidate_finite(float_dtype):
    for beta in (1.001, 1.01, 2.0):
        cap = _cap(beta, float_dtype)
        assert math.isfinite(float(grid_edges(cap, log_beta(beta, float_dtype)) * 4))
        rounded = float(np.asarray(beta, float_dtype))  # the grid's beta
        assert cap >= math.log(float(jnp.finfo(float_dtype).max) / 8) / math.log(rounded) - 2
    assert 86_000 < _cap(1.001, jnp.float32) < 2**17  # log(float32 max / 8) / log(1.001)


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
    assert unbounded_many_guarantee(np.linspace(0.1, 0.9, 6), 3.0) == PureDP(3.0)
    assert unbounded_many_guarantee([0.5], 2.0, split=0.25) == PureDP(2.0)
    with pytest.raises(ValueError, match="increasing"):
        unbounded_many(jax.random.key(0), x, [0.5, 0.5], 1.0)


def test_guarantees():
    assert unbounded_guarantee(0.5, 1.0).epsilon == 1.0
    assert unbounded_guarantee(0.5, 1.0, split=0.3).to_zcdp() == ZCDP(0.5 * (0.15 + 0.7) ** 2)
    assert unbounded_guarantee(0.99, 1.0, neighbors="add_remove").epsilon == pytest.approx(0.995)
    assert unbounded_guarantee(0.5, 1.0, neighbors=Neighbors.ADD_REMOVE).epsilon == pytest.approx(0.75)
    # General split (Lemma B.1): max{(1-q) eps1, q eps1 + eps2}.
    assert unbounded_guarantee(0.1, 1.0, split=0.9, neighbors="add_remove").epsilon == pytest.approx(0.81)
    assert fully_unbounded_guarantee(0.5, 2.0).epsilon == 2.0
    assert fully_unbounded_guarantee(0.5, 2.0).to_zcdp().rho == pytest.approx(2 * 0.5 * 0.75**2)
    with pytest.raises(ValueError, match="q"):
        unbounded_guarantee(0.0, 1.0, neighbors="add_remove")
    with pytest.raises(ValueError, match="gumbel"):
        unbounded_guarantee(0.5, 1.0, noise="gumbel", split=0.4)


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
        (dict(max_queries=2**24 + 1), "max_queries"),
        (dict(beta=1 + 1e-9), "beta"),  # rounds to 1 in float32
    ],
)
def test_bad_input(kwargs, match):
    args = dict(x=[1.0, 2.0, 3.0], q=0.5, epsilon=1.0)
    args.update(kwargs)
    x, q, epsilon = args.pop("x"), args.pop("q"), args.pop("epsilon")
    with pytest.raises(ValueError, match=match):
        unbounded(jax.random.key(0), x, q, epsilon, **args)
