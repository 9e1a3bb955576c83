"""The Accountant: a privacy budget that refuses a release before it would be exceeded.

``Accountant(budget)`` takes a ``PureDP``, ``ZCDP`` or ``ApproxDP`` budget. ``spend`` checks that the
composition of everything spent so far with the new guarantee still fits the budget and raises
``BudgetExceededError`` *before* recording anything when it does not, so that a caller who spends
before drawing noise never releases an over-budget result.

Accounting per budget type:

* ``PureDP(epsilon)``: spends must imply pure DP; epsilons add.
* ``ZCDP(rho)``: spends must imply zCDP (pure epsilon as epsilon^2/2, range-bounded as
  epsilon^2/8); rhos add.
* ``ApproxDP(epsilon, delta)``: the spends that imply zCDP are composed in zCDP and converted at
  the delta left over by the (epsilon, delta) spends (Canonne, Kamath and Steinke 2020); when every
  one of them is pure, plain epsilon addition is used instead if it is smaller. The
  (epsilon, delta) spends add by basic composition.

Data-dependent costs (adaptive SVT, pay-what-you-get, per-user filters) use ``reserve``: the worst
case is authorized before the release and ``Reservation.settle`` charges what was actually used (the
protocol of :mod:`dpjax.accounting.ledger`, shared with ``PayWhatYouGet`` and ``PerUserLedger``).
"""

from __future__ import annotations

import dataclasses
import math

from dpjax.accounting.conversions import zcdp_epsilon
from dpjax.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP, RangeBounded
from dpjax.accounting.ledger import BudgetExceededError, Ledger, Reservation

__all__ = ["Accountant", "BudgetExceededError", "Reservation", "Spend"]

_SLACK = 1e-12  # relative tolerance for float sums that land exactly on the budget


@dataclasses.dataclass(frozen=True)
class Spend:
    """One entry of an accountant's history."""

    guarantee: Guarantee
    label: str


class Accountant(Ledger):
    """Tracks spends against a fixed privacy budget.

    Example:
      >>> acct = Accountant(PureDP(1.0))
      >>> acct.spend(PureDP(0.4), label="median")
      >>> acct.remaining
      PureDP(epsilon=0.6)
    """

    def __init__(self, budget: Guarantee):
        if not isinstance(budget, PureDP | ZCDP | ApproxDP):
            raise TypeError(f"budget must be PureDP, ZCDP or ApproxDP, got {type(budget).__name__}.")
        super().__init__()
        self._budget = budget
        self._history: list[Spend] = []

    @property
    def budget(self) -> Guarantee:
        return self._budget

    @property
    def history(self) -> tuple[Spend, ...]:
        """Every recorded spend, in order."""
        with self._lock:
            return tuple(self._history)

    @property
    def spent(self) -> Guarantee:
        """The composition of every recorded spend, in the budget's notion."""
        return self._total([s.guarantee for s in self.history])

    @property
    def remaining(self) -> Guarantee:
        """What is left, in the budget's notion (outstanding reservations count as spent)."""
        with self._lock:
            used = self._total(self._held())
        if isinstance(self._budget, PureDP):
            return PureDP(max(self._budget.epsilon - used.epsilon, 0.0))
        if isinstance(self._budget, ZCDP):
            return ZCDP(max(self._budget.rho - used.rho, 0.0))
        return ApproxDP(
            max(self._budget.epsilon - used.epsilon, 0.0),
            max(self._budget.delta - used.delta, 0.0),
        )

    def can_spend(self, guarantee: Guarantee) -> bool:
        """Whether ``spend(guarantee)`` would succeed (at this moment: another thread may spend
        before you do; ``spend`` and ``reserve`` check and record atomically)."""
        with self._lock:
            return self._fits([*self._held(), guarantee])

    def spend(self, guarantee: Guarantee, label: str = "") -> None:
        """Records a spend, or raises ``BudgetExceededError`` without recording anything.

        The check and the record are one atomic step: concurrent spends never exceed the budget.
        """
        with self._lock:
            self._authorize(guarantee)
            self._history.append(Spend(guarantee, label))

    def reserve(self, worst_case: Guarantee, *, label: str = "") -> Reservation:
        """Authorizes a worst case now (atomically, like :meth:`spend`).

        Use the returned reservation as a context manager and ``settle`` it with the guarantee
        actually spent (which must not exceed ``worst_case``) after the release; leaving the block
        unsettled charges ``worst_case`` (see :mod:`dpjax.accounting.ledger`).

        Example:
          >>> acct = Accountant(PureDP(1.0))
          >>> with acct.reserve(PureDP(0.8), label="adaptive") as r:
          ...     r.settle(PureDP(0.3))  # what the release actually used
          PureDP(epsilon=0.3)
          >>> acct.remaining
          PureDP(epsilon=0.7)
        """
        with self._lock:
            self._authorize(worst_case)
            return self._hold(Reservation(self, worst_case, label))

    def _held(self) -> list[Guarantee]:
        """Every recorded spend and every open reservation's worst case (call under the lock)."""
        return [s.guarantee for s in self._history] + [r.worst_case for r in self._open]

    def _settle(self, reservation: Reservation, actual: Guarantee) -> Guarantee:
        if not _dominated(actual, reservation.worst_case):
            worst = reservation.worst_case
            raise ValueError(f"actual cost {actual} exceeds the reserved worst case {worst}.")
        self._history.append(Spend(actual, reservation.label))
        return actual

    def _worst_use(self, reservation: Reservation) -> tuple[Guarantee]:
        return (reservation.worst_case,)

    def _authorize(self, guarantee: Guarantee) -> None:
        if not isinstance(guarantee, Guarantee):
            raise TypeError(f"expected a Guarantee, got {type(guarantee).__name__}.")
        self._convertible(guarantee)
        if not self._fits([*self._held(), guarantee]):
            raise BudgetExceededError(
                f"spending {guarantee} would exceed the budget {self._budget} (remaining: {self.remaining})."
            )

    def _convertible(self, guarantee: Guarantee) -> None:
        if isinstance(self._budget, PureDP):
            guarantee.to_pure()
        elif isinstance(self._budget, ZCDP):
            guarantee.to_zcdp()

    def _total(self, guarantees: list[Guarantee]) -> Guarantee:
        if isinstance(self._budget, PureDP):
            return PureDP(sum(g.to_pure().epsilon for g in guarantees))
        if isinstance(self._budget, ZCDP):
            return ZCDP(sum(g.to_zcdp().rho for g in guarantees))
        approx = [g for g in guarantees if isinstance(g, ApproxDP)]
        rest = [g for g in guarantees if not isinstance(g, ApproxDP)]
        eps = sum(g.epsilon for g in approx)
        delta = sum(g.delta for g in approx)
        if rest:
            delta_left = self._budget.delta - delta
            candidates = []
            if all(isinstance(g, PureDP | RangeBounded) for g in rest):
                candidates.append(sum(g.to_pure().epsilon for g in rest))
            if delta_left > 0:
                rho = sum(g.to_zcdp().rho for g in rest)
                candidates.append(zcdp_epsilon(rho, delta_left))
                delta = self._budget.delta
            eps += min(candidates) if candidates else math.inf
        return ApproxDP(eps, min(delta, 1.0)) if math.isfinite(eps) else _Infeasible()

    def _fits(self, guarantees: list[Guarantee]) -> bool:
        total = self._total(guarantees)
        if isinstance(total, _Infeasible):
            return False
        if isinstance(total, PureDP):
            return total.epsilon <= self._budget.epsilon * (1 + _SLACK)
        if isinstance(total, ZCDP):
            return total.rho <= self._budget.rho * (1 + _SLACK)
        return total.epsilon <= self._budget.epsilon * (1 + _SLACK) and total.delta <= self._budget.delta * (
            1 + _SLACK
        )


class _Infeasible(Guarantee):
    """Marks a composition that no (epsilon, delta) within the budget's delta can describe."""


def _dominated(actual: Guarantee, worst: Guarantee) -> bool:
    """Whether ``actual`` costs no more than ``worst`` in every notion ``worst`` is charged in."""

    def within(a: float, w: float) -> bool:
        return a <= w * (1 + _SLACK)

    if isinstance(worst, ApproxDP):
        return (
            isinstance(actual, ApproxDP)
            and within(actual.epsilon, worst.epsilon)
            and within(actual.delta, worst.delta)
        )
    try:
        if not within(actual.to_zcdp().rho, worst.to_zcdp().rho):
            return False
        return not isinstance(worst, PureDP | RangeBounded) or within(actual.to_pure().epsilon, worst.epsilon)
    except TypeError:
        return False
