"""Exact integer samplers (CKS 2020): integer-only jaxprs, exact laws (chi-square at 10^6 draws with
the tails tested by binomial tests), a two-sample test against OpenDP, bad input, release keys."""

import functools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_walk import equations
from scipy import stats

from dpjax import noise
from dpjax._src.exact.noise import exact_rational

DRAWS = 10**6
ALPHA = 1e-4  # a correct sampler fails each test with probability below this


@functools.cache
def _sampler(kind, parameter, n):
    """One compiled sampler per (kind, parameter, size), shared by the tests."""
    fn = noise.discrete_laplace if kind == "laplace" else noise.discrete_gaussian
    return lambda key: fn(key, parameter, (n,))  # compiled once per kind and size (see _sample)


def _laplace_pmf(scale: Fraction):
    q = math.exp(-float(1 / scale))
    return lambda z: (1 - q) / (1 + q) * q ** np.abs(z)


def _gaussian_pmf(sigma: Fraction):
    s2 = float(sigma * sigma)
    support = np.arange(-int(60 * math.sqrt(s2)) - 20, int(60 * math.sqrt(s2)) + 21)
    weights = np.exp(-(support.astype(np.float64) ** 2) / (2 * s2))
    table = dict(zip(support.tolist(), (weights / weights.sum()).tolist(), strict=True))
    return lambda z: np.array([table.get(int(v), 0.0) for v in np.atleast_1d(z)])


def _laplace_tail(scale: Fraction, a: int) -> float:
    """P(|Z| > a) in closed form: 2 q^(a+1) / (1 + q)."""
    q = math.exp(-float(1 / scale))
    return 2 * q ** (a + 1) / (1 + q)


def _chi_square_pvalue(samples, pmf, width):
    """Chi-square over bins of ``width`` consecutive integers, the outer bins pooled until each
    expects at least 20 draws (the far tails are tested separately)."""
    lo, hi = int(samples.min()), int(samples.max())
    edges = np.arange(lo, hi + width + 1, width)
    values = np.arange(lo, edges[-1])
    starts = np.arange(0, values.size, width)
    probs = np.add.reduceat(pmf(values), starts)
    counts = np.add.reduceat(np.bincount(samples - lo, minlength=values.size), starts)
    expected = probs * samples.size
    keep = expected >= 20
    first, last = np.argmax(keep), keep.size - 1 - np.argmax(keep[::-1])
    obs = np.concatenate([[counts[: first + 1].sum()], counts[first + 1 : last], [counts[last:].sum()]])
    exp = np.concatenate([[expected[: first + 1].sum()], expected[first + 1 : last], [expected[last:].sum()]])
    exp = exp / exp.sum() * obs.sum()  # the mass outside [lo, hi] is in the tail tests
    return stats.chisquare(obs, exp).pvalue


def _binomial_ok(count, n, p):
    return stats.binomtest(int(count), n, p).pvalue > ALPHA


def _no_float_in_jaxpr(jaxpr) -> list[str]:
    variables = ((eqn, var) for eqn in equations(jaxpr) for var in (*eqn.invars, *eqn.outvars))
    avals = ((eqn, getattr(var, "aval", None)) for eqn, var in variables)
    return [
        f"{eqn.primitive}: {aval.dtype}"
        for eqn, aval in avals
        if getattr(aval, "dtype", None) is not None and jnp.issubdtype(aval.dtype, jnp.inexact)
    ]


@pytest.mark.parametrize(
    ("kind", "parameter"),
    [("laplace", (7, 2)), ("laplace", (100, 3)), ("gaussian", (7, 2))],
    ids=["laplace-7/2", "laplace-100/3", "gaussian"],
)
@pytest.mark.parametrize("n", [8, 5000])  # state machine at 8 values, fast passes at 5000
def test_sampling_path_has_no_floating_point_operation(kind, parameter, n):
    fn = noise.discrete_laplace if kind == "laplace" else noise.discrete_gaussian
    closed = jax.make_jaxpr(lambda key: fn(key, parameter, (n,)))(jax.random.key(0))
    assert _no_float_in_jaxpr(closed.jaxpr) == []
    assert any(e.primitive.name == "while" for e in closed.jaxpr.eqns) or "while" in str(closed)


@pytest.mark.parametrize(
    ("scale", "width"),
    [(Fraction(1, 3), 1), (Fraction(7, 2), 1), (Fraction(10), 1), (Fraction(10**6), 20_000)],
    ids=["tiny", "7/2", "10", "huge"],  # the fast pass (numerator <= 64), then the state machine
)
def test_discrete_laplace_law(scale, width):
    z = np.asarray(_sampler("laplace", (scale.numerator, scale.denominator), DRAWS)(jax.random.key(11)))
    assert _chi_square_pvalue(z, _laplace_pmf(scale), width) > ALPHA
    assert _binomial_ok(np.sum(z == 0), DRAWS, float(_laplace_pmf(scale)(0)))
    # tails: beyond 6 standard deviations (sqrt(2) scale) and beyond 12 scales
    for a in (math.floor(6 * math.sqrt(2) * scale), math.floor(12 * scale)):
        assert _binomial_ok(np.sum(np.abs(z) > a), DRAWS, _laplace_tail(scale, a))
    assert np.all(np.abs(z) < 40 * scale + 5)


# Only the state machine ("huge") is run-bound and compiles with every XLA pass (tests/conftest.py):
# the fast rounds compile 2x faster without them and run about as long (tiny, 3 and 10 in one run of
# this test: 34 s of CPU against 42 s; huge 7.2 s against 6.6 s, 9 s alone without the passes;
# 2026-12-06, load ~3 on 2 cores). The same integer samplers, draws and thresholds either way.
@pytest.mark.parametrize(
    ("sigma", "width"),
    [
        (Fraction(1, 2), 1),
        (Fraction(3), 1),
        (Fraction(10), 1),
        pytest.param(Fraction(150), 5, marks=pytest.mark.optimized),
    ],
    ids=["tiny", "3", "10", "huge"],  # the fast rounds up to sigma 10, then the state machine
)
def test_discrete_gaussian_law(sigma, width):
    z = np.asarray(_sampler("gaussian", (sigma.numerator, sigma.denominator), DRAWS)(jax.random.key(12)))
    pmf = _gaussian_pmf(sigma)
    assert _chi_square_pvalue(z, pmf, width) > ALPHA
    s = float(sigma)
    for k in (3, 4, 6):  # tail probabilities (the 6 sigma one expects < 0.01 draws: none beyond it)
        a = math.floor(k * s)
        support = np.arange(a + 1, int(60 * s) + 20)
        p = 2 * pmf(support).sum()
        assert _binomial_ok(np.sum(np.abs(z) > a), DRAWS, p)
    assert abs(np.mean(z)) < 5 * s / math.sqrt(DRAWS)


def test_exact_pmf_of_the_discrete_gaussian_normalises():
    """The summation-normalised PMF against the closed-form variance bound of CKS20 Prop. 19."""
    for sigma in (Fraction(1, 2), Fraction(3), Fraction(150)):
        pmf = _gaussian_pmf(sigma)
        support = np.arange(-int(60 * sigma) - 20, int(60 * sigma) + 21)
        p = pmf(support)
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        assert (p * support**2).sum() <= float(sigma**2) + 1e-9


def test_int64_and_x64_limits(x64):
    """64-bit words: sigma = 10^4 and scale 2^40 (refused with 32-bit words); 8 calls of 256 lanes."""
    keys = jax.random.split(jax.random.key(0), 8)
    z = np.concatenate([np.asarray(noise.discrete_gaussian(k, 10_000, (256,), jnp.int64)) for k in keys])
    assert z.dtype == np.int64
    assert abs(float(np.std(z)) / 10_000 - 1) < 0.1
    big = np.concatenate([np.asarray(noise.discrete_laplace(k, 2**40, (256,), jnp.int64)) for k in keys])
    assert abs(float(np.mean(np.abs(big.astype(np.float64)))) / 2**40 - 1) < 0.12
    fast = np.asarray(noise.discrete_laplace(keys[0], 10, (4096,), jnp.int64))  # the fast pass, int64 out
    q = math.exp(-1 / 10)  # E|Z| = 2q / (1 - q^2)
    assert fast.dtype == np.int64 and abs(float(np.mean(np.abs(fast))) / (2 * q / (1 - q * q)) - 1) < 0.1
    fast = np.asarray(noise.discrete_gaussian(keys[0], 10, (4096,), jnp.int64))  # fast rounds, 64-bit machine
    assert fast.dtype == np.int64 and abs(float(np.var(fast)) / 100 - 1) < 0.1


def test_two_sample_against_opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    n = 20_000
    domain = dp.vector_domain(dp.atom_domain(T="i64"))
    peers = {
        "laplace": dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=3.5),
        "gaussian": dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), scale=3.0),
    }
    ours = {"laplace": (7, 2), "gaussian": 3}
    for kind, measurement in peers.items():
        theirs = np.asarray(measurement(np.zeros(n, np.int64)))
        mine = np.asarray(_sampler(kind, ours[kind], DRAWS)(jax.random.key(5)))[:n]
        values = np.clip(np.concatenate([theirs, mine]), -12, 12)
        table = np.stack([np.bincount(v + 12, minlength=25) for v in (values[:n], values[n:])])
        table = table[:, table.sum(0) > 0]
        assert stats.chi2_contingency(table).pvalue > ALPHA, kind


def test_parameters_are_exact_rationals():
    assert exact_rational(0.5, "s") == Fraction(1, 2)
    assert exact_rational((10, 4), "s") == Fraction(5, 2)
    assert exact_rational(Fraction(1, 3), "s") == Fraction(1, 3)
    assert exact_rational(0.1, "s") == Fraction(0.1)  # its binary value, not 1/10


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda k: noise.discrete_laplace(k, 0, (3,)), ValueError, "scale must be > 0"),
        (lambda k: noise.discrete_laplace(k, -1.5, (3,)), ValueError, "scale must be > 0"),
        (lambda k: noise.discrete_laplace(k, float("nan"), (3,)), ValueError, "finite"),
        (lambda k: noise.discrete_gaussian(k, (1, 0), (3,)), ValueError, "zero denominator"),
        (lambda k: noise.discrete_laplace(k, 0.1, (3,)), ValueError, "too large a fraction"),
        (lambda k: noise.discrete_gaussian(k, 10**6, (3,)), ValueError, "jax_enable_x64"),
        (lambda k: noise.discrete_laplace(k, 2, (3,), jnp.float32), ValueError, "int32 or int64"),
        (lambda k: jax.jit(lambda s: noise.discrete_laplace(k, s, (3,)))(2.0), TypeError, "traced"),
        (lambda k: noise.discrete_laplace(k, "2", (3,)), TypeError, "real number"),
    ],
)
def test_bad_parameters_are_refused_eagerly(call, error, message):
    with pytest.raises(error, match=message):
        call(jax.random.key(0))


def test_int64_needs_x64():
    with jax.enable_x64(False), pytest.raises(ValueError, match="jax_enable_x64"):
        noise.discrete_laplace(jax.random.key(0), 2, (3,), jnp.int64)


def test_vmap_over_keys_matches_shapes_and_law():
    keys = jax.random.split(jax.random.key(3), 4000)
    z = np.asarray(jax.jit(jax.vmap(lambda k: noise.discrete_laplace(k, 2, (3,))))(keys))
    assert z.shape == (4000, 3) and z.dtype == np.int32
    q = math.exp(-0.5)
    assert _binomial_ok(np.sum(z == 0), z.size, (1 - q) / (1 + q))


def test_vmap_over_keys_of_the_fast_paths_gives_each_keys_own_samples():
    """The Gaussian's fast rounds (which draw their candidates on the Laplace fast pass) batched over
    keys: each row is the unbatched call's output, so the loops, conditionals and compactions batch."""
    keys = jax.random.split(jax.random.key(3), 2)
    sample = lambda k: noise.discrete_gaussian(k, 10, (4096,))  # noqa: E731
    batched = np.asarray(jax.jit(jax.vmap(sample))(keys))
    for key, row in zip(keys, batched, strict=True):
        np.testing.assert_array_equal(row, np.asarray(sample(key)))


def test_release_key_is_fresh_from_os_entropy():
    a, b = noise.release_key(), noise.release_key()
    assert jax.random.key_data(a).shape == jax.random.key_data(jax.random.key(0)).shape
    assert not np.array_equal(jax.random.key_data(a), jax.random.key_data(b))
    assert noise.discrete_laplace(a, 3, (2,)).shape == (2,)
