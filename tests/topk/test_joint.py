"""The joint exponential mechanism for top-k (Gillenwater, Joseph, Munoz Medina, Ribero Diaz 2022):
exact law over all k-sequences on tiny inputs, the law of its utility at 10^6 draws on realistic
counts, k = 1 as the exponential mechanism, guarantee, bad input, dtypes, data work once."""

import itertools

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from laws import P_MIN, chi_square_pvalue, sample

from dpjax import selection
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
    ],
)
def test_law_over_all_k_sequences_of_five_items(scores, k, monotonic, method):
    sequences, law = sequence_law(scores, k, 2.0, monotonic)
    options = {"k": k, "epsilon": 2.0, "monotonic": monotonic, "method": method}
    out = sample(JOINT, jnp.asarray(scores), 200_000, seed=k, **options)
    _check_law(out, sequences, law)


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


def _sort_operand_shapes(jaxpr):
    shapes = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "sort":
            shapes += [v.aval.shape for v in eqn.invars]
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            shapes += _sort_operand_shapes(sub)
    return shapes


def test_vmap_over_keys_builds_the_entry_table_once():
    scores = jnp.arange(30)
    keys = jax.random.split(jax.random.key(0), 7)
    jaxpr = jax.make_jaxpr(jax.vmap(lambda k: selection.joint_top_k(k, scores, 3, 1.0)))(keys)
    shapes = _sort_operand_shapes(jaxpr.jaxpr)
    assert shapes and all(shape in ((30,), (90,)) for shape in shapes), shapes


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
