"""Per-user filters, the eq. (10) approximate-GP filter, the ledger, splits, lambda and Algorithm 3."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpjax._src.accounting.per_user import approx_gp_epsilon, approx_gp_rho_star
from dpjax._src.budgeting import filters
from dpjax._src.budgeting.multi_query import allotment, gamma_schedule, run_multi_query
from dpjax._src.budgeting.range_count import range_count
from dpjax._src.budgeting.splits import running_mean_weights
from dpjax.accounting import BudgetExceededError, PerUserLedger
from dpjax.budgeting import split_schedule, tail_radius

# --- eq. (10) -------------------------------------------------------------------------------------


def test_approx_gp_epsilon_matches_spec_values_and_closed_form():
    rho = np.geomspace(1e-4, 10, 200)
    eps = approx_gp_epsilon(rho, 1e-6, 1.0)
    assert np.all(np.diff(eps) > 0)
    assert np.all(eps <= rho + 2 * np.sqrt(rho * np.log(1e6)) + 1e-12)
    assert approx_gp_epsilon(1e-4, 1e-6, 1.0) == pytest.approx(0.0572, abs=5e-4)
    assert approx_gp_epsilon(1.0, 1e-6, 1.0) == pytest.approx(8.017, abs=5e-4)


def _literal_eq10(rho, delta, lam):
    """min over a fine grid of s of max(g_delta(s) sqrt(rho), s Lambda rho): a literal reading."""
    s = 1 + np.geomspace(1e-8, 2 / delta - 2 - 1e-9, 400_000)
    g = s / (s - 1) * 2 * np.sqrt(np.log(2 / ((s + 1) * delta)))
    return np.min(np.maximum(g * np.sqrt(rho), s * lam * rho))


@pytest.mark.parametrize(("rho", "delta", "lam"), [(1e-3, 1e-5, 1.0), (0.5, 1e-6, 2.0), (3.0, 1e-3, 0.5)])
def test_approx_gp_epsilon_equals_literal_minimisation(rho, delta, lam):
    assert approx_gp_epsilon(rho, delta, lam) == pytest.approx(_literal_eq10(rho, delta, lam), rel=1e-4)


def test_rho_star_is_the_filter_capacity():
    budgets = np.array([0.05, 1.0, 4.0])
    cap = approx_gp_rho_star(budgets, 1e-6, 1.0)
    assert np.all(approx_gp_epsilon(cap, 1e-6, 1.0) <= budgets)
    assert np.all(approx_gp_epsilon(cap * (1 + 1e-6), 1e-6, 1.0) > budgets)


def test_approx_gp_filter_step_equals_eq10_rule():
    rng = np.random.default_rng(0)
    budget, delta, lam = 1.0, 1e-6, 1.0
    state = filters.init_filter(jnp.full(50, budget))
    total = np.zeros(50)
    halted = np.zeros(50, bool)
    for _ in range(6):
        req = rng.uniform(0, 0.008, 50) * (rng.random(50) < 0.8)
        released, state = filters.approx_gp_filter_step(state, jnp.asarray(req), delta, lam)
        literal_ok = approx_gp_epsilon(total + req, delta, lam) <= budget
        expect = ~halted & (req > 0) & literal_ok
        # the f32 kernel and the f64 literal rule may disagree only at the exact capacity boundary
        boundary = np.abs(total + req - approx_gp_rho_star(budget, delta, lam)) < 1e-6
        assert np.all((np.asarray(released) == expect) | boundary)
        halted |= (req > 0) & ~np.asarray(released)
        total = np.where(np.asarray(released), total + req, total)
    assert np.any(halted) and np.any(~halted)


# --- Algorithm 1 filter semantics ----------------------------------------------------------------


def test_filter_step_matches_literal_algorithm_1():
    rng = np.random.default_rng(1)
    n, budget = 40, 1.0
    state = filters.init_filter(jnp.full(n, budget))
    spent, halted = np.zeros(n), np.zeros(n, bool)
    for _ in range(20):
        req = rng.choice([0.0, 1 / 16, 1 / 8, 5 / 16], size=n)  # dyadic: float32 sums are exact
        released, state = filters.filter_step(state, jnp.asarray(req, jnp.float32))
        for i in range(n):
            if halted[i] or req[i] == 0:
                ok = False
            elif spent[i] + req[i] <= budget:
                ok = True
                spent[i] += req[i]
            else:
                ok = False
                halted[i] = True
            assert bool(released[i]) == ok
        np.testing.assert_array_equal(np.asarray(state.spent), spent)
        assert np.all(np.asarray(state.spent) <= budget)
    np.testing.assert_array_equal(np.asarray(state.halted), halted)
    # once halted, no further charges even for tiny requests
    before = np.asarray(state.spent)
    released, after = filters.filter_step(state, jnp.full(n, 1e-9, jnp.float32))
    assert not np.any(np.asarray(released)[halted])
    np.testing.assert_array_equal(np.asarray(after.spent)[halted], before[halted])


def test_filter_rejects_bad_budget():
    with pytest.raises(ValueError, match="budget"):
        filters.init_filter(jnp.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="request"):
        filters.filter_step(filters.init_filter(jnp.ones(2)), jnp.array([-1.0, 0.0]))


# --- the ledger ----------------------------------------------------------------------------------


def test_ledger_reserves_worst_case_and_debits_actual_cost():
    ledger = PerUserLedger(1e-4, n=4)
    _, cum = split_schedule(4)
    grant = ledger.reserve(np.array([5e-5, 5e-5, 0.0, 1e-4]), label="q1")
    assert np.all(ledger.remaining <= ledger.capacity - grant.r + 1e-20)  # reserved while open
    debit = grant.settle(np.array([1, 4, 0, 2]), cum)
    np.testing.assert_allclose(debit, grant.r * cum[[1, 4, 0, 2]], rtol=0)
    assert np.all(ledger.spent <= ledger.budget)
    np.testing.assert_allclose(ledger.remaining, 1e-4 - debit)
    assert ledger.history[-1].label == "q1" and ledger.history[-1].users_charged == 3
    with pytest.raises(RuntimeError, match="settled"):
        grant.settle(np.zeros(4, int), cum)


def test_ledger_refuses_before_recording_and_halts_when_not_strict():
    ledger = PerUserLedger(np.array([1.0, 2.0]))
    with pytest.raises(BudgetExceededError):
        ledger.reserve(np.array([1.5, 1.5]))
    assert np.all(ledger.spent == 0) and np.all(ledger.remaining == [1.0, 2.0])
    grant = ledger.reserve(np.array([1.5, 1.5]), strict=False)
    assert grant.r[0] == 0 and ledger.halted.tolist() == [True, False]
    grant.settle(np.array([0, 1]), np.array([0.0, 1.0]))
    assert ledger.reserve(np.array([0.1, 0.1]), strict=False).r[0] == 0  # halted forever


def test_ledger_exhausts_exactly_to_the_budget():
    ledger = PerUserLedger(np.array([0.3, 1e-4, 7.0]))
    for _ in range(3):
        grant = ledger.reserve(ledger.remaining)
        assert np.all(ledger.spent + grant.r <= ledger.capacity)
        grant.settle(np.ones(3, int), np.array([0.0, 1.0]))
    assert np.all(ledger.spent <= ledger.budget)
    assert np.all(ledger.remaining <= 1e-6 * ledger.budget)


def test_ledger_approx_gp_capacity():
    ledger = PerUserLedger(1.0, n=2, delta=1e-6, lam=1.0)
    assert ledger.capacity[0] == pytest.approx(approx_gp_rho_star(1.0, 1e-6, 1.0))
    with pytest.raises(ValueError, match="delta"):
        PerUserLedger(1.0, n=2, delta=0.0, lam=1.0)


@pytest.mark.parametrize("budget", [0.0, -1.0, np.nan, [1.0, 0.0]])
def test_ledger_rejects_nonpositive_budgets(budget):
    with pytest.raises(ValueError, match="budget"):
        PerUserLedger(budget, n=None if np.ndim(budget) else 2)


def test_ledger_rejects_bad_shapes():
    ledger = PerUserLedger(1.0, n=3)
    with pytest.raises(ValueError, match="shape"):
        ledger.reserve(np.ones(2))
    with pytest.raises(ValueError, match="r must"):
        ledger.reserve(np.array([0.1, -0.1, 0.1]))
    with pytest.raises(ValueError, match="both delta and lam"):
        PerUserLedger(1.0, n=3, delta=1e-6)


# --- splits and lambda ---------------------------------------------------------------------------


@pytest.mark.parametrize("c", [1, 4, 10, 64])
def test_split_schedules(c):
    frac, cum = split_schedule(c)
    assert cum[0] == 0 and cum[-1] == 1 and frac.sum() == pytest.approx(1)
    np.testing.assert_allclose(cum, np.arange(c + 1) / c)
    frac, cum = split_schedule(c, "doubling")
    np.testing.assert_allclose(cum, (2.0 ** np.arange(c + 1) - 1) / (2.0**c - 1), rtol=1e-12)
    assert cum[-1] == 1
    w = running_mean_weights(cum)
    assert w[0] == 1 and np.all(w <= 1)


def test_split_rejects_bad_c():
    with pytest.raises(ValueError, match="c must be >= 1"):
        split_schedule(0)
    with pytest.raises(ValueError, match="split"):
        split_schedule(4, "halving")


@pytest.mark.parametrize("d", [1, 2, 3, 784])
def test_tail_radius_coverage(d):
    beta, trials = 0.1, 4000
    z = jax.random.normal(jax.random.key(d), (trials, d))
    misses = int(jnp.sum(jnp.linalg.norm(z, axis=1) > tail_radius(d, beta)))
    assert misses <= stats.binom.ppf(1 - 1e-4, trials, beta)


# --- Algorithm 3 ---------------------------------------------------------------------------------


def test_gamma_schedule():
    assert gamma_schedule(1).tolist() == [1.0]
    g = gamma_schedule(5)
    assert g[0] == 0.75 and g[-1] == 1.0 and g[1] == pytest.approx(0.75 + 1 / 16)


@pytest.mark.parametrize("m", [1, 2, 7])
def test_algorithm_3_invariants_with_random_savings(m):
    rng = np.random.default_rng(m)
    n, budget, c = 300, 2.0, 8
    _, cum = split_schedule(c)
    ledger = PerUserLedger(budget, n=n)
    seen = []

    def psa(key, l, r):
        start = ledger.remaining + r.astype(np.float64)  # remaining excludes the open grant
        seen.append((l, start, r.astype(np.float64)))
        return None, rng.integers(1, c + 1, n), cum

    run_multi_query(jax.random.key(0), psa, ledger, m)
    for l, b_start, r in seen:
        assert np.all(b_start >= (m - l + 1) * budget / m * (1 - 1e-7))
        assert np.all(r >= budget / m * (1 - 1e-6)) and np.all(r <= b_start * (1 + 1e-12))
        if l == m:
            np.testing.assert_allclose(r, b_start, rtol=1e-6)
    assert np.all(ledger.spent <= budget) and np.all(ledger.remaining >= 0)


def test_allotment_formula_exact_at_last_query():
    rem = np.array([1.0, 0.7, 0.5])
    np.testing.assert_array_equal(allotment(rem, 1.0, 3, 3), rem)
    np.testing.assert_allclose(allotment(np.ones(3), 1.0, 1, 3), 1 / 3)


def test_algorithm_3_without_savings_is_uniform_and_spends_everything():
    m, n, budget = 6, 50, 1e-4
    ledger = PerUserLedger(budget, n=n)
    answers, allots = run_multi_query(
        jax.random.key(0), lambda k, l, r: (l, np.ones(n, int), np.array([0.0, 1.0])), ledger, m
    )
    assert answers == list(range(1, m + 1))
    np.testing.assert_allclose(allots, budget / m, rtol=1e-6)
    assert np.all(ledger.remaining <= 1e-6 * budget) and np.all(ledger.spent <= budget)


def test_algorithm_3_with_range_counting_reinvests_savings():
    x = jax.random.uniform(jax.random.key(3), (4000, 2), maxval=10_000.0)
    c, m, budget = 8, 4, 4e-4
    _, cum = split_schedule(c)

    def psa(key, l, r):
        count, res = range_count(
            key, x, r, jnp.array([5000.0, 5000.0]), jnp.array([800.0, 800.0]), c=c, beta0=0.025
        )
        return int(count), res.rounds, cum

    adaptive = PerUserLedger(budget, n=4000)
    _, allots = run_multi_query(jax.random.key(1), psa, adaptive, m)
    uniform = PerUserLedger(budget, n=4000)
    _, uallots = run_multi_query(jax.random.key(1), psa, uniform, m, adaptive=False)
    assert np.all(adaptive.spent <= budget) and np.all(uniform.spent <= budget)
    assert allots[1:].mean() > 1.5 * uallots[1:].mean()  # savings were reinvested
    np.testing.assert_allclose(uallots, budget / m, rtol=1e-6)


def test_filters_take_traced_budgets_and_requests_and_never_release_on_invalid_input():
    init = jax.jit(filters.init_filter)
    step = jax.jit(filters.filter_step)
    np.testing.assert_array_equal(np.asarray(init(jnp.array([1.0, 2.0])).budget), [1.0, 2.0])
    bad = init(jnp.array([1.0, 0.0]))  # a traced budget that is not > 0: NaN state
    assert np.isnan(np.asarray(bad.budget)).all() and np.isnan(np.asarray(bad.spent)).all()
    released, _ = step(bad, jnp.array([0.5, 0.5]))
    assert not np.asarray(released).any()
    state = filters.init_filter(jnp.ones(2))
    released, after = step(state, jnp.array([0.5, np.nan]))  # a NaN request: nobody releases again
    assert not np.asarray(released)[1] and np.isnan(np.asarray(after.spent)).all()
    released, _ = step(after, jnp.array([0.25, 0.25]))
    assert not np.asarray(released).any()
    with pytest.raises(TypeError, match="host"):
        jax.jit(lambda b: filters.approx_gp_filter_step(filters.init_filter(b), jnp.ones(1), 1e-6, 1.0))(
            jnp.ones(1)
        )
