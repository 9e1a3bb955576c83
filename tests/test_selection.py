"""dpjax.selection: exact laws (chi-square against closed forms), invariants, batching, bad input."""


import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import (
    P_MIN,
    PEELING_CASES,
    N,
    chi_square_pvalue,
    em_probabilities,
    laplace_difference_tail,
    noisy_max_probabilities,
    plackett_luce,
    sample,
    scale_of,
)
from scipy import stats

from dpjax import selection
from dpjax.accounting import ZCDP, PureDP, RangeBounded

# ----------------------------------------------------------------------------------------------- laws


# The law tests sample with ``jit(vmap)`` over keys, where the default ``method="auto"`` runs the
# fast sampler (tests/test_auto.py): each runs with the literal kernel (auto's path for one release)
# and with the default.
METHODS = ("literal", "auto")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("monotonic", "sensitivity", "use_x64"), [(False, 1.0, False), (True, 1.0, True), (False, 2.5, False)]
)
def test_exponential_mechanism_law(monotonic, sensitivity, use_x64, method, request):
    if use_x64:
        request.getfixturevalue("x64")
    utilities = jnp.asarray([3.0, 1.0, 0.0, 2.5, -1.0])
    assert utilities.dtype == (jnp.float64 if use_x64 else jnp.float32)
    draws = sample(
        selection.exponential_mechanism,
        utilities,
        N,
        1,
        epsilon=1.0,
        sensitivity=sensitivity,
        monotonic=monotonic,
        method=method,
    )
    assert draws.dtype == np.int32
    probs = em_probabilities(utilities, scale_of(1.0, sensitivity, monotonic))
    assert chi_square_pvalue(np.bincount(draws, minlength=5), probs) > P_MIN


@pytest.mark.slow
def test_exponential_mechanism_million_candidates_spanning_1e4():
    """Linear-space weights exp(u/2) underflow to 0 here; Gumbel-max in log space is exact."""
    n = 10**6
    rng = np.random.default_rng(0)
    utilities = rng.uniform(-1e4, -100.0, n).astype(np.float32)
    top = rng.choice(n, 3, replace=False)
    utilities[top] = [0.0, -1.0, -3.0]
    assert np.exp(utilities.astype(np.float64) - 1e4 / 2).sum() == 0.0  # what a linear-space sampler sees
    draws = sample(selection.exponential_mechanism, utilities, 64, 2, epsilon=1.0)
    assert np.isin(draws, top).all()
    observed = [(draws == i).sum() for i in top]
    assert chi_square_pvalue(observed, em_probabilities([0.0, -1.0, -3.0], 2.0)) > P_MIN


@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize("noise", ["gumbel", "exponential", "laplace"])
def test_report_noisy_max_law(noise, monotonic, request):
    if monotonic:  # the monotone cases run with x64, the general ones in float32
        request.getfixturevalue("x64")
    scores = jnp.asarray([2.0, 1.0, 0.0, 1.5])
    method = "literal" if monotonic else "auto"  # Gumbel: the literal noisy max, and auto's tree
    draws = sample(
        selection.report_noisy_max, scores, N, 3, epsilon=1.0, noise=noise, monotonic=monotonic, method=method
    )
    probs = noisy_max_probabilities(scores, noise, scale_of(1.0, 1.0, monotonic))
    assert chi_square_pvalue(np.bincount(draws, minlength=4), probs) > P_MIN


def test_gumbel_noisy_max_is_the_exponential_mechanism():
    """The closed form of Gumbel report-noisy-max (integration) is the softmax law."""
    scores = [2.0, 1.0, 0.0, 1.5]
    np.testing.assert_allclose(
        noisy_max_probabilities(scores, "gumbel", 2.0), em_probabilities(scores, 2.0), atol=1e-9
    )


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", sorted(PEELING_CASES))
def test_gumbel_top_k_equals_peeling(case, method):
    scores, k, monotonic = PEELING_CASES[case]
    epsilon = 1.3
    draws = sample(
        selection.gumbel_top_k, jnp.asarray(scores), N, 4,
        k=k, epsilon=epsilon, monotonic=monotonic, method=method,
    )
    assert draws.shape == (N, k)
    tuples, probs = plackett_luce(scores, k, scale_of(epsilon, 1.0, monotonic))
    index = {t: i for i, t in enumerate(tuples)}
    codes = np.array([index[tuple(row)] for row in draws.tolist()])
    assert chi_square_pvalue(np.bincount(codes, minlength=len(tuples)), probs) > P_MIN


def test_gumbel_top_k_equals_peeling_x64(x64):
    scores, k, _ = PEELING_CASES["d5_k3_ties"]
    draws = sample(selection.gumbel_top_k, jnp.asarray(scores), N, 5, k=k, epsilon=0.7, sensitivity=2.0)
    tuples, probs = plackett_luce(scores, k, scale_of(0.7, 2.0, False))
    index = {t: i for i, t in enumerate(tuples)}
    codes = np.array([index[tuple(row)] for row in draws.tolist()])
    assert chi_square_pvalue(np.bincount(codes, minlength=len(tuples)), probs) > P_MIN


# ------------------------------------------------------------------------------ noisy top-k with gap


@pytest.mark.parametrize("separation", [0.0, 3.0])
def test_noisy_max_with_gap_joint_law_two_candidates(separation):
    """n = 2: P(j = 0, g >= t) = S(t - Delta) and P(j = 1, g >= t) = S(t + Delta) exactly."""
    epsilon = 1.0
    b = 2 / epsilon
    scores = jnp.asarray([separation * b, 0.0])
    index, gap = sample(selection.noisy_max_with_gap, scores, N, 6, epsilon=epsilon)
    assert (gap > 0).all()
    edges = np.array([0.0, 0.5, 1, 2, 3, 5, 8, 12, np.inf]) * b
    delta = separation * b
    observed, probs = [], []
    for j, shift in ((0, -delta), (1, delta)):
        tail = laplace_difference_tail(edges + shift, b)
        probs.extend(tail[:-1] - tail[1:])
        observed.extend(np.histogram(gap[index == j], edges)[0])
    assert chi_square_pvalue(observed, probs) > P_MIN


def test_noisy_top_k_gaps_of_equal_scores_are_renyi_spacings():
    """All scores equal: g_1..g_k are independent Exp with means b/i (exact, Renyi representation)."""
    k, epsilon = 10, 1.0
    b = 2 * k / epsilon
    _, gaps = sample(selection.noisy_top_k_with_gap, jnp.zeros(256), 10_000, 7, k=k, epsilon=epsilon)
    for i in range(k):
        assert stats.kstest(gaps[:, i], stats.expon(scale=b / (i + 1)).cdf).pvalue > P_MIN / k
    corr = np.corrcoef(gaps, rowvar=False)
    assert np.abs(corr[np.triu_indices(k, 1)]).max() < 0.05


def test_noisy_top_k_gaps_of_separated_scores(x64):
    """Separated scores: E g_i = true gap, Var g_i = 4b^2, Cov(g_i, g_i+1) = -2b^2."""
    k, epsilon = 4, 2.0
    b = k / epsilon  # monotonic
    scores = jnp.asarray([1000.0, 700.0, 450.0, 100.0, -200.0, -600.0])
    idx, gaps = sample(
        selection.noisy_top_k_with_gap, scores, 40_000, 8, k=k, epsilon=epsilon, monotonic=True
    )
    assert (idx == np.arange(k)).all()
    true_gaps = -np.diff(np.asarray(scores))[:k]
    se = np.sqrt(4 * b**2 / len(gaps))
    assert np.all(np.abs(gaps.mean(0) - true_gaps) < 5 * se)
    cov = np.cov(gaps, rowvar=False)
    np.testing.assert_allclose(np.diag(cov), 4 * b**2, rtol=0.06)
    np.testing.assert_allclose(np.diag(cov, 1), -2 * b**2, rtol=0.1)
    assert np.abs(np.diag(cov, 2)).max() < 0.15 * b**2


def test_noisy_top_k_with_gap_structure(float_dtype):
    scores = jnp.asarray(np.random.default_rng(1).normal(0, 3, 40), float_dtype)
    idx5, gaps5 = sample(selection.noisy_top_k_with_gap, scores, 50, 9, k=5, epsilon=5 / 3)
    idx3, gaps3 = sample(selection.noisy_top_k_with_gap, scores, 50, 9, k=3, epsilon=1.0)
    assert idx5.dtype == np.int32 and gaps5.dtype == float_dtype
    assert all(len(set(row)) == 5 for row in idx5.tolist()) and (gaps5 > 0).all()
    # Same keys and the same Laplace scale 2k/epsilon = 6: the k = 3 release is a prefix of the k = 5 one.
    np.testing.assert_array_equal(idx3, idx5[:, :3])
    np.testing.assert_allclose(gaps3, gaps5[:, :3], rtol=1e-5)
    index, gap = sample(selection.noisy_max_with_gap, scores, 50, 9, epsilon=1.0)
    idx1, gaps1 = sample(selection.noisy_top_k_with_gap, scores, 50, 9, k=1, epsilon=1.0)
    assert index.shape == gap.shape == (50,)
    np.testing.assert_array_equal(index, idx1[:, 0])
    np.testing.assert_array_equal(gap, gaps1[:, 0])


# ----------------------------------------------------------------------- equivalences and batching


def test_gumbel_top_k_with_k1_is_the_exponential_mechanism():
    scores = jnp.asarray(np.random.default_rng(2).normal(0, 2, 30))
    top = sample(selection.gumbel_top_k, scores, 200, 10, k=1, epsilon=0.5)
    np.testing.assert_array_equal(
        top[:, 0], sample(selection.exponential_mechanism, scores, 200, 10, epsilon=0.5)
    )
    np.testing.assert_array_equal(top[:, 0], sample(selection.report_noisy_max, scores, 200, 10, epsilon=0.5))


@pytest.mark.parametrize("noise", ["gumbel", "exponential", "laplace"])
def test_shift_invariance_is_exact(noise):
    """A common integer shift is removed exactly (integer arithmetic for counts): same key, same output."""
    counts = jnp.asarray(np.random.default_rng(3).integers(0, 50, 25), jnp.int32)
    for key in jax.random.split(jax.random.key(11), 3):
        a = selection.report_noisy_max(key, counts, 1.0, noise=noise, monotonic=True)
        b = selection.report_noisy_max(key, counts + 2**30, 1.0, noise=noise, monotonic=True)
        c = selection.report_noisy_max(
            key, counts.astype(jnp.uint32) + jnp.uint32(2**31), 1.0, noise=noise, monotonic=True
        )
        assert a == b == c
    key = jax.random.key(12)
    np.testing.assert_array_equal(
        selection.gumbel_top_k(key, counts, 4, 1.0), selection.gumbel_top_k(key, counts + 10**6, 4, 1.0)
    )


def test_permuting_candidates_permutes_outputs_in_law():
    """Relabelling the candidates relabels the output: P(top-2 = (2, 0)) is the same after relabelling."""
    scores = np.array([1.0, 0.0, 2.0, 0.5])
    perm = np.array([3, 1, 0, 2])  # new position of old candidate i is where perm == i
    draws = sample(selection.gumbel_top_k, jnp.asarray(scores[perm]), N, 13, k=2, epsilon=1.0)
    relabelled = perm[draws]
    tuples, probs = plackett_luce(scores, 2, 2.0)
    index = {t: i for i, t in enumerate(tuples)}
    codes = np.array([index[tuple(row)] for row in relabelled.tolist()])
    assert chi_square_pvalue(np.bincount(codes, minlength=len(tuples)), probs) > P_MIN


# With a named method a draw depends on the key only; "auto" (the default) picks its path by how the
# call is batched (tests/test_auto.py), so these pin the literal kernel.
MECHANISMS = {
    "exponential_mechanism": lambda k, s: selection.exponential_mechanism(k, s, 1.0, method="literal"),
    "rnm_exponential": lambda k, s: selection.report_noisy_max(k, s, 1.0, noise="exponential"),
    "rnm_laplace": lambda k, s: selection.report_noisy_max(k, s, 1.0, noise="laplace"),
    "gumbel_top_k": lambda k, s: selection.gumbel_top_k(k, s, 3, 1.0, monotonic=True, method="literal"),
    "noisy_top_k_with_gap": lambda k, s: selection.noisy_top_k_with_gap(k, s, 3, 1.0),
    "noisy_max_with_gap": lambda k, s: selection.noisy_max_with_gap(k, s, 1.0, monotonic=True),
}


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_vmap_and_jit_equal_python_loop(name, request):
    if "gap" in name:
        request.getfixturevalue("x64")
    fn = MECHANISMS[name]
    scores = jnp.asarray(np.random.default_rng(4).normal(0, 2, 12))
    keys = jax.random.split(jax.random.key(14), 3)
    batched = jax.jit(jax.vmap(fn, in_axes=(0, None)))(keys, scores)
    looped = [fn(k, scores) for k in keys]
    jit_fn = jax.jit(fn)
    jitted = [jit_fn(k, scores) for k in keys]
    for i in range(len(keys)):
        row = jax.tree.map(lambda x, i=i: x[i], batched)
        chex.assert_trees_all_close(row, looped[i], jitted[i], rtol=1e-6)


def test_integer_counts_use_the_default_float_dtype(float_dtype):
    counts = jnp.asarray([5, 9, 2, 7])
    _, gaps = selection.noisy_top_k_with_gap(jax.random.key(0), counts, 2, 1.0, monotonic=True)
    assert gaps.dtype == float_dtype


# ----------------------------------------------------------------------------------------- guarantees


def test_guarantees():
    assert selection.exponential_mechanism_guarantee(0.5) == RangeBounded(0.5)
    assert selection.exponential_mechanism_guarantee(0.5, monotonic=True, sensitivity=3.0) == RangeBounded(
        0.5
    )
    assert selection.report_noisy_max_guarantee(0.5) == RangeBounded(0.5)
    assert selection.report_noisy_max_guarantee(0.5, noise="exponential") == PureDP(0.5)
    assert selection.report_noisy_max_guarantee(0.5, noise="laplace") == PureDP(0.5)
    # Only the range-bounded (Gumbel) version gets the epsilon^2/8 zCDP conversion.
    assert selection.report_noisy_max_guarantee(0.5).to_zcdp() == ZCDP(0.5**2 / 8)
    assert selection.report_noisy_max_guarantee(0.5, noise="exponential").to_zcdp() == ZCDP(0.5**2 / 2)
    assert selection.gumbel_top_k_guarantee(10, 0.1).epsilon == 10 * 0.1
    assert selection.gumbel_top_k_guarantee(10, 0.1).to_zcdp() == ZCDP(10 * 0.1**2 / 8)
    assert selection.noisy_top_k_with_gap_guarantee(10, 0.7, monotonic=True) == PureDP(0.7)
    assert selection.noisy_max_with_gap_guarantee(0.7) == PureDP(0.7)
    assert selection.noisy_top_k_with_gap_scale(10, 0.7) == pytest.approx(20 / 0.7)
    assert selection.noisy_top_k_with_gap_scale(10, 0.7, monotonic=True, sensitivity=2.0) == pytest.approx(
        20 / 0.7
    )


# ------------------------------------------------------------------------------------------ bad input

SCORES = jnp.asarray([1.0, 2.0, 3.0])
KEY = jax.random.key(0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: selection.gumbel_top_k(KEY, SCORES, 4, 1.0), "k"),
        (lambda: selection.gumbel_top_k(KEY, SCORES, 0, 1.0), "k"),
        (lambda: selection.gumbel_top_k(KEY, SCORES, -1, 1.0), "k"),
        (lambda: selection.noisy_top_k_with_gap(KEY, SCORES, 3, 1.0), "k"),
        (lambda: selection.noisy_top_k_with_gap(KEY, SCORES, 0, 1.0), "k"),
        (lambda: selection.noisy_max_with_gap(KEY, SCORES[:1], 1.0), "at least 2"),
        (lambda: selection.exponential_mechanism(KEY, SCORES, 0.0), "epsilon"),
        (lambda: selection.exponential_mechanism(KEY, SCORES, -1.0), "epsilon"),
        (lambda: selection.exponential_mechanism(KEY, SCORES, float("inf")), "epsilon"),
        (lambda: selection.report_noisy_max(KEY, SCORES, 0.0, noise="laplace"), "epsilon"),
        (lambda: selection.gumbel_top_k(KEY, SCORES, 2, 0.0), "epsilon"),
        (lambda: selection.noisy_top_k_with_gap(KEY, SCORES, 1, -0.1), "epsilon"),
        (lambda: selection.exponential_mechanism(KEY, jnp.asarray([1.0, jnp.nan]), 1.0), "NaN"),
        (lambda: selection.gumbel_top_k(KEY, jnp.asarray([1.0, jnp.nan]), 1, 1.0), "NaN"),
        (lambda: selection.noisy_top_k_with_gap(KEY, jnp.asarray([1.0, jnp.nan, 2.0]), 1, 1.0), "NaN"),
        (lambda: selection.report_noisy_max(KEY, jnp.asarray([1.0, jnp.inf]), 1.0), "infinite"),
        (lambda: selection.exponential_mechanism(KEY, jnp.asarray([]), 1.0), "empty"),
        (lambda: selection.gumbel_top_k(KEY, jnp.zeros((0,)), 1, 1.0), "empty"),
        (lambda: selection.report_noisy_max(KEY, jnp.zeros((2, 3)), 1.0), "rank"),
        (lambda: selection.report_noisy_max(KEY, SCORES, 1.0, noise="gaussian"), "noise"),
        (lambda: selection.report_noisy_max(KEY, SCORES, 1.0, sensitivity=0.0), "sensitivity"),
        (lambda: selection.gumbel_top_k_guarantee(0, 1.0), "k"),
        (lambda: selection.exponential_mechanism_guarantee(0.0), "epsilon"),
        (lambda: selection.report_noisy_max_guarantee(1.0, noise="uniform"), "noise"),
        (lambda: selection.noisy_top_k_with_gap_guarantee(2, -1.0), "epsilon"),
    ],
)
def test_bad_input_is_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_wrong_types_are_refused():
    with pytest.raises(TypeError, match="k"):
        selection.gumbel_top_k(KEY, SCORES, 1.5, 1.0)
    with pytest.raises(TypeError, match="monotonic"):
        selection.exponential_mechanism(KEY, SCORES, 1.0, monotonic="yes")
    with pytest.raises(TypeError, match="monotonic"):  # a static option: a Python bool
        selection.gumbel_top_k(KEY, SCORES, 2, 1.0, monotonic=np.bool_(True))


def test_traced_epsilon_is_used_and_checked_in_the_graph():
    """A traced epsilon gives the eager release; NaN scores or a bad epsilon under jit give -1/NaN,
    never index 0 (argmax of NaN) or the first k indices (top_k of NaN), for every key."""
    keys = jax.random.split(KEY, 16)
    literal = jax.jit(
        jax.vmap(lambda k, s, e: selection.exponential_mechanism(k, s, e, method="literal"), (0, None, None))
    )
    np.testing.assert_array_equal(
        literal(keys, SCORES, 0.3),
        [selection.exponential_mechanism(key, SCORES, 0.3) for key in keys],
    )
    em = jax.jit(jax.vmap(selection.exponential_mechanism, in_axes=(0, None, None)))  # auto: the tree
    poisoned = jnp.asarray([1.0, jnp.nan, 2.0, 0.5])
    assert (np.asarray(em(keys, poisoned, 1.0)) == -1).all()
    assert (np.asarray(em(keys, SCORES, -1.0)) == -1).all()
    top = jax.jit(jax.vmap(lambda key, s: selection.gumbel_top_k(key, s, 3, 1.0), in_axes=(0, None)))
    assert (np.asarray(top(keys, poisoned)) == -1).all()
    gap = jax.vmap(lambda key, e: selection.noisy_top_k_with_gap(key, SCORES, 2, e), in_axes=(0, None))
    index, gaps = jax.jit(gap)(keys, jnp.nan)
    assert (np.asarray(index) == -1).all() and np.isnan(gaps).all()
