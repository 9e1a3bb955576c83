"""Privacy guarantees as values.

A mechanism's companion function returns one of these frozen dataclasses; the accountant composes
and converts them. They carry no behaviour beyond validation and their standard conversions, in the
spirit of ``dp_accounting.dp_event``: the math lives in :mod:`dpjax._src.accounting.conversions`.

* ``PureDP(epsilon)``: epsilon-differential privacy (Dwork, McSherry, Nissim, Smith 2006).
* ``ApproxDP(epsilon, delta)``: (epsilon, delta)-DP.
* ``ZCDP(rho)``: rho-zero-concentrated DP (Bun and Steinke 2016, Def. 1.1).
* ``RangeBounded(epsilon)``: epsilon-range-bounded (Durfee and Rogers 2019, Def. 3.1): the privacy
  loss ranges over an interval of width epsilon. Implies epsilon-DP and epsilon^2/8-zCDP
  (Cesar and Rogers 2021, Lemma 3.4).

One value carries both accountings. ``PureDP`` and ``RangeBounded`` take an optional ``rho``: a
zCDP bound the mechanism's paper proves directly and that is tighter than the generic conversion
(e.g. ``k`` composed epsilon-range-bounded selections are ``k epsilon``-range-bounded *and*
``k epsilon^2/8``-zCDP, not only ``(k epsilon)^2/8``). ``to_zcdp()`` returns the tighter of the two,
the :class:`~dpjax.accounting.Accountant` converts each spend to its budget's notion, and a companion
never asks which notion the caller wants. ``rho`` is kept only when it is strictly tighter than the
generic conversion, so equal guarantees compare equal.

``to_dp_event()`` exports a guarantee as a ``dp_accounting`` event: the mechanism's own event where
its companion attaches one (``LaplaceDpEvent``, ``GaussianDpEvent``: exact for every ``dp_accounting``
accountant, PLD included), else ``ZCDpEvent`` for everything that implies zCDP (RDP accountant);
``dp_accounting`` 0.6 has no pure or (epsilon, delta) event, so a guarantee that is only
(epsilon, delta)-DP exports as ``UnsupportedDpEvent``. The attached event does not take part in
equality: it describes the same guarantee exactly.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dp_accounting.dp_event import DpEvent
else:  # dp_accounting loads on first use (seconds): at run time the annotation reads Any
    DpEvent = Any

__all__ = [
    "ZCDP",
    "ApproxDP",
    "Guarantee",
    "PureDP",
    "RangeBounded",
]


def _check_nonnegative(name: str, value: float) -> float:
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value}.")
    return value


class Guarantee:
    """Base class of the guarantee values (for ``isinstance`` checks and typing)."""

    def to_zcdp(self) -> ZCDP:
        """The rho-zCDP this guarantee implies; raises ``TypeError`` when it implies none."""
        raise TypeError(f"{type(self).__name__} does not imply a zCDP guarantee.")

    def to_pure(self) -> PureDP:
        """The pure DP this guarantee implies; raises ``TypeError`` when it implies none."""
        raise TypeError(f"{type(self).__name__} does not imply a pure DP guarantee.")

    def to_approx_dp(self, delta: float) -> ApproxDP:
        """An (epsilon, delta)-DP guarantee at the given delta."""
        raise NotImplementedError

    def to_dp_event(self) -> DpEvent:
        """The ``dp_accounting`` event of this guarantee: the mechanism's event when its companion
        attached one, else ``ZCDpEvent(rho)`` of :meth:`to_zcdp` (an RDP accountant composes it
        exactly), ``UnsupportedDpEvent`` when none implies it."""
        from dp_accounting import dp_event

        event = getattr(self, "event", None)
        if event is not None:
            return event
        try:
            return dp_event.ZCDpEvent(self.to_zcdp().rho)
        except TypeError:
            return dp_event.UnsupportedDpEvent()


def _tight_rho(guarantee, generic: float) -> None:
    """Validates the optional direct zCDP bound and drops it unless it beats ``generic`` (an infinite
    bound never does). Squares of epsilon are products here and in the companions: past ~1.3e154 they
    are infinite, where Python's float power raises ``OverflowError``; a zCDP conversion then is
    refused with a ``ValueError``."""
    rho = guarantee.rho
    if rho == math.inf:
        rho = None
    if rho is not None:
        rho = _check_nonnegative("rho", rho)
        if rho >= generic:
            rho = None
    object.__setattr__(guarantee, "rho", rho)


def _repr(guarantee) -> str:
    fields = [f"epsilon={guarantee.epsilon!r}"]
    if guarantee.rho is not None:
        fields.append(f"rho={guarantee.rho!r}")
    if getattr(guarantee, "approx", None) is not None:
        fields.append(f"approx={guarantee.approx!r}")
    return f"{type(guarantee).__name__}({', '.join(fields)})"


@dataclasses.dataclass(frozen=True)
class PureDP(Guarantee):
    """epsilon-DP: Pr[M(x) in S] <= e^epsilon Pr[M(x') in S] for all neighbors and events.

    ``rho`` (optional): a rho-zCDP bound proved for the mechanism, kept when tighter than
    epsilon^2/2. ``event`` (optional): the mechanism's own ``dp_accounting`` event.
    """

    epsilon: float
    rho: float | None = None
    event: object = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_nonnegative("epsilon", self.epsilon))
        _tight_rho(self, (self.epsilon * self.epsilon) / 2)

    __repr__ = _repr

    def to_pure(self) -> PureDP:
        return self

    def to_zcdp(self) -> ZCDP:
        """epsilon-DP implies epsilon^2/2-zCDP (Bun and Steinke 2016, Prop. 1.4), or ``rho``."""
        return ZCDP((self.epsilon * self.epsilon) / 2 if self.rho is None else self.rho)

    def to_approx_dp(self, delta: float = 0.0) -> ApproxDP:
        if delta > 0 and self.rho is not None:
            direct = ApproxDP(self.epsilon, delta)
            return min(direct, self.to_zcdp().to_approx_dp(delta), key=lambda g: g.epsilon)
        return ApproxDP(self.epsilon, delta)


@dataclasses.dataclass(frozen=True)
class ApproxDP(Guarantee):
    """(epsilon, delta)-DP: Pr[M(x) in S] <= e^epsilon Pr[M(x') in S] + delta."""

    epsilon: float
    delta: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_nonnegative("epsilon", self.epsilon))
        delta = _check_nonnegative("delta", self.delta)
        if delta > 1:
            raise ValueError(f"delta must be in [0, 1], got {delta}.")
        object.__setattr__(self, "delta", delta)

    def to_pure(self) -> PureDP:
        if self.delta == 0:
            return PureDP(self.epsilon)
        return super().to_pure()

    def to_approx_dp(self, delta: float | None = None) -> ApproxDP:
        if delta is not None and delta < self.delta:
            raise ValueError(f"cannot lower delta from {self.delta} to {delta}.")
        return self


@dataclasses.dataclass(frozen=True)
class ZCDP(Guarantee):
    """rho-zCDP: the Renyi divergence of order alpha is at most rho*alpha for every alpha > 1.

    ``event`` (optional): the mechanism's own ``dp_accounting`` event.
    """

    rho: float
    event: object = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "rho", _check_nonnegative("rho", self.rho))

    def to_zcdp(self) -> ZCDP:
        return self

    def to_approx_dp(self, delta: float) -> ApproxDP:
        """The tightest standard conversion, Canonne, Kamath and Steinke (2020), Prop. 12."""
        from dpjax._src.accounting.conversions import zcdp_epsilon

        return ApproxDP(zcdp_epsilon(self.rho, delta), delta)


@dataclasses.dataclass(frozen=True)
class RangeBounded(Guarantee):
    """epsilon-range-bounded (Durfee and Rogers 2019): the privacy loss spans at most epsilon.

    ``rho`` (optional): a rho-zCDP bound proved for the mechanism, kept when tighter than
    epsilon^2/8 (e.g. ``k`` composed epsilon-range-bounded steps: ``k epsilon^2/8``).
    ``approx`` (optional): an ``ApproxDP`` bound proved for the mechanism, kept when its epsilon is
    below ``epsilon`` (e.g. ``k`` nonadaptive range-bounded steps by the optimal composition of
    Dong, Durfee and Rogers 2020, Thm. 3); used at every delta >= its delta.
    """

    epsilon: float
    rho: float | None = None
    approx: ApproxDP | None = None

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_nonnegative("epsilon", self.epsilon))
        _tight_rho(self, (self.epsilon * self.epsilon) / 8)
        if self.approx is not None:
            if not isinstance(self.approx, ApproxDP):
                raise TypeError(f"approx must be an ApproxDP, got {type(self.approx).__name__}.")
            if self.approx.epsilon >= self.epsilon:
                object.__setattr__(self, "approx", None)

    __repr__ = _repr

    def to_pure(self) -> PureDP:
        """epsilon-range-bounded implies epsilon-DP (and the zCDP bound carries over)."""
        return PureDP(self.epsilon, self.to_zcdp().rho)

    def to_zcdp(self) -> ZCDP:
        """epsilon-range-bounded implies epsilon^2/8-zCDP (Cesar and Rogers 2021, Lemma 3.4), or ``rho``."""
        return ZCDP((self.epsilon * self.epsilon) / 8 if self.rho is None else self.rho)

    def to_approx_dp(self, delta: float = 0.0) -> ApproxDP:
        """The least epsilon of the range bound, its zCDP conversion and ``approx``, at ``delta``."""
        candidates = [ApproxDP(self.epsilon, delta)]
        if delta > 0:
            candidates.append(self.to_zcdp().to_approx_dp(delta))
        if self.approx is not None and self.approx.delta <= delta:
            candidates.append(ApproxDP(self.approx.epsilon, delta))
        return min(candidates, key=lambda g: g.epsilon)
