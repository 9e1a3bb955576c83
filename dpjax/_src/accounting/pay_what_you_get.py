"""Pay-what-you-get accounting for top-k over unknown domains (Durfee and Rogers, NeurIPS 2019).

"Practical Differentially Private Top-k Selection with Pay-what-you-get Composition",
arXiv 1905.04273. The extracted paper text lost its formulas; those below are rebuilt from the
statements of Lemma 4.4 and Theorems 1-3 (corroborated by the google-research
``dp_mm_domain/top_k.py`` implementation of Theorem 1):

* :func:`epsilon_star` -- Lemma 4.4 (composition of ``k`` epsilon-range-bounded mechanisms) and
  Theorem 1 (one call of the limited-domain Algorithm 1 with output length at most ``k`` is
  ``(epsilon_star(k, epsilon, delta'), delta + delta')``-DP)::

      epsilon_star = min{ k eps,
                          k eps tanh(eps/2) + eps sqrt(2 k ln(1/delta')),
                          k eps^2 / 2 + eps sqrt((k/2) ln(1/delta')) }

  (``tanh(eps/2) = (e^eps - 1)/(e^eps + 1)``; with ``delta' = 0`` only ``k eps`` applies).
* :func:`advanced_composition_epsilon` -- Theorem 3 (the first two terms), for epsilon-DP parts
  that are not range-bounded (the fixed-threshold Algorithm 8).
* :func:`calibrate_epsilon` -- the inverse of ``epsilon_star`` in ``epsilon``, by bisection.
* :func:`optimal_composition` -- Lemma A.1 (Kairouz, Oh and Viswanath), used for Figure 1.
* :class:`PayWhatYouGet` -- Algorithm 2 / Theorem 2: with a cap ``max_outcomes`` (k*) on the total
  number of returned outcomes (indices *and* ⊥, a ⊥ counting as one outcome) and a cap
  ``max_calls`` (l*) on the number of top-k queries, every sequence of limited-domain calls with
  per-step ``(epsilon, delta)`` is ``(epsilon_star(k*, epsilon, delta'), 2 l* delta + delta')``-DP
  under add/remove-one-user neighbors.

The guarantee of Theorem 2 is ex ante: it is a function of the caps, never of the realised usage.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import ArrayLike

from dpjax._src.accounting.guarantees import ApproxDP
from dpjax._src.accounting.ledger import BudgetExceededError, Ledger, Reservation
from dpjax._src.host_checks import check_epsilon, check_int, check_probability
from dpjax._src.numerics import bisect

__all__ = [
    "Charge",
    "PayWhatYouGet",
    "Ticket",
    "advanced_composition_epsilon",
    "calibrate_epsilon",
    "epsilon_star",
    "optimal_composition",
    "pay_what_you_get_guarantee",
]

# Halvings of the calibration bracket [lo, hi], hi <= 2 max(lo, target): 200 reach adjacent float64
# values for any root above 2^-140 target (54 halvings per binade crossed, see dpjax.numerics).
_BISECTION_STEPS = 200


def _check_delta_prime(delta_prime) -> float:
    return check_probability(delta_prime, "delta_prime", open_high=True)


def advanced_composition_epsilon(k: int, epsilon: float, delta_prime: float) -> float:
    """Theorem 3 (advanced composition): ``k`` adaptive epsilon-DP steps are ``(eps', delta')``-DP.

    ``eps' = min{k eps, k eps tanh(eps/2) + eps sqrt(2 k ln(1/delta'))}``; ``k eps`` when
    ``delta' = 0``. (Each step's own delta adds separately, ``k delta`` in total.)

    Example:
      >>> round(advanced_composition_epsilon(100, 0.1, 1e-6), 4)
      5.7561
    """
    k = check_int(k, "k", minimum=0)
    epsilon = check_epsilon(epsilon, allow_zero=True)
    delta_prime = _check_delta_prime(delta_prime)
    basic = k * epsilon
    if k == 0 or delta_prime == 0:
        return basic
    log_term = math.log(1 / delta_prime)
    return min(basic, k * epsilon * math.tanh(epsilon / 2) + epsilon * math.sqrt(2 * k * log_term))


def epsilon_star(k: int, epsilon: float, delta_prime: float) -> float:
    """Lemma 4.4 / Theorem 1: the epsilon of ``k`` adaptive epsilon-range-bounded steps at ``delta'``.

    This is the accountant formula of the paper: one call of the limited-domain mechanism
    (Algorithm 1 or 5) returning at most ``k`` outcomes is ``(epsilon_star(k, eps, delta'),
    delta + delta')``-DP, and ``max_outcomes`` pay-what-you-get outcomes cost
    ``epsilon_star(max_outcomes, eps, delta')`` (Theorem 2).

    Args:
      k: number of composed steps (outputs), >= 0.
      epsilon: per-step epsilon (the Gumbel scale is ``1/epsilon`` on counts), >= 0.
      delta_prime: the extra delta of the composition, in [0, 1).

    Returns:
      ``min{k eps, k eps tanh(eps/2) + eps sqrt(2k ln(1/delta')), k eps^2/2 + eps sqrt(k ln(1/delta')/2)}``.

    Example:
      >>> round(epsilon_star(10, 0.1, 1e-6), 5)
      0.88113
    """
    bound = advanced_composition_epsilon(k, epsilon, delta_prime)
    if k == 0 or delta_prime == 0:
        return bound
    log_term = math.log(1 / delta_prime)
    return min(bound, k * (epsilon * epsilon) / 2 + epsilon * math.sqrt(k * log_term / 2))


def calibrate_epsilon(target_epsilon: float, k: int, delta_prime: float) -> float:
    """The largest per-step epsilon with ``epsilon_star(k, epsilon, delta') <= target_epsilon``.

    ``epsilon_star`` is continuous and increasing in ``epsilon``, so bisection applies; the result
    is rounded down (it never overspends the target).

    Example:
      >>> eps = calibrate_epsilon(1.0, 10, 1e-6)
      >>> epsilon_star(10, eps, 1e-6) <= 1.0
      True
    """
    target = check_epsilon(target_epsilon, "target_epsilon")
    k = check_int(k, "k", minimum=1)
    delta_prime = _check_delta_prime(delta_prime)
    lo, hi = 0.0, target
    while epsilon_star(k, hi, delta_prime) <= target:
        lo, hi = hi, 2 * hi
    lo, _ = bisect(lambda eps: epsilon_star(k, float(eps), delta_prime) <= target, lo, hi, _BISECTION_STEPS)
    return float(lo)


def optimal_composition(k: int, epsilon: float, delta: float) -> tuple[float, float]:
    """Lemma A.1 (Kairouz, Oh and Viswanath 2015): optimal composition of ``k`` epsilon-DP steps.

    The composition is ``((k - 2i) eps, delta_i)``-DP for each ``i`` in ``0..floor(k/2)`` with
    ``delta_i = sum_{l<i} C(k,l) (e^{(k-l) eps} - e^{(k-2i+l) eps}) / (1 + e^eps)^k``. As in the
    paper's Figure 1, this returns the smallest ``(k - 2i) eps`` whose ``delta_i <= delta``, with
    that ``delta_i``. Computed in log space with running sums (O(k)).

    Example:
      >>> eps, d = optimal_composition(100, 0.1, 1e-6)
      >>> round(eps, 6), d < 1e-6
      (4.8, True)
    """
    k = check_int(k, "k", minimum=1)
    epsilon = check_epsilon(epsilon)
    delta = check_probability(delta, "delta")
    ells = np.arange(k // 2, dtype=np.float64)
    log_binom = np.array([math.lgamma(k + 1) - math.lgamma(l + 1) - math.lgamma(k - l + 1) for l in ells])
    log_norm = k * np.logaddexp(0.0, epsilon)
    # delta_i = (A_i - e^{-2 i eps} B_i) / (1 + e^eps)^k with running sums A_i, B_i over l < i.
    log_a = np.logaddexp.accumulate(log_binom + (k - ells) * epsilon) if k > 1 else np.zeros(0)
    log_b = np.logaddexp.accumulate(log_binom + (k + ells) * epsilon) if k > 1 else np.zeros(0)
    i = ells + 1
    ratio = np.exp(log_b - 2 * i * epsilon - log_a)  # < 1: each term of A_i exceeds B_i's
    deltas = np.exp(log_a - log_norm) * (1.0 - ratio)
    fits = np.nonzero(deltas <= delta)[0]
    if fits.size == 0:
        return k * epsilon, 0.0
    best = int(fits[-1])  # delta_i increases with i: the largest fitting i has the smallest epsilon
    return (k - 2 * (best + 1)) * epsilon, float(deltas[best])


def pay_what_you_get_guarantee(
    epsilon: float, delta: float, *, max_outcomes: int, max_calls: int, delta_prime: float = 0.0
) -> ApproxDP:
    """Theorem 2: ``(epsilon_star(k*, epsilon, delta'), 2 l* delta + delta')``-DP.

    Args:
      epsilon: per-step epsilon of every limited-domain call.
      delta: per-call delta of every limited-domain call (its threshold's bad-event bound).
      max_outcomes: k*, the cap on the total number of returned outcomes (⊥ counts as one).
      max_calls: l*, the cap on the number of top-k queries.
      delta_prime: the composition's extra delta, in [0, 1).

    Example:
      >>> g = pay_what_you_get_guarantee(0.1, 1e-9, max_outcomes=100, max_calls=20, delta_prime=1e-6)
      >>> round(g.epsilon, 4), g.delta
      (3.1283, 1.04e-06)
    """
    epsilon = check_epsilon(epsilon)
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    max_outcomes = check_int(max_outcomes, "max_outcomes", minimum=1)
    max_calls = check_int(max_calls, "max_calls", minimum=1)
    delta_prime = _check_delta_prime(delta_prime)
    total_delta = 2 * max_calls * delta + delta_prime
    if total_delta > 1:
        raise ValueError(f"2 * max_calls * delta + delta_prime = {total_delta} exceeds 1.")
    return ApproxDP(epsilon_star(max_outcomes, epsilon, delta_prime), total_delta)


@dataclasses.dataclass(frozen=True)
class Charge:
    """One settled call of a :class:`PayWhatYouGet` session: its label and outcomes charged."""

    label: str
    queries: int
    outcomes: int


class PayWhatYouGet(Ledger["Ticket"]):
    """The pay-what-you-get accountant of Algorithm 2 (Theorem 2).

    A session fixes the per-step ``epsilon`` and per-call ``delta`` of every limited-domain call and
    two caps: ``max_outcomes`` (k*) on the total number of returned outcomes and ``max_calls`` (l*)
    on the number of top-k queries. Each call is charged by what it returned: its number of indices
    plus one if it ended with ⊥ (``num_returned + bottom``), plus one more for the private choice of
    kbar (Algorithm 6). A call is admitted only if its worst case (``k`` outcomes, ``k + 1`` with
    Algorithm 6) still fits, so the caps are never exceeded; :meth:`reserve` raises
    ``BudgetExceededError`` *before* any noise is drawn (the reserve/settle protocol of
    :mod:`dpjax._src.accounting.ledger`). The guarantee (:attr:`guarantee`) depends
    on the caps only.

    Example:
      >>> import jax
      >>> from dpjax import topk
      >>> acct = PayWhatYouGet(0.1, 1e-9, max_outcomes=30, max_calls=5, delta_prime=1e-6)
      >>> ticket = acct.reserve(10)
      >>> res = topk.limited_domain(jax.random.key(0), [90, 80, 70, 5, 3], 3, 4, acct.epsilon, acct.delta)
      >>> ticket.settle(res.num_returned, res.bottom) <= 4
      True
      >>> acct.remaining_outcomes <= 29
      True
    """

    def __init__(
        self, epsilon: float, delta: float, *, max_outcomes: int, max_calls: int, delta_prime: float = 0.0
    ):
        super().__init__()
        self._guarantee = pay_what_you_get_guarantee(
            epsilon, delta, max_outcomes=max_outcomes, max_calls=max_calls, delta_prime=delta_prime
        )
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.delta_prime = float(delta_prime)
        self.max_outcomes = int(max_outcomes)
        self.max_calls = int(max_calls)
        self._outcomes = 0
        self._calls = 0
        self._history: list[Charge] = []

    @property
    def guarantee(self) -> ApproxDP:
        """``(epsilon_star(k*, epsilon, delta'), 2 l* delta + delta')``: a function of the caps only."""
        return self._guarantee

    @property
    def history(self) -> tuple[Charge, ...]:
        with self._lock:
            return tuple(self._history)

    @property
    def outcomes_used(self) -> int:
        """Outcomes charged by settled calls."""
        return self._outcomes

    @property
    def calls_used(self) -> int:
        """Queries made by settled calls."""
        return self._calls

    @property
    def remaining_outcomes(self) -> int:
        """Outcomes still available (open tickets count at their worst case)."""
        with self._lock:
            return self.max_outcomes - self._outcomes - sum(t.worst_case for t in self._open)

    @property
    def remaining_calls(self) -> int:
        """Queries still available (open tickets count)."""
        with self._lock:
            return self.max_calls - self._calls - sum(t.queries for t in self._open)

    def reserve(self, k: int, *, queries: int = 1, private_kbar: bool = False, label: str = "") -> Ticket:
        """Authorizes ``queries`` top-k calls of output length at most ``k`` before they run.

        Args:
          k: the calls' ``k`` (maximum number of indices each returns).
          queries: number of independent queries released together (e.g. one vmapped call over a
            batch of histograms of the same users); each is a call of Algorithm 2.
          private_kbar: the calls use Algorithm 6, whose choice of kbar costs one more outcome.
          label: recorded in the history.

        Returns:
          A :class:`Ticket` to settle with what the calls returned; as a context manager, leaving
          its block unsettled charges the worst case (see :mod:`dpjax._src.accounting.ledger`).

        Raises:
          BudgetExceededError: if the worst case ``queries * (k + private_kbar)`` outcomes or the
            ``queries`` calls do not fit in what remains; nothing is recorded.
        """
        k = check_int(k, "k", minimum=1)
        queries = check_int(queries, "queries", minimum=1)
        per_query = k + (1 if private_kbar else 0)
        worst = queries * per_query
        with self._lock:  # check and record atomically
            return self._hold(self._authorize(k, queries, bool(private_kbar), worst, label))

    def _authorize(self, k: int, queries: int, private_kbar: bool, worst: int, label: str) -> Ticket:
        if queries > self.remaining_calls:
            raise BudgetExceededError(
                f"{queries} more top-k queries would exceed max_calls={self.max_calls} "
                f"(remaining: {self.remaining_calls})."
            )
        if worst > self.remaining_outcomes:
            raise BudgetExceededError(
                f"a worst case of {worst} outcomes would exceed max_outcomes={self.max_outcomes} "
                f"(remaining: {self.remaining_outcomes}); lower k to at most "
                f"{self.remaining_outcomes // queries - (1 if private_kbar else 0)}."
            )
        return Ticket(self, k, queries, private_kbar, worst, label)

    def _settle(self, ticket: Ticket, num_returned, bottom) -> int:
        outcomes = ticket.cost(num_returned, bottom)
        self._outcomes += outcomes
        self._calls += ticket.queries
        self._history.append(Charge(ticket.label, ticket.queries, outcomes))
        return outcomes

    def _worst_use(self, ticket: Ticket) -> tuple:
        """Every query returned ``k`` indices (and, with Algorithm 6, its kbar): the worst case."""
        return np.full(ticket.queries, ticket.k), np.zeros(ticket.queries, bool)


class Ticket(Reservation):
    """A reserved batch of top-k calls (worst case: outcomes); settle it once with
    ``(num_returned, bottom)``, what the calls returned."""

    def __init__(
        self, accountant: PayWhatYouGet, k: int, queries: int, private_kbar: bool, worst: int, label: str
    ):
        super().__init__(accountant, worst, label)
        self.k = k
        self.queries = queries
        self.private_kbar = private_kbar
        self.epsilon = accountant.epsilon
        self.delta = accountant.delta

    def cost(self, num_returned: ArrayLike, bottom: ArrayLike) -> int:
        """Outcomes charged for these results: ``sum(num_returned + bottom (+1 with Algorithm 6))``."""
        n = np.asarray(num_returned).astype(np.int64).ravel()
        b = np.asarray(bottom).astype(bool).ravel()
        if n.shape != (self.queries,) or b.shape != (self.queries,):
            raise ValueError(
                f"expected {self.queries} results, got num_returned {n.shape} and bottom {b.shape}."
            )
        if np.any(n < 0) or np.any(n > self.k):
            raise ValueError(f"num_returned must be in [0, k={self.k}].")
        if np.any(b != (n < self.k)):
            raise ValueError("bottom must be True exactly when num_returned < k (⊥ ends a short output).")
        return int(n.sum() + b.sum() + (self.queries if self.private_kbar else 0))
