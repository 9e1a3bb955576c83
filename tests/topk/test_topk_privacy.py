"""Exact privacy audits of the top-k mechanisms by enumeration on tiny domains.

For every histogram with small counts and every add-one-user neighbor ``h' = h + 1_U`` (``|U| <=
Delta``), the closed-form output laws (``topk_laws``) are compared by the hockey-stick
divergence ``sum_o max(0, P(o) - e^eps Q(o))`` in both directions, which must be at most the claimed
delta at the claimed epsilon. Negative controls (the threshold without its "+1", a Delta that the
neighbors do not respect, a pay-what-you-get session that does not charge ⊥) must fail.
"""

import math

import numpy as np
import pytest
from topk_laws import (
    BOTTOM,
    fixed_threshold_law,
    hockey_stick,
    limited_domain_law,
    neighbor_pairs,
    private_kbar_law,
)

from dpjax._src.accounting.pay_what_you_get import Ticket
from dpjax.accounting import BudgetExceededError, PayWhatYouGet
from dpjax.topk import fixed_threshold_guarantee, limited_domain_guarantee, private_kbar_guarantee


def worst_divergence(law, eps, pairs):
    worst = 0.0
    for h, g in pairs:
        p, q = law(h), law(g)
        worst = max(worst, hockey_stick(p, q, eps), hockey_stick(q, p, eps))
    return worst


GRID = [(eps, delta) for eps in (0.5, 2.0) for delta in (0.05, 0.2)]
SHAPES = [(4, 2, 2, None), (4, 1, 3, None), (4, 2, 3, 1), (3, 2, 3, None)]  # (d, k, kbar, Delta)


@pytest.mark.parametrize(("eps", "delta"), GRID)
@pytest.mark.parametrize(("d", "k", "kbar", "cap"), SHAPES)
def test_limited_domain_is_private(eps, delta, d, k, kbar, cap):
    g = limited_domain_guarantee(k, eps, delta)
    assert g.epsilon == pytest.approx(k * eps)
    law = lambda h: limited_domain_law(h, k, kbar, eps, delta, max_contributions=cap)  # noqa: E731
    assert worst_divergence(law, g.epsilon, neighbor_pairs(d, cap)) <= g.delta * (1 + 1e-9)


@pytest.mark.parametrize(("eps", "delta"), GRID)
def test_limited_domain_without_plus_one_fails(eps, delta):
    # Mutation test: dropping the threshold's "+1" (the l_inf sensitivity) breaks the guarantee.
    law = lambda h: limited_domain_law(h, 2, 2, eps, delta, plus=0.0)  # noqa: E731
    assert worst_divergence(law, 2 * eps, neighbor_pairs(4)) > 1.2 * delta


def test_limited_domain_with_a_false_delta_bound_fails():
    # Using min(Delta, kbar) = 1 while a user may touch every item breaks the bad-event bound
    # (two items can leave the top-kbar at once; d - kbar >= 2 so that they can).
    eps, delta = 1.0, 0.05
    law = lambda h: limited_domain_law(h, 1, 2, eps, delta, max_contributions=1)  # noqa: E731
    assert worst_divergence(law, eps, neighbor_pairs(4)) > 1.5 * delta


@pytest.mark.parametrize(("eps", "delta"), GRID)
def test_strictly_limited_domain_is_private(eps, delta):
    g = limited_domain_guarantee(2, eps, delta)
    law = lambda h: limited_domain_law(h, 2, 3, eps, delta, strict=True)  # noqa: E731
    assert worst_divergence(law, g.epsilon, neighbor_pairs(4)) <= g.delta * (1 + 1e-9)


@pytest.mark.parametrize(("eps", "delta"), GRID)
@pytest.mark.parametrize("cap", [None, 1])
def test_private_kbar_is_private(eps, delta, cap):
    g = private_kbar_guarantee(1, eps, delta)
    assert g.epsilon == pytest.approx(2 * eps)
    law = lambda h: private_kbar_law(h, 1, 3, eps, delta, max_contributions=cap)  # noqa: E731
    assert worst_divergence(law, g.epsilon, neighbor_pairs(4, cap)) <= g.delta * (1 + 1e-9)


@pytest.mark.parametrize(("eps", "delta"), GRID)
def test_fixed_threshold_is_private_and_plus_one_matters(eps, delta):
    g = fixed_threshold_guarantee(2, eps, delta)
    assert g.epsilon == pytest.approx(2 * eps)
    law = lambda h: fixed_threshold_law(h, 2, eps, delta)  # noqa: E731
    assert worst_divergence(law, g.epsilon, neighbor_pairs(4)) <= g.delta * (1 + 1e-9)
    mutant = lambda h: fixed_threshold_law(h, 2, eps, delta, plus=0.0)  # noqa: E731
    assert worst_divergence(mutant, g.epsilon, neighbor_pairs(4)) > 1.5 * delta


def test_bad_event_bound_lemma_5_5():
    # P_h[an item of D_h \ D_h' is returned] <= delta, exactly (Lemma 5.5), for Delta = 1 and kbar = 2.
    eps, delta = 1.0, 0.1
    worst = 0.0
    for h, g in neighbor_pairs(4, 1):
        for a, b in ((h, g), (g, h)):
            top_a = {i for _, i in sorted((-c, i) for i, c in enumerate(a))[:2]}
            top_b = {i for _, i in sorted((-c, i) for i, c in enumerate(b))[:2]}
            law = limited_domain_law(a, 2, 2, eps, delta, max_contributions=1)
            bad = sum(p for o, p in law.items() if any(i in top_a - top_b for i in o if i != BOTTOM))
            worst = max(worst, bad)
    assert 0 < worst <= delta


# -- pay-what-you-get sessions (Algorithm 2, Theorem 2) -------------------------------------------


class _BottomFreeTicket(Ticket):
    """The wrong rule seen in some third-party code: ⊥ is not charged."""

    def cost(self, num_returned, bottom):
        return super().cost(num_returned, bottom) - int(np.sum(bottom))


def session_law(make, histogram, kbar, k_max, ticket_type=Ticket):
    """The law of an analyst who repeats the top-k query with k = min(k_max, what remains) until
    the accountant refuses; outcomes are tuples of per-call outcomes. Each branch replays its calls
    on a fresh accountant from ``make`` (a ledger cannot be copied)."""
    law = {}

    def replay(calls):
        acct = make()
        for k, returned, bottom in calls:
            ticket = acct.reserve(k)
            ticket.__class__ = ticket_type
            ticket.settle(returned, bottom)
        return acct

    def run(calls, prefix, prob):
        acct = replay(calls)
        k = min(k_max, acct.remaining_outcomes)
        try:
            ticket = acct.reserve(max(k, 1))
        except BudgetExceededError:
            law[prefix] = law.get(prefix, 0.0) + prob
            return
        for o, p in limited_domain_law(histogram, ticket.k, kbar, acct.epsilon, acct.delta).items():
            n = len(o) - (o[-1] == BOTTOM)
            run((*calls, (ticket.k, n, o[-1] == BOTTOM)), (*prefix, o), prob * p)

    run((), (), 1.0)
    return law


@pytest.mark.slow
def test_pay_what_you_get_session_is_private():
    # Theorem 2 with delta' = 0: (k* eps, 2 l* delta), charged by what each call returned.
    eps, delta, k_star, l_star = 1.0, 0.05, 3, 3
    make = lambda: PayWhatYouGet(eps, delta, max_outcomes=k_star, max_calls=l_star)  # noqa: E731
    g = make().guarantee
    assert (g.epsilon, g.delta) == pytest.approx((k_star * eps, 2 * l_star * delta))
    worst = 0.0
    for h, h2 in neighbor_pairs(3, values=range(3)):
        p, q = session_law(make, h, 2, 2), session_law(make, h2, 2, 2)
        assert sum(p.values()) == pytest.approx(1.0)
        worst = max(worst, hockey_stick(p, q, g.epsilon), hockey_stick(q, p, g.epsilon))
    assert worst <= g.delta


def test_session_that_does_not_charge_bottom_fails():
    # With k* = 1 and ⊥ free, the analyst can ask l* = 8 times; each ⊥ leaks up to eps, and the
    # claimed (eps, 2 l* delta) fails on a histogram whose top item is as heavy as ⊥.
    eps, delta, k_star, l_star = 1.0, 1e-5, 1, 8
    h, h2 = [12, 0], [13, 0]  # one user adds to item 0; w_item = e^12 ~ w_bot = e * 1e5
    make = lambda: PayWhatYouGet(eps, delta, max_outcomes=k_star, max_calls=l_star)  # noqa: E731
    claimed = make().guarantee
    charged = session_law(make, h, 1, 1), session_law(make, h2, 1, 1)
    assert max(hockey_stick(*charged, claimed.epsilon), hockey_stick(*charged[::-1], claimed.epsilon)) <= (
        claimed.delta
    )
    free = session_law(make, h, 1, 1, _BottomFreeTicket), session_law(make, h2, 1, 1, _BottomFreeTicket)
    assert max(len(o) for o in free[0]) == l_star
    assert hockey_stick(*free, claimed.epsilon) > 10 * claimed.delta
    assert math.isclose(sum(free[0].values()), 1.0)
