"""Guarantees, conversions and composition against the literature's closed forms and sandwiches."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from dpjax.accounting import (
    ZCDP,
    ApproxDP,
    PureDP,
    RangeBounded,
    bun_steinke_epsilon,
    compose,
    zcdp_delta,
    zcdp_epsilon,
)


def test_standard_conversions_golden_values():
    # Bun and Steinke 2016, Prop. 1.4: epsilon-DP => epsilon^2/2-zCDP.
    assert PureDP(1.0).to_zcdp() == ZCDP(0.5)
    assert PureDP(0.1).to_zcdp().rho == pytest.approx(0.005)
    # Cesar and Rogers 2021: epsilon-range-bounded => epsilon^2/8-zCDP and epsilon-DP.
    assert RangeBounded(1.0).to_zcdp() == ZCDP(0.125)
    assert RangeBounded(2.0).to_pure() == PureDP(2.0, rho=0.5)  # the range bound keeps its zCDP
    # Bun and Steinke 2016, Prop. 1.3: rho + 2 sqrt(rho log(1/delta)).
    assert bun_steinke_epsilon(0.5, 1e-6) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)))
    assert bun_steinke_epsilon(0.5, 1e-6) == pytest.approx(5.7565217697569, rel=1e-12)


def _cks_epsilon_reference(rho, delta):
    """CKS20 Cor. 13 minimized independently with scipy (bounded Brent on log(alpha - 1))."""

    def f(t):
        a = 1 + math.exp(t)
        return a * rho + (math.log(1 / delta) + (a - 1) * math.log(1 - 1 / a) - math.log(a)) / (a - 1)

    best = min(
        (optimize.minimize_scalar(f, bounds=(lo, lo + 5), method="bounded") for lo in range(-20, 20, 5)),
        key=lambda r: r.fun,
    )
    return best.fun


def _gaussian_exact_delta(rho, epsilon):
    """The exact privacy profile of the Gaussian mechanism that is exactly rho-zCDP (Balle-Wang 2018)."""
    mu = math.sqrt(2 * rho)  # sensitivity / sigma
    return stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2)


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.1, 0.5, 1.0, 5.0, 50.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_zcdp_to_approx_dp_is_tight_and_valid(rho, delta):
    eps = zcdp_epsilon(rho, delta)
    # Equals an independent minimization of the CKS20 formula.
    assert eps == pytest.approx(_cks_epsilon_reference(rho, delta), rel=1e-6, abs=1e-9)
    # Never worse than Bun-Steinke, strictly better away from rho -> 0.
    assert eps <= bun_steinke_epsilon(rho, delta) + 1e-12
    # Valid: the Gaussian mechanism is exactly rho-zCDP, so its exact delta at eps must not exceed delta.
    assert _gaussian_exact_delta(rho, eps) <= delta * (1 + 1e-6)
    # And the two directions are inverse of each other.
    assert zcdp_delta(rho, eps) == pytest.approx(delta, rel=1e-6)
    assert ZCDP(rho).to_approx_dp(delta) == ApproxDP(eps, delta)


def test_zcdp_conversion_edge_cases():
    assert zcdp_epsilon(0.0, 1e-6) == 0.0
    assert zcdp_delta(0.0, 0.1) == 0.0
    with pytest.raises(ValueError, match="delta"):
        zcdp_epsilon(1.0, 0.0)
    with pytest.raises(ValueError, match="delta"):
        zcdp_epsilon(1.0, 1.0)
    with pytest.raises(ValueError, match="rho"):
        zcdp_epsilon(-1.0, 1e-6)


def test_composition_rules():
    # Epsilons add; the parts' zCDP bounds add too (Bun and Steinke 2016, Lemma 2.3) and are kept.
    assert compose([PureDP(0.3), PureDP(0.7)]) == PureDP(1.0, rho=0.3**2 / 2 + 0.7**2 / 2)
    assert compose([RangeBounded(0.5), RangeBounded(0.5)]) == RangeBounded(1.0, rho=2 * 0.5**2 / 8)
    assert compose([RangeBounded(0.5), PureDP(0.5)]) == PureDP(1.0, rho=0.5**2 / 8 + 0.5**2 / 2)
    assert compose([PureDP(0.5)]) == PureDP(0.5)  # one part: nothing tighter than eps^2/2
    assert compose([PureDP(1.0), RangeBounded(2.0), ZCDP(0.1)]) == ZCDP(0.5 + 0.5 + 0.1)
    assert compose([ApproxDP(1.0, 1e-6), PureDP(0.5)]) == ApproxDP(1.5, 1e-6)
    mixed = compose([ApproxDP(1.0, 1e-6), ZCDP(0.5)], delta=1e-6)
    assert mixed.epsilon == pytest.approx(1.0 + zcdp_epsilon(0.5, 1e-6))
    assert mixed.delta == pytest.approx(2e-6)
    assert compose([]) == PureDP(0.0)
    with pytest.raises(ValueError, match="delta"):
        compose([ApproxDP(1.0, 1e-6), ZCDP(0.5)])
    with pytest.raises(TypeError):
        compose([0.5])


def test_k_fold_composition_in_zcdp_beats_linear():
    # 100 releases at epsilon = 0.1: linear composition gives 10; zCDP gives about 4.3 at delta 1e-6.
    total = compose([PureDP(0.1)] * 100)
    assert total.epsilon == pytest.approx(10.0)
    rho = compose([PureDP(0.1).to_zcdp()] * 100).rho
    assert rho == pytest.approx(0.5)
    assert total.to_zcdp().rho == pytest.approx(0.5)  # the composed pure value carries it
    assert zcdp_epsilon(rho, 1e-6) < 5.3


@pytest.mark.parametrize(
    "make",
    [
        lambda: PureDP(-1),
        lambda: PureDP(math.inf),
        lambda: ZCDP(math.nan),
        lambda: ApproxDP(1.0, 1.5),
        lambda: ApproxDP(1.0, -1e-9),
        lambda: RangeBounded(-0.1),
    ],
)
def test_invalid_guarantees(make):
    with pytest.raises(ValueError):
        make()


def test_guarantees_are_frozen_and_unconvertible_where_no_implication():
    g = PureDP(1.0)
    with pytest.raises(AttributeError):
        g.epsilon = 2.0
    with pytest.raises(TypeError, match="zCDP"):
        ApproxDP(1.0, 1e-6).to_zcdp()
    with pytest.raises(TypeError, match="pure"):
        ZCDP(0.1).to_pure()
    assert ApproxDP(1.0, 0.0).to_pure() == PureDP(1.0)
    assert np.isclose(RangeBounded(1.0).to_approx_dp(1e-6).epsilon, 1.0)
