"""The top-k kernels against their closed-form laws (chi-square), invariants, batching and inputs."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from laws import P_MIN, chi_square_pvalue
from scipy import stats
from topk_laws import (
    BOTTOM,
    fixed_threshold_law,
    limited_domain_law,
    private_kbar_law,
    ranked,
)

from dpjax import noise, topk
from dpjax._src.topk.histogram import top_counts
from dpjax._src.topk.laplace import laplace_limited_domain

N_DRAWS = 100_000


def draws(mechanism, counts, *args, n=N_DRAWS, seed=0, **kwargs):
    """``n`` independent releases as one call over a batch of ``n`` copies of ``counts`` (one
    compilation per shape: the tests stay fast on a loaded machine)."""
    batch = jnp.tile(jnp.asarray(counts), (n, 1))
    return jax.tree.map(np.asarray, mechanism(jax.random.key(seed), batch, *args, **kwargs))


def tally(rows, to_outcome):
    """``{outcome: count}`` from the distinct rows of a 2-D integer array."""
    unique, counts = np.unique(rows, axis=0, return_counts=True)
    return {to_outcome(row): int(c) for row, c in zip(unique, counts, strict=True)}


def sequences(res):
    """Kernel outputs as oracle outcomes: the returned ids, then BOTTOM if ⊥ was returned."""
    rows = np.column_stack([res.indices, res.num_returned, res.bottom])
    k = res.indices.shape[-1]
    return tally(rows, lambda r: (*(int(i) for i in r[: r[k]]), *((BOTTOM,) if r[k + 1] else ())))


def chi_square(counts, law):
    """Chi-square p-value of ``{outcome: count}`` against ``{outcome: probability}``."""
    assert set(counts) <= set(law), f"impossible outcomes {set(counts) - set(law)}"
    outcomes = sorted(law, key=str)
    return chi_square_pvalue([counts.get(o, 0) for o in outcomes], [law[o] for o in outcomes])


# -- distribution -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_limited_domain_equals_peeling_with_bottom(float_dtype):
    # Spec §9.3.3 (counts permuted, with ties): 17 outcomes, against Algorithm 3's closed form.
    counts, eps, delta = [9, 6, 10, 7, 9], 0.7, 0.2
    res = draws(topk.limited_domain, counts, 2, 4, eps, delta)
    assert chi_square(sequences(res), limited_domain_law(counts, 2, 4, eps, delta)) > P_MIN


@pytest.mark.slow
@pytest.mark.parametrize(
    ("counts", "k", "kbar", "cap"),
    [
        ([3, 3, 3, 3, 2, 1], 3, 3, 2),  # flat top, restricted sensitivity
        ([4, 1], 2, 3, None),  # fewer than kbar + 1 items: zero-count padding ids 2, 3
    ],
)
def test_limited_domain_law_edge_cases(counts, k, kbar, cap):
    eps, delta = 0.7, 0.2
    res = draws(topk.limited_domain, counts, k, kbar, eps, delta, max_contributions=cap)
    law = limited_domain_law(counts, k, kbar, eps, delta, max_contributions=cap)
    assert chi_square(sequences(res), law) > P_MIN


@pytest.mark.slow
def test_strictly_limited_domain_law():
    counts, eps, delta = [5, 2, 4, 2, 2, 0], 0.6, 0.3
    res = draws(topk.strictly_limited_domain, counts, 2, 4, eps, delta)
    assert chi_square(sequences(res), limited_domain_law(counts, 2, 4, eps, delta, strict=True)) > P_MIN


@pytest.mark.slow
def test_private_kbar_law(float_dtype):
    counts, eps, delta = [9, 8, 4, 4, 3, 0, 0], 0.8, 0.1
    res = draws(topk.private_kbar, counts, 1, 4, eps, delta)
    rows = np.column_stack([res.kbar, res.indices, res.bottom])
    samples = tally(rows, lambda r: (int(r[0]), (int(r[1]),) if r[1] >= 0 else (BOTTOM,)))
    assert chi_square(samples, private_kbar_law(counts, 1, 4, eps, delta)) > P_MIN


@pytest.mark.slow
def test_fixed_threshold_law(float_dtype):
    counts, eps, delta = [6, 1, 5, 1, 4, 0], 0.9, 0.2
    res = draws(topk.fixed_threshold, counts, 3, eps, delta)
    samples = tally(res.indices, lambda r: frozenset(int(i) for i in r if i >= 0))
    assert chi_square(samples, fixed_threshold_law(counts, 3, eps, delta)) > P_MIN


@pytest.mark.slow
@pytest.mark.parametrize("base", [10_000_000, 2**30])
def test_large_counts_keep_float32_precision(base):
    # Counts near 10^7 (below 2^24: float32 selection keys) and 2^30 (native int32 selection) are
    # beyond float32's resolution for noise of scale ~1: the kernel works with exact integer gaps to
    # h_(kbar+1), so the law is the one of the small counts.
    small = [9, 6, 10, 7, 9]
    res = draws(topk.limited_domain, np.add(small, base, dtype=np.int32), 2, 4, 0.7, 0.2, n=50_000)
    assert chi_square(sequences(res), limited_domain_law(small, 2, 4, 0.7, 0.2)) > P_MIN


def test_top_counts_equal_lax_top_k_for_integer_counts():
    """Integer counts are ranked as float32 keys when all are below 2^24 and natively otherwise;
    both give lax.top_k's ids and values (ties to the lower index)."""
    rng = np.random.default_rng(4)
    small = jnp.asarray(rng.integers(0, 4, (50, 300)), jnp.int32).at[3, 7].set(5)
    counts = small.at[3, 7].set(2**24 + 3)
    for hist in (counts, small):
        ids, values = jax.jit(top_counts, static_argnums=1)(hist, 41)
        ref_values, ref_ids = jax.lax.top_k(hist, 41)
        assert np.array_equal(ids, ref_ids) and np.array_equal(values, ref_values)
    assert int(values[3, 0]) == 5 and int(ref_ids[3, 0]) == 7


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
@pytest.mark.slow
def test_threshold_tail_rate_in_float32():
    # k = 1 over kbar tied items with Delta = 1: an item wins iff max_i G_i - G_bot > eps + ln(1/delta)
    # = 12.5, in the Gumbel tail; P[first != ⊥] = kbar / (kbar + e^12.5) exactly.
    kbar, eps, n, tail = 1_000, 1.0, 10_000, 12.5
    zeros = np.zeros(kbar + 1, np.int32)
    res = draws(topk.limited_domain, zeros, 1, kbar, eps, math.exp(eps - tail), n=n, max_contributions=1)
    p = kbar / (kbar + math.exp(tail))
    assert stats.binomtest(int(np.sum(res.num_returned)), n, p).pvalue > P_MIN


def test_kernels_draw_tail_exact_noise(monkeypatch):
    # The ⊥ comparisons live in the noise tails: every draw must come from dpjax.noise in its
    # exact-tail mode ("high"), never from a truncated float32 sampler.
    modes = []

    def spy(sampler):
        def wrapped(*args, **kwargs):
            modes.append((sampler.__name__, kwargs.get("mode", "high")))
            return sampler(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(noise, "gumbel", spy(noise.gumbel))
    monkeypatch.setattr(noise, "laplace", spy(noise.laplace))
    counts = jnp.asarray([7, 3, 5, 1, 2, 2, 8, 4, 4, 4, 4])  # a shape no other test uses: forces a trace
    key = jax.random.key(3)
    for call in (
        lambda: topk.limited_domain(key, counts, 2, 5, 0.3, 0.01),
        lambda: topk.strictly_limited_domain(key, counts, 2, 5, 0.3, 0.01),
        lambda: topk.private_kbar(key, counts, 2, 5, 0.3, 0.01),
        lambda: topk.fixed_threshold(key, counts, 5, 0.3, 0.01),
    ):
        jax.eval_shape(call)  # traces without compiling
    assert modes == [("gumbel", "high")] * 3 + [("laplace", "high")]


# -- invariants -------------------------------------------------------------------------------------


def _ranks(counts):
    return {i: r for r, (_, i) in enumerate(ranked(list(counts), len(counts)))}


def test_invariants_on_random_histograms():
    rng = np.random.default_rng(1)
    d, k, kbar = 25, 5, 8
    batch = rng.integers(0, 12, (400, d)) * rng.integers(1, 4, (400, 1))
    key = jax.random.key(7)
    for strict, res in (
        (False, topk.limited_domain(key, batch, k, kbar, 0.5, 1e-3)),
        (True, topk.strictly_limited_domain(key, batch, k, kbar, 0.5, 1e-3)),
    ):
        res = jax.tree.map(np.asarray, res)
        assert np.all((0 <= res.num_returned) & (res.num_returned <= k))
        assert np.array_equal(res.bottom, res.num_returned < k)
        assert np.array_equal(res.outcomes, np.minimum(res.num_returned + 1, k))
        for counts, row, n in zip(batch, res.indices, res.num_returned, strict=True):
            rank = _ranks(counts)
            h_next = ranked(list(counts), kbar + 1)[kbar][0]
            assert np.all(row[n:] == -1) and len(set(row[:n])) == n
            assert all(rank[i] < kbar for i in row[:n])  # from the true top-kbar
            assert not strict or all(counts[i] > h_next for i in row[:n])
        assert 0 < np.mean(res.num_returned) < k  # both regimes occur on this batch


def test_kbar_equal_k_returns_only_true_top_k():
    res = draws(topk.limited_domain, [5, 5, 4, 3, 3, 3, 1], 3, 3, 2.0, 0.3, n=2000)
    assert set(res.indices[res.indices >= 0].tolist()) <= {0, 1, 2}


def test_private_kbar_and_fixed_threshold_invariants():
    counts = np.array([30, 2, 25, 3, 3, 20, 0, 1])
    res = draws(topk.private_kbar, counts, 2, 5, 0.5, 1e-2, n=2000)
    assert np.all((2 <= res.kbar) & (res.kbar <= 5))
    rank = _ranks(counts)
    for row, n, kb in zip(res.indices, res.num_returned, res.kbar, strict=True):
        assert all(rank[i] < kb for i in row[:n]) and np.all(row[n:] == -1)
    assert np.array_equal(res.outcomes, res.num_returned + res.bottom + 1)
    fixed = draws(topk.fixed_threshold, counts, 4, 0.5, 1e-2, n=2000)
    for row, n in zip(fixed.indices, fixed.num_returned, strict=True):
        assert np.all(np.diff(row[:n]) > 0) and np.all(row[n:] == -1)
        assert set(row[:n].tolist()) <= {0, 2, 5}  # strictly above h_(kbar+1) = 3


def test_separated_histogram_returns_all_k():
    # Lemma 8.1(2): h_(k) - h_(kbar+1) >= 1 + ln(kbar/delta)/eps + ln(k/beta)/eps => P[n = k] >= 1 - beta.
    eps, delta, beta, k, kbar = 1.0, 1e-6, 1e-3, 3, 6
    gap = math.ceil(1 + math.log(kbar / delta) / eps + math.log(k / beta) / eps)
    counts = [60 + gap, 59 + gap, 58 + gap, 60, 59, 58, 57, 56]
    res = draws(topk.limited_domain, counts, k, kbar, eps, delta, n=5000)
    assert np.array_equal(res.indices[0], [0, 1, 2]) or res.num_returned[0] == k
    assert np.mean(res.num_returned == k) >= 1 - 3 * beta


def test_threshold_offset_golden_values():
    # Spec §3.1 worked magnitudes of h_bot - h_(kbar+1).
    assert topk.threshold_offset(100, 1.0, 1e-6) == pytest.approx(19.42, abs=5e-3)
    assert topk.threshold_offset(100, 0.1, 1e-6) == pytest.approx(185.2, abs=5e-2)
    assert topk.threshold_offset(100, 1.0, 1e-6, max_contributions=1) == pytest.approx(14.82, abs=5e-3)
    assert topk.threshold_offset(1000, 0.5, 1e-8, max_contributions=5) == pytest.approx(41.06, abs=5e-3)


# -- batching ---------------------------------------------------------------------------------------


def test_vmap_over_keys_and_histograms_matches_loop():
    rng = np.random.default_rng(2)
    batch = jnp.asarray(rng.integers(0, 50, (6, 40)))
    keys = jax.random.split(jax.random.key(5), 6)
    batched = jax.jit(jax.vmap(lambda key, c: topk.limited_domain(key, c, 4, 10, 0.3, 1e-4)))(keys, batch)
    for b in range(6):
        single = topk.limited_domain(keys[b], batch[b], 4, 10, 0.3, 1e-4)
        for field in topk.TopKResult._fields:
            assert np.array_equal(getattr(batched, field)[b], getattr(single, field))


def test_private_kbar_vmap_matches_loop():
    # Dynamic kbar is handled by masks: a vmapped batch equals the individual calls bit for bit.
    rng = np.random.default_rng(3)
    batch = jnp.asarray(rng.integers(0, 20, (4, 12)), jnp.float32)
    keys = jax.random.split(jax.random.key(6), 4)
    batched = jax.vmap(lambda key, c: topk.private_kbar(key, c, 2, 6, 0.4, 1e-3))(keys, batch)
    for b in range(4):
        single = topk.private_kbar(keys[b], batch[b], 2, 6, 0.4, 1e-3)
        for field in topk.PrivateKbarResult._fields:
            assert np.array_equal(getattr(batched, field)[b], getattr(single, field))


def test_accuracy_lemma_8_1():
    # Lemma 8.1(1): P[some returned i has h_i < h_(k) - ln(k kbar/beta)/eps] <= beta.
    eps, delta, beta, k, kbar = 0.5, 1e-3, 0.05, 3, 10
    counts = np.array([40, 30, 30, 29, 28, 20, 20, 19, 18, 17, 3])  # 17 < h_(k) - alpha = 17.7
    alpha = math.log(k * kbar / beta) / eps
    res = draws(topk.limited_domain, counts, k, kbar, eps, delta, n=4000)
    bad = np.any((res.indices >= 0) & (counts[np.maximum(res.indices, 0)] < 30 - alpha), axis=-1)
    assert stats.binomtest(int(bad.sum()), len(bad), beta, alternative="greater").pvalue > P_MIN


def test_leading_batch_axis_gives_independent_queries():
    counts = jnp.tile(jnp.asarray([9, 6, 10, 7, 9]), (4000, 1))
    res = topk.limited_domain(jax.random.key(0), counts, 2, 4, 0.7, 0.2)
    assert res.indices.shape == (4000, 2) and res.bottom.shape == (4000,)
    rate = float(np.mean(np.asarray(res.indices[:, 0]) == -1))
    law = limited_domain_law([9, 6, 10, 7, 9], 2, 4, 0.7, 0.2)
    assert stats.binomtest(round(rate * 4000), 4000, law[(BOTTOM,)]).pvalue > P_MIN


def test_noisy_scores_are_not_returned():
    res = topk.limited_domain(jax.random.key(0), [3, 2, 1], 1, 2, 1.0, 0.1)
    assert set(res._fields) == {"indices", "num_returned", "bottom"}
    assert all(jnp.issubdtype(v.dtype, jnp.integer) or v.dtype == jnp.bool_ for v in res)


# -- bad input --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 5, "kbar": 4}, "k must be <= kbar"),
        ({"k": 0}, "k must be"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"delta": -0.1}, "delta"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"counts": [3.0, float("nan"), 1.0]}, "NaN"),
        ({"counts": [3, -1, 2]}, "non-negative"),
        ({"counts": [3.5, 1.0]}, "integer-valued"),
        ({"counts": 7}, "at least one axis"),
        ({"counts": []}, "empty"),
        ({"max_contributions": 0}, "max_contributions"),
    ],
)
def test_bad_input(kwargs, match):
    args = {"counts": [5, 3, 1], "k": 2, "kbar": 2, "epsilon": 1.0, "delta": 1e-3} | kwargs
    with pytest.raises(ValueError, match=match):
        topk.limited_domain(jax.random.key(0), **args)


def test_bad_input_variants():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="k must be <= kbar_max"):
        topk.private_kbar(key, [3, 2, 1], 4, 3, 1.0, 0.1)
    with pytest.raises(ValueError, match="delta"):
        topk.strictly_limited_domain(key, [3, 2, 1], 1, 2, 1.0, 1.5)
    with pytest.raises(ValueError, match="non-negative"):
        topk.fixed_threshold(key, [3, -2, 1], 2, 1.0, 0.1)
    # k and kbar fix the output shapes: they stay static (epsilon, delta and Delta may be traced).
    with pytest.raises(TypeError, match="k must be a concrete integer"):
        jax.jit(lambda k: topk.limited_domain(key, [3, 2, 1], k, 2, 1.0, 0.1))(1)
    with pytest.raises(TypeError, match="kbar must be a concrete integer"):
        jax.jit(lambda kbar: topk.fixed_threshold(key, [3, 2, 1], kbar, 1.0, 0.1))(2)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, bool])
def test_traced_negative_counts_mark_every_mechanism(dtype, request):
    """The sign of traced integer counts is read off the top counts (a negative count ranks first
    by its unsigned bits): a negative count anywhere, in any row, on the blocked path (d = 8192) or
    not, marks the output; valid counts give what the eager call gives."""
    if dtype is np.int64:
        request.getfixturevalue("x64")
    key = jax.random.key(3)
    rng = np.random.default_rng(5)
    mechanisms = {
        "limited_domain": lambda c: topk.limited_domain(key, c, 3, 5, 1.0, 1e-3),
        "strictly_limited_domain": lambda c: topk.strictly_limited_domain(key, c, 3, 5, 1.0, 1e-3),
        "private_kbar": lambda c: topk.private_kbar(key, c, 2, 5, 1.0, 1e-3),
        "fixed_threshold": lambda c: topk.fixed_threshold(key, c, 4, 1.0, 1e-3),
        "laplace_limited_domain": lambda c: laplace_limited_domain(
            key, c, 2, 5, 1.0, 1e-3, max_contributions=1
        ),
    }
    for d in (7, 8192):
        counts = rng.integers(0, 2 if dtype is bool else 100, (2, d)).astype(dtype)
        for name, mechanism in mechanisms.items():
            eager, traced = mechanism(counts), jax.jit(mechanism)(counts)
            for a, b in zip(jax.tree.leaves(eager), jax.tree.leaves(traced), strict=True):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
            if dtype is bool:
                continue
            bad = counts.copy()
            bad[1, d // 2] = -1
            res = jax.jit(mechanism)(bad)
            assert np.all(np.asarray(res.indices) == -1) and np.all(np.asarray(res.num_returned) == -1), name


def test_checkify_names_negative_traced_counts():
    from jax.experimental import checkify

    from dpjax._src.validation import checkify_checks

    with checkify_checks():
        release = jax.jit(
            checkify.checkify(lambda c: topk.limited_domain(jax.random.key(0), c, 2, 3, 1.0, 0.1))
        )
        err, _ = release(jnp.asarray([5, -1, 3, 2], jnp.int32))
    assert err.get().startswith("counts must be non-negative")


# ------------------------------------------------------------------ the closed-form laws themselves


def test_laws_sum_to_one():
    for law in (
        limited_domain_law([3, 1, 4, 1, 5], 3, 4, 0.7, 0.1),
        limited_domain_law([3, 1, 4, 1, 5], 2, 3, 0.7, 0.1, strict=True, max_contributions=1),
        limited_domain_law([2, 2], 2, 3, 1.0, 0.3),
        private_kbar_law([9, 7, 7, 2, 1, 0], 2, 4, 0.5, 0.05),
        fixed_threshold_law([9, 7, 7, 2, 1, 0], 3, 0.5, 0.05),
    ):
        assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
        assert min(law.values()) >= 0


def test_spec_example_bottom_first():
    # h = [10, 9, 9, 7], h_(kbar+1) = 6, k = 2, eps = 0.7, delta = 0.2: 17 outcomes.
    law = limited_domain_law([10, 9, 9, 7, 6], 2, 4, 0.7, 0.2)
    assert len(law) == 17
    assert law[(BOTTOM,)] == pytest.approx(0.53653, abs=5e-6)


def test_flat_histogram_bottom_first():
    # All counts equal => P[first = ⊥] = 1 / (1 + kbar delta e^-eps / min(Delta, kbar)).
    eps, delta, kbar = 0.5, 0.01, 5
    law = limited_domain_law([4] * 8, 2, kbar, eps, delta, max_contributions=2)
    assert law[(BOTTOM,)] == pytest.approx(1 / (1 + kbar * delta * math.exp(-eps) / 2), rel=1e-12)
