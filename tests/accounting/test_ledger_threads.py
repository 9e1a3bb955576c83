"""Every ledger under concurrency, and reservations as context managers.

8 threads hammer one ledger with spends and reserve/settle pairs while the interpreter switches
threads every microsecond (``sys.setswitchinterval(1e-6)``), repeated many times: the budget is never
exceeded, and what the ledger recorded is exactly what the successful calls were charged (nothing lost,
nothing double-charged, no reservation left open). Without the ledgers' lock these fail in most
repetitions (the check of the budget and the record are then interleaved).
"""

import math
import sys
import threading

import numpy as np
import pytest

from dpjax.accounting import (
    ZCDP,
    Accountant,
    ApproxDP,
    BudgetExceededError,
    PayWhatYouGet,
    PerUserLedger,
    PureDP,
)

THREADS = 8


@pytest.fixture
def fast_switching():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


class _Boom(Exception):
    pass


def _hammer(attempts, call):
    """Runs ``call(thread, i)`` for ``i < attempts`` in each of 8 threads released together; returns
    the charges of the calls that succeeded (``call`` returns its charge, or raises
    ``BudgetExceededError``)."""
    barrier = threading.Barrier(THREADS)
    charges = [[] for _ in range(THREADS)]

    def run(thread):
        barrier.wait()
        for i in range(attempts):
            try:
                charges[thread].append(call(thread, i))
            except BudgetExceededError:
                pass

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [c for per_thread in charges for c in per_thread]


def _pair(ledger, worst, used, charge, worst_charge, i):
    """One call of three kinds, by ``i``: a reserve/settle pair in a ``with`` block, a block left by
    an exception (charged ``worst_charge``), or a reservation cancelled (no charge)."""
    kind = i % 3
    try:
        with ledger.reserve(worst) as r:
            if kind == 0:
                r.settle(*used)
                return charge
            if kind == 1:
                raise _Boom
            r.cancel()
            return 0.0
    except _Boom:
        return worst_charge


def test_accountant_is_never_overspent_by_threads(fast_switching):
    # Pure budget: spends of 0.01 and reservations of 0.02 settled at 0.01 (or charged 0.02).
    for _ in range(30):
        acct = Accountant(PureDP(1.0))

        def call(thread, i, acct=acct):
            if i % 2:
                acct.spend(PureDP(0.01))
                return 0.01
            return _pair(acct, PureDP(0.02), (PureDP(0.01),), 0.01, 0.02, i // 2)

        charges = _hammer(40, call)
        spent = acct.spent.epsilon
        assert spent <= 1.0 + 1e-12
        assert spent == pytest.approx(math.fsum(charges), abs=1e-12)
        assert len(acct.history) == sum(c > 0 for c in charges) and acct.open_reservations == ()
        assert spent > 1.0 - 0.01 - 1e-9  # nothing stranded: the budget was used up


def test_accountant_with_zcdp_spends_against_an_approx_budget(fast_switching):
    # The case: ZCDP(2.5e-4) spends against ApproxDP(1, 1e-6); 97 fit one after another.
    sequential = Accountant(ApproxDP(1.0, 1e-6))
    while sequential.can_spend(ZCDP(2.5e-4)):
        sequential.spend(ZCDP(2.5e-4))
    assert len(sequential.history) == 97
    for _ in range(3):
        acct = Accountant(ApproxDP(1.0, 1e-6))

        def call(thread, i, acct=acct):
            acct.spend(ZCDP(2.5e-4))
            return 1

        assert len(_hammer(16, call)) == len(acct.history) == 97
        assert acct.spent.epsilon <= 1.0 + 1e-12


def test_pay_what_you_get_is_never_overspent_by_threads(fast_switching):
    # Worst case 3 outcomes per call; a settled call returned 1 index then bottom (2 outcomes).
    for _ in range(30):
        acct = PayWhatYouGet(0.1, 1e-9, max_outcomes=101, max_calls=10_000)

        def call(thread, i, acct=acct):
            return _pair(acct, 3, (1, True), 2, 3, i)

        charges = _hammer(12, call)
        assert acct.outcomes_used <= acct.max_outcomes
        assert acct.outcomes_used == sum(charges) and acct.open_reservations == ()
        assert len(acct.history) == sum(c > 0 for c in charges)
        # Nothing stranded: what is left is free to reserve. (Every thread's last call cancels its
        # reservation, so the last thread to finish may leave 3 or more outcomes unused.)
        left = acct.remaining_outcomes
        assert left == acct.max_outcomes - acct.outcomes_used
        if left >= 3:
            with acct.reserve(3) as r:
                r.cancel()
        assert acct.remaining_outcomes == left


def test_per_user_ledger_is_never_overspent_by_threads(fast_switching):
    # Allotments of 0.125 per user; a settled grant released 1 of 2 rounds (half charged).
    cumfrac = np.array([0.0, 0.5, 1.0])
    for _ in range(30):
        ledger = PerUserLedger(1.0, n=3)
        used = (np.ones(3, dtype=np.int64), cumfrac)

        def call(thread, i, ledger=ledger, used=used):
            return _pair(ledger, np.full(3, 0.125), used, 0.0625, 0.125, i)

        charges = _hammer(8, call)
        assert np.all(ledger.spent <= ledger.capacity)
        np.testing.assert_allclose(ledger.spent, math.fsum(charges), rtol=0, atol=1e-12)
        assert len(ledger.history) == sum(c > 0 for c in charges) and ledger.open_reservations == ()
        assert np.all(ledger.remaining < 0.125)


def test_leaving_a_reservation_block_unsettled_charges_the_worst_case():
    acct = Accountant(PureDP(1.0))
    with pytest.raises(_Boom):  # the release failed: the exception propagates, 0.6 is charged
        with acct.reserve(PureDP(0.6), label="failed release"):
            raise _Boom
    assert acct.spent == PureDP(0.6) and acct.history[-1].label == "failed release"
    with acct.reserve(PureDP(0.1)):  # no settle at all: charged too
        pass
    assert acct.spent.epsilon == pytest.approx(0.7)
    with acct.reserve(PureDP(0.3)) as r:  # provably never ran: cancelled, nothing charged
        r.cancel()
    assert acct.spent.epsilon == pytest.approx(0.7) and acct.remaining.epsilon == pytest.approx(0.3)
    with pytest.raises(RuntimeError, match="settled"):
        r.settle(PureDP(0.1))
    with pytest.raises(RuntimeError, match="settled"):
        r.cancel()


def test_open_reservations_are_reported_and_hold_their_worst_case():
    acct = Accountant(PureDP(1.0))
    first, second = acct.reserve(PureDP(0.5), label="a"), acct.reserve(PureDP(0.25), label="b")
    assert acct.open_reservations == (first, second)
    assert acct.remaining.epsilon == pytest.approx(0.25)
    with pytest.raises(ValueError, match="exceeds"):  # a refused settlement leaves it open
        first.settle(PureDP(0.6))
    assert acct.open_reservations == (first, second)
    first.settle(PureDP(0.5))
    second.cancel()
    assert acct.open_reservations == () and acct.remaining.epsilon == pytest.approx(0.5)


def test_worst_case_charges_of_the_other_ledgers():
    pwyg = PayWhatYouGet(0.1, 1e-9, max_outcomes=20, max_calls=5)
    with pwyg.reserve(3, queries=2, private_kbar=True):
        pass
    assert pwyg.outcomes_used == 8 and pwyg.calls_used == 2  # 2 queries x (3 + kbar)
    ledger = PerUserLedger(1.0, n=2)
    with pytest.raises(_Boom):
        with ledger.reserve([0.25, 0.0]):
            raise _Boom
    np.testing.assert_array_equal(ledger.spent, [0.25, 0.0])
