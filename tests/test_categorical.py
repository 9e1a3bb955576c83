"""dpjax._src.categorical and ``method="inverse_cdf"`` of the exponential mechanism: the exact law by
chi-square against the softmax probabilities, and the two-level table's probabilities against them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import LAW_CASES, P_MIN, N, chi_square_pvalue, em_probabilities, sample

from dpjax import selection
from dpjax._src import categorical
from dpjax._src.numerics import ceil_div


@pytest.mark.parametrize("case", sorted(LAW_CASES))
def test_inverse_cdf_exponential_mechanism_law(case):
    utilities = jnp.asarray(LAW_CASES[case], jnp.float32)
    draws = sample(selection.exponential_mechanism, utilities, N, 21, epsilon=1.0, method="inverse_cdf")
    assert draws.dtype == np.int32
    probs = em_probabilities(LAW_CASES[case], 2.0)
    observed = np.bincount(draws, minlength=len(probs))
    assert len(observed) == len(probs)  # never an index past the candidates (the padding)
    assert observed[probs == 0].sum() == 0
    if len(probs) > 1:
        assert chi_square_pvalue(observed, probs) > P_MIN


def test_inverse_cdf_law_in_x64_with_report_noisy_max(x64):
    scores = jnp.asarray([2.0, 1.0, 0.0, 1.5, 2.0, -3.0])
    options = {"epsilon": 0.8, "monotonic": True, "method": "inverse_cdf"}
    draws = sample(selection.report_noisy_max, scores, N, 22, **options)
    assert chi_square_pvalue(np.bincount(draws, minlength=6), em_probabilities(scores, 1 / 0.8)) > P_MIN


@pytest.mark.parametrize("spread", [0.0, 3.0, 30.0])
def test_two_level_table_keeps_every_candidate_at_a_million(spread):
    """Each candidate's table probability P(b) P(i | b) against p_i = exp(l_i)/sum: in float32 a single
    cumulative sum over 10^6 equal weights is off by about 5% per candidate; the two levels keep
    |P(i) - p_i| <= 4 eps (p_i / p_b + p_b + eps), as the module docstring states."""
    d, eps = 10**6, np.finfo(np.float32).eps
    log_weights = np.random.default_rng(0).normal(0, spread, d).astype(np.float32)
    table = categorical.log_cdf_table(jnp.asarray(log_weights))
    size = table.block_size
    blocks = ceil_div(d, size)
    block_mass = np.diff(np.asarray(table.blocks[:blocks], np.float64), prepend=0.0)
    within = np.diff(np.asarray(table.within, np.float64).reshape(blocks, size), axis=1, prepend=0.0)
    got = (block_mass[:, None] * within).reshape(-1)
    assert (got[d:] == 0).all()  # the padding
    exact = np.exp(log_weights.astype(np.float64) - log_weights.max())
    exact /= exact.sum()
    exact_block = np.repeat(np.pad(exact, (0, blocks * size - d)).reshape(blocks, size).sum(axis=1), size)[:d]
    assert (block_mass >= 0).all() and (within >= 0).all()  # monotone tables
    assert (np.abs(got[:d] - exact) <= 4 * eps * (exact / exact_block + exact_block + eps)).all()
    if spread == 0.0:
        np.testing.assert_allclose(got[:d], 1 / d, rtol=1e-3)


def test_inverse_cdf_is_built_once_per_data_and_matches_separate_calls():
    scores = jnp.asarray(np.random.default_rng(5).normal(0, 2, 37), jnp.float32)
    keys = jax.random.split(jax.random.key(23), 5)
    draw = jax.vmap(
        lambda key, s: selection.exponential_mechanism(key, s, 1.0, method="inverse_cdf"), in_axes=(0, None)
    )
    jaxpr = str(jax.make_jaxpr(draw)(keys, scores))
    assert "cumsum" in jaxpr and "f32[5,37]" not in jaxpr and "f32[5,64]" not in jaxpr  # no per-key table
    np.testing.assert_array_equal(
        jax.jit(draw)(keys, scores),
        [selection.exponential_mechanism(key, scores, 1.0, method="inverse_cdf") for key in keys],
    )


def test_bad_method_is_refused():
    scores = jnp.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="method"):
        selection.exponential_mechanism(jax.random.key(0), scores, 1.0, method="alias")
    with pytest.raises(ValueError, match="gumbel"):
        selection.report_noisy_max(jax.random.key(0), scores, 1.0, noise="laplace", method="inverse_cdf")
    with pytest.raises(ValueError, match="power of two"):
        categorical.log_cdf_table(scores, block_size=3)
