"""PIE-NI (Algorithm 4) and PIE-k (Algorithm 5): invariants, literal references, statistics, bad input.

Compilations are expensive on the shared CI machine, so the tests share a few configurations and run
each one vmapped over many keys, checking every invariant on every run.
"""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax._src.budgeting import pie, pie_kernel
from dpjax.budgeting import pie_k, pie_ni, split_schedule, tail_radius, user_noise

N, C, BETA0, RHO, TRIALS = 5000, 8, 0.1, 1e-4, 400
PHI = np.asarray(np.random.default_rng(0).normal(0, 300, N), np.float32)  # user-side scores, metres
# heterogeneous allotments; every fifth user takes no part (r = 0: not in G_0)
RHOS = np.where(np.arange(N) % 5 == 0, 0.0, RHO * (1 + np.arange(N) % 3)).astype(np.float32)
KEYS = jax.random.split(jax.random.key(42), TRIALS)


def _ni(key, phi=PHI, rho=RHOS, **kw):
    return pie_ni(key, phi, rho, c=C, beta0=BETA0, nu_low=0.0, nu_high=0.0, **kw)


@pytest.fixture(scope="module")
def ni_runs():
    return jax.tree.map(np.asarray, jax.jit(jax.vmap(_ni))(KEYS))


def _check_ni_invariants(res, c, participating):
    status, rounds, jhat = res.status, res.rounds.astype(int), int(res.rounds_run)
    assert 1 <= jhat <= c
    assert np.all((status == 0) == ~participating)  # S_0, S_1 and G_jhat partition G_0
    assert np.all(rounds[~participating] == 0) and np.all(rounds[participating] >= 1)
    assert np.all(rounds <= jhat)
    assert np.all(rounds[status == 3] == jhat)  # survivors released in every executed round
    if jhat < c:
        assert not np.any(status == 3)
    # G_j is nested: |G_{j-1}| = #users that released in round j
    counts = np.array([(rounds > j).sum() for j in range(c)])
    np.testing.assert_array_equal(res.active_counts, np.where(np.arange(c) < jhat, counts, 0))
    assert np.all(np.diff(counts) <= 0)


@pytest.mark.optimized  # its CPU goes into running compiled code (tests/conftest.py)
def test_pie_ni_invariants_on_every_run(ni_runs):
    for t in range(TRIALS):
        _check_ni_invariants(jax.tree.map(lambda a, t=t: a[t], ni_runs), C, RHOS > 0)


def test_pie_ni_misclassification_rate_within_beta0(ni_runs):
    """Lemma 5.2: P(some i in S_1 has phi >= 0 or some i in S_0 has phi <= 0) <= beta0."""
    wrong = ((ni_runs.status == 1) & (PHI >= 0)) | ((ni_runs.status == 2) & (PHI <= 0))
    failures = int(np.any(wrong, axis=1).sum())
    assert failures <= stats.binom.ppf(1 - 1e-4, TRIALS, BETA0)
    assert np.mean(ni_runs.status[:, RHOS > 0] != 3) > 0.1  # and it does eliminate


def test_pie_ni_half_width_is_lemma_6_1(ni_runs):
    _, cum = split_schedule(C)
    res = jax.tree.map(lambda a: a[0], ni_runs)
    e = res.rounds.astype(int)
    part = RHOS > 0
    beta = BETA0 / (C * res.active_counts[np.maximum(e - 1, 0)])
    expect = np.sqrt(2 * np.log(2 / beta)) / np.sqrt(2 * np.where(part, RHOS * cum[e], 1))
    np.testing.assert_allclose(res.half_width[part], expect[part], rtol=1e-5)
    assert np.all(np.isinf(res.half_width[~part]))


def test_charge_equals_the_noise_generated(ni_runs):
    """Rebuild every user's mean from the exposed per-round noise: exactly rounds_i releases at
    r_i frac_j each, so the ledger's debit r_i cumfrac[rounds_i] is what the noise cost."""
    res = jax.tree.map(lambda a: a[0], ni_runs)
    frac, cum = split_schedule(C)
    z = np.stack([np.asarray(user_noise(KEYS[0], j, N)) for j in range(C)])  # (c, n)
    e = res.rounds.astype(int)
    r_round = RHOS[None, :].astype(np.float64) * frac[:, None]
    used = np.arange(C)[:, None] < e[None, :]
    releases = PHI[None, :] + z / np.sqrt(2 * np.where(r_round > 0, r_round, 1))
    wsum = np.sum(np.where(used, r_round * releases, 0), axis=0)
    rbar = np.sum(np.where(used, r_round, 0), axis=0)
    np.testing.assert_allclose(rbar, RHOS * cum[e], rtol=1e-12)  # charge = budgets of generated noise
    part = RHOS > 0
    np.testing.assert_allclose(res.mean[part], wsum[part] / rbar[part], rtol=1e-4, atol=1e-2)
    assert np.all(res.mean[~part] == 0)
    charged = np.asarray(pie.charged(jax.tree.map(jnp.asarray, res), RHOS, C))
    np.testing.assert_allclose(charged, RHOS * cum[e], rtol=1e-6)
    assert np.all(charged <= RHOS)


def test_noise_is_fresh_across_rounds_and_users():
    key = jax.random.key(3)
    z0, z1 = np.asarray(user_noise(key, 0, N)), np.asarray(user_noise(key, 1, N))
    assert abs(np.corrcoef(z0, z1)[0, 1]) < 5 / np.sqrt(N)
    assert abs(np.corrcoef(z0[:-1], z0[1:])[0, 1]) < 5 / np.sqrt(N)  # neighboring users differ
    assert stats.kstest(z0, "norm").pvalue > 1e-4
    z_more = np.asarray(user_noise(key, 0, N + 1000))  # more users: user i's noise is unchanged
    np.testing.assert_array_equal(z_more[:N], z0)


def test_pie_ni_chunking_does_not_change_the_result(ni_runs):
    chunked = jax.jit(jax.vmap(lambda k: _ni(k, chunk_size=1100)))(KEYS[:2])  # 5 chunks, last shifted
    for a, b in zip(ni_runs, chunked, strict=True):
        np.testing.assert_array_equal(a[:2], np.asarray(b))


def test_no_possible_elimination_spends_everything_and_matches_the_baseline_law():
    """nu = (-inf, +inf): every user spends rho and the mean is N(x, 1/(2 rho)) (KS test)."""
    res = pie_ni(jax.random.key(9), PHI, RHOS, c=C, beta0=BETA0)
    part = RHOS > 0
    assert np.all(np.asarray(res.status)[part] == 3) and int(res.rounds_run) == C
    assert np.all(np.asarray(res.rounds)[part] == C)
    z = (np.asarray(res.mean) - PHI)[part] * np.sqrt(2 * RHOS[part])
    assert stats.kstest(z, "norm").pvalue > 1e-4


def test_one_sided_thresholds_never_fill_the_other_set():
    res = pie_ni(jax.random.key(1), PHI, RHOS, c=C, beta0=BETA0, nu_high=0.0)
    assert not np.any(np.asarray(res.status) == 1)
    res = pie_ni(jax.random.key(1), PHI, RHOS, c=C, beta0=BETA0, nu_low=0.0)
    assert not np.any(np.asarray(res.status) == 2)


def test_pie_ni_in_float64(x64):
    res = _ni(jax.random.key(2), PHI.astype(np.float64))
    assert res.mean.dtype == jnp.float64
    res = jax.tree.map(np.asarray, res)
    _check_ni_invariants(res, C, RHOS > 0)
    wrong = ((res.status == 1) & (PHI >= 0)) | ((res.status == 2) & (PHI <= 0))
    assert not np.any(wrong)


def test_analyst_side_never_sees_raw_data():
    params = set(inspect.signature(pie_kernel._analyst_round).parameters)
    assert not params & {"x", "data", "phi", "points"}


# --- PIE-k ---------------------------------------------------------------------------------------

K, NK, CK = 5, 2000, 16
DIST = np.asarray(np.abs(np.random.default_rng(2).normal(0, 30, NK)), np.float32)
K_KEYS = jax.random.split(jax.random.key(0), 300)


def _k(key, dist=DIST, **kw):
    return pie_k(key, dist, 2.0, k=K, c=CK, beta0=BETA0, **kw)


@pytest.fixture(scope="module")
def k_runs():
    return jax.tree.map(np.asarray, jax.jit(jax.vmap(_k))(K_KEYS))


def test_pie_k_coverage_and_invariants(k_runs):
    """Lemma 5.3: J* (the k smallest) stays in G_j w.p. >= 1 - beta0; |G_j| >= k always."""
    runs, trials = k_runs, len(K_KEYS)
    true = np.argsort(DIST)[:K]
    missed = int(np.sum(np.any(runs.status[:, true] != 3, axis=1)))
    assert missed <= stats.binom.ppf(1 - 1e-4, trials, BETA0)
    survivors = (runs.status == 3).sum(axis=1)
    assert np.all(survivors >= K)
    assert np.mean(survivors) < NK / 4  # it does eliminate
    for t in range(trials):
        jhat = runs.rounds_run[t]
        counts = runs.active_counts[t]
        assert np.all(counts[:jhat] > K) and np.all(np.diff(counts[:jhat]) <= 0)
        assert jhat == CK or survivors[t] == K
        rounds = runs.rounds[t]
        np.testing.assert_array_equal(counts[:jhat], [(rounds > j).sum() for j in range(jhat)])


def keep_k_smallest(estimate, half_width, active, k: int):
    """PIE-k's elimination rule (Algorithm 5, lines 8-14) in the vectorised form the kernel uses.

    Keeps ``{i active : est_i - h_i <= U_k}`` with ``U_k`` the k-th smallest upper end ``est + h``
    among the active users (needs more than k active). Equivalent to the literal rule "the k smallest
    upper ends plus every interval meeting the k-th one's interval", ties included: a user whose
    interval lies wholly left of ``I_{t_k}`` has an upper end below ``U_k`` and is one of the k.
    """
    upper = jnp.where(active, estimate + half_width, jnp.inf)
    u_k = -jax.lax.top_k(-upper, k)[0][k - 1]
    return active & (estimate - half_width <= u_k)


def _literal_keep(est, h, k):
    """Algorithm 5, lines 8-14, literally (one arbitrary argmin among ties)."""
    order = np.lexsort((np.random.default_rng(0).random(est.size), est + h))
    t = order[:k]
    tk = t[-1]
    keep = np.zeros(est.size, bool)
    keep[t] = True
    meets = (est - h <= est[tk] + h[tk]) & (est[tk] - h[tk] <= est + h)
    return keep | meets


def test_vectorised_k_rule_equals_literal_algorithm_5():
    rng = np.random.default_rng(3)
    rule = jax.jit(keep_k_smallest, static_argnames="k")
    for _ in range(300):
        n = int(rng.integers(2, 32))
        k = min(int(rng.choice([1, 2, 3, 5, 8])), n - 1)
        est = rng.integers(0, 8, n).astype(np.float32)  # ties on purpose
        h = rng.integers(0, 3, n).astype(np.float32)
        pad = 32 - n  # one shape for every instance: inactive padding
        got = rule(
            jnp.asarray(np.pad(est, (0, pad))),
            jnp.asarray(np.pad(h, (0, pad))),
            jnp.asarray(np.arange(32) < n),
            k=k,
        )
        np.testing.assert_array_equal(np.asarray(got)[:n], _literal_keep(est, h, k))
        assert not np.any(np.asarray(got)[n:])


def test_pie_k_chunking_does_not_change_the_result(k_runs):
    chunked = jax.jit(jax.vmap(lambda k: _k(k, chunk_size=300)))(K_KEYS[:2])
    for a, b in zip(k_runs, chunked, strict=True):
        np.testing.assert_array_equal(a[:2], np.asarray(b))


def test_pie_k_with_at_most_k_participants_runs_no_round():
    rho = np.zeros(NK, np.float32)
    rho[:K] = 0.05
    res = pie_k(jax.random.key(0), DIST, rho, k=K, c=CK, beta0=BETA0)
    assert int(res.rounds_run) == 0 and np.all(np.asarray(res.rounds) == 0)
    assert np.all(np.asarray(res.status)[:K] == 3)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(c=0), "c must be"),
        (dict(beta0=0.0), "beta0"),
        (dict(beta0=1.0), "beta0"),
        (dict(nu_low=1.0, nu_high=0.0), "nu_low"),
        (dict(nu_low=np.nan), "NaN"),
        (dict(split="odd"), "split"),
        (dict(noise_mode="mid"), "noise_mode"),
    ],
)
def test_pie_ni_rejects_bad_parameters(kwargs, match):
    args = dict(c=4, beta0=0.1, nu_low=0.0, nu_high=0.0) | kwargs
    with pytest.raises(ValueError, match=match):
        pie_ni(jax.random.key(0), PHI[:10], RHO, **args)


def test_pie_rejects_bad_data_and_budgets():
    with pytest.raises(ValueError, match="NaN"):
        pie_ni(jax.random.key(0), np.array([1.0, np.nan]), RHO, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="rho"):
        pie_ni(jax.random.key(0), PHI[:10], 0.0, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="rho"):
        pie_ni(jax.random.key(0), PHI[:10], -1.0, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="rho"):
        pie_ni(jax.random.key(0), PHI[:10], np.full(9, RHO), c=2, beta0=0.1)
    with pytest.raises(ValueError, match="rho"):
        pie_ni(jax.random.key(0), PHI[:3], np.array([RHO, -RHO, RHO]), c=2, beta0=0.1)
    with pytest.raises(ValueError, match="data"):
        pie_ni(jax.random.key(0), PHI[:10].reshape(5, 2), RHO, c=2, beta0=0.1)  # no score_fn: 1-D
    with pytest.raises(ValueError, match="k must be <= 10"):
        pie_k(jax.random.key(0), PHI[:10], RHO, k=11, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="k must be >= 1"):
        pie_k(jax.random.key(0), PHI[:10], RHO, k=0, c=2, beta0=0.1)
    with pytest.raises(ValueError, match="rho"):
        pie.pie_guarantee([0.0, 0.0])


def test_guarantee_is_the_worst_case_allotment():
    assert pie.pie_guarantee([1e-4, 3e-4, 0.0]).rho == 3e-4


def test_tail_radius_special_forms():
    assert float(tail_radius(2, 0.1)) == pytest.approx(np.sqrt(2 * np.log(10)))
    assert float(tail_radius(1, 0.1)) == pytest.approx(np.sqrt(2 * np.log(20)))
    d, b = 784, 0.01
    assert float(tail_radius(d, b)) == pytest.approx(
        np.sqrt(d + 2 * np.sqrt(d * np.log(1 / b)) + 2 * np.log(1 / b)), rel=1e-6
    )
