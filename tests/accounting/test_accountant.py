"""The Accountant: spends, remaining budget, history, and refusal before anything is spent."""

import pytest

from dpjax.accounting import (
    ZCDP,
    Accountant,
    ApproxDP,
    BudgetExceededError,
    PureDP,
    RangeBounded,
    zcdp_epsilon,
)


def test_pure_budget_spends_and_refuses_without_recording():
    acct = Accountant(PureDP(1.0))
    acct.spend(PureDP(0.4), label="a")
    acct.spend(RangeBounded(0.6), label="b")  # lands exactly on the budget
    assert acct.remaining == PureDP(0.0)
    before = acct.history
    with pytest.raises(BudgetExceededError, match="exceed"):
        acct.spend(PureDP(1e-6), label="too much")
    assert acct.history == before  # nothing recorded
    assert [s.label for s in acct.history] == ["a", "b"]
    assert acct.spent == PureDP(1.0)


def test_float_sums_landing_on_the_budget_are_accepted():
    acct = Accountant(PureDP(1.0))
    for _ in range(10):
        acct.spend(PureDP(0.1))  # 0.1 added ten times is 0.9999999999999999
    assert not acct.can_spend(PureDP(1e-9))


def test_pure_budget_rejects_guarantees_without_pure_implication():
    acct = Accountant(PureDP(1.0))
    with pytest.raises(TypeError, match="pure"):
        acct.spend(ZCDP(0.01))
    assert acct.history == ()


def test_zcdp_budget_converts_pure_and_range_bounded():
    acct = Accountant(ZCDP(1.0))
    acct.spend(PureDP(1.0))  # 0.5
    acct.spend(RangeBounded(2.0))  # 0.5
    assert acct.remaining.rho == pytest.approx(0.0)
    with pytest.raises(BudgetExceededError):
        acct.spend(ZCDP(1e-3))
    with pytest.raises(TypeError, match="zCDP"):
        Accountant(ZCDP(1.0)).spend(ApproxDP(0.1, 1e-9))


def test_approx_budget_uses_zcdp_composition_when_it_is_tighter():
    budget = ApproxDP(10.0, 1e-6)
    acct = Accountant(budget)
    # 300 pure spends of 0.1: linear composition would need 30, zCDP needs less than 10.
    rho = 300 * 0.1**2 / 2
    assert zcdp_epsilon(rho, 1e-6) < 10
    for i in range(300):
        acct.spend(PureDP(0.1), label=str(i))
    assert len(acct.history) == 300
    # A few pure spends are cheaper by plain addition.
    small = Accountant(ApproxDP(1.0, 1e-6))
    small.spend(PureDP(0.5))
    small.spend(PureDP(0.5))
    with pytest.raises(BudgetExceededError):
        small.spend(PureDP(0.01))


def test_approx_budget_with_approx_spends_and_delta():
    acct = Accountant(ApproxDP(2.0, 1e-5))
    acct.spend(ApproxDP(1.0, 5e-6))
    with pytest.raises(BudgetExceededError):
        acct.spend(ApproxDP(0.5, 6e-6))  # delta 1.1e-5 > 1e-5
    acct.spend(ApproxDP(0.5, 5e-6))
    # No delta is left for converting zCDP spends: refused.
    assert not acct.can_spend(ZCDP(1e-6))
    assert acct.remaining.epsilon == pytest.approx(0.5)


def test_reservation_authorizes_worst_case_and_charges_actual():
    acct = Accountant(PureDP(1.0))
    r = acct.reserve(PureDP(0.8), label="adaptive")
    assert not acct.can_spend(PureDP(0.3))  # the worst case is held
    r.settle(PureDP(0.5))
    assert acct.remaining.epsilon == pytest.approx(0.5)
    assert acct.history[-1].label == "adaptive"
    with pytest.raises(RuntimeError, match="settled"):
        r.settle(PureDP(0.1))
    r2 = acct.reserve(PureDP(0.4))
    with pytest.raises(ValueError, match="exceeds"):
        r2.settle(PureDP(0.45))
    with pytest.raises(BudgetExceededError):
        acct.reserve(PureDP(0.2))


def test_each_budget_uses_the_form_it_needs_from_one_guarantee():
    # 10 Gumbel selections at 0.2: RangeBounded(2.0, rho=10 * 0.2^2/8) (Cesar and Rogers 2021).
    top10 = RangeBounded(2.0, rho=0.05)
    zcdp = Accountant(ZCDP(0.1))
    zcdp.spend(top10)
    assert zcdp.remaining.rho == pytest.approx(0.1 - 0.05)  # not 2.0^2/8 = 0.5, which would not fit
    pure = Accountant(PureDP(2.5))
    pure.spend(top10)
    assert pure.remaining.epsilon == pytest.approx(0.5)
    approx = Accountant(ApproxDP(2.0, 1e-6))
    approx.spend(top10)
    assert approx.spent.epsilon == pytest.approx(zcdp_epsilon(0.05, 1e-6))  # < 2.0 by the zCDP route


def test_every_ledger_has_the_reserve_settle_protocol():
    from dpjax.accounting import Ledger, PayWhatYouGet, PerUserLedger, Reservation

    ledgers = {
        Accountant(PureDP(1.0)): (PureDP(0.5), (PureDP(0.2),)),
        PayWhatYouGet(0.1, 1e-9, max_outcomes=5, max_calls=2): (3, (1, True)),
        PerUserLedger(1.0, n=2): ([0.5, 0.5], ([1, 0], [0.0, 1.0])),
    }
    for ledger, (worst, used) in ledgers.items():
        assert isinstance(ledger, Ledger)
        reservation = ledger.reserve(worst, label="q")
        assert isinstance(reservation, Reservation) and not reservation.settled
        reservation.settle(*used)
        assert reservation.settled and ledger.history[-1].label == "q"
        with pytest.raises(RuntimeError, match="settled"):
            reservation.settle(*used)


def test_bad_budgets_and_spends():
    with pytest.raises(TypeError, match="budget"):
        Accountant(RangeBounded(1.0))
    with pytest.raises(TypeError, match="budget"):
        Accountant(1.0)
    with pytest.raises(TypeError, match="Guarantee"):
        Accountant(PureDP(1.0)).spend(0.5)
