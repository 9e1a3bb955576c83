"""Accountant.epsilon's RDP route (dpjax._src.accounting.tightest): the mixed Laplace + range-bounded
example, lower bounds by dp_accounting's optimistic PLD, and the curves against closed forms."""

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from dpjax._src.accounting.tightest import pure_dp_rdp, range_bounded_rdp
from dpjax._src.additive import laplace_guarantee
from dpjax.accounting import ZCDP, Accountant, ApproxDP, PureDP, RangeBounded

ORDERS = np.asarray(rdp.DEFAULT_RDP_ORDERS, np.float64)


def _mixed(delta=1e-3):
    acct = Accountant(ApproxDP(20.0, delta))
    for _ in range(10):
        acct.spend(laplace_guarantee(0.3))
        acct.spend(RangeBounded(0.3))
    return acct


def _optimistic_lower_bound(delta):
    """An instance of the mixed spends (ten Laplace at 0.3, ten 0.3-range-bounded randomized
    responses of log-odds 0.15, a binary exponential mechanism): dp_accounting's optimistic PLD of
    it bounds every valid figure from below."""
    laplace = pld_lib.from_laplace_mechanism(
        1 / 0.3, pessimistic_estimate=False, value_discretization_interval=1e-4, use_connect_dots=False
    ).self_compose(10)
    response = pld_lib.from_randomized_response(
        2 / (1 + math.exp(0.15)), 2, pessimistic_estimate=False, value_discretization_interval=1e-4
    ).self_compose(10)
    return laplace.compose(response).get_epsilon_for_delta(delta)


@pytest.mark.parametrize(("delta", "rdp_figure"), [(1e-5, 4.221), (1e-8, 5.097)])
def test_mixed_laplace_and_range_bounded_spends_by_the_rdp_route(delta, rdp_figure):
    acct = _mixed()
    epsilon, route = acct.epsilon_route(delta)
    assert route == "rdp" and epsilon == acct.epsilon(delta)
    assert epsilon <= rdp_figure + 1e-3  # the RDP composition (alpha epsilon^2/8), or tighter
    assert _optimistic_lower_bound(delta) <= epsilon
    assert epsilon < _mixed(delta).spent.epsilon - 0.8  # the own (zCDP) rule: 5.060 at 1e-5


def test_pld_route_is_kept_where_it_is_tighter():
    acct = Accountant(ApproxDP(20.0, 1e-6))
    for _ in range(100):
        acct.spend(laplace_guarantee(0.1))
    epsilon, route = acct.epsilon_route(1e-6)
    assert route == "pld" and round(epsilon, 2) == 4.69


def test_approx_spends_add_to_the_rdp_route_and_take_their_delta():
    acct = _mixed()
    acct.spend(ApproxDP(0.5, 5e-6))
    assert acct.epsilon(1e-5) <= _mixed().epsilon(5e-6) + 0.5 + 1e-9


def test_range_bounded_curve_between_the_two_point_pair_and_hoeffding():
    for epsilon in (0.05, 0.3, 1.0, 3.0):
        curve = range_bounded_rdp(epsilon, ORDERS)
        assert np.all(curve <= ORDERS * epsilon**2 / 8 + 1e-15) and np.all(curve <= epsilon)
        # The pair at t = epsilon/2 (loss +-epsilon/2, randomized response) is range bounded.
        assert np.all(curve >= pure_dp_rdp(epsilon / 2, ORDERS) - 1e-12)
        # Within the grid's resolution of the supremum over t, computed densely here.
        t = np.linspace(0, epsilon, 20001)[:, None]
        q = (np.exp(-t) - np.exp(-epsilon)) / (1 - np.exp(-epsilon))
        with np.errstate(divide="ignore"):  # q = 0 at t = epsilon with a large order
            moment = ORDERS * t + np.log(np.exp(-ORDERS * epsilon) + q * (1 - np.exp(-ORDERS * epsilon)))
        exact = np.minimum(np.max(moment, axis=0) / (ORDERS - 1), epsilon)
        assert np.all(curve >= exact - 1e-12)
        assert np.all(curve <= exact + ORDERS * epsilon / 4096 / (ORDERS - 1) * 2 + 1e-12)


def test_pure_dp_curve_is_randomized_response():
    # dp_accounting's two-bucket randomized response with noise p has log-odds log((2 - p) / p).
    for epsilon in (0.1, 1.0, 4.0):
        noise = 2 / (1 + math.exp(epsilon))
        event = dp_event.RandomizedResponseDpEvent(noise_parameter=noise, num_buckets=2)
        relation = rdp.NeighborRel.REPLACE_ONE
        want = rdp.RdpAccountant(list(ORDERS), neighboring_relation=relation).compose(event).rdp
        got = pure_dp_rdp(epsilon, ORDERS)
        np.testing.assert_allclose(
            got, np.minimum(want, np.minimum(epsilon, ORDERS * epsilon**2 / 2)), rtol=1e-9
        )


def test_zcdp_and_pure_spends_without_events():
    acct = Accountant(ApproxDP(50.0, 1e-5))
    for _ in range(20):
        acct.spend(PureDP(0.2))
        acct.spend(ZCDP(0.01))
    epsilon, route = acct.epsilon_route(1e-5)
    assert epsilon <= acct.spent.epsilon and route in ("own", "pld+zcdp", "rdp")
    rho = 20 * 0.01 + 20 * 0.2**2 / 2
    epsilon_rdp = rdp.compute_epsilon(ORDERS, ORDERS * rho, 1e-5)[0]
    assert epsilon <= epsilon_rdp + 1e-12
