"""The joint top-k's histogram path for integer counts (dpjax._src.topk.joint_histogram): its table
of (error, first row at the error) weights against the enumeration of all k-sequences, its draws
against the exact law and against the literal sampler, the fallback where the window does not hold
the law, and the static window."""

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxpr_walk import operand_shapes
from laws import P_MIN, chi_square_pvalue, sample
from scipy import stats

from dpjax import selection
from dpjax._src.topk import joint, joint_histogram

CASES = [  # crowded and tied integer counts, d = 5
    (np.array([3, 7, 7, 1, 4], np.int32), 2),
    (np.array([2, 2, 2, 0, 2], np.int32), 3),
    (np.array([-3, 5, 5, 5, -1], np.int32), 3),
    (np.array([9, 0, 1, 1, 8], np.int32), 3),
]


def enumerated(counts, k, scale):
    """Every k-sequence with its error ``max_i (c_(i) - c_{s_i})``, its first row at that error, and
    ``P(S) ∝ exp(-error / scale)``."""
    counts = np.asarray(counts, np.int64)
    top = np.sort(counts)[::-1][:k]
    sequences = list(itertools.permutations(range(len(counts)), k))
    gaps = np.array([top - counts[list(s)] for s in sequences])
    errors = gaps.max(axis=1)
    first = np.argmax(gaps == errors[:, None], axis=1)
    p = np.exp(-(errors - errors.min()) / scale)
    return sequences, errors, first, p / p.sum()


@functools.partial(jax.jit, static_argnames=("k", "block"))
def _table(counts, scale, *, k, block):
    """The law of the threshold's cell over a window of 16 count values (softmax of its 16
    log-weights), and whether its tail is negligible."""
    hist = joint_histogram._histogram(counts, k, 16, block)
    logits, negligible = joint_histogram._log_weights(hist, counts.shape[0], k, scale)
    return jax.nn.softmax(logits), negligible


def _enumerated_table(counts, k, scale):
    """``P(cell e) ∝ N(e) (exp(-e/b) - exp(-(e+1)/b))``, the last cell ``N(15) exp(-15/b)``, with
    ``N(e)`` the number of k-sequences of error at most ``e``, enumerated."""
    _, errors, _, _ = enumerated(counts, k, scale)
    e = np.arange(16)
    below = np.array([np.sum(errors <= x) for x in e])
    width = np.where(e < 15, -np.expm1(-1.0 / scale), 1.0)
    law = below * np.exp(-e / scale) * width
    return law / law.sum()


@pytest.mark.parametrize(("counts", "k"), CASES)
@pytest.mark.parametrize("block", [2, None])
def test_error_table_is_the_enumerated_law(counts, k, block):
    """The threshold's cells have the law of the joint mechanism's auxiliary threshold exactly (the
    per-block counts and the sort build the same histogram)."""
    table, negligible = _table(jnp.asarray(counts), jnp.float32(1.5), k=k, block=block)
    assert bool(negligible)  # every error is in the window
    np.testing.assert_allclose(np.asarray(table), _enumerated_table(counts, k, 1.5), atol=1e-6)


def test_every_count_in_the_window_is_not_every_error():
    """Every count lies within the 16 values below ``c_(k)`` but ``c_(1) - c_(d) = 3000``: at scale
    1000 the sequences without item 0 first carry 40% of the law and lie beyond the window, so the
    tail is not negligible (the fallback draws); at scale 0.05 it is."""
    counts = jnp.asarray(np.array([3000, 0, 1, 2, 2], np.int32))
    assert not bool(_table(counts, jnp.float32(1000.0), k=2, block=2)[1])
    assert bool(_table(counts, jnp.float32(0.05), k=2, block=2)[1])


def test_error_table_in_float64(x64):
    counts, k = np.array([3, 7, 7, 1, 4], np.int64), 3
    table, _ = _table(jnp.asarray(counts), jnp.float64(0.7), k=k, block=2)
    np.testing.assert_allclose(np.asarray(table), _enumerated_table(counts, k, 0.7), rtol=1e-12, atol=1e-15)


def _histogram_method(key, scores, *, k, epsilon, monotonic, method, window):
    """The histogram methods with a head of 2 items, too narrow for these counts: the threshold
    sampler hands the draw to the histogram (with the literal fallback when ``window`` is None)."""
    scale = jnp.asarray((2.0 if monotonic else 4.0) / epsilon, jnp.result_type(float))
    return joint._joint_top_k(key, scores, scale, k=k, method=method, width=2, window=window)


@pytest.mark.parametrize(
    ("counts", "k", "method", "window", "epsilon"),
    [
        (*CASES[0], "histogram", None, 2.0),  # the default window, the literal fallback compiled in
        (*CASES[3], "histogram", 512, 2.0),
        # a wide window (scale 100): the first, of 1024 values, does not hold the law, the second does
        (np.array([3000, 0, 1, 2, 2990], np.int32), 2, "histogram_tree", 32768, 0.02),
    ],
)
def test_law_over_all_k_sequences(counts, k, method, window, epsilon):
    sequences, _, _, law = enumerated(counts, k, 2.0 / epsilon)
    options = {"k": k, "epsilon": epsilon, "monotonic": True, "method": method, "window": window}
    out = sample(_histogram_method, jnp.asarray(counts), 40_000, seed=20 + k, **options)
    index = {s: i for i, s in enumerate(sequences)}
    observed = np.bincount([index[tuple(row)] for row in out], minlength=len(sequences))
    assert chi_square_pvalue(observed, law) > P_MIN


def test_same_law_as_the_literal_sampler_on_crowded_counts():
    """Zipf counts of 300 items crowded near the k-th largest (the head does not suffice): the
    default (the histogram under vmap) against the literal ``blocks`` sampler, two samples, on the
    error and on the first item."""
    counts = jnp.asarray(np.floor(40.0 / np.arange(1, 301) ** 1.1).astype(np.int32))
    k, options = 4, {"k": 4, "epsilon": 1.0, "monotonic": True}
    top = np.sort(np.asarray(counts))[::-1][:k]
    draws = [sample(selection.joint_top_k, counts, 20_000, seed=5, **options)]
    draws.append(sample(selection.joint_top_k, counts, 20_000, seed=6, method="blocks", **options))
    for statistic in (lambda out: np.max(top - np.asarray(counts)[out], axis=1), lambda out: out[:, 0]):
        values = [statistic(out) for out in draws]
        cells = np.unique(np.concatenate(values))
        table = np.array([[np.sum(v == c) for c in cells] for v in values])
        table = table[:, table.sum(axis=0) >= 20]  # sparse cells dropped (both rows alike)
        assert stats.chi2_contingency(table).pvalue > P_MIN


def test_fallback_where_the_window_does_not_hold_the_law():
    """A window of 8 count values: with counts spread beyond it and a wide scale the tail is not
    negligible and the fallback runs; with every count inside it the histogram draws."""

    def fallback(key, scores, scale):
        return jnp.full(2, -7, jnp.int32)

    @jax.jit
    def draw(counts, scale):
        return joint_histogram.sample(
            jax.random.key(0),
            counts,
            scale,
            k=2,
            window=8,
            draw=(lambda x: x, joint._gumbel_argmax),
            fallback=fallback,
        )

    spread, inside = jnp.array([100, 50, 0, 60, 3]), jnp.array([7, 5, 0, 6, 3])
    np.testing.assert_array_equal(draw(spread, 5.0), [-7, -7])
    assert set(np.asarray(draw(inside, 5.0))) <= set(range(5))
    assert set(np.asarray(draw(spread, 0.01))) == {0, 3}  # the tail below exp(-200)


def test_static_window():
    """:func:`window_for` covers ``b (log prod (d - i) + 201)``, or gives None past the largest."""
    d, k, b = 10**5, 10, 2.0
    need = b * (sum(math.log(d - i) for i in range(k)) + 201)
    window = joint_histogram.window_for(d, k, b)
    assert window >= need and window & (window - 1) == 0 and window < 2 * need
    assert joint_histogram.window_for(d, k, 200.0) is None


@pytest.mark.parametrize("method", ["histogram", "histogram_tree"])
def test_traced_epsilon_and_float_scores(method):
    counts = jnp.array([5, 100, 7, 99, 3], jnp.int32)
    release = jax.jit(
        lambda e: selection.joint_top_k(jax.random.key(2), counts, 2, e, monotonic=True, method=method)
    )
    assert set(np.asarray(release(50.0))) == {1, 3}
    np.testing.assert_array_equal(release(-1.0), [-1, -1])
    with pytest.raises(ValueError, match="integer"):
        selection.joint_top_k(jax.random.key(0), counts.astype(jnp.float32), 2, 1.0, method=method)


def test_vmap_over_keys_builds_the_histogram_once():
    """``auto`` under vmap over 7 keys: the histogram's scatter-add, the sort and the top-k see
    the unbatched counts."""
    counts = jnp.asarray(np.floor(40.0 / np.arange(1, 301) ** 1.1).astype(np.int32))
    keys = jax.random.split(jax.random.key(0), 7)
    jaxpr = jax.make_jaxpr(jax.vmap(lambda key: selection.joint_top_k(key, counts, 3, 1.0)))(keys)
    scatters = operand_shapes(jaxpr.jaxpr, ("scatter-add",))
    shapes = operand_shapes(jaxpr.jaxpr, ("sort", "top_k", "scatter-add"))
    assert scatters and (300,) in shapes and all(7 not in shape for shape in shapes), shapes
