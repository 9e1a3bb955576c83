"""Property tests of the top-k selections on tiny inputs (hypothesis): whatever the scores (ties,
signs, spreads) and key, the released indices are distinct and in range, in decreasing noisy order,
and the gaps are non-negative.

Each release is one function jitted once at a fixed shape (8 scores, k = 3) with the key, the scores
and epsilon as arguments, so hypothesis's examples reuse one compiled program per mechanism.
"""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpjax import selection

N, K = 8, 3
CHEAP = settings(max_examples=40, deadline=None, derandomize=True)

SCORE_POOL = st.floats(-1e4, 1e4, width=32)
SCORES = st.lists(SCORE_POOL, min_size=1, max_size=3).flatmap(
    lambda pool: st.lists(st.sampled_from(pool), min_size=N, max_size=N)  # few values: many ties
) | st.lists(SCORE_POOL, min_size=N, max_size=N)
EPSILON = st.floats(2.0**-10, 2.0**10, width=32)
SEED = st.integers(0, 2**31 - 1)


def _release(fn):
    return jax.jit(lambda seed, scores, epsilon: fn(jax.random.key(seed), scores, epsilon))


GUMBEL_TOP_K = {
    method: _release(lambda key, s, e, method=method: selection.gumbel_top_k(key, s, K, e, method=method))
    for method in ("literal", "tree")
}
TOP_K_WITH_GAP = _release(lambda key, s, e: selection.noisy_top_k_with_gap(key, s, K, e))


def _distinct_in_range(indices):
    indices = np.asarray(indices)
    assert indices.shape == (K,) and len(set(indices.tolist())) == K
    assert np.all((0 <= indices) & (indices < N))


@CHEAP
@given(SEED, SCORES, EPSILON)
def test_gumbel_top_k_indices_are_distinct_and_in_range(seed, scores, epsilon):
    for release in GUMBEL_TOP_K.values():
        _distinct_in_range(release(seed, jnp.asarray(scores, jnp.float32), epsilon))


@CHEAP
@given(SEED, SCORES, EPSILON)
def test_noisy_top_k_with_gap_indices_are_distinct_and_gaps_non_negative(seed, scores, epsilon):
    indices, gaps = TOP_K_WITH_GAP(seed, jnp.asarray(scores, jnp.float32), epsilon)
    _distinct_in_range(indices)
    assert np.all(np.asarray(gaps) >= 0)


@CHEAP
@given(SEED, st.permutations(range(N)))
def test_with_negligible_noise_the_true_top_k_is_released_with_its_gaps(seed, order):
    """Scores 0, 100, ..., 700 in any order at epsilon 1e6 (noise scale ~1e-5): the release is the true
    ranking, and each gap is the score difference to the next one (100)."""
    scores = jnp.asarray(order, jnp.float32) * 100
    best = np.argsort(-np.asarray(scores))[:K]
    for release in GUMBEL_TOP_K.values():
        np.testing.assert_array_equal(release(seed, scores, 1e6), best)
    indices, gaps = TOP_K_WITH_GAP(seed, scores, 1e6)
    np.testing.assert_array_equal(indices, best)
    np.testing.assert_allclose(gaps, 100.0, rtol=1e-3)
