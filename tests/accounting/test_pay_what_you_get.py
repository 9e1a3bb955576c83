"""Pay-what-you-get accounting: Theorem 1's epsilon*, its inverse, Lemma A.1 and the Algorithm 2
accountant (spec §9.4 golden values, the ⊥-counts-as-one rule, refusal before overspending)."""

import itertools
import math

import jax
import numpy as np
import pytest

from dpjax import topk
from dpjax._src.accounting.pay_what_you_get import (
    advanced_composition_epsilon,
    calibrate_epsilon,
    epsilon_star,
    optimal_composition,
    pay_what_you_get_guarantee,
)
from dpjax.accounting import BudgetExceededError, PayWhatYouGet

GOLDEN = [  # spec §9.4: (k, eps, delta'), t2, t3, min
    ((1, 1.0, 1e-6), 5.7186, 3.1283, 1.0),
    ((10, 0.1, 1e-6), 1.7122, 0.88113, 0.88113),
    ((10, 1.0, 1e-6), 21.244, 13.311, 10.0),
    ((100, 0.1, 1e-6), 5.7561, 3.1283, 3.1283),
    ((1000, 0.01, 1e-9), 2.0858, 1.0679, 1.0679),
    ((50, 0.05, 1e-7), 2.0699, 1.0662, 1.0662),
]


@pytest.mark.parametrize(("args", "t2", "t3", "best"), GOLDEN)
def test_epsilon_star_golden_values(args, t2, t3, best):
    k, eps, dp = args
    assert epsilon_star(*args) == pytest.approx(best, rel=5e-5)
    assert advanced_composition_epsilon(*args) == pytest.approx(min(k * eps, t2), rel=5e-5)
    # the two advanced terms on their own, from the formulas
    log_term = math.log(1 / dp)
    assert k * eps * math.tanh(eps / 2) + eps * math.sqrt(2 * k * log_term) == pytest.approx(t2, rel=5e-5)
    assert k * eps**2 / 2 + eps * math.sqrt(k * log_term / 2) == pytest.approx(t3, rel=5e-5)


def test_epsilon_star_properties():
    assert epsilon_star(7, 0.3, 0.0) == pytest.approx(2.1)
    assert epsilon_star(0, 0.3, 1e-6) == 0.0
    for eps in (0.01, 0.1, 0.5, 1.0):
        for dp in (1e-2, 1e-6, 1e-12):
            assert epsilon_star(1, eps, dp) == pytest.approx(eps)
    ks, epss = range(1, 300, 7), np.linspace(0.001, 2, 40)
    for dp in (1e-3, 1e-9):
        for eps in epss:
            values = [epsilon_star(k, eps, dp) for k in ks]
            assert np.all(np.diff(values) >= 0)
        for k in ks:
            values = [epsilon_star(k, eps, dp) for eps in epss]
            assert np.all(np.diff(values) > 0)


@pytest.mark.parametrize(
    ("k", "eps", "dp"), [(10, 0.1, 1e-6), (100, 0.1, 1e-6), (1000, 0.01, 1e-9), (3, 1.5, 1e-3)]
)
def test_calibrate_epsilon_inverts_epsilon_star(k, eps, dp):
    target = epsilon_star(k, eps, dp)
    found = calibrate_epsilon(target, k, dp)
    assert found == pytest.approx(eps, rel=1e-9)
    assert epsilon_star(k, found, dp) <= target  # rounded down: never overspends
    assert epsilon_star(k, np.nextafter(found, 1.0) * (1 + 1e-12), dp) > target


def test_calibrate_epsilon_with_large_delta_prime():
    # With delta' near 1 the third term can fall below eps itself; the bracket still grows.
    found = calibrate_epsilon(0.5, 1, 0.9)
    assert epsilon_star(1, found, 0.9) == pytest.approx(0.5, rel=1e-9)


def _kov_direct(k, eps, delta):
    """Lemma A.1 term by term (float64, no running sums), for small k."""
    best = (k * eps, 0.0)
    for i in range(1, k // 2 + 1):
        d_i = (
            sum(
                math.comb(k, l) * (math.exp((k - l) * eps) - math.exp((k - 2 * i + l) * eps))
                for l in range(i)
            )
            / (1 + math.exp(eps)) ** k
        )
        if d_i <= delta:
            best = ((k - 2 * i) * eps, d_i)
    return best


@pytest.mark.parametrize(
    ("k", "eps", "delta"), list(itertools.product((1, 2, 7, 30, 101), (0.05, 0.3, 1.0), (1e-6, 0.1)))
)
def test_optimal_composition_matches_direct_sum(k, eps, delta):
    got, want = optimal_composition(k, eps, delta), _kov_direct(k, eps, delta)
    assert got[0] == pytest.approx(want[0]) and got[1] == pytest.approx(want[1], rel=1e-9, abs=1e-300)


def test_optimal_composition_golden_and_figure_1_ratios():
    assert optimal_composition(100, 0.1, 1e-6) == pytest.approx((4.8, 8.055e-7), rel=1e-3)
    for k, eps, ratio in [(100, 0.1, 1.52), (100, 0.01, 1.47), (1000, 0.01, 1.55), (500, 0.05, 1.56)]:
        kov, d_i = optimal_composition(k, eps, 1e-6)  # spec §7 spot values
        assert kov / epsilon_star(k, eps, d_i) == pytest.approx(ratio, abs=5e-3)


def test_pay_what_you_get_guarantee_is_theorem_2():
    g = pay_what_you_get_guarantee(0.1, 1e-9, max_outcomes=100, max_calls=20, delta_prime=1e-6)
    assert g.epsilon == pytest.approx(3.1283, rel=5e-5)
    assert g.delta == pytest.approx(2 * 20 * 1e-9 + 1e-6)
    with pytest.raises(ValueError, match="exceeds 1"):
        pay_what_you_get_guarantee(0.1, 0.2, max_outcomes=10, max_calls=5)


# -- the accountant (Algorithm 2) -------------------------------------------------------------------


def make(**kwargs):
    args = {"max_outcomes": 10, "max_calls": 4, "delta_prime": 1e-6} | kwargs
    return PayWhatYouGet(0.2, 1e-8, **args)


def test_bottom_counts_as_one_outcome():
    acct = make()
    acct.reserve(3).settle(0, True)  # (⊥): one outcome
    acct.reserve(3).settle(2, True)  # (i, j, ⊥): three outcomes
    acct.reserve(3).settle(3, False)  # (i, j, l): three outcomes, no ⊥
    assert [c.outcomes for c in acct.history] == [1, 3, 3]
    assert acct.outcomes_used == 7 and acct.calls_used == 3 and acct.remaining_outcomes == 3


def test_refuses_a_call_whose_worst_case_does_not_fit():
    acct = make()
    acct.reserve(5).settle(5, False)
    acct.reserve(4).settle(1, True)  # charged 2, not 4
    assert acct.remaining_outcomes == 3
    before = (acct.outcomes_used, acct.calls_used, acct.history)
    with pytest.raises(BudgetExceededError, match="max_outcomes"):
        acct.reserve(4)
    assert (acct.outcomes_used, acct.calls_used, acct.history) == before  # nothing recorded
    acct.reserve(3).settle(3, False)
    with pytest.raises(BudgetExceededError):
        acct.reserve(1)


def test_refuses_beyond_max_calls():
    acct = make(max_outcomes=100, max_calls=2)
    acct.reserve(1).settle(1, False)
    acct.reserve(1).settle(0, True)
    with pytest.raises(BudgetExceededError, match="max_calls"):
        acct.reserve(1)


def test_open_tickets_hold_their_worst_case():
    acct = make()
    ticket = acct.reserve(6)
    assert acct.remaining_outcomes == 4 and acct.remaining_calls == 3
    with pytest.raises(BudgetExceededError):
        acct.reserve(5)
    ticket.settle(1, True)
    assert acct.remaining_outcomes == 8
    with pytest.raises(RuntimeError, match="already"):
        ticket.settle(1, True)


def test_private_kbar_costs_one_more_and_batches_of_queries():
    acct = make(max_outcomes=20, max_calls=10)
    t = acct.reserve(2, private_kbar=True)
    assert t.worst_case == 3
    t.settle(0, True)
    assert acct.outcomes_used == 2
    batch = acct.reserve(2, queries=3)
    assert acct.remaining_outcomes == 20 - 2 - 6 and acct.remaining_calls == 10 - 1 - 3
    batch.settle(np.array([2, 0, 1]), np.array([False, True, True]))
    assert acct.outcomes_used == 2 + 2 + 1 + 2 and acct.calls_used == 4


def test_settle_rejects_inconsistent_results():
    acct = make()
    with pytest.raises(ValueError, match="bottom"):
        acct.reserve(3).settle(1, False)
    with pytest.raises(ValueError, match="num_returned"):
        acct.reserve(3).settle(4, False)
    with pytest.raises(ValueError, match="expected 1"):
        acct.reserve(3).settle([1, 2], [True, True])


def test_guarantee_depends_on_caps_only():
    acct = make()
    g = acct.guarantee
    assert g.epsilon == pytest.approx(epsilon_star(10, 0.2, 1e-6))
    assert g.delta == pytest.approx(2 * 4 * 1e-8 + 1e-6)
    acct.reserve(2).settle(0, True)
    assert acct.guarantee == g


def test_session_with_the_kernel_never_exceeds_the_caps():
    acct = PayWhatYouGet(0.5, 1e-6, max_outcomes=25, max_calls=8)
    rng = np.random.default_rng(0)
    key = jax.random.key(0)
    calls = 0
    while True:
        k = min(5, acct.remaining_outcomes)
        try:
            ticket = acct.reserve(max(k, 1))
        except BudgetExceededError:
            break
        key, sub = jax.random.split(key)
        res = topk.limited_domain(sub, rng.integers(0, 30, 40), ticket.k, 10, ticket.epsilon, ticket.delta)
        ticket.settle(res.num_returned, res.bottom)
        assert int(res.outcomes) == acct.history[-1].outcomes
        calls += 1
    assert acct.outcomes_used <= 25 and acct.calls_used <= 8 and calls == acct.calls_used


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: epsilon_star(-1, 0.1, 1e-6), "k"),
        (lambda: epsilon_star(3, -0.1, 1e-6), "epsilon"),
        (lambda: epsilon_star(3, 0.1, 1.0), "delta_prime"),
        (lambda: calibrate_epsilon(0.0, 3, 1e-6), "target_epsilon"),
        (lambda: optimal_composition(0, 0.1, 1e-6), "k"),
        (lambda: PayWhatYouGet(0.1, 0.0, max_outcomes=3, max_calls=1), "delta"),
        (lambda: PayWhatYouGet(0.1, 1e-6, max_outcomes=0, max_calls=1), "max_outcomes"),
        (lambda: PayWhatYouGet(0.1, 1e-6, max_outcomes=3, max_calls=0), "max_calls"),
        (lambda: make().reserve(0), "k"),
        (lambda: topk.limited_domain_guarantee(2, 0.1, 1e-6, delta_prime=-1.0), "delta_prime"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
