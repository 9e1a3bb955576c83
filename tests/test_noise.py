"""Noise samplers: laws (KS against scipy), moments, and upper tails checked pattern by pattern."""

from decimal import Decimal, localcontext

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax._src import noise

N = 200_000
# KS p-value threshold: a correct sampler fails with probability 1e-5 per test (fixed seeds anyway).
P_MIN = 1e-5

LAWS = {
    "laplace": lambda b: stats.laplace(scale=b),
    "gumbel": lambda b: stats.gumbel_r(scale=b),
    "exponential": lambda b: stats.expon(scale=b),
    "gaussian": lambda b: stats.norm(scale=b),
}


@pytest.mark.parametrize("mode", ["high", "low"])
@pytest.mark.parametrize("name", sorted(LAWS))
def test_law_matches_scipy(name, mode, float_dtype):
    scale = 2.5
    x = noise.sample(name, jax.random.key(11), (N,), scale, float_dtype, mode=mode)
    assert x.dtype == float_dtype and x.shape == (N,)
    x = np.asarray(x, dtype=np.float64)
    assert stats.kstest(x, LAWS[name](scale).cdf).pvalue > P_MIN
    law = LAWS[name](scale)
    # Sample mean within 6 standard errors of the true mean.
    assert abs(x.mean() - law.mean()) < 6 * law.std() / np.sqrt(N)


@pytest.mark.parametrize("name", sorted(LAWS))
def test_tail_probabilities_beyond_naive_float32_limit(name):
    """Half a million draws above the 0.9999 quantile: the conditional law there is still right."""
    # Condition on the upper tail by checking exceedance counts at several levels.
    x = np.asarray(noise.sample(name, jax.random.key(3), (2_000_000,), 1.0, jnp.float32))
    law = LAWS[name](1.0)
    for level in (law.isf(1e-3), law.isf(1e-4), law.isf(1e-5)):
        expected = law.sf(level) * x.size
        observed = int((x > level).sum())
        # Poisson count: within 5 sigma (+1 for small counts).
        assert abs(observed - expected) < 5 * np.sqrt(expected) + 1


def _tail_probability_from_bits(transform, t, dtype, sign_bit=0):
    """P(sign = sign_bit and transform(bits) > t), computed exactly from the bit map.

    Given the sign bit, W = (h + (l + 1/2) 2^-32) 2^-32 increases with the 63-bit pattern index
    N = h 2^32 + l and the transform decreases with W, so bisection over N finds how many of the
    2^63 equally likely patterns exceed t; each has probability 2^-64 (the sign bit is one more).
    """

    def value(index):
        hi = jnp.asarray([(sign_bit << 31) | (index >> 32)], jnp.uint32)
        lo = jnp.asarray([index & 0xFFFFFFFF], jnp.uint32)
        sign, w = noise.sign_and_half_uniform_from_bits(hi, lo, dtype)
        return float(transform(sign, w)[0])

    low, high = 0, 2**63 - 1
    assert value(low) > t, "the sampler cannot reach this tail at all"
    while high - low > 1:
        mid = (low + high) // 2
        if value(mid) > t:
            low = mid
        else:
            high = mid
    return (low + 1) * 2.0**-64


@pytest.mark.parametrize("t", [18.0, 25.0, 30.0, 35.0])
def test_gumbel_upper_tail_exact_to_35(float_dtype, t):
    def gumbel_from(sign, w):
        return -jnp.log(noise.exponential_from_sign_and_half_uniform(sign, w))

    p = _tail_probability_from_bits(gumbel_from, t, float_dtype)
    exact = -np.expm1(-np.exp(-t))  # P(G > t) = 1 - exp(-exp(-t))
    assert p == pytest.approx(exact, rel=2e-3)


def test_naive_float32_gumbel_is_truncated_and_ours_is_not():
    """Documents the failure this module exists for: jax's default float32 Gumbel tops out at ~16.6."""
    key = jax.random.key(0)
    naive_max = float(jnp.max(jax.random.gumbel(key, (10**6,), jnp.float32, mode="low")))
    assert naive_max < 16.7
    # The largest value our map can produce (W at its smallest) is far beyond 30.
    sign, w = noise.sign_and_half_uniform_from_bits(
        jnp.zeros(1, jnp.uint32), jnp.zeros(1, jnp.uint32), jnp.float32
    )
    assert float(-jnp.log(noise.exponential_from_sign_and_half_uniform(sign, w))[0]) > 44


@pytest.mark.parametrize("t", [18.0, 30.0, 40.0])
def test_exponential_and_laplace_upper_tail_exact(float_dtype, t):
    # Exponential: only the upper branch (sign bit set) reaches E > log 2; P(E > t) = e^-t.
    p = _tail_probability_from_bits(noise.exponential_from_sign_and_half_uniform, t, float_dtype, 1)
    assert p == pytest.approx(np.exp(-t), rel=2e-3)

    # Laplace: positive when the sign bit is 0, |L| = -log(2W); P(L > t) = e^-t / 2.
    p = _tail_probability_from_bits(noise.laplace_from_sign_and_half_uniform, t, float_dtype, 0)
    assert p == pytest.approx(np.exp(-t) / 2, rel=2e-3)


def test_half_uniform_is_uniform_in_the_bulk():
    key = jax.random.key(5)
    sign, w = noise._sign_and_half_uniform(key, (N,), jnp.float32)
    w = np.asarray(w, np.float64)
    assert 0 < w.min() and w.max() <= 0.5
    assert stats.kstest(2 * w, "uniform").pvalue > P_MIN
    assert stats.binomtest(int(np.asarray(sign).sum()), N).pvalue > P_MIN


def test_scale_zero_shape_and_jit_vmap():
    key = jax.random.key(0)
    batched = jax.jit(jax.vmap(lambda k: noise.laplace(k, (3,), 2.0)))(jax.random.split(key, 4))
    assert batched.shape == (4, 3)
    assert noise.gumbel(key, 5).shape == (5,)
    assert float(noise.exponential(key, (), 0.0)) == 0.0


def test_bad_arguments():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="mode"):
        noise.gumbel(key, (2,), mode="medium")
    with pytest.raises(ValueError, match="noise"):
        noise.sample("cauchy", key, (2,))
    with pytest.raises(ValueError, match="dtype"):
        noise.laplace(key, (2,), dtype=jnp.int32)


def test_gaussian_from_words_reaches_the_tail_and_is_standard_normal(x64):
    """The counter-based map (PIE's per-user noise): sign and W from words 0-1 (W down to 2^-64,
    so |Z| reaches sqrt(2 log 2^64) = 9.42), the angle on [0, pi/2) from words 2-3."""
    for dtype in (np.float32, np.float64):
        words = np.zeros((4, 3), np.uint32)
        words[0, 2] = 2**31  # the sign bit
        words[2, 1] = 2**31  # angle pi/4
        z = np.asarray(noise.gaussian_from_words(jnp.asarray(words), dtype), np.float64)
        assert noise.gaussian_from_words(jnp.asarray(words), dtype).dtype == dtype
        radius = np.sqrt(2 * 64 * np.log(2))
        np.testing.assert_allclose(z, [radius, radius * np.sqrt(0.5), -radius], rtol=1e-5)
        words = jnp.asarray(jax.random.bits(jax.random.key(5), (4, 20000), jnp.uint32))
        assert stats.kstest(np.asarray(noise.gaussian_from_words(words, dtype)), "norm").pvalue > 1e-4


def test_gaussian_pairs_are_two_independent_standard_normals(float_dtype):
    """The two halves of ``gaussian`` pair up as Box-Muller pairs: (X, Y) is standard bivariate
    normal iff X^2 + Y^2 ~ Exp(mean 2) and atan2(Y, X) is uniform and independent of it."""
    z = np.asarray(noise.gaussian(jax.random.key(13), (2 * N,), 1.0, float_dtype), np.float64)
    x, y = z[:N], z[N:]
    radius2, angle = x * x + y * y, np.arctan2(y, x)
    assert stats.kstest(radius2, stats.expon(scale=2).cdf).pvalue > P_MIN
    assert stats.kstest(angle, stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > P_MIN
    # Independence of radius and angle: the radius' law is the same on each half of the circle.
    assert stats.ks_2samp(radius2[angle > 0], radius2[angle <= 0]).pvalue > P_MIN


def test_gaussian_pair_map_reaches_the_tail_and_uses_every_octant(x64):
    """Crafted words: W at its smallest gives the radius sqrt(2 log 2^64) = 9.42; the top bit of the
    angle word swaps (cos, sin), the angle's bits set psi, the lowest bit signs the second member."""
    radius = np.sqrt(2 * 64 * np.log(2))
    for dtype, rows in ((np.float32, 3), (np.float64, 4)):
        assert noise._words_per_gaussian_pair(dtype) == rows
        words = np.zeros((rows, 4), np.uint32)
        words[2, 1] = 2**31  # swap
        words[0, 2] = 2**31  # first member negative
        words[rows - 1, 2] = 1  # second member negative
        words[2, 3] = 2**30  # the angle's top bit: psi = pi/8 (half the octant)
        first, second = (np.asarray(a, np.float64) for a in noise._gaussian_pairs_from_words(words, dtype))
        c, s = radius * np.cos(np.pi / 8), radius * np.sin(np.pi / 8)
        np.testing.assert_allclose(first, [radius, 0, -radius, c], rtol=1e-6, atol=0)
        np.testing.assert_allclose(second, [0, radius, -0.0, s], rtol=1e-6, atol=0)


def _cos_sin_reference(psi):
    """cos and sin to 40 digits by their Taylor series (exact decimal arithmetic)."""
    with localcontext() as context:
        context.prec = 40
        x = Decimal(float(psi))
        cos = sin = Decimal(0)
        term = Decimal(1)
        for n in range(1, 60):
            if n % 2:
                cos += term
            else:
                sin += term
            term = term * x / n * (-1 if n % 2 == 0 else 1)
        return float(cos), float(sin)


@pytest.mark.optimized
def test_quarter_cos_sin_within_one_epsilon(x64):
    """The polynomial cos and sin on [0, pi/4]: relative error below one epsilon of the dtype, on
    the float32 angle grid (the small angles all, the rest strided) and on float64 samples. Compiled
    as a user's program is (with every XLA pass: the bound counts on fused multiply-adds, which XLA
    without its optimization passes does not form, and then errs by 1.01 epsilon)."""
    t = np.concatenate([np.arange(2**16), np.arange(2**16, 2**24, 97), [2**24 - 1]])
    psi32 = jnp.asarray(t * 2.0**-24, jnp.float32) * jnp.asarray(np.pi / 4, jnp.float32)
    reference = np.asarray(psi32, np.float64)
    for got, want in zip(noise._quarter_cos_sin(psi32), (np.cos(reference), np.sin(reference)), strict=True):
        error = np.abs(np.asarray(got, np.float64) - want) / np.where(want > 0, want, 1)
        assert error.max() < np.finfo(np.float32).eps
    psi64 = np.concatenate([np.random.default_rng(0).uniform(0, np.pi / 4, 1000), [0, 1e-9, np.pi / 4]])
    got = np.asarray(noise._quarter_cos_sin(jnp.asarray(psi64, jnp.float64)), np.float64)
    want = np.asarray([_cos_sin_reference(p) for p in psi64]).T
    error = np.abs(got - want) / np.where(want > 0, want, 1)
    assert error.max() < np.finfo(np.float64).eps


def test_word_pairs_are_the_halves_of_jax_64_bit_words(x64):
    """For threefry keys the two words are jax.random.bits' 64-bit word split in two (one hash);
    other key implementations get jax.random.bits' 32-bit words."""
    key = jax.random.key(21)
    hi, lo = noise.random_word_pairs(key, (3, 5))
    bits = np.asarray(jax.random.bits(key, (3, 5), jnp.uint64))
    np.testing.assert_array_equal(np.asarray(hi, np.uint64) << np.uint64(32) | np.asarray(lo), bits)
    rbg = jax.random.key(21, impl="rbg")
    want = jax.random.bits(rbg, (2, 4), jnp.uint32)
    np.testing.assert_array_equal(np.stack(noise.random_word_pairs(rbg, (4,))), want)
    with pytest.raises(ValueError, match="2\\^32"):
        noise.random_word_pairs(key, (2**16, 2**16))
