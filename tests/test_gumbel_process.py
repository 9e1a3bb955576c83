"""dpjax._src.gumbel_process and ``method="tree"`` of the selection kernels: the exact Plackett-Luce law of
the ranked top-k (enumeration of every ordered k-tuple, chi-square), the softmax law of the winner,
the law of the first two places at a medium size, and equality in law with the literal kernel."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import (
    LAW_CASES,
    P_MIN,
    PEELING_CASES,
    N,
    chi_square_pvalue,
    em_probabilities,
    plackett_luce,
    sample,
    scale_of,
)
from scipy import special, stats

from dpjax import selection
from dpjax._src import gumbel_process

TREE_PEELING_CASES = {
    **PEELING_CASES,
    "d7_k4_peaked": ([0.0, -30.0, 8.0, -1e4, 7.0, 9.5, 0.0], 4, True),
    "d8_k3_flat": ([1.0] * 8, 3, False),  # a full tree: no padding
    "d1_k1": ([2.0], 1, False),  # depth 0
}


def codes_of(draws, tuples):
    index = {t: i for i, t in enumerate(tuples)}
    return np.array([index[tuple(row)] for row in draws.tolist()])


@pytest.mark.parametrize("case", sorted(TREE_PEELING_CASES))
def test_tree_top_k_is_plackett_luce(case):
    scores, k, monotonic = TREE_PEELING_CASES[case]
    options = {"k": k, "epsilon": 1.3, "monotonic": monotonic, "method": "tree"}
    draws = sample(selection.gumbel_top_k, jnp.asarray(scores), N, 31, **options)
    assert draws.shape == (N, k) and draws.dtype == np.int32
    tuples, probs = plackett_luce(scores, k, scale_of(1.3, 1.0, monotonic))
    observed = np.bincount(codes_of(draws, tuples), minlength=len(tuples))
    if len(tuples) > 1:
        assert chi_square_pvalue(observed, probs) > P_MIN


def test_tree_top_k_is_plackett_luce_x64(x64):
    scores, k, _ = PEELING_CASES["d5_k3_ties"]
    draws = sample(
        selection.gumbel_top_k, jnp.asarray(scores), N, 32, k=k, epsilon=0.7, sensitivity=2.0, method="tree"
    )
    tuples, probs = plackett_luce(scores, k, scale_of(0.7, 2.0, False))
    assert chi_square_pvalue(np.bincount(codes_of(draws, tuples), minlength=len(tuples)), probs) > P_MIN


@pytest.mark.parametrize("case", sorted(LAW_CASES))
def test_tree_exponential_mechanism_law(case):
    utilities = jnp.asarray(LAW_CASES[case], jnp.float32)
    draws = sample(selection.exponential_mechanism, utilities, N, 33, epsilon=1.0, method="tree")
    probs = em_probabilities(LAW_CASES[case], 2.0)
    observed = np.bincount(draws, minlength=len(probs))
    assert len(observed) == len(probs) and observed[probs == 0].sum() == 0
    if len(probs) > 1:
        assert chi_square_pvalue(observed, probs) > P_MIN


def medium_scores():
    """300 candidates (padded to 512): a peaked head, a tied block and a long flat tail."""
    rng = np.random.default_rng(7)
    scores = np.concatenate([[6.0, 5.0, 5.0, 4.0], np.full(20, 2.0), rng.normal(-1.0, 1.0, 276)])
    return rng.permutation(scores).astype(np.float32)


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
def test_tree_first_two_places_at_medium_size():
    """P(o_1 = i, o_2 = j) = w_i w_j / (1 - w_i) over all 300 * 299 ordered pairs (small cells pooled)."""
    scores = medium_scores()
    draws = sample(selection.gumbel_top_k, jnp.asarray(scores), N, 34, k=5, epsilon=2.0, method="tree")
    assert (np.sort(draws, axis=1)[:, 1:] != np.sort(draws, axis=1)[:, :-1]).all()  # distinct
    w = em_probabilities(scores, 1.0)
    pairs = w[:, None] * w[None, :] / (1 - w[:, None])
    np.fill_diagonal(pairs, 0.0)
    observed = np.bincount(draws[:, 0] * len(w) + draws[:, 1], minlength=len(w) ** 2)
    keep = pairs.reshape(-1) > 0
    assert observed[~keep].sum() == 0
    assert chi_square_pvalue(observed[keep], pairs.reshape(-1)[keep]) > P_MIN


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
@pytest.mark.parametrize("place", [0, 4])
def test_tree_equals_literal_in_law_at_medium_size(place):
    """Two-sample chi-square (contingency table) of one place of the ranked top-5: tree against literal."""
    scores = jnp.asarray(medium_scores())
    options = {"k": 5, "epsilon": 2.0}
    tree = sample(selection.gumbel_top_k, scores, N, 35, method="tree", **options)[:, place]
    literal = sample(selection.gumbel_top_k, scores, N, 36, **options)[:, place]
    table = np.stack([np.bincount(tree, minlength=300), np.bincount(literal, minlength=300)])
    expected = table.sum(axis=0)
    table = np.concatenate([table[:, expected >= 20], table[:, expected < 20].sum(axis=1, keepdims=True)], 1)
    assert stats.chi2_contingency(table).pvalue > P_MIN


@pytest.mark.parametrize("spread", [0.0, 30.0])
def test_log_mass_tree_sums_and_splits(spread):
    """Every node's log-mass against the float64 log-sum of its leaves, the root's to a few ulps, and the
    split probabilities against the float64 ratio, within the module docstring's 2 L eps (M + 1)."""
    d, eps = 1000, np.finfo(np.float32).eps
    log_weights = np.random.default_rng(1).normal(0, spread, d).astype(np.float32)
    log_weights -= log_weights.max()
    tree = gumbel_process.log_mass_tree(jnp.asarray(log_weights))
    leaves = 1024
    padded = np.full(leaves, -np.inf)
    padded[:d] = log_weights
    exact = np.empty(2 * leaves)
    exact[leaves:] = padded
    for n in range(leaves - 1, 0, -1):
        exact[n] = np.logaddexp(exact[2 * n], exact[2 * n + 1])
    log_mass = np.asarray(tree.log_mass, np.float64)
    finite = np.isfinite(exact[1:])
    assert (np.isneginf(log_mass[1:]) == ~finite).all()
    bound = 10 * eps * (np.abs(exact[1:][finite]) + 1)
    assert (np.abs(log_mass[1:][finite] - exact[1:][finite]) <= bound).all()
    internal = np.arange(1, leaves)
    live = np.isfinite(exact[2 * internal]) | np.isfinite(exact[2 * internal + 1])
    with np.errstate(invalid="ignore"):  # -inf - -inf in the dead (all padding) nodes
        p_left = special.expit(exact[2 * internal] - exact[2 * internal + 1])[live]
    got = np.exp(-np.asarray(tree.split, np.float64)[1:][live])
    m = np.max(np.abs(exact[1:][finite]))
    assert (np.abs(got - p_left) <= 2 * 10 * eps * (m + 1) * p_left + 1e-300).all()


def test_tree_never_returns_padding_and_values_decrease():
    log_weights = jnp.asarray([0.0, -1e4, 3.0, -2.0, 1.0], jnp.float32)  # padded to 8 leaves
    keys = jax.random.split(jax.random.key(37), 2000)
    values, indices = jax.vmap(
        lambda key: gumbel_process.top_k(key, gumbel_process.log_mass_tree(log_weights), 5)
    )(keys)
    assert (np.sort(np.asarray(indices), axis=1) == np.arange(5)).all()
    assert (np.diff(np.asarray(values), axis=1) <= 0).all()


def test_tree_method_is_refused_with_other_noise():
    with pytest.raises(ValueError, match="noise must be 'gumbel'"):
        selection.report_noisy_max(jax.random.key(0), jnp.ones(3), 1.0, noise="laplace", method="tree")
    with pytest.raises(ValueError, match="method"):
        selection.gumbel_top_k(jax.random.key(0), jnp.ones(3), 2, 1.0, method="inverse_cdf")
