"""Composition of privacy guarantees.

Basic (sequential) composition: epsilons and deltas add for pure and approximate DP (Dwork et al.
2006); rho adds for zCDP (Bun and Steinke 2016, Lemma 2.3); epsilon adds for range-bounded
mechanisms (Durfee and Rogers 2019, Lemma 3.2). Mixtures are composed in the strongest notion that
every part implies: pure DP and range-bounded parts compose in zCDP when any part is zCDP, and
everything composes as approximate DP once a part is only (epsilon, delta)-DP.

What ``dp_accounting`` composes tightly is kept: when every part carries its mechanism's own event
(Laplace, Gaussian, their subsampled forms), the composed guarantee carries their
``ComposedDpEvent``, so its :meth:`~dpjax.accounting.Guarantee.to_dp_event` gives a PLD accountant
the exact composition (e.g. 1000 Laplace releases at epsilon 0.01: 1.36 at delta 1e-6 by PLD, where
the composed 0.05-zCDP converts to 1.47).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from dpjax._src.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP, RangeBounded

__all__ = [
    "compose",
]


def compose(guarantees: Iterable[Guarantee], *, delta: float | None = None) -> Guarantee:
    """Sequential composition of guarantees.

    Args:
      guarantees: the guarantees of mechanisms run on the same data.
      delta: needed only when zCDP parts are composed with (epsilon, delta)-DP parts: the zCDP block
        is converted to (epsilon, delta)-DP at this delta before the basic composition.

    Composition keeps both accountings: the composed ``RangeBounded``/``PureDP`` value carries the sum
    of the parts' zCDP bounds as its ``rho`` (so ``k`` parts ``RangeBounded(eps)`` compose to
    ``RangeBounded(k eps, rho=k eps^2/8)``, not only to the ``(k eps)^2/8`` of the composed range).

    Returns:
      ``RangeBounded`` if every part is range-bounded, ``PureDP`` if every part is pure (or
      range-bounded), ``ZCDP`` if every part implies zCDP and at least one is ``ZCDP``, otherwise
      ``ApproxDP``. A ``PureDP`` or ``ZCDP`` result carries the parts' ``ComposedDpEvent`` when every
      part carries its own event; a ``RangeBounded`` result carries the basic composition of the
      parts' ``approx`` bounds when any part has one.
    """
    parts = list(guarantees)
    composed = _compose(parts, delta)
    events = [getattr(g, "event", None) for g in parts]
    if parts and isinstance(composed, PureDP | ZCDP) and all(e is not None for e in events):
        from dp_accounting import dp_event

        return dataclasses.replace(composed, event=dp_event.ComposedDpEvent(events))
    return composed


def _zcdp_rho(guarantee: PureDP | RangeBounded) -> float:
    """The part's zCDP bound, infinite where it has no finite one (an epsilon past ~1.3e154)."""
    try:
        return guarantee.to_zcdp().rho
    except ValueError:
        return math.inf


def _compose(parts: list[Guarantee], delta: float | None) -> Guarantee:
    for g in parts:
        if not isinstance(g, Guarantee):
            raise TypeError(f"cannot compose {type(g).__name__}; expected a Guarantee.")
    if not parts:
        return PureDP(0.0)
    bounded = [g for g in parts if isinstance(g, PureDP | RangeBounded)]
    if len(bounded) == len(parts):
        rho = sum(_zcdp_rho(g) for g in bounded)  # infinite: no rho is kept
        ranges = [g for g in bounded if isinstance(g, RangeBounded)]
        if len(ranges) == len(parts):
            return RangeBounded(sum(g.epsilon for g in ranges), rho, _basic_approx(ranges))
        return PureDP(sum(g.epsilon for g in bounded), rho)
    if all(isinstance(g, PureDP | RangeBounded | ZCDP) for g in parts):
        return ZCDP(sum(g.to_zcdp().rho for g in parts))
    # Some part is (epsilon, delta)-DP only.
    approx = [g for g in parts if isinstance(g, ApproxDP)]
    concentrated = [g for g in parts if isinstance(g, ZCDP)]
    pure = [g for g in parts if isinstance(g, PureDP | RangeBounded)]
    eps = sum(g.epsilon for g in approx) + sum(g.to_pure().epsilon for g in pure)
    total_delta = sum(g.delta for g in approx)
    if concentrated:
        if delta is None:
            raise ValueError("composing zCDP with (epsilon, delta)-DP needs the delta argument.")
        block = ZCDP(sum(g.rho for g in concentrated)).to_approx_dp(delta)
        eps += block.epsilon
        total_delta += block.delta
    return ApproxDP(eps, min(total_delta, 1.0))


def _basic_approx(parts: list[RangeBounded]) -> ApproxDP | None:
    """Basic composition of the parts' ``approx`` bounds (``(epsilon, 0)`` where a part has none)."""
    if all(g.approx is None for g in parts):
        return None
    bounds = [g.approx or ApproxDP(g.epsilon, 0.0) for g in parts]
    return ApproxDP(sum(b.epsilon for b in bounds), min(sum(b.delta for b in bounds), 1.0))
