"""Per-user privacy budgets: the analyst-side ledger of a local privacy filter.

Liang and Yi, "Adaptive Privacy Budgeting" (Algorithms 1 and 2, Sec. 4.2; Thms 4.4 and 4.5). Every
user ``i`` holds one scalar budget ``B_i`` that covers all of its data components (Thm 5.1). The
filter rule is "continue while ``spent_i + request_i <= B_i``" (eq. 7); a user whose request would
not fit halts and releases nothing.

Units of the budgets and charges (one ledger, no notion switch):

* without ``delta``: budgets and charges are in the same units, CGP ``rho`` (loss per unit distance
  squared; with the Hamming metric and Lambda = 1 this is rho-zCDP; guarantee: (B_i, Lambda)-CGP per
  user, Thm 4.4) or pure-GP ``epsilon`` per unit distance (Sec. 4.2.1): the filter is the same rule;
* with ``delta`` (and a finite ``lam``): budgets are approximate-GP ``epsilon`` and charges CGP
  ``rho``; the eq. (10) filter is applied. Since the eq. (10) epsilon is non-decreasing in the
  cumulative rho, the filter equals ``spent_i + request_i <= rho*(B_i)`` (:func:`approx_gp_rho_star`),
  which is the capacity the ledger uses (Thm 4.5: (B_i, delta, Lambda)-GP per user).

Protocol (Liang and Yi, Algorithm 1, as the reserve/settle protocol of :mod:`dpjax._src.accounting.ledger`):
``grant = ledger.reserve(r)`` before a query checks the worst case ``r_i`` of every participating user
against its filter and raises before any noise is drawn (or, with ``strict=False``, halts the users that
do not fit, Algorithm 1 line 13); after the query, ``grant.settle(rounds, cumfrac)`` debits exactly what
each user's released noise cost, ``r_i * cumfrac[rounds_i]`` computed in float64 and clamped to ``r_i``.
Reserving the worst case and refunding unused rounds is sound: the filter theorems only need the sum of
the costs actually applied to stay within the budget.

The eq. (10) helpers live here because they are accounting math (a conversion from CGP to
approximate GP); the kernels import them, never the other way round.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from dpjax._src.accounting.ledger import BudgetExceededError, Ledger, Reservation
from dpjax._src.host_checks import check_positive, check_probability
from dpjax._src.numerics import bisect

__all__ = [
    "Grant",
    "LedgerEntry",
    "PerUserLedger",
    "approx_gp_epsilon",
    "approx_gp_rho_star",
]


def _g_delta(t, delta):
    """g_delta(s) = s/(s-1) * 2 sqrt(log(2/((s+1) delta))) of eq. (10), at s = 1 + exp(t)."""
    return (1 + np.exp(-t)) * 2 * np.sqrt(np.maximum(np.log(2 / ((2 + np.exp(t)) * delta)), 0.0))


def approx_gp_epsilon(rho: ArrayLike, delta: float, lam: float) -> float | np.ndarray:
    """The eq. (10) epsilon of a cumulative CGP cost: ``min_{s>1} max(g_delta(s) sqrt(rho), s Lambda rho)``.

    Lemma 3.2 / Thm 4.5 of Liang and Yi: a (rho, Lambda)-CGP mechanism is (epsilon, delta, Lambda)-GP
    with this epsilon. ``s`` ranges over (1, 2/delta - 1), where the log argument is >= 1. The first
    term decreases and the second increases in ``s``, so the minimum of the maximum is at their
    crossing, found by bisection on log(s - 1). Never larger than the closed form
    ``rho Lambda + 2 sqrt(rho log(1/delta))``.

    Args:
      rho: cumulative CGP cost(s), >= 0 (scalar or array).
      delta: in (0, 1).
      lam: the neighborhood radius Lambda, finite and > 0.

    Returns:
      epsilon, a float64 array of ``rho``'s shape (a float for scalar input).

    Example:
      >>> round(float(approx_gp_epsilon(1.0, 1e-6, 1.0)), 3)
      8.017
    """
    delta = check_probability(delta, "delta", open_low=True, open_high=True)
    lam = check_positive(lam, "Lambda")
    rho = np.asarray(rho, dtype=np.float64)
    if np.any(~np.isfinite(rho)) or np.any(rho < 0):
        raise ValueError("rho must be finite and >= 0.")
    sq = np.sqrt(rho)
    # Bracket on log(s - 1); 64 halvings of a width below 80 leave less than 5e-18.
    lo, hi = bisect(
        lambda t: _g_delta(t, delta) * sq > (1 + np.exp(t)) * lam * rho,
        np.full(rho.shape, -60.0), math.log(2 / delta - 2), steps=64,
    )
    eps = np.minimum(
        np.maximum(_g_delta(lo, delta) * sq, (1 + np.exp(lo)) * lam * rho),
        np.maximum(_g_delta(hi, delta) * sq, (1 + np.exp(hi)) * lam * rho),
    )
    eps = np.where(rho == 0, 0.0, eps)
    return float(eps) if eps.ndim == 0 else eps


def approx_gp_rho_star(budget: ArrayLike, delta: float, lam: float) -> float | np.ndarray:
    """``rho*(B) = sup{rho : approx_gp_epsilon(rho) <= B}``: the CGP capacity of the eq. (10) filter.

    Bisection on rho (``approx_gp_epsilon`` is non-decreasing). The returned capacity satisfies
    ``approx_gp_epsilon(rho*) <= B`` (it is the lower end of the final bracket).

    Example:
      >>> rho = approx_gp_rho_star(1.0, 1e-6, 1.0)
      >>> bool(approx_gp_epsilon(rho, 1e-6, 1.0) <= 1.0)
      True
    """
    budget = np.asarray(budget, dtype=np.float64)
    if np.any(~np.isfinite(budget)) or np.any(budget <= 0):
        raise ValueError("budget must be finite and > 0.")
    if budget.ndim > 0:
        unique, inverse = np.unique(budget, return_inverse=True)
        if unique.size < budget.size:
            return np.asarray(approx_gp_rho_star(unique, delta, lam))[inverse].reshape(budget.shape)
    # epsilon(rho) >= rho * Lambda, hence rho* <= B / Lambda; and epsilon <= closed form.
    hi = budget / check_positive(lam, "Lambda") * (1 + 1e-12)
    lo, _ = bisect(lambda rho: approx_gp_epsilon(rho, delta, lam) <= budget, 0.0, hi, steps=64)
    return float(lo) if lo.ndim == 0 else lo


class Grant(Reservation):
    """An authorized per-user worst case; settle it once with ``(rounds, cumfrac)``.

    Attributes:
      r: (n,) float64 allotments, each exactly representable in the kernel dtype (rounded towards
        zero) and fitting its user's filter; 0 for users that do not take part (also ``worst_case``).
      label: free text recorded in the history.
      dtype: the kernel dtype the allotments were rounded to.
    """

    def __init__(self, ledger: PerUserLedger, r: np.ndarray, label: str, dtype: np.dtype):
        super().__init__(ledger, r, label)
        self.r = r
        self.dtype = dtype

    def kernel_r(self) -> np.ndarray:
        """The allotments as the kernel receives them (exact in ``dtype``)."""
        return self.r.astype(self.dtype)


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One settled query: its label, how many users were charged, the total and maximum debit."""

    label: str
    users_charged: int
    total: float
    maximum: float


class PerUserLedger(Ledger[Grant]):
    """Per-user budgets and the filter rule, on the host in float64.

    Args:
      budget: initial budget per user, a scalar (with ``n``) or an (n,) array; every entry > 0.
      n: number of users when ``budget`` is a scalar.
      delta, lam: for approximate-GP budgets (see the module docstring), the delta in (0, 1) and the
        finite neighborhood radius Lambda; without them budgets are in the charges' units.

    Example:
      >>> import numpy as np
      >>> ledger = PerUserLedger(1e-4, n=3)
      >>> grant = ledger.reserve(np.full(3, 5e-5), label="range count")
      >>> debit = grant.settle(np.array([1, 4, 0]), np.array([0, .25, .5, .75, 1]))
      >>> ledger.remaining.round(10).tolist()
      [8.75e-05, 5e-05, 0.0001]
    """

    def __init__(
        self, budget: ArrayLike, n: int | None = None, *, delta: float | None = None, lam: float | None = None
    ) -> None:
        super().__init__()
        budget = np.asarray(budget, dtype=np.float64)
        if budget.ndim == 0:
            if n is None:
                raise ValueError("n is required when budget is a scalar.")
            if int(n) < 1:
                raise ValueError(f"n must be >= 1, got {n}.")
            budget = np.full(int(n), float(budget))
        elif budget.ndim != 1 or (n is not None and budget.shape[0] != n):
            raise ValueError(f"budget must be a scalar or an (n,) array, got shape {budget.shape}.")
        if budget.size == 0 or not np.all(np.isfinite(budget)) or np.any(budget <= 0):
            raise ValueError("budget must be finite and > 0 for every user.")
        self.budget = budget
        if (delta is None) != (lam is None):
            raise ValueError("give both delta and lam (approximate-GP budgets) or neither.")
        self.delta, self.lam = None, None
        if delta is not None and lam is not None:  # both or neither (checked above)
            self.delta = check_probability(delta, "delta", open_low=True, open_high=True)
            self.lam = check_positive(lam, "Lambda")
            self.capacity = np.asarray(approx_gp_rho_star(budget, self.delta, self.lam))
        else:
            self.capacity = budget.copy()
        self.spent = np.zeros_like(budget)
        self.halted = np.zeros(budget.shape, dtype=bool)
        self._history: list[LedgerEntry] = []

    @property
    def n(self) -> int:
        return self.budget.shape[0]

    @property
    def remaining(self) -> np.ndarray:
        """Each user's remaining capacity (in the charges' units: CGP rho with ``delta``), >= 0.

        Outstanding (authorized, unsettled) grants count as spent.
        """
        with self._lock:
            return np.maximum(self.capacity - self.spent - self._reserved(), 0.0)

    @property
    def history(self) -> tuple[LedgerEntry, ...]:
        with self._lock:
            return tuple(self._history)

    def _reserved(self) -> np.ndarray:
        """The open grants' allotments, summed per user (call under the lock)."""
        return sum((grant.r for grant in self._open), np.zeros_like(self.budget))

    def reserve(
        self, r: ArrayLike, *, label: str = "", strict: bool = True, dtype: DTypeLike = np.float32
    ) -> Grant:
        """Checks the filter ``spent_i + r_i <= capacity_i`` for every user with ``r_i > 0``.

        Allotments are first rounded towards zero to ``dtype`` (the kernel dtype), then shaved by at
        most a few ulps where float rounding alone would overshoot the capacity. Users with
        ``r_i = 0`` or already halted take no part (``R = 0`` gives NULL, Algorithm 1 line 7).

        Returns:
          A :class:`Grant` to settle with ``(rounds, cumfrac)``; as a context manager, leaving its
          block unsettled charges every allotment in full (see :mod:`dpjax._src.accounting.ledger`).

        Raises:
          BudgetExceededError: (``strict=True``) some user's request does not fit; nothing is
            recorded. With ``strict=False`` those users are halted instead (Algorithm 1 line 13):
            they get ``r_i = 0`` now and in every later grant.
        """
        r = np.asarray(r, dtype=np.float64)
        if r.ndim == 0:
            r = np.full(self.n, float(r))
        if r.shape != (self.n,):
            raise ValueError(f"r must have shape ({self.n},), got {r.shape}.")
        if not np.all(np.isfinite(r)) or np.any(r < 0):
            raise ValueError("r must be finite and >= 0.")
        dtype = np.dtype(dtype)
        r = _round_down(r, dtype)
        with self._lock:  # check and record atomically
            return self._hold(self._authorize(r, label, strict, dtype))

    def _authorize(self, r: np.ndarray, label: str, strict: bool, dtype: np.dtype) -> Grant:
        r = np.where(self.halted, 0.0, r)
        used = self.spent + self._reserved()
        over = used + r > self.capacity
        close = over & (used + r <= self.capacity * (1 + 1e-6) + 1e-300)
        for _ in range(64):  # float rounding only: shave by ulps
            if not np.any(close):
                break
            shaved = np.nextafter(r.astype(dtype), dtype.type(0)).astype(np.float64)
            r = np.where(close, shaved, r)
            over = used + r > self.capacity
            close &= over
        if np.any(over):
            if strict:
                i = int(np.argmax(over))
                raise BudgetExceededError(
                    f"{int(over.sum())} user(s) would exceed their budget (user {i}: spent "
                    f"{used[i]:.6g} + request {r[i]:.6g} > capacity {self.capacity[i]:.6g})."
                )
            self.halted |= over
            r = np.where(over, 0.0, r)
        return Grant(self, r, label, dtype)

    def _settle(self, grant: Grant, rounds, cumfrac) -> np.ndarray:
        """``grant.settle(rounds, cumfrac)``: debits ``min(r_i * cumfrac[rounds_i], r_i)`` (float64)
        and returns the debits.

        Args:
          rounds: (n,) integers in ``0..c``, the number of rounds each user released in (``0``:
            not queried).
          cumfrac: (c + 1,) cumulative split fractions with ``cumfrac[0] = 0`` and
            ``cumfrac[c] = 1`` (see :func:`dpjax.budgeting.split_schedule`).
        """
        rounds = np.asarray(rounds)
        cumfrac = np.asarray(cumfrac, dtype=np.float64)
        if rounds.shape != (self.n,):
            raise ValueError(f"rounds must have shape ({self.n},), got {rounds.shape}.")
        if cumfrac.ndim != 1 or cumfrac[0] != 0 or cumfrac[-1] != 1:
            raise ValueError("cumfrac must be 1-D with cumfrac[0] = 0 and cumfrac[-1] = 1.")
        if np.any(rounds < 0) or np.any(rounds >= cumfrac.size):
            raise ValueError(f"rounds must lie in 0..{cumfrac.size - 1}.")
        debit = np.minimum(grant.r * cumfrac[rounds], grant.r)
        spent = self.spent + debit
        if np.any(spent > self.capacity):  # impossible after reserve; kept as a hard invariant
            raise BudgetExceededError("a settlement would exceed a user's budget.")
        self.spent = spent
        self._history.append(
            LedgerEntry(grant.label, int(np.count_nonzero(debit)), float(debit.sum()), float(debit.max()))
        )
        return debit

    def _worst_use(self, grant: Grant) -> tuple:
        """Every user released in every round: debits of ``r_i`` in full."""
        return np.ones(self.n, dtype=np.int64), np.array([0.0, 1.0])


def _round_down(r: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``r`` rounded towards zero to ``dtype`` and returned in float64."""
    cast = r.astype(dtype)
    up = cast.astype(np.float64) > r
    cast = np.where(up, np.nextafter(cast, dtype.type(0)), cast)
    return cast.astype(np.float64)
