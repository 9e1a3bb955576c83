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
protocol of :mod:`dpjax._src.accounting.ledger`, shared with ``PayWhatYouGet`` and ``PerUserLedger``: a
context manager that charges the worst case when left unsettled; every check-and-record is atomic
under the ledger's lock, so concurrent threads never spend past the budget).

``Accountant.epsilon(delta)`` reports the total by the tightest route (``epsilon_route`` names it):
dp_accounting's PLD accountant on the mechanisms' own events where they carry one (Laplace, Gaussian,
Poisson-subsampled runs), the RDP composition of every spend's tightest curve
(:mod:`dpjax._src.accounting.tightest`), or the own rule; and
``Accountant.dp_event()`` exports the spends as one ``dp_accounting`` event.
"""

from __future__ import annotations

import dataclasses
import math

from dpjax._src.accounting.conversions import zcdp_epsilon
from dpjax._src.accounting.guarantees import ZCDP, ApproxDP, DpEvent, Guarantee, PureDP, RangeBounded
from dpjax._src.accounting.ledger import BudgetExceededError, Ledger, Reservation
from dpjax._src.accounting.tightest import rdp_epsilon
from dpjax._src.host_checks import check_probability

__all__ = [
    "Accountant",
    "BudgetExceededError",
    "Reservation",
    "Spend",
]

_SLACK = 1e-12  # relative tolerance for float sums that land exactly on the budget
_DELTA_SHARES = (0.1, 0.5, 0.9)  # shares of delta tried for the PLD block in Accountant.epsilon


@dataclasses.dataclass(frozen=True)
class Spend:
    """One entry of an accountant's history."""

    guarantee: Guarantee
    label: str


class Accountant(Ledger[Reservation]):
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
        self._budget: PureDP | ZCDP | ApproxDP = budget
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
        budget = self._budget
        with self._lock:
            held = self._held()
            if isinstance(budget, PureDP):
                return PureDP(max(budget.epsilon - _pure_total(held).epsilon, 0.0))
            if isinstance(budget, ZCDP):
                return ZCDP(max(budget.rho - _zcdp_total(held).rho, 0.0))
            used = _approx_total(held, budget.delta)
        assert isinstance(used, ApproxDP)  # every held spend was authorized: their composition fits
        return ApproxDP(
            max(budget.epsilon - used.epsilon, 0.0),
            max(budget.delta - used.delta, 0.0),
        )

    def dp_event(self) -> DpEvent:
        """The ``dp_accounting`` event of every recorded spend: a ``ComposedDpEvent`` of their
        :meth:`~dpjax.accounting.Guarantee.to_dp_event` (the mechanisms' own events where attached),
        equal events grouped as ``SelfComposedDpEvent(event, count)`` (composition commutes)."""
        return _grouped([s.guarantee.to_dp_event() for s in self.history])

    def epsilon(self, delta: float) -> float:
        """The least epsilon at ``delta`` of everything recorded, by the tightest route available.

        Three routes, and the smallest result (:meth:`epsilon_route` says which): (1) ``"own"``, this
        accountant's own rule (zCDP with the CKS20 conversion, pure or basic composition); (2)
        ``"pld"``, dp_accounting's PLD accountant (add/remove neighbors, its default grid 1e-4: a
        pessimistic bound) on the spends' own events (Laplace, Gaussian, their subsampled forms:
        exact, see :mod:`dpjax._src.accounting.composition`), with the spends without one as the
        worst-case pair of their (epsilon, delta)-DP bound (exact for pure DP: Kairouz, Oh and
        Viswanath 2015); zCDP-only spends then add by basic composition at a few splits of
        ``delta`` (``"pld+zcdp"``); (3) ``"rdp"``, every spend as its tightest Renyi-DP curve (exact
        Laplace/Gaussian/subsampled curves of its event, the exact curve of range-bounded spends,
        below ``alpha epsilon^2/8``, Cesar and Rogers 2021, Lemma 3.4, and ``alpha rho`` for zCDP),
        added order by order and converted by dp_accounting (:mod:`dpjax._src.accounting.tightest`).
        Budget checks use the own rule.

        Example:
          >>> from dpjax.additive import laplace_guarantee
          >>> acct = Accountant(ApproxDP(6.0, 1e-6))
          >>> for _ in range(100):
          ...     acct.spend(laplace_guarantee(0.1))
          >>> round(acct.epsilon(1e-6), 2), round(acct.spent.epsilon, 2)  # PLD; zCDP (CKS20)
          (4.69, 5.22)
        """
        return self.epsilon_route(delta)[0]

    def epsilon_route(self, delta: float) -> tuple[float, str]:
        """``(epsilon, route)``: :meth:`epsilon`'s figure and the route that gave it (``"own"``,
        ``"pld"``, ``"pld+zcdp"`` or ``"rdp"``; the first listed on a tie).

        Example:
          >>> from dpjax.additive import laplace_guarantee
          >>> acct = Accountant(ApproxDP(10.0, 1e-5))
          >>> for _ in range(10):
          ...     acct.spend(laplace_guarantee(0.3))
          ...     acct.spend(RangeBounded(0.3))
          >>> epsilon, route = acct.epsilon_route(1e-5)
          >>> round(epsilon, 3), route
          (4.173, 'rdp')
        """
        delta = check_probability(delta, "delta", open_low=True, open_high=True)
        spends = [s.guarantee for s in self.history]
        routes = {"own": _epsilon_of(_approx_total(spends, delta))}
        zcdp_only = [g for g in spends if isinstance(g, ZCDP) and _pld_event(g) is None]
        pld = _pld([g for g in spends if not any(g is z for z in zcdp_only)])
        if not zcdp_only:
            routes["pld"] = float(pld.get_epsilon_for_delta(delta))
        else:
            rho = sum(g.rho for g in zcdp_only)
            routes["pld+zcdp"] = min(
                float(pld.get_epsilon_for_delta(share * delta)) + zcdp_epsilon(rho, (1 - share) * delta)
                for share in _DELTA_SHARES
            )
        routes["rdp"] = rdp_epsilon(spends, delta)
        route = min(routes, key=routes.__getitem__)
        return routes[route], route

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
        unsettled charges ``worst_case`` (see :mod:`dpjax._src.accounting.ledger`).

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
            return _pure_total(guarantees)
        if isinstance(self._budget, ZCDP):
            return _zcdp_total(guarantees)
        return _approx_total(guarantees, self._budget.delta)

    def _fits(self, guarantees: list[Guarantee]) -> bool:
        budget = self._budget
        if isinstance(budget, PureDP):
            return _pure_total(guarantees).epsilon <= budget.epsilon * (1 + _SLACK)
        if isinstance(budget, ZCDP):
            return _zcdp_total(guarantees).rho <= budget.rho * (1 + _SLACK)
        total = _approx_total(guarantees, budget.delta)
        if isinstance(total, _Infeasible):
            return False
        return total.epsilon <= budget.epsilon * (1 + _SLACK) and total.delta <= budget.delta * (1 + _SLACK)


def _pure_total(guarantees: list[Guarantee]) -> PureDP:
    return PureDP(sum(g.to_pure().epsilon for g in guarantees))


def _zcdp_total(guarantees: list[Guarantee]) -> ZCDP:
    return ZCDP(sum(g.to_zcdp().rho for g in guarantees))


def _grouped(events: list[DpEvent]) -> DpEvent:
    """``ComposedDpEvent`` of the distinct events, each self-composed its number of times."""
    from dp_accounting import dp_event

    distinct: list[DpEvent] = []
    counts: list[int] = []
    for event in events:
        for i, seen in enumerate(distinct):
            if seen == event:
                counts[i] += 1
                break
        else:
            distinct.append(event)
            counts.append(1)
    return dp_event.ComposedDpEvent(
        [e if n == 1 else dp_event.SelfComposedDpEvent(e, n) for e, n in zip(distinct, counts, strict=True)]
    )


def _epsilon_of(total: Guarantee) -> float:
    return total.epsilon if isinstance(total, ApproxDP) else math.inf


def _pld_event(guarantee: Guarantee):
    """The guarantee's own event if dp_accounting's PLD accountant composes it, else ``None``."""
    event = getattr(guarantee, "event", None)
    if event is None:
        return None
    from dp_accounting.pld import PLDAccountant

    return event if PLDAccountant().supports(event) else None


def _dp_bound(guarantee: Guarantee) -> ApproxDP:
    """The (epsilon, delta)-DP bound a spend without a PLD event enters the PLD with: its own, its
    direct ``approx`` bound, or its pure epsilon."""
    if isinstance(guarantee, ApproxDP):
        return guarantee
    approx = getattr(guarantee, "approx", None)
    if approx is not None:
        return approx
    return ApproxDP(guarantee.to_pure().epsilon, 0.0)


def _pld(guarantees: list[Guarantee]):
    """The PLD of the composition: own events through dp_accounting's PLD accountant, the other
    pure or (epsilon, delta) bounds as their worst-case pair (``from_privacy_parameters``)."""
    from dp_accounting.pld import PLDAccountant, common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    accountant = PLDAccountant()
    accountant.compose(_grouped([e for e in map(_pld_event, guarantees) if e is not None]))
    total = accountant._pld  # dp_accounting 0.6 keeps the composed PLD here; no public getter
    counts: dict[tuple[float, float], int] = {}
    for g in guarantees:
        if _pld_event(g) is None:
            bound = _dp_bound(g)
            counts[bound.epsilon, bound.delta] = counts.get((bound.epsilon, bound.delta), 0) + 1
    for (epsilon, delta), count in counts.items():
        parameters = common.DifferentialPrivacyParameters(epsilon, delta)
        total = total.compose(pld_lib.from_privacy_parameters(parameters).self_compose(count))
    return total


class _Infeasible(Guarantee):
    """Marks a composition that no (epsilon, delta) within the budget's delta can describe."""


def _approx_total(guarantees: list[Guarantee], delta: float) -> ApproxDP | _Infeasible:
    """The (epsilon, delta) composition within ``delta`` (see the module docstring), or
    ``_Infeasible``. A range-bounded part with a direct ``approx`` bound is composed both ways (by
    its range/zCDP bounds, and by ``approx`` with the (epsilon, delta) parts); the least epsilon
    within ``delta`` is kept."""
    totals = [_approx_split(guarantees, delta)]
    if any(getattr(g, "approx", None) is not None for g in guarantees):
        direct = [_direct_bound(g) for g in guarantees]
        totals.append(_approx_split(direct, delta))
    feasible = [t for t in totals if isinstance(t, ApproxDP) and t.delta <= delta * (1 + _SLACK)]
    return min(feasible, key=lambda t: t.epsilon) if feasible else totals[0]


def _direct_bound(guarantee: Guarantee) -> Guarantee:
    """The guarantee's direct ``approx`` bound where it has one, else the guarantee."""
    approx = getattr(guarantee, "approx", None)
    return guarantee if approx is None else approx


def _approx_split(guarantees: list[Guarantee], delta_budget: float) -> ApproxDP | _Infeasible:
    approx = [g for g in guarantees if isinstance(g, ApproxDP)]
    rest = [g for g in guarantees if not isinstance(g, ApproxDP)]
    eps = sum(g.epsilon for g in approx)
    delta = sum(g.delta for g in approx)
    if rest:
        delta_left = delta_budget - delta
        candidates = []
        if all(isinstance(g, PureDP | RangeBounded) for g in rest):
            candidates.append(sum(g.to_pure().epsilon for g in rest))
        if delta_left > 0:
            rho = sum(g.to_zcdp().rho for g in rest)
            candidates.append(zcdp_epsilon(rho, delta_left))
            delta = delta_budget
        eps += min(candidates) if candidates else math.inf
    return ApproxDP(eps, min(delta, 1.0)) if math.isfinite(eps) else _Infeasible()


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
        approx = getattr(worst, "approx", None)
        if approx is not None:
            at = approx.delta
            if not within(actual.to_approx_dp(at).epsilon, approx.epsilon):
                return False
        return not isinstance(worst, PureDP | RangeBounded) or within(actual.to_pure().epsilon, worst.epsilon)
    except (TypeError, ValueError):
        return False
