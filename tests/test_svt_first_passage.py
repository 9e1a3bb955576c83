"""Gumbel AboveThreshold by first passage (``method="first_passage"``): the halting law against Durfee's
Lemma 3.3 (exact, float64) by chi-square, equality in law with the literal kernel, and bad input."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import P_MIN, chi_square_pvalue
from scipy import stats
from svt_laws import gumbel_halting_log_probabilities, halting_histogram

from dpjax import svt

TRIALS = 100_000
CASES = {  # queries, threshold, epsilon
    "mixed": ([-1.5, 0.5, -0.5, 1.0, 0.0, 2.0], 1.0, 0.8),
    "far_above": ([60.0, 55.0, 70.0], 0.0, 1.0),  # halts at 0 up to ~e^-55
    "far_below": ([-40.0, -35.0, -30.0, -38.0, 2.0], 0.0, 1.0),  # mostly the last query or none
    "ties": ([1.0, 1.0, 1.0, 1.0, -1.0, 1.0], 1.0, 0.5),
    "ramp_300": (list(np.linspace(-20.0, 5.0, 300)), 0.0, 0.7),
    "all_below": ([-5.0] * 40, 0.0, 1.0),  # -1 often
}


@functools.cache
def _batched(method, epsilon):
    def release(key, queries, threshold):
        return svt.above_threshold(key, queries, threshold, epsilon, epsilon, noise="gumbel", method=method)

    return jax.jit(jax.vmap(release, in_axes=(0, None, None)))


def sample(method, queries, threshold, epsilon, seed, trials=TRIALS):
    keys = jax.random.split(jax.random.key(seed), trials)
    return np.asarray(_batched(method, epsilon)(keys, jnp.asarray(queries), threshold))


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


def test_first_passage_equals_literal_in_law():
    """Two-sample chi-square (contingency table) on a 2000-query stream, halting indices pooled in
    cells of expected count >= 20."""
    queries = np.random.default_rng(3).normal(-4.0, 2.0, 2000).astype(np.float32)
    fast = halting_histogram(sample("first_passage", queries, 1.0, 1.0, 43, 50_000), 2000)
    literal = halting_histogram(sample("literal", queries, 1.0, 1.0, 44, 50_000), 2000)
    table = np.stack([fast, literal])
    big = table.sum(axis=0) >= 20
    table = np.concatenate([table[:, big], table[:, ~big].sum(axis=1, keepdims=True)], axis=1)
    assert stats.chi2_contingency(table).pvalue > P_MIN


def test_first_passage_refuses_other_noise_and_checks_traced_budgets():
    queries = jnp.arange(5.0)
    with pytest.raises(ValueError, match="first_passage"):
        svt.above_threshold(jax.random.key(0), queries, 2.0, 1.0, 1.0, method="first_passage")
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
