"""The joint exponential mechanism for top-k (Gillenwater, Joseph, Munoz Medina, Ribero Diaz 2022):
exact law over all k-sequences on tiny inputs, the law of its utility at 10^6 draws on realistic
counts, k = 1 as the exponential mechanism, guarantee, bad input, dtypes, data work once."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_walk import operand_shapes
from laws import P_MIN, chi_square_pvalue, sample

from dpjax import selection
from dpjax._src.topk import joint
from dpjax.accounting import RangeBounded

JOINT = selection.joint_top_k


def sequence_law(scores, k, epsilon, monotonic):
    """``P(S) ∝ exp(-epsilon max_i (c_(i) - c_{s_i}) / (2 Delta_u))`` over every k-sequence."""
    scores = np.asarray(scores, np.float64)
    top = np.sort(scores)[::-1][:k]
    scale = (2.0 if monotonic else 4.0) / epsilon
    sequences = list(itertools.permutations(range(len(scores)), k))
    logits = np.array([-np.max(top - scores[list(s)]) / scale for s in sequences])
    p = np.exp(logits - logits.max())
    return sequences, p / p.sum()


def _check_law(out, sequences, law):
    index = {s: i for i, s in enumerate(sequences)}
    observed = np.bincount([index[tuple(row)] for row in out], minlength=len(sequences))
    assert chi_square_pvalue(observed, law) > P_MIN


@pytest.mark.parametrize(
    ("scores", "k", "monotonic", "method"),
    [
        (np.array([3, 7, 7, 1, 4], np.int32), 2, False, "blocks"),  # a tie among the top
        (np.array([3, 7, 7, 1, 4], np.int32), 3, True, "auto"),  # the tree under vmap
        (np.array([0.5, -1.0, 2.25, 2.0, 0.0], np.float32), 3, False, "blocks"),  # real scores
        (np.array([0.5, -1.0, 2.25, 2.0, 0.0], np.float32), 3, False, "threshold"),  # whole head
    ],
)
def test_law_over_all_k_sequences_of_five_items(scores, k, monotonic, method):
    sequences, law = sequence_law(scores, k, 2.0, monotonic)
    options = {"k": k, "epsilon": 2.0, "monotonic": monotonic, "method": method}
    out = sample(JOINT, jnp.asarray(scores), 200_000, seed=k, **options)
    _check_law(out, sequences, law)


def _pruned(key, scores, *, k, epsilon, monotonic, method, width):
    """The threshold samplers with a first head of ``width`` items."""
    scale = jnp.asarray((2.0 if monotonic else 4.0) / epsilon, jnp.result_type(float))
    return joint._joint_top_k(key, scores, scale, k=k, method=method, width=width)


@pytest.mark.parametrize(
    ("scores", "k", "monotonic", "method", "width"),
    [
        (np.array([3, 7, 7, 1, 4], np.int32), 2, False, "threshold", 2),
        (np.array([3, 7, 7, 1, 4], np.int32), 3, True, "threshold_tree", 4),
        (np.array([0.5, -1.0, 2.25, 2.0, 0.0], np.float32), 3, False, "threshold", 4),
        (np.array([300, 0, 296, -400, 298], np.int32), 2, True, "threshold_tree", 3),  # head enough
    ],
)
def test_law_when_the_first_head_is_too_narrow(scores, k, monotonic, method, width):
    """A head of ``width`` < d items: where its tail bound is not negligible, the literal sampler
    (under ``lax.cond``); in the last case it is (``U = 298``), and the head alone is drawn from."""
    sequences, law = sequence_law(scores, k, 2.0, monotonic)
    options = {"k": k, "epsilon": 2.0, "monotonic": monotonic, "method": method, "width": width}
    _check_law(sample(_pruned, jnp.asarray(scores), 50_000, seed=10 + k, **options), sequences, law)


def test_law_when_the_first_head_is_too_narrow_in_float64(x64):
    scores = np.array([3, 7, 7, 1, 4], np.int64)
    sequences, law = sequence_law(scores, 2, 1.0, True)
    options = {"k": 2, "epsilon": 1.0, "monotonic": True, "method": "threshold_tree", "width": 3}
    _check_law(sample(_pruned, jnp.asarray(scores), 50_000, seed=3, **options), sequences, law)


@pytest.mark.parametrize("method", ["threshold", "threshold_tree"])
def test_traced_epsilon(method):
    counts = jnp.array([5, 100, 7, 99, 3], jnp.int32)
    release = jax.jit(lambda e: JOINT(jax.random.key(2), counts, 2, e, monotonic=True, method=method))
    assert set(np.asarray(release(50.0))) == {1, 3}
    np.testing.assert_array_equal(release(-1.0), [-1, -1])


def test_k_equal_one_is_the_exponential_mechanism():
    scores = np.array([4.0, 1.0, 3.0, 0.0], np.float32)
    sequences, law = sequence_law(scores, 1, 3.0, True)
    weights = np.exp(3.0 * (scores - scores.max()) / 2)
    np.testing.assert_allclose(law, weights / weights.sum())
    out = sample(
        selection.joint_top_k, jnp.asarray(scores), 100_000, seed=1, k=1, epsilon=3.0, monotonic=True
    )
    _check_law(out, sequences, law)


def utility_law(counts, k, epsilon, monotonic):
    """The exact law of ``D(S) = max_i (c_(i) - c_{s_i})`` for counts by the paper's counting
    (Lemma 3.7), independently of the library: the sequences whose rows r stay within
    ``n_r(t) = #{j: c_(r) - c_(j) <= t}`` number ``prod_r (n_r(t) - r)``; differences give ``= t``."""
    c = np.sort(np.asarray(counts, np.int64))[::-1]
    values = np.unique((c[:k, None] - c[None, :]).ravel())
    values = values[values >= 0]
    within = np.array(
        [np.prod([max(np.sum(c[r] - c <= t) - r, 0) for r in range(k)], dtype=np.float64) for t in values]
    )
    exactly = np.diff(np.concatenate([[0.0], within]))
    scale = (2.0 if monotonic else 4.0) / epsilon
    log_w = np.log(np.maximum(exactly, 1e-300)) - values / scale
    p = np.where(exactly > 0, np.exp(log_w - log_w.max()), 0.0)
    return values, p / p.sum()


@pytest.mark.optimized
def test_utility_law_at_a_million_draws_on_realistic_counts():
    """Zipf-like counts of 2000 items, k = 5: the sampled sequences' utility against its exact law
    (the first stage, the worst entry, and the second, a sequence that has it)."""
    counts = np.floor(2000.0 / np.arange(1, 2001) ** 1.1).astype(np.int32)
    k, epsilon = 5, 4.0
    values, law = utility_law(counts, k, epsilon, monotonic=True)
    out = sample(
        selection.joint_top_k, jnp.asarray(counts), 1_000_000, seed=7, k=k, epsilon=epsilon, monotonic=True
    )
    top = np.sort(counts)[::-1][:k]
    assert np.all(np.sort(out, axis=1)[:, 1:] != np.sort(out, axis=1)[:, :-1])  # distinct items
    utility = np.max(top[None, :] - counts[out], axis=1)
    observed = np.bincount(np.searchsorted(values, utility), minlength=len(values))
    assert np.all(values[np.searchsorted(values, utility)] == utility)
    assert chi_square_pvalue(observed, law) > P_MIN


def test_vmap_over_keys_builds_the_entry_table_once():
    scores = jnp.arange(30)
    keys = jax.random.split(jax.random.key(0), 7)
    jaxpr = jax.make_jaxpr(jax.vmap(lambda k: selection.joint_top_k(k, scores, 3, 1.0, method="tree")))(keys)
    shapes = operand_shapes(jaxpr.jaxpr, ("sort",))
    assert shapes and all(shape in ((30,), (90,)) for shape in shapes), shapes


def test_vmap_over_keys_ranks_and_sorts_once():
    """``auto`` under vmap (the threshold sampler with the Gumbel process): the head's partial
    top-k and the tail's sort see the unbatched scores (d = 300 > the head's 64 items)."""
    scores = jnp.arange(300)
    keys = jax.random.split(jax.random.key(0), 7)
    jaxpr = jax.make_jaxpr(jax.vmap(lambda k: selection.joint_top_k(k, scores, 3, 1.0)))(keys)
    shapes = operand_shapes(jaxpr.jaxpr, ("sort", "top_k"))
    assert (300,) in shapes and all(7 not in shape for shape in shapes), shapes


def test_float64_and_integer_counts(x64):
    counts = np.array([5, 100, 7, 99, 3], np.int64)
    out = selection.joint_top_k(jax.random.key(0), counts, 2, 50.0, monotonic=True)
    assert out.dtype == jnp.int32 and set(np.asarray(out)) == {1, 3}
    real = selection.joint_top_k(jax.random.key(1), counts.astype(np.float64), 2, 50.0)
    assert set(np.asarray(real)) == {1, 3}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"k": 6}, "k"),
        ({"k": 0}, "k"),
        ({"sensitivity": 0.0}, "sensitivity"),
        ({"scores": np.array([1.0, np.nan, 0.0, 0.0, 0.0])}, "scores"),
        ({"scores": np.zeros((2, 3))}, "scores"),
        ({"method": "sort"}, "method"),
    ],
)
def test_bad_input_raises_before_randomness(kwargs, match):
    args = {"scores": np.arange(5.0), "k": 2, "epsilon": 1.0} | kwargs
    with pytest.raises(ValueError, match=match):
        selection.joint_top_k(jax.random.key(0), **args)


def test_guarantee_is_one_range_bounded_selection():
    assert selection.joint_top_k_guarantee(10, 0.7) == RangeBounded(0.7)
    assert [g.epsilon for g in selection.joint_top_k_guarantee(3, np.array([0.5, 1.0]))] == [0.5, 1.0]
    with pytest.raises(ValueError):
        selection.joint_top_k_guarantee(0, 1.0)
