"""dpjax.optax accounting: training_epsilon against dp_accounting compositions built here, the
Gaussian-DP bound of pure DP against the randomized-response privacy profile, and the inverse."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import stats

from dpjax import optax as dpo

DELTA = 1e-5
RUN = dict(steps=300, sampling_rate=0.01, noise_multiplier=1.1)


def pld_epsilon(parts, delta=DELTA):
    """epsilon of the composition of Poisson-subsampled Gaussians ``[(count, sigma)]``, built directly
    from dp_accounting's PLD of the subsampled Gaussian (not through its accountant)."""
    total = None
    for count, sigma in parts:
        pld = pld_lib.from_gaussian_mechanism(
            sigma, sampling_prob=RUN["sampling_rate"], value_discretization_interval=1e-4
        ).self_compose(count)
        total = pld if total is None else total.compose(pld)
    return total.get_epsilon_for_delta(delta)


def test_fixed_clip_is_the_pld_of_the_poisson_sampled_gaussian():
    acc = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 300
        )
    )
    assert dpo.training_epsilon(DELTA, clip=dpo.fixed_clip(2.0), **RUN) == acc.get_epsilon(DELTA)
    # the clip norm itself does not enter (sensitivity and noise both scale with it)
    assert dpo.training_epsilon(DELTA, clip=0.1, **RUN) == acc.get_epsilon(DELTA)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 300
        )
    )
    assert dpo.training_epsilon(DELTA, clip=1.0, accountant="rdp", **RUN) == pytest.approx(
        rdp.get_epsilon(DELTA), rel=1e-12
    )
    # RDP is an upper bound of the (tighter) PLD epsilon
    assert rdp.get_epsilon(DELTA) >= acc.get_epsilon(DELTA)


def test_geometric_clip_composes_sum_and_count_as_one_gaussian():
    z_b = 20.0
    strategy = dpo.geometric_clip(0.1, count_noise_multiplier=z_b)
    fixed = dpo.training_epsilon(DELTA, clip=1.0, **RUN)
    geometric = dpo.training_epsilon(DELTA, clip=strategy, **RUN)
    assert geometric > fixed
    # the joint (sum, count) Gaussian: sensitivities 1/sigma and 1/z_b in units of the noise
    joint = 1.0 / math.hypot(1 / 1.1, 1 / z_b)
    assert geometric == pytest.approx(pld_epsilon([(300, joint)]), rel=1e-9)
    # dp_accounting's RDP accountant composes the two Gaussians of the same sample on its own
    rdp = dp_accounting.rdp.RdpAccountant()
    sub = dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(1.1), dp_accounting.GaussianDpEvent(z_b)]
    )
    rdp.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(0.01, sub), 300))
    assert dpo.training_epsilon(DELTA, clip=strategy, accountant="rdp", **RUN) == pytest.approx(
        rdp.get_epsilon(DELTA), rel=1e-9
    )


@pytest.mark.parametrize("every", [1, 7])
def test_quantile_clip_composes_gdp_of_each_estimate(every):
    eps_q = 0.1
    strategy = dpo.quantile_clip(1.0, epsilon=eps_q, every=every)
    fixed = dpo.training_epsilon(DELTA, clip=1.0, **RUN)
    quantile = dpo.training_epsilon(DELTA, clip=strategy, **RUN)
    assert quantile > fixed
    mu = 2 * stats.norm.ppf(math.exp(eps_q) / (1 + math.exp(eps_q)))
    estimates = len(range(0, 300, every))
    joint = (1.1**-2 + mu**2) ** -0.5
    parts = [(estimates, joint)] + ([(300 - estimates, 1.1)] if estimates < 300 else [])
    assert quantile == pytest.approx(pld_epsilon(parts), rel=1e-9)


def gaussian_profile(mu, eps):
    """delta(eps) of mu-GDP (Dong, Roth, Su 2022, Cor. 2.13)."""
    return stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 1.0, 3.0])
def test_pure_dp_is_dominated_by_the_stated_gaussian(epsilon):
    """Every epsilon-DP mechanism's profile is at most randomized response's, max(0, (e^eps - e^t)/(1+e^eps));
    the stated mu must dominate it at every t and be tight at t = 0 (the smallest such mu)."""
    mu = dpo.pure_dp_to_gdp(epsilon)
    t = np.linspace(0.0, epsilon, 2001)
    rr = (np.exp(epsilon) - np.exp(t)) / (1 + np.exp(epsilon))
    assert np.all(gaussian_profile(mu, t) >= rr - 1e-12)
    assert gaussian_profile(mu, 0.0) == pytest.approx(rr[0], rel=1e-9)
    assert np.any(gaussian_profile(mu * (1 - 1e-3), t) < rr)


def test_noise_multiplier_for_epsilon_is_the_smallest_within_budget():
    strategy = dpo.geometric_clip(0.1, count_noise_multiplier=20.0)
    kwargs = dict(steps=300, sampling_rate=0.01, clip=strategy)
    sigma = dpo.noise_multiplier_for_epsilon(2.0, DELTA, **kwargs)
    assert dpo.training_epsilon(DELTA, noise_multiplier=sigma, **kwargs) <= 2.0
    assert dpo.training_epsilon(DELTA, noise_multiplier=sigma * (1 - 1e-3), **kwargs) > 2.0


# (sigma, q, steps, delta): the run (epsilon 0.21 over 10^4 steps) and a short run of tiny
# epsilon (0.057); the test above covers epsilon 2 with a clip strategy's own releases. Two settings
# only: each calibration costs ~20 PLD evaluations, and a PLD's cost grows with the spread of the
# privacy loss (small sigma, large q) over the grid, which is 1e-4 epsilon here.
CALIBRATION_GRID = [(2.0, 1e-3, 10_000, 1e-6), (20.0, 0.1, 10, 1e-6)]


@pytest.mark.parametrize(("sigma", "q", "steps", "delta"), CALIBRATION_GRID)
def test_calibrated_noise_is_minimal_on_the_scaled_grid(sigma, q, steps, delta):
    """eps(sigma*) <= target < eps(sigma* (1 - 1e-3)) on the calibration grid, and sigma* is the
    sigma the target came from (up to the 1e-4 grid's overstatement of the target)."""
    run = dict(steps=steps, sampling_rate=q, clip=1.0)
    target = dpo.training_epsilon(delta, noise_multiplier=sigma, **run)
    found = dpo.noise_multiplier_for_epsilon(target, delta, **run)
    grid = dpo.accounting.calibration_discretization(target)
    assert grid == min(1e-4, 1e-4 * target)
    assert dpo.training_epsilon(delta, noise_multiplier=found, pld_discretization=grid, **run) <= target
    below = found * (1 - 1e-3)
    assert dpo.training_epsilon(delta, noise_multiplier=below, pld_discretization=grid, **run) > target
    assert found == pytest.approx(sigma, rel=5e-3)  # the run: 1.995, not 2.82


def test_noise_multiplier_for_epsilon_refuses_a_budget_the_strategy_alone_exceeds():
    strategy = dpo.quantile_clip(1.0, epsilon=1.0, every=1)
    with pytest.raises(ValueError, match="clip strategy alone"):
        dpo.noise_multiplier_for_epsilon(0.5, DELTA, steps=300, sampling_rate=0.01, clip=strategy)


def test_zero_steps_spend_nothing():
    assert dpo.training_epsilon(DELTA, steps=0, sampling_rate=0.01, noise_multiplier=1.0, clip=1.0) == 0.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(noise_multiplier=0.0), "noise_multiplier"),
        (dict(noise_multiplier=-1.0), "noise_multiplier"),
        (dict(sampling_rate=1.5), "sampling_rate"),
        (dict(steps=-1), "steps"),
        (dict(clip=0.0), "initial_norm"),
    ],
)
def test_training_epsilon_bad_input(kwargs, message):
    args = dict(RUN, clip=1.0) | kwargs
    with pytest.raises(ValueError, match=message):
        dpo.training_epsilon(DELTA, **args)
