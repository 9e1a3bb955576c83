"""The reserve/settle protocol shared by every budget keeper of the package.

A data-dependent cost (adaptive SVT, pay-what-you-get top-k, per-user filters) is known only after
the release, but the budget must refuse a release *before* any noise is drawn. Every ledger
therefore offers the same two steps, best written as a ``with`` block::

    with ledger.reserve(worst_case, label="q") as reservation:
        result = release(...)
        reservation.settle(*used)

1. ``ledger.reserve(worst_case, *, label="")`` authorizes the worst case now, or raises
   :class:`BudgetExceededError` having recorded nothing;
2. ``reservation.settle(*used)`` after the release charges what was actually used (never more than
   the worst case) and releases the rest; it returns what was charged. A reservation settles once
   (a second call raises ``RuntimeError``); a refused settlement (``ValueError``) leaves it open.

Leaving the ``with`` block with the reservation still open (an exception in the release, or no
``settle``) charges the **worst case**. That is the only sound default: the release may have read
the data (and drawn noise that was seen, logged or partly returned) before it failed, and whether
it failed can itself depend on the data, so the failure is an output of the mechanism that must be
paid for. ``reservation.cancel()`` releases the reservation without any charge; call it only for a
release that provably never ran (e.g. refused by its own argument checks before touching the data).
A reservation that is neither settled nor cancelled outside a ``with`` block keeps its worst case
held and is listed in ``ledger.open_reservations``.

Every ledger is safe under concurrency: authorizing and recording happen under one lock per ledger,
so no interleaving of threads can spend past the budget, and a reservation settles (or is charged,
or cancelled) exactly once.

**A ledger is one ledger.** A second copy of a budget would let two spenders each spend it in full, so
a ledger (and a reservation, which holds its ledger) refuses ``copy.copy``, ``copy.deepcopy`` and
``pickle`` with a ``TypeError`` (so passing one to a ``ProcessPoolExecutor`` or a spawned
``multiprocessing.Process`` fails before the worker starts), and a ledger inherited by a forked child
(``fork`` or ``forkserver``) refuses every use there with a ``RuntimeError``: it belongs to the
process that made it. For several processes, one process owns the ledger and the others ask it:
:class:`dpjax.accounting.LedgerManager` serves ledgers from one process to the others (see the
accountant guide, ``docs/guides/accountant.md``).

Charging the worst case up front and refunding what was not used is sound for every ledger here: the
theorems behind them (basic composition, Durfee and Rogers 2019 Theorem 2, Liang and Yi Theorems 4.4
and 4.5) only need the sum of the costs actually applied to stay within the budget.

The three ledgers differ only in what a worst case and a use are:

* :class:`~dpjax.accounting.Accountant`: a :class:`~dpjax.accounting.Guarantee`, settled with the
  guarantee actually spent;
* :class:`~dpjax.accounting.PayWhatYouGet`: the calls' ``k`` (outcomes), settled with
  ``(num_returned, bottom)``;
* :class:`~dpjax.accounting.PerUserLedger`: per-user allotments ``r``, settled with
  ``(rounds, cumfrac)``.
"""

from __future__ import annotations

import abc
import os
import threading
from typing import Any, Generic, TypeVar

__all__ = [
    "BudgetExceededError",
    "Ledger",
    "Reservation",
]


class BudgetExceededError(RuntimeError):
    """Raised when a spend or reservation would exceed the budget; nothing has been recorded."""


class Reservation:
    """A worst case authorized by :meth:`Ledger.reserve`: settle it once with what was used.

    A context manager: leaving its ``with`` block while it is still open charges the worst case (see
    the module docstring for why); :meth:`cancel` frees it for a release that never ran.

    Attributes:
      worst_case: what was authorized (in the ledger's units).
      label: free text recorded in the ledger's history.
    """

    def __init__(self, ledger: Ledger[Any], worst_case: Any, label: str = "") -> None:
        self._ledger = ledger
        self.worst_case = worst_case
        self.label = label
        self._open = True

    @property
    def settled(self) -> bool:
        """Whether the reservation is closed (settled, charged its worst case, or cancelled)."""
        return not self._open

    def settle(self, *used: Any) -> Any:
        """Charges ``used`` (at most the worst case) and releases the rest; returns the charge."""
        with self._ledger._lock:
            self._check_open()
            charged = self._ledger._settle(self, *used)
            self._close()
        return charged

    def cancel(self) -> None:
        """Releases the reservation with no charge: only for a release that provably never ran
        (it neither read the data nor drew noise). Raises ``RuntimeError`` if already closed."""
        with self._ledger._lock:
            self._check_open()
            self._close()

    def __enter__(self) -> Reservation:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        """Charges the worst case if the block left the reservation open; never hides ``exc``."""
        with self._ledger._lock:
            if self._open:
                self._ledger._settle(self, *self._ledger._worst_use(self))
                self._close()

    def __reduce_ex__(self, protocol):
        raise _refuse_copy(self)

    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError("this reservation has already been settled.")

    def _close(self) -> None:
        self._open = False
        self._ledger._open.remove(self)


_R = TypeVar("_R", bound=Reservation)


class Ledger(abc.ABC, Generic[_R]):
    """A budget keeper with the reserve/settle protocol (see the module docstring).

    Subclasses call ``super().__init__()``, take ``self._lock`` around every check-then-record
    step, and register each reservation they grant with :meth:`_hold` (under the same lock). The
    type parameter is the kind of reservation the ledger grants.
    """

    def __init__(self) -> None:
        self._lock = _ProcessLock(type(self).__name__)
        self._open: list[_R] = []

    def __reduce_ex__(self, protocol):
        raise _refuse_copy(self)

    def __copy__(self):
        raise _refuse_copy(self)

    def __deepcopy__(self, memo):
        raise _refuse_copy(self)

    @property
    def open_reservations(self) -> tuple[_R, ...]:
        """The reservations granted and not yet settled, charged or cancelled (their worst cases
        are held)."""
        with self._lock:
            return tuple(self._open)

    def _hold(self, reservation: _R) -> _R:
        self._open.append(reservation)
        return reservation

    @abc.abstractmethod
    def reserve(self, worst_case: Any, *, label: str = "") -> _R:
        """Authorizes ``worst_case`` or raises :class:`BudgetExceededError` having recorded nothing."""

    @abc.abstractmethod
    def _settle(self, reservation: _R, *used: Any, **_: Any) -> Any:
        """Charges what ``reservation`` used (called once, under the lock, by
        :meth:`Reservation.settle`; the reservation is still in ``_open`` during the call). Each
        ledger names its own ``used`` arguments (``**_`` lets mypy accept them as overrides)."""

    @abc.abstractmethod
    def _worst_use(self, reservation: _R) -> tuple:
        """The ``used`` arguments of :meth:`_settle` that charge ``reservation``'s worst case."""

    @property
    @abc.abstractmethod
    def history(self) -> tuple:
        """The settled charges, in order."""


def _refuse_copy(obj) -> TypeError:
    return TypeError(
        f"a {type(obj).__name__} cannot be copied or pickled: a copy of a budget could be spent again "
        "without the original seeing it (e.g. in a worker process). Keep one ledger in one process and "
        "let the others ask it: dpjax.accounting.LedgerManager (docs/guides/accountant.md)."
    )


class _ProcessLock:
    """The ledger's re-entrant lock, which only the process that created it may take: a ledger
    inherited by a forked child (``fork``, ``forkserver``) refuses every use there instead of
    spending a copy of the budget that its owner never sees."""

    def __init__(self, owner: str):
        self._lock = threading.RLock()
        self._owner = owner
        self._pid = os.getpid()

    def __enter__(self):
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"this {self._owner} belongs to process {self._pid}, not to this forked process "
                f"{os.getpid()}: a forked copy cannot spend its budget. Let the owning process serve it "
                "(dpjax.accounting.LedgerManager, docs/guides/accountant.md)."
            )
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)
