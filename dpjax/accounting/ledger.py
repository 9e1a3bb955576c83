"""The reserve/settle protocol shared by every budget keeper of the package.

A data-dependent cost (adaptive SVT, pay-what-you-get top-k, per-user filters) is known only after
the release, but the budget must refuse a release *before* any noise is drawn. Every ledger
therefore offers the same two steps:

1. ``reservation = ledger.reserve(worst_case, *, label="")`` authorizes the worst case now, or
   raises :class:`BudgetExceededError` having recorded nothing;
2. ``reservation.settle(*used)`` after the release charges what was actually used (never more than
   the worst case) and releases the rest; it returns what was charged. A reservation settles once
   (a second call raises ``RuntimeError``); a refused settlement (``ValueError``) leaves it open.

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


class BudgetExceededError(RuntimeError):
    """Raised when a spend or reservation would exceed the budget; nothing has been recorded."""


class Reservation:
    """A worst case authorized by :meth:`Ledger.reserve`; settle it once with what was used.

    Attributes:
      worst_case: what was authorized (in the ledger's units).
      label: free text recorded in the ledger's history.
    """

    def __init__(self, ledger: Ledger, worst_case, label: str = ""):
        self._ledger = ledger
        self.worst_case = worst_case
        self.label = label
        self._open = True

    @property
    def settled(self) -> bool:
        return not self._open

    def settle(self, *used):
        """Charges ``used`` (at most the worst case) and releases the rest; returns the charge."""
        if not self._open:
            raise RuntimeError("this reservation has already been settled.")
        charged = self._ledger._settle(self, *used)
        self._open = False
        return charged


class Ledger(abc.ABC):
    """A budget keeper with the reserve/settle protocol (see the module docstring)."""

    @abc.abstractmethod
    def reserve(self, worst_case, *, label: str = "") -> Reservation:
        """Authorizes ``worst_case`` or raises :class:`BudgetExceededError` having recorded nothing."""

    @abc.abstractmethod
    def _settle(self, reservation: Reservation, *used):
        """Charges what ``reservation`` used (called once, by :meth:`Reservation.settle`)."""

    @property
    @abc.abstractmethod
    def history(self) -> tuple:
        """The settled charges, in order."""
