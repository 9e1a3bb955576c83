"""Tight accounting: exponential mechanisms are range-bounded (charged as OpenDP charges them), and
what dp_accounting composes exactly (Laplace, Gaussian) reaches its PLD accountant unchanged.

OpenDP (0.16) charges its Gumbel report-noisy-max and its private quantile ``epsilon^2/8``-zCDP, where
``epsilon`` is its own pure-DP map of the same measurement (Cesar and Rogers 2021, Lemma 3.4); the
companions of the same mechanisms must charge the same. dp_accounting's PLD accountant composes the
attached Laplace / Gaussian events exactly; an Accountant's total must equal its result for the same
events (1000 Laplace releases at epsilon 0.01: 1.36 at delta 1e-6, not the 1.47 of 0.05-zCDP).
"""

import math

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant

from dpjax import quantiles, selection
from dpjax._src.additive import gaussian_guarantee, laplace_guarantee
from dpjax.accounting import (
    ZCDP,
    Accountant,
    ApproxDP,
    BudgetExceededError,
    PureDP,
    RangeBounded,
    compose,
    zcdp_epsilon,
)

CANDIDATES = [float(c) for c in range(-5, 6)]


@pytest.fixture(scope="module")
def dp():
    """OpenDP's prelude (a peer, in the ``bench`` extra): the charges below are compared with its own."""
    prelude = pytest.importorskip("opendp.prelude")
    prelude.enable_features("contrib")
    return prelude


def _floats(dp):
    return dp.vector_domain(dp.atom_domain(T=float, nan=False))


def _noisy_max(dp, measure, scale, monotonic):
    metric = dp.linf_distance(T=float, monotonic=monotonic)
    return dp.m.make_noisy_max(_floats(dp), metric, measure, scale=scale)


def _quantile(dp, measure, scale, alpha, metric):
    return dp.m.make_private_quantile(
        _floats(dp), metric, measure, candidates=CANDIDATES, alpha=alpha, scale=scale
    )


def _exponential_mechanism_guarantees(epsilon, alpha, monotonic=False):
    return (
        selection.report_noisy_max_guarantee(epsilon, monotonic=monotonic),
        selection.exponential_mechanism_guarantee(epsilon, monotonic=monotonic),
        selection.gumbel_top_k_guarantee(1, epsilon, monotonic=monotonic),
        quantiles.emq_guarantee(epsilon),
        quantiles.joint_exp_guarantee(epsilon),
        quantiles.ind_exp_guarantee([alpha], epsilon),
        quantiles.app_ind_exp_guarantee([alpha], epsilon, delta=0.0),
    )


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 1.0, 7.0])
def test_every_exponential_mechanism_is_range_bounded_at_epsilon_squared_over_8(epsilon):
    # Cesar and Rogers 2021, Lemma 3.4: an epsilon-DP exponential mechanism is epsilon-range-bounded,
    # hence epsilon^2/8-zCDP (not the epsilon^2/2 of a generic epsilon-DP release).
    for monotonic in (False, True):
        for guarantee in _exponential_mechanism_guarantees(epsilon, 0.3, monotonic):
            assert isinstance(guarantee, RangeBounded)
            assert guarantee.to_pure().epsilon == pytest.approx(epsilon, rel=1e-12)
            assert guarantee.to_zcdp().rho == pytest.approx(epsilon**2 / 8, rel=1e-12)
    # m quantiles at epsilon/m each compose in zCDP to m (epsilon/m)^2/8.
    for m in (1, 3, 29):
        levels = [(i + 1) / (m + 1) for i in range(m)]
        rho = quantiles.ind_exp_guarantee(levels, epsilon).to_zcdp().rho
        assert rho == pytest.approx(m * (epsilon / m) ** 2 / 8, rel=1e-12)


@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_gumbel_selection_is_charged_as_opendp_charges_it(dp, scale, monotonic):
    # The same mechanism: argmax of scores + Gumbel(scale), scale = (2 or 1) * sensitivity / epsilon.
    epsilon = (1.0 if monotonic else 2.0) / scale
    rho = _noisy_max(dp, dp.zero_concentrated_divergence(), scale, monotonic).map(1.0)
    pure = _noisy_max(dp, dp.max_divergence(), scale, monotonic).map(1.0)
    assert pure == pytest.approx(epsilon, rel=1e-12)
    for guarantee in (
        selection.report_noisy_max_guarantee(epsilon, monotonic=monotonic),
        selection.exponential_mechanism_guarantee(epsilon, monotonic=monotonic),
        selection.gumbel_top_k_guarantee(1, epsilon, monotonic=monotonic),
    ):
        assert isinstance(guarantee, RangeBounded)
        assert guarantee.to_zcdp().rho == pytest.approx(rho, rel=1e-12)
        assert guarantee.to_pure().epsilon == pytest.approx(pure, rel=1e-12)


@pytest.mark.parametrize("metric", ["symmetric_distance", "insert_delete_distance"])
@pytest.mark.parametrize(("alpha", "scale"), [(0.5, 1.0), (0.25, 2.0), (0.9, 0.5)])
def test_quantile_exponential_mechanisms_are_charged_as_opendp_charges_its_quantile(dp, alpha, scale, metric):
    # OpenDP's private quantile is the exponential mechanism on a rank utility: at the scale where it
    # is epsilon-DP it charges epsilon^2/8-zCDP; so do EMQ, JointExp and IndExp with one level.
    metric = getattr(dp, metric)()
    for d_in in (1, 2):
        epsilon = _quantile(dp, dp.max_divergence(), scale, alpha, metric).map(d_in)
        rho = _quantile(dp, dp.zero_concentrated_divergence(), scale, alpha, metric).map(d_in)
        for guarantee in (
            quantiles.emq_guarantee(epsilon),
            quantiles.joint_exp_guarantee(epsilon),
            quantiles.ind_exp_guarantee([alpha], epsilon),
            quantiles.app_ind_exp_guarantee([alpha], epsilon, delta=0.0),
        ):
            assert isinstance(guarantee, RangeBounded)
            assert guarantee.to_zcdp().rho == pytest.approx(rho, rel=1e-12)
            assert guarantee.to_pure().epsilon == pytest.approx(epsilon, rel=1e-12)


def test_ind_exp_is_charged_as_opendp_composes_its_quantiles(dp):
    # m quantiles at epsilon/m each (OpenDP's scale set so), composed by OpenDP in zCDP: m (epsilon/m)^2/8.
    levels, epsilon, metric = [0.1, 0.5, 0.9], 1.5, dp.symmetric_distance()
    scales = [_quantile(dp, dp.max_divergence(), 1.0, a, metric).map(1) / (epsilon / 3) for a in levels]
    for a, scale in zip(levels, scales, strict=True):
        assert _quantile(dp, dp.max_divergence(), scale, a, metric).map(1) == pytest.approx(epsilon / 3)
    zcdp = dp.zero_concentrated_divergence()
    parts = [_quantile(dp, zcdp, s, a, metric) for a, s in zip(levels, scales, strict=True)]
    composed = dp.c.make_composition(parts).map(1)
    assert quantiles.ind_exp_guarantee(levels, epsilon).to_zcdp().rho == pytest.approx(composed, rel=1e-9)


def test_app_ind_exp_keeps_its_approximate_bound_in_every_budget():
    g = quantiles.app_ind_exp_guarantee([0.25, 0.5, 0.75], 1.0, delta=1e-6)
    approx = Accountant(ApproxDP(1.0, 1e-6))
    approx.spend(g)  # the DDR20 bound fits exactly, where m eps_0 > 1 and its zCDP would not
    assert approx.spent == ApproxDP(1.0, 1e-6) and not approx.can_spend(PureDP(1e-3))
    zcdp = Accountant(ZCDP(0.05))
    zcdp.spend(g)  # usable under a zCDP budget too (an ApproxDP-only guarantee was refused there)
    assert zcdp.spent.rho == pytest.approx(g.rho)
    both = compose([g, g])
    assert both.approx == ApproxDP(2.0, 2e-6) and both.rho == pytest.approx(2 * g.rho)
    with pytest.raises(BudgetExceededError):
        approx.reserve(g)
    fresh = Accountant(ApproxDP(1.0, 1e-6))
    with fresh.reserve(g) as r:  # a worst case with an approximate bound, settled with less
        r.settle(quantiles.app_ind_exp_guarantee([0.25, 0.5, 0.75], 0.5, delta=1e-6))
    with pytest.raises(ValueError, match="exceeds"):
        fresh.reserve(PureDP(0.0)).settle(g)


def _pld_epsilon(event, delta):
    accountant = PLDAccountant()
    accountant.compose(event)
    return accountant.get_epsilon(delta)


def test_accountant_total_is_dp_accountings_pld_for_laplace_releases():
    acct = Accountant(PureDP(20.0))
    for _ in range(1000):
        acct.spend(laplace_guarantee(0.01))
    tight = acct.epsilon(1e-6)
    assert tight == _pld_epsilon(dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(100.0), 1000), 1e-6)
    assert tight == _pld_epsilon(acct.dp_event(), 1e-6)
    assert tight == pytest.approx(1.363, abs=1e-3)
    assert zcdp_epsilon(1000 * 0.01**2 / 2, 1e-6) == pytest.approx(1.4716, abs=1e-4)  # the zCDP route


def test_composition_keeps_the_events_dp_accounting_composes_exactly():
    parts = [laplace_guarantee(0.5), gaussian_guarantee(3.0), laplace_guarantee(0.2, sensitivity=2.0)]
    composed = compose(parts)
    assert isinstance(composed, ZCDP) and composed.rho == pytest.approx(0.5**2 / 2 + 1 / 18 + 0.2**2 / 2)
    events = dp_event.ComposedDpEvent([g.to_dp_event() for g in parts])
    assert composed.to_dp_event() == events
    acct = Accountant(ApproxDP(5.0, 1e-6))
    for g in parts:
        acct.spend(g)
    assert acct.epsilon(1e-6) == _pld_epsilon(events, 1e-6) < composed.to_approx_dp(1e-6).epsilon
    assert compose([*parts, RangeBounded(0.1)]).to_dp_event() == dp_event.ZCDpEvent(composed.rho + 0.1**2 / 8)


def test_accountant_total_with_spends_dp_accounting_cannot_compose():
    # Pure spends without an event enter the PLD as the epsilon-DP worst-case pair; zCDP-only spends
    # add to the PLD block by basic composition at a split of delta.
    acct = Accountant(PureDP(20.0))
    for _ in range(200):
        acct.spend(laplace_guarantee(0.05))
    laplace_only = acct.epsilon(1e-6)
    for _ in range(5):
        acct.spend(quantiles.emq_guarantee(0.1))
    mixed = acct.epsilon(1e-6)
    assert laplace_only < mixed <= laplace_only + 5 * 0.1  # an epsilon-DP pair adds at most epsilon
    assert mixed < zcdp_epsilon(200 * 0.05**2 / 2 + 5 * 0.1**2 / 8, 1e-6)  # the own (zCDP) route
    approx = Accountant(ApproxDP(20.0, 1e-6))
    for _ in range(200):
        approx.spend(laplace_guarantee(0.05))
    approx.spend(ZCDP(1e-4))  # zCDP only: PLD at a share of delta + its conversion at the rest
    events = dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(20.0), 200)
    shares = [_pld_epsilon(events, s * 1e-6) + zcdp_epsilon(1e-4, (1 - s) * 1e-6) for s in (0.1, 0.5, 0.9)]
    assert laplace_only < approx.epsilon(1e-6) <= min(*shares, approx.spent.epsilon)
    # One 1-range-bounded spend alone: its RDP curve (dpjax.accounting.tightest) beats the 1-DP pair
    # (1.0), and stays above the exact epsilon of the worst 1-range-bounded pair at 1e-6, 0.99841 (the
    # two-point pair of loss t, t - 1, maximized over t by root finding).
    em = Accountant(ApproxDP(10.0, 1e-6))
    em.spend(quantiles.joint_exp_guarantee(1.0))
    assert em.spent.epsilon == 1.0 and 0.99840 < em.epsilon(1e-6) <= 1.0
    assert em.epsilon_route(1e-6)[1] == "rdp"
    assert math.isclose(Accountant(PureDP(1.0)).epsilon(1e-6), 0.0)


def test_accountant_composes_a_training_run_with_other_releases_by_pld():
    # The run's Poisson-subsampled Gaussians (amplification included) and a Laplace release on the
    # same data: exactly dp_accounting's PLD of the two events; far below the run's zCDP bound.
    from dpjax import optax as dpo

    run = dpo.training_guarantee(steps=100, sampling_rate=0.01, noise_multiplier=2.0, clip=1.0)
    assert run.rho == pytest.approx(100 / 8)
    acct = Accountant(ZCDP(20.0))
    acct.spend(run)
    acct.spend(laplace_guarantee(0.1))
    both = dp_event.ComposedDpEvent([run.event, dp_event.LaplaceDpEvent(10.0)])
    assert acct.epsilon(1e-6) == _pld_epsilon(both, 1e-6) < 1.0 < acct.spent.to_approx_dp(1e-6).epsilon
