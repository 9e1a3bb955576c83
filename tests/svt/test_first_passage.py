"""AboveThreshold and sparse vector by first passage (``method="first_passage"``): the halting law
against Durfee's Lemma 3.3 (Gumbel, exact) and the 1-D quadrature oracle (Laplace, Exponential) by
chi-square, sparse vector's law of the answer pairs (a product of halting laws from each restart),
equality in law with the literal kernels on medium streams, and bad input."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import P_MIN, chi_square_pvalue
from scipy import stats
from svt_laws import adaptive_gap_law, gumbel_halting_log_probabilities, halting_histogram, halting_law

from dpjax import svt
from dpjax._src.svt import gap_passage

TRIALS = 100_000
CASES = {  # queries, threshold, epsilon
    "mixed": ([-1.5, 0.5, -0.5, 1.0, 0.0, 2.0], 1.0, 0.8),
    "far_above": ([60.0, 55.0, 70.0], 0.0, 1.0),  # halts at 0 up to ~e^-55
    "far_below": ([-40.0, -35.0, -30.0, -38.0, 2.0], 0.0, 1.0),  # mostly the last query or none
    "ties": ([1.0, 1.0, 1.0, 1.0, -1.0, 1.0], 1.0, 0.5),
    "ramp_300": (list(np.linspace(-20.0, 5.0, 300)), 0.0, 0.7),
    "all_below": ([-5.0] * 40, 0.0, 1.0),  # -1 often
}


THINNED = ("laplace", "exponential")
THINNED_CASES = ("mixed", "far_above", "far_below", "ties", "all_below")
EPSILON1 = 0.6  # Laplace and Exponential: a threshold budget other than the query budget


# The budgets are traced arguments (as the threshold is): one compilation per method, noise, stream
# length and dtype, shared by the cases and budgets of this module, not one per epsilon.
@functools.cache
def _batched(method, noise="gumbel"):
    def release(key, queries, threshold, epsilon1, epsilon2):
        return svt.above_threshold(key, queries, threshold, epsilon1, epsilon2, noise=noise, method=method)

    return jax.jit(jax.vmap(release, in_axes=(0, None, None, None, None)))


def sample(method, queries, threshold, epsilon, seed, trials=TRIALS, noise="gumbel", epsilon1=None):
    keys = jax.random.split(jax.random.key(seed), trials)
    epsilon1 = epsilon if epsilon1 is None else epsilon1
    batched = _batched(method, noise)
    return np.asarray(batched(keys, jnp.asarray(queries), threshold, epsilon1, epsilon))


@pytest.mark.parametrize("case", sorted(CASES))
def test_first_passage_halting_law(case):
    queries, threshold, epsilon = CASES[case]
    got = sample("first_passage", np.asarray(queries, np.float32), threshold, epsilon, 41)
    assert got.dtype == np.int32 and got.min() >= -1 and got.max() < len(queries)
    probs = np.exp(gumbel_halting_log_probabilities(queries, threshold, epsilon))
    assert chi_square_pvalue(halting_histogram(got, len(queries)), probs) > P_MIN


def test_first_passage_halting_law_x64(x64):
    queries, threshold, epsilon = CASES["mixed"]
    got = sample("first_passage", np.asarray(queries), threshold, epsilon, 42)
    probs = np.exp(gumbel_halting_log_probabilities(queries, threshold, epsilon))
    assert chi_square_pvalue(halting_histogram(got, len(queries)), probs) > P_MIN


@pytest.mark.parametrize("noise", THINNED)
@pytest.mark.parametrize("case", THINNED_CASES)
def test_thinned_first_passage_halting_law(noise, case):
    """Laplace and Exponential (envelope and thinning) against the quadrature oracle, including
    queries far above (certain firing) and far below the threshold."""
    queries, threshold, epsilon = CASES[case]
    got = sample(
        "first_passage", np.asarray(queries, np.float32), threshold, epsilon, 45, 50_000, noise, EPSILON1
    )
    assert got.dtype == np.int32 and got.min() >= -1 and got.max() < len(queries)
    probs = halting_law(noise, queries, threshold, EPSILON1, epsilon)
    assert chi_square_pvalue(halting_histogram(got, len(queries)), probs) > P_MIN


@pytest.mark.parametrize("noise", THINNED)
def test_thinned_first_passage_halting_law_x64(x64, noise):
    queries, threshold, epsilon = CASES["mixed"]
    got = sample("first_passage", np.asarray(queries), threshold, epsilon, 46, 50_000, noise, EPSILON1)
    probs = halting_law(noise, queries, threshold, EPSILON1, epsilon)
    assert chi_square_pvalue(halting_histogram(got, len(queries)), probs) > P_MIN


def _two_sample_pvalue(first, second, cells):
    """Chi-square of a 2 x cells contingency table, cells of total count < 20 pooled."""
    table = np.stack([np.bincount(first, minlength=cells), np.bincount(second, minlength=cells)])
    big = table.sum(axis=0) >= 20
    table = np.concatenate([table[:, big], table[:, ~big].sum(axis=1, keepdims=True)], axis=1)
    return stats.chi2_contingency(table[:, table.sum(axis=0) > 0]).pvalue


@pytest.mark.parametrize("noise", svt.NOISES)
def test_first_passage_equals_literal_in_law(noise):
    """Two-sample chi-square on a 1000-query stream, halting indices pooled in cells of count >= 20."""
    queries = np.random.default_rng(3).normal(-4.0, 2.0, 1000).astype(np.float32)
    epsilon1 = None if noise == "gumbel" else EPSILON1
    fast = sample("first_passage", queries, 1.0, 1.0, 43, 20_000, noise, epsilon1)
    literal = sample("literal", queries, 1.0, 1.0, 44, 20_000, noise, epsilon1)
    assert _two_sample_pvalue(fast % 1001, literal % 1001, 1001) > P_MIN


# ----------------------------------------------------------------------------- sparse vector


def _sparse_pair_law(noise, queries, threshold, epsilon1, epsilon2):
    """P(first two answers = (i, j)) of sparse vector with c = 2, the threshold redrawn after the
    first answer: the halting law from 0 times the halting law from i + 1 (fresh noise), flattened
    to cells ``(i + 1) * (n + 1) + (j + 1)`` with -1 for no answer."""
    n = len(queries)
    law = np.zeros((n + 1, n + 1))
    first = halting_law(noise, queries, threshold, epsilon1, epsilon2)
    law[0, 0] = first[n]
    for i in range(n):
        rest = (
            halting_law(noise, queries[i + 1 :], threshold, epsilon1, epsilon2) if i + 1 < n else np.ones(1)
        )
        law[i + 1, 0] = first[i] * rest[-1]
        law[i + 1, i + 2 :] = first[i] * rest[:-1]
    return law.reshape(-1)


def _pair_codes(indices, n):
    return (indices[:, 0] + 1) * (n + 1) + (indices[:, 1] + 1)


@functools.cache
def _batched_sparse(method, noise, c):
    def release(key, queries, threshold, epsilon1, epsilon2):
        options = {"c": c, "noise": noise, "method": method}
        return svt.sparse_vector(key, queries, threshold, epsilon1, epsilon2, **options)

    return jax.jit(jax.vmap(release, in_axes=(0, None, None, None, None)))


def sample_sparse(method, noise, queries, threshold, epsilon1, epsilon2, seed, trials, c=2):
    keys = jax.random.split(jax.random.key(seed), trials)
    return _batched_sparse(method, noise, c)(keys, jnp.asarray(queries), threshold, epsilon1, epsilon2)


SPARSE_QUERIES = np.array([60.0, -1.0, 0.5, -30.0, 1.5, 0.0], np.float32)  # a first answer far above


@pytest.mark.parametrize("noise", svt.NOISES)
def test_sparse_vector_first_passage_pair_law(noise):
    """The law of the first two answers, exactly: after an answer far above the threshold the next run
    must see the following queries at full precision (no prefix sum through the big one)."""
    epsilon1 = 0.9 if noise == "gumbel" else EPSILON1
    result = sample_sparse("first_passage", noise, SPARSE_QUERIES, 0.5, epsilon1, 0.9, 47, 50_000)
    n = len(SPARSE_QUERIES)
    indices = np.asarray(result.indices)
    assert indices.dtype == np.int32 and ((indices[:, 1] > indices[:, 0]) | (indices[:, 1] == -1)).all()
    last = np.where(indices[:, 1] >= 0, indices[:, 1] + 1, n)
    np.testing.assert_array_equal(np.asarray(result.num_processed), last)
    np.testing.assert_array_equal(np.asarray(result.above).sum(axis=1), (indices >= 0).sum(axis=1))
    probs = _sparse_pair_law(noise, SPARSE_QUERIES, 0.5, epsilon1, 0.9)
    observed = np.bincount(_pair_codes(indices, n), minlength=(n + 1) ** 2)
    assert chi_square_pvalue(observed, probs) > P_MIN


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
@pytest.mark.slow
@pytest.mark.parametrize("noise", svt.NOISES)
def test_sparse_vector_first_passage_equals_literal_in_law(noise):
    """c = 10 over 2000 queries: the marginal laws of answers 1, 5 and 10, two-sample chi-square."""
    queries = np.random.default_rng(5).normal(-3.0, 2.5, 2000).astype(np.float32)
    epsilon1 = 1.0 if noise == "gumbel" else EPSILON1
    fast = sample_sparse("first_passage", noise, queries, 1.0, epsilon1, 1.0, 48, 10_000, c=10)
    literal = sample_sparse("literal", noise, queries, 1.0, epsilon1, 1.0, 49, 10_000, c=10)
    for j in (0, 4, 9):
        first = np.asarray(fast.indices[:, j]) % 2001
        second = np.asarray(literal.indices[:, j]) % 2001
        assert _two_sample_pvalue(first, second, 2001) > P_MIN / 3


def test_first_passage_checks_method_and_traced_budgets():
    queries = jnp.arange(5.0)
    with pytest.raises(ValueError, match="method"):
        svt.sparse_vector(jax.random.key(0), queries, 2.0, 1.0, 1.0, c=2, method="fast")
    with pytest.raises(ValueError, match="method"):
        svt.above_threshold(jax.random.key(0), queries, 2.0, 1.0, 1.0, noise="gumbel", method="fast")

    @jax.jit
    def release(epsilon1):
        return svt.above_threshold(
            jax.random.key(0), queries, 2.0, epsilon1, 1.0, noise="gumbel", method="first_passage"
        )

    assert int(release(0.5)) == -1  # epsilon1 != epsilon2 under jit: the invalid marker
    options = {"noise": "gumbel", "method": "first_passage"}
    eager = svt.above_threshold(jax.random.key(0), queries, 2.0, 1.0, 1.0, **options)
    assert int(release(1.0)) == int(eager)  # a valid traced budget: the eager call's draw


# ----------------------------------------------------------------------------- sparse vector with gap

GAP_QUERIES = np.array([12.0, -3.0, 1.0, -20.0, 4.0, 0.0, 2.5, 30.0], np.float32)


@functools.cache
def _batched_gap(method):
    def release(key, queries):
        return svt.sparse_vector_with_gap(key, queries, 1.0, 2.0, c=2, method=method)

    return jax.jit(jax.vmap(release, in_axes=(0, None)))


def test_sparse_vector_with_gap_first_passage_equals_literal_in_law():
    """The answers (two-sample chi-square on the pairs) and the released gaps (two-sample KS, per
    answer slot and given the most frequent first answer) against the literal kernel, 40k releases
    each, with queries far above (gap = c - T~ + Exp) and below (gap an Exp by memorylessness)."""
    keys = jax.random.split(jax.random.key(50), 40_000)
    fast = jax.tree.map(np.asarray, _batched_gap("first_passage")(keys, jnp.asarray(GAP_QUERIES)))
    keys = jax.random.split(jax.random.key(51), 40_000)
    literal = jax.tree.map(np.asarray, _batched_gap("literal")(keys, jnp.asarray(GAP_QUERIES)))
    n = len(GAP_QUERIES)
    assert (
        _two_sample_pvalue(_pair_codes(fast.indices, n), _pair_codes(literal.indices, n), (n + 1) ** 2)
        > P_MIN
    )
    for j in range(2):
        a, b = fast.gaps[fast.indices[:, j] >= 0, j], literal.gaps[literal.indices[:, j] >= 0, j]
        assert (a >= 0).all() and stats.ks_2samp(a, b).pvalue > P_MIN / 4
    first = np.bincount(literal.indices[:, 0] + 1).argmax() - 1
    a, b = fast.gaps[fast.indices[:, 0] == first, 0], literal.gaps[literal.indices[:, 0] == first, 0]
    assert stats.ks_2samp(a, b).pvalue > P_MIN / 4
    for field in ("units_used", "num_processed", "answer_branches"):
        got = getattr(fast, field)
        assert _two_sample_pvalue(np.ravel(got) + 1, np.ravel(getattr(literal, field)) + 1, n + 2) > P_MIN / 4
    answers = (fast.indices >= 0).sum(axis=1)
    np.testing.assert_array_equal(fast.units_used, 2 * answers)
    np.testing.assert_array_equal((fast.branch == svt.BRANCH_MIDDLE).sum(axis=1), answers)
    np.testing.assert_array_equal((fast.branch >= 0).sum(axis=1), fast.num_processed)
    np.testing.assert_allclose(fast.epsilon_spent + fast.epsilon_left, 2.0, rtol=1e-6)


@pytest.mark.parametrize("depth", [0.3, 5.0, 200.0])
def test_laplace_overshoot_below_zero_is_finite_and_exact(depth):
    """``Z - t`` given ``t <= Z < 0`` (Z ~ Laplace(1), t = -depth) has the CDF
    ``(e^{x - depth} - e^{-depth}) / (1 - e^{-depth})`` on [0, depth); queries far above the threshold
    (depth 200, where ``expm1`` overflows in float32) used to give infinite gaps."""
    keys = jax.random.split(jax.random.key(52), 20_000)
    overshoot = jax.jit(jax.vmap(lambda k: gap_passage._inside_overshoot(
        jax.random.uniform(k, (), jnp.float32), jnp.float32(depth))))
    draws = np.asarray(overshoot(keys))
    assert np.isfinite(draws).all() and (draws >= 0).all() and (draws <= depth).all()
    def cdf(x):
        return (np.exp(np.asarray(x, np.float64) - depth) - np.exp(-depth)) / -np.expm1(-depth)

    assert stats.kstest(draws, cdf).pvalue > P_MIN


# ------------------------------------------------------------------------ adaptive sparse vector with gap

ADAPTIVE_QUERIES = np.array([3.0, -40.0, 0.5, 40.0, -1.0, 2.0], np.float32)  # far below, far above
ADAPTIVE = {"epsilon": 2.0, "c": 2, "theta": 0.4, "monotonic": True}
ADAPTIVE_SCALES = (1 / 0.8, 1 / 0.3, 1 / 0.6)  # b0 = 1/eps0, bt = 1/eps2, bm = 1/eps1 (Alg. 2, line 2)


@functools.cache
def _batched_adaptive(method, sigma):
    def release(key, queries):
        return svt.adaptive_sparse_vector_with_gap(key, queries, 1.0, sigma=sigma, method=method, **ADAPTIVE)

    return jax.jit(jax.vmap(release, in_axes=(0, None)))


def sample_adaptive(method, sigma, seed, trials=100_000, queries=ADAPTIVE_QUERIES):
    keys = jax.random.split(jax.random.key(seed), trials)
    return jax.tree.map(np.asarray, _batched_adaptive(method, sigma)(keys, jnp.asarray(queries)))


def _transcript_pvalue(result, sigma):
    """Chi-square of the released transcripts (the ``branch`` arrays) against the quadrature law."""
    law, listed = adaptive_gap_law(ADAPTIVE_QUERIES, 1.0, ADAPTIVE_SCALES, sigma, ADAPTIVE["c"])
    index = {t: k for k, t in enumerate(listed)}
    codes = np.array([index[tuple(int(b) for b in row)] for row in result.branch])
    return chi_square_pvalue(np.bincount(codes, minlength=len(listed)), [law[t] for t in listed])


@pytest.mark.parametrize("sigma", [2.0, math.inf])
@pytest.mark.parametrize("method", ["first_passage", "literal"])
def test_adaptive_gap_transcript_law(method, sigma):
    """The law of the whole transcript (branch of every processed query, hence the indices, units
    and stopping point) against quadrature over the threshold noise, for both kernels (the literal
    one checks the oracle); queries far above (always a top ⊤) and far below (never a ⊤)."""
    result = sample_adaptive(method, sigma, 60, 100_000 if method == "first_passage" else 50_000)
    assert _transcript_pvalue(result, sigma) > P_MIN
    answered = result.indices >= 0
    np.testing.assert_array_equal(answered.sum(axis=1), (result.branch > 0).sum(axis=1))
    units = np.where(result.branch == 2, 2, result.branch == 1).sum(axis=1)
    np.testing.assert_array_equal(result.units_used, units)
    np.testing.assert_array_equal(result.num_processed, (result.branch >= 0).sum(axis=1))
    rows = np.arange(len(result.branch))[:, None]
    np.testing.assert_array_equal(result.branch[rows, np.maximum(result.indices, 0)][answered],
                                  result.answer_branches[answered])
    assert (result.gaps[result.answer_branches == 1] >= sigma).all()
    assert (result.gaps[result.answer_branches == 2] >= 0).all() and np.isnan(result.gaps[~answered]).all()


@pytest.mark.slow
def test_adaptive_gap_first_passage_transcript_law_x64(x64):
    result = sample_adaptive("first_passage", 2.0, 61, 30_000, ADAPTIVE_QUERIES.astype(np.float64))
    assert result.gaps.dtype == np.float64 and _transcript_pvalue(result, 2.0) > P_MIN


def test_adaptive_gap_first_passage_gap_law():
    """The released gaps of the most frequent transcript, each answer binned at quantile edges and
    tested by chi-square against ``P(transcript, gap <= g)`` by quadrature (top and middle ⊤s)."""
    result = sample_adaptive("first_passage", 2.0, 62)
    law, listed = adaptive_gap_law(ADAPTIVE_QUERIES, 1.0, ADAPTIVE_SCALES, 2.0, ADAPTIVE["c"])
    transcript = max(listed, key=law.get)
    rows = (result.branch == np.array(transcript)).all(axis=1)
    for slot, i in enumerate(np.flatnonzero(np.array(transcript) > 0)):
        gaps = result.gaps[rows, slot]
        edges = np.quantile(gaps, np.linspace(0.05, 0.95, 10))
        cdf, _ = adaptive_gap_law(
            ADAPTIVE_QUERIES, 1.0, ADAPTIVE_SCALES, 2.0, ADAPTIVE["c"], edges, (transcript, i)
        )
        probs = np.diff(np.concatenate([[0.0], cdf / law[transcript], [1.0]]))
        assert chi_square_pvalue(np.bincount(np.searchsorted(edges, gaps), minlength=11), probs) > P_MIN / 3


def test_adaptive_gap_first_passage_without_top_branch_is_sparse_vector_with_gap():
    """``sigma = inf``: no top ⊤, and the same key draws what Sparse-Vector-with-Gap draws."""
    queries = jnp.asarray(GAP_QUERIES)
    options = {"c": 2, "method": "first_passage"}
    for seed in range(8):
        key = jax.random.key(seed)
        plain = svt.sparse_vector_with_gap(key, queries, 1.0, 2.0, **options)
        adaptive = svt.adaptive_sparse_vector_with_gap(key, queries, 1.0, 2.0, sigma=math.inf, **options)
        np.testing.assert_array_equal(adaptive.indices, np.append(plain.indices, -1))
        np.testing.assert_array_equal(adaptive.branch, plain.branch)
        assert int(adaptive.units_used) == int(plain.units_used)
        np.testing.assert_allclose(adaptive.gaps[:2], plain.gaps, rtol=1e-6)


@pytest.mark.parametrize("adaptive", [False, True])
def test_gap_first_passage_far_above_the_threshold_is_finite_and_exact_in_float32(adaptive):
    """A query 400 (plain, ``Lap(4)`` noise) or 10^4 (adaptive, top branch ``Lap(8)``) above the
    threshold 0 in float32, epsilon 1, theta 1/2, c = 1: the overshoot's inverse CDF used to form
    ``e^100`` and release ``inf`` in ~40% of runs. Now every gap is finite, and the gaps (the query
    plus its noise minus the threshold noise ``Lap(2)``, answered with probability 1 - e^-90)
    match a float64 NumPy sample of that law (two-sample KS, 10k against 200k)."""
    query, scale = (1e4, 8.0) if adaptive else (400.0, 4.0)
    mechanism = svt.adaptive_sparse_vector_with_gap if adaptive else svt.sparse_vector_with_gap
    release = jax.jit(jax.vmap(lambda key: mechanism(
        key, jnp.array([query], jnp.float32), 0.0, 1.0, c=1, theta=0.5, method="first_passage"
    )))
    result = release(jax.random.split(jax.random.key(63), 10_000))
    gaps = np.asarray(result.gaps[:, 0], np.float64)
    assert np.isfinite(gaps).all() and (np.asarray(result.indices[:, 0]) == 0).all()
    branch = svt.BRANCH_TOP if adaptive else svt.BRANCH_MIDDLE
    assert (np.asarray(result.answer_branches[:, 0]) == branch).all()
    rng = np.random.default_rng(64)
    reference = query + rng.laplace(0.0, scale, 200_000) - rng.laplace(0.0, 2.0, 200_000)
    assert stats.ks_2samp(gaps, reference).pvalue > P_MIN


def test_inside_overshoot_is_finite_and_accurate_for_every_finite_threshold():
    """:func:`dpjax._src.svt.gap_passage._inside_overshoot` in float32 against float64 ``log1p(u
    expm1(s))`` (beyond ``s = 700``, ``logaddexp(log u + s, log1p(-u))``): relative error
    within ``8 eps (1 + s + |log u|)``, finite up to ``s = 10^30``, and in ``[0, s]``."""
    from dpjax._src.svt.gap_passage import _inside_overshoot

    u = np.array([0.0, 2.0**-23, 1e-6, 0.01, 0.3, 0.5, 0.9, 1 - 2.0**-23], np.float32)[:, None]
    s = np.array([0.0, 1e-6, 0.5, 1.0, 1.5, 20.0, 88.0, 89.0, 100.0, 400.0, 1e4, 1e8, 1e30], np.float32)
    got = np.asarray(_inside_overshoot(jnp.asarray(u), jnp.asarray(s)), np.float64)
    u64, s64 = u.astype(np.float64), s.astype(np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        want = np.where(s64 < 700, np.log1p(u64 * np.expm1(np.minimum(s64, 700))),
                        np.logaddexp(np.log(u64) + s64, np.log1p(-u64)))
        bound = 8 * np.finfo(np.float32).eps * (1 + s64 + np.abs(np.log(np.maximum(u64, 2.0**-24)))) * want
    assert np.isfinite(got).all() and (got >= 0).all() and (got <= s64 * (1 + 1e-6)).all()
    np.testing.assert_array_less(np.abs(got - want), bound + 1e-45)
