"""Property tests of the host-side accounting (hypothesis): validation, conversions, composition,
calibration round trips.

Each property is a statement of the math the module's docstring cites, checked on examples
hypothesis draws (``derandomize``: the same examples on every run, so the suite stays deterministic)
in a bounded number (``max_examples``). Everything here runs on the host in float64; the
``dp_accounting`` calibration is the only slow one (a few PLD evaluations), so it gets two examples.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpjax import optax as dpo
from dpjax._src.accounting.bounded_range import composition_delta, optimal_composition_epsilon
from dpjax._src.accounting.conversions import bun_steinke_epsilon, zcdp_delta, zcdp_epsilon
from dpjax._src.accounting.pay_what_you_get import (
    advanced_composition_epsilon,
    calibrate_epsilon,
    epsilon_star,
)
from dpjax._src.additive import gaussian_guarantee, gaussian_sigma_for_zcdp
from dpjax._src.host_checks import check_epsilon, check_probability
from dpjax.accounting import ZCDP, ApproxDP, PureDP, RangeBounded, compose

CHEAP = settings(max_examples=60, deadline=None, derandomize=True)
SLOW = settings(max_examples=2, deadline=None, derandomize=True)

EPSILON = st.floats(1e-3, 20.0)
DELTA = st.floats(1e-12, 0.5)
RHO = st.floats(1e-6, 50.0)
GUARANTEE = st.one_of(
    st.builds(PureDP, EPSILON),
    st.builds(RangeBounded, EPSILON),
    st.builds(ZCDP, RHO),
    st.builds(ApproxDP, EPSILON, st.floats(0.0, 1e-3)),
)


# ----------------------------------------------------------------------------------------- validation

FINITE_POSITIVE = st.floats(min_value=0.0, exclude_min=True, allow_infinity=False, allow_nan=False)
NOT_POSITIVE_OR_NOT_FINITE = st.one_of(
    st.floats(max_value=0.0, allow_nan=False), st.sampled_from([math.nan, math.inf, -math.inf])
)


@CHEAP
@given(FINITE_POSITIVE)
def test_every_finite_positive_epsilon_is_accepted(epsilon):
    """Up to the largest float: a pure or range bound past ~1.3e154 has no finite zCDP conversion,
    and that conversion (not the guarantee) is refused with a ValueError."""
    assert check_epsilon(epsilon) == epsilon
    for guarantee in (PureDP(epsilon), RangeBounded(epsilon)):
        assert guarantee.epsilon == epsilon
        if math.isfinite(epsilon**2 if epsilon < 1e154 else math.inf):
            assert guarantee.to_zcdp().rho > 0 or epsilon < 1e-150
        else:
            with pytest.raises(ValueError, match="rho must be finite"):
                guarantee.to_zcdp()


@CHEAP
@given(NOT_POSITIVE_OR_NOT_FINITE)
def test_every_non_positive_or_non_finite_epsilon_is_refused_by_name(epsilon):
    with pytest.raises(ValueError, match=r"^budget must be (finite|> 0)"):
        check_epsilon(epsilon, "budget")
    if not (epsilon == 0 or epsilon == -0.0):
        with pytest.raises(ValueError, match="epsilon must be finite and >= 0"):
            PureDP(epsilon)


@CHEAP
@given(st.floats(allow_nan=True))
def test_probabilities_are_accepted_exactly_in_the_unit_interval(p):
    if 0 <= p <= 1:
        assert check_probability(p, "q") == p
        open_ok = 0 < p < 1
        if not open_ok:
            with pytest.raises(ValueError, match=r"q must be in \(0, 1\)"):
                check_probability(p, "q", open_low=True, open_high=True)
    else:
        with pytest.raises(ValueError, match=r"q must be in \[0, 1\]"):
            check_probability(p, "q")


# ---------------------------------------------------------------------------------------- conversions


@CHEAP
@given(RHO, RHO, DELTA, DELTA)
def test_zcdp_epsilon_grows_with_rho_and_shrinks_with_delta(rho_a, rho_b, delta_a, delta_b):
    """CKS20 Cor. 13 is an infimum over alpha of expressions increasing in rho and decreasing in delta."""
    (rho_lo, rho_hi), (delta_lo, delta_hi) = sorted((rho_a, rho_b)), sorted((delta_a, delta_b))
    tol = 1e-9
    assert zcdp_epsilon(rho_lo, delta_lo) <= zcdp_epsilon(rho_hi, delta_lo) * (1 + tol)
    assert zcdp_epsilon(rho_lo, delta_hi) <= zcdp_epsilon(rho_lo, delta_lo) * (1 + tol)
    assert 0 <= zcdp_epsilon(rho_lo, delta_lo) <= bun_steinke_epsilon(rho_lo, delta_lo)


@CHEAP
@given(RHO, DELTA)
def test_zcdp_epsilon_and_delta_are_inverse(rho, delta):
    """Prop. 12 and Cor. 13 describe one curve: the delta at the computed epsilon is the target (or
    below it where epsilon = 0 already meets it)."""
    epsilon = zcdp_epsilon(rho, delta)
    if epsilon > 0:
        assert zcdp_delta(rho, epsilon) == pytest.approx(delta, rel=1e-6)
    else:
        assert zcdp_delta(rho, 0.0) <= delta


@CHEAP
@given(EPSILON, EPSILON, DELTA, DELTA)
def test_pure_to_zcdp_to_approx_is_monotone(eps_a, eps_b, delta_a, delta_b):
    (eps_lo, eps_hi), (delta_lo, delta_hi) = sorted((eps_a, eps_b)), sorted((delta_a, delta_b))

    def via_zcdp(epsilon, delta):
        return PureDP(epsilon).to_zcdp().to_approx_dp(delta).epsilon

    tol = 1e-9
    assert PureDP(eps_lo).to_zcdp().rho <= PureDP(eps_hi).to_zcdp().rho
    assert via_zcdp(eps_lo, delta_lo) <= via_zcdp(eps_hi, delta_lo) * (1 + tol)
    assert via_zcdp(eps_lo, delta_hi) <= via_zcdp(eps_lo, delta_lo) * (1 + tol)


@CHEAP
@given(EPSILON, DELTA)
def test_range_bounded_is_never_weaker_than_pure(epsilon, delta):
    """epsilon-range-bounded implies epsilon-DP and epsilon^2/8-zCDP (Cesar and Rogers 2021, L. 3.4),
    a quarter of pure DP's epsilon^2/2 (Bun and Steinke 2016, Prop. 1.4)."""
    bounded, pure = RangeBounded(epsilon), PureDP(epsilon)
    assert bounded.to_zcdp().rho == pytest.approx(pure.to_zcdp().rho / 4, rel=1e-15)
    assert bounded.to_pure() == PureDP(epsilon, rho=epsilon**2 / 8)
    assert bounded.to_approx_dp(delta).epsilon <= pure.to_approx_dp(delta).epsilon == epsilon
    assert bounded.to_approx_dp(delta).delta == delta


# ---------------------------------------------------------------------------------------- composition


@CHEAP
@given(st.lists(EPSILON, min_size=1, max_size=6))
def test_pure_and_range_bounded_epsilons_add(epsilons):
    pure = compose(PureDP(e) for e in epsilons)
    assert isinstance(pure, PureDP) and pure.epsilon == pytest.approx(math.fsum(epsilons), rel=1e-12)
    bounded = compose(RangeBounded(e) for e in epsilons)
    assert isinstance(bounded, RangeBounded)
    assert bounded.epsilon == pytest.approx(math.fsum(epsilons), rel=1e-12)
    # ... and each part's zCDP adds: k parts eps^2/8, never the composed range's (sum eps)^2/8
    assert bounded.to_zcdp().rho == pytest.approx(math.fsum(e**2 / 8 for e in epsilons), rel=1e-12)


@CHEAP
@given(st.lists(GUARANTEE, min_size=1, max_size=5), DELTA)
def test_composition_is_commutative_and_monotone(parts, delta):
    """The order of the parts does not matter, and a further part never lowers the epsilon at delta
    when the composition stays in one notion. (Across notions it may: pure parts compose as pure DP
    beside an (epsilon, delta) part but through zCDP beside zCDP parts alone, which is looser for a
    large epsilon.)"""
    composed = compose(parts, delta=delta)
    reverse = compose(reversed(parts), delta=delta)
    assert type(composed) is type(reverse)
    for field in ("epsilon", "delta", "rho"):
        if getattr(composed, field, None) is not None:
            assert getattr(reverse, field) == pytest.approx(getattr(composed, field), rel=1e-12)
    total = 2 * delta + math.fsum(getattr(g, "delta", 0.0) for g in parts)  # a delta every step admits
    shorter = compose(parts[:-1], delta=delta)
    if total < 1 and type(shorter) is type(composed):
        longer = composed.to_approx_dp(total).epsilon
        assert shorter.to_approx_dp(total).epsilon <= longer * (1 + 1e-9)


@CHEAP
@given(st.lists(RHO, min_size=1, max_size=6), st.lists(EPSILON, max_size=3))
def test_zcdp_rhos_add_and_pure_parts_enter_as_epsilon_squared_over_two(rhos, epsilons):
    composed = compose([*(ZCDP(r) for r in rhos), *(PureDP(e) for e in epsilons)])
    expected = math.fsum(rhos) + math.fsum(e**2 / 2 for e in epsilons)
    assert isinstance(composed, ZCDP) and composed.rho == pytest.approx(expected, rel=1e-12)


@CHEAP
@given(EPSILON, DELTA, st.integers(1, 30), DELTA)
def test_optimal_bounded_range_composition_is_valid_and_monotone_in_delta(epsilon, delta, k, other):
    """DDR20 Thm. 3 inverted: the per-mechanism budget lies between basic composition (eps / k) and
    eps, meets the target delta, and a larger delta never asks for a smaller budget."""
    epsilon_0 = optimal_composition_epsilon(epsilon, delta, k)
    assert epsilon / k * (1 - 1e-12) <= epsilon_0 <= epsilon
    assert composition_delta(epsilon_0, epsilon, k) <= delta * (1 + 1e-9)
    if other > delta:
        assert optimal_composition_epsilon(epsilon, other, k) >= epsilon_0 * (1 - 1e-12)


@CHEAP
@given(st.integers(1, 1000), st.floats(1e-4, 2.0), DELTA)
def test_range_bounded_accounting_is_below_advanced_and_basic_composition(k, epsilon, delta_prime):
    """LKPWYG Lemma 4.4 takes the least of three bounds: never above advanced or basic composition."""
    star = epsilon_star(k, epsilon, delta_prime)
    assert star <= advanced_composition_epsilon(k, epsilon, delta_prime) <= k * epsilon * (1 + 1e-15)


# ------------------------------------------------------------------------------ calibration round trips


@CHEAP
@given(st.floats(0.01, 20.0), st.integers(1, 1000), DELTA)
def test_calibrated_range_bounded_budget_is_the_largest_within_target(target, k, delta_prime):
    """calibrate_epsilon inverts epsilon_star (continuous, increasing): rounded down, to float64
    resolution (one part in 1e9 more already overspends)."""
    epsilon = calibrate_epsilon(target, k, delta_prime)
    assert epsilon_star(k, epsilon, delta_prime) <= target
    assert epsilon_star(k, epsilon * (1 + 1e-9), delta_prime) > target


@CHEAP
@given(RHO, st.floats(1e-3, 1e3))
def test_gaussian_sigma_for_zcdp_round_trips(rho, sensitivity):
    sigma = gaussian_sigma_for_zcdp(rho, sensitivity=sensitivity)
    assert gaussian_guarantee(sigma, sensitivity=sensitivity).rho == pytest.approx(rho, rel=1e-12)


@SLOW
@given(st.floats(4.0, 8.0), st.integers(1, 4))
def test_noise_multiplier_for_epsilon_inverts_training_epsilon(sigma, steps):
    """On the calibration grid, the calibrated sigma of sigma's own epsilon is sigma to its stated 0.1%:
    eps(found) <= target < eps(found (1 - 1e-3)), and eps is decreasing in sigma. Full batches
    (sampling rate 1: composed Gaussians, the cheapest PLDs, ~1 s per calibration)."""
    run = dict(steps=steps, sampling_rate=1.0, clip=1.0)
    rough = dpo.training_epsilon(1e-6, noise_multiplier=sigma, **run)
    grid = dpo.calibration_discretization(rough)
    target = dpo.training_epsilon(1e-6, noise_multiplier=sigma, pld_discretization=grid, **run)
    found = dpo.noise_multiplier_for_epsilon(target, 1e-6, pld_discretization=grid, **run)
    assert sigma * (1 - 1e-3) <= found <= sigma / (1 - 1e-3)
