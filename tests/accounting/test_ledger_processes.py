"""A ledger is one ledger: no copy, pickle or forked child can spend a budget its owner does not see.

Issue 45: an ``Accountant`` with 0.5 of 1 spent, passed to a ``ProcessPoolExecutor(4)``, spent 2.0 more
while the parent still reported 0.5 (spawn, fork and forkserver); ``copy.copy`` shared the history
with a new lock and threads overspent. Now copying and pickling refuse, a forked child refuses to use
an inherited ledger, and :class:`~dpjax.accounting.LedgerManager` is the supported way to share one.
"""

import copy
import multiprocessing
import pickle
import threading
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest

from dpjax.accounting import (
    Accountant,
    BudgetExceededError,
    LedgerManager,
    PayWhatYouGet,
    PerUserLedger,
    PureDP,
)

_LEDGERS = {
    "Accountant": lambda: Accountant(PureDP(1.0)),
    "PayWhatYouGet": lambda: PayWhatYouGet(1.0, 1e-6, max_outcomes=10, max_calls=10),
    "PerUserLedger": lambda: PerUserLedger(np.ones(3)),
}
_RESERVE = {
    "Accountant": lambda ledger: ledger.reserve(PureDP(0.5)),
    "PayWhatYouGet": lambda ledger: ledger.reserve(2),
    "PerUserLedger": lambda ledger: ledger.reserve(np.full(3, 0.5)),
}
_COPIES = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}
# The forked children here never call into JAX (they touch a ledger or a manager's proxy only), so
# JAX's warning that a fork of its threads may deadlock does not apply to them.
_FORK_OK = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


@pytest.mark.parametrize("kind", sorted(_LEDGERS))
@pytest.mark.parametrize("how", sorted(_COPIES))
def test_a_live_ledger_and_its_reservations_refuse_to_be_copied(kind, how):
    ledger = _LEDGERS[kind]()
    reservation = _RESERVE[kind](ledger)
    for obj in (ledger, reservation):
        with pytest.raises(TypeError, match=r"cannot be copied or pickled.*LedgerManager"):
            _COPIES[how](obj)
    assert ledger.open_reservations == (reservation,)


def _spend_one(ledger):  # a worker: a spend the parent would not see on a copy
    ledger.spend(PureDP(0.25))
    return True


def test_a_process_pool_cannot_receive_a_ledger():
    acct = Accountant(PureDP(1.0))
    acct.spend(PureDP(0.5))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with pytest.raises(TypeError, match="cannot be copied or pickled"):
            pool.submit(_spend_one, acct).result(timeout=60)
    assert acct.spent == PureDP(0.5)


_INHERITED = {}


def _use_inherited(kind, results):
    try:
        _RESERVE[kind](_INHERITED[kind])
        results.put("spent")
    except RuntimeError as err:
        results.put(str(err))


@_FORK_OK
def test_a_forked_child_cannot_use_an_inherited_ledger():
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    for kind, make in _LEDGERS.items():
        _INHERITED[kind] = make()
        child = ctx.Process(target=_use_inherited, args=(kind, results))
        child.start()
        child.join(60)
        assert child.exitcode == 0
        message = results.get(timeout=10)
        assert "belongs to process" in message and "forked copy cannot spend" in message, message
        assert _INHERITED[kind].history == ()  # the owner's ledger is untouched and still usable
        _RESERVE[kind](_INHERITED[kind]).cancel()


def test_copy_no_longer_forks_the_lock():
    """The 21-in-100 overspend of copy.copy under threads cannot happen: there is no second handle."""
    acct = Accountant(PureDP(1.0))
    errors = []

    def worker():
        try:
            copy.copy(acct).spend(PureDP(0.1))
        except TypeError as err:
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 4 and acct.history == ()


def _spend_many(acct, n):
    spent = 0
    for _ in range(n):
        try:
            acct.spend(PureDP(0.125), "worker")
            spent += 1
        except BudgetExceededError:
            pass
    return spent


def _reserve_and_settle(pwyg):
    try:
        ticket = pwyg.reserve(3)  # a worst case of 3 outcomes: 2 returned and the bottom
    except BudgetExceededError:
        return 0
    with ticket:
        return ticket.settle(np.array([2]), np.array([True]))


@_FORK_OK
def test_ledger_manager_shares_one_budget_across_processes():
    """4 worker processes spend through one served Accountant: exactly the budget, seen by all. (The
    proxies pickle alike for every start method; fork keeps the test fast: spawned workers import
    JAX.)"""
    ctx = multiprocessing.get_context("fork")
    with LedgerManager(ctx=ctx) as manager:
        acct = manager.Accountant(PureDP(1.0))
        acct.spend(PureDP(0.5), "parent")
        with ProcessPoolExecutor(4, mp_context=ctx) as pool:
            granted = sum(pool.map(_spend_many, [acct] * 4, [3] * 4))
            pwyg = manager.PayWhatYouGet(1.0, 1e-6, max_outcomes=10, max_calls=10)
            charges = list(pool.map(_reserve_and_settle, [pwyg] * 5))
        assert granted == 4  # 0.5 of 1.0 left: four spends of 0.125, whatever the interleaving
        assert acct.spent == PureDP(1.0) and len(acct.history) == 5
        with pytest.raises(BudgetExceededError):
            acct.spend(PureDP(0.125))
        assert sorted(charges) == [0, 0, 3, 3, 3]  # 10 outcomes hold three worst cases of 3
        assert pwyg.outcomes_used == 9 and pwyg.calls_used == 3
        with acct.reserve(PureDP(0.0)) as reservation:  # a reservation lives in the server
            assert reservation.worst_case == PureDP(0.0) and not reservation.settled
        assert reservation.settled and acct.open_reservations == ()
        users = manager.PerUserLedger(np.ones(3))
        with users.reserve(np.full(3, 0.5)) as grant:
            debits = grant.settle(np.array([1, 0, 1]), np.array([0.0, 1.0]))
        np.testing.assert_array_equal(debits, [0.5, 0, 0.5])
        np.testing.assert_array_equal(users.remaining, [0.5, 1.0, 0.5])
