"""Studies of the additive mechanisms: a clipped mean with Laplace or Gaussian noise."""

from __future__ import annotations

import numpy as np

from dpjax.accounting import PureDP
from dpjax.additive import gaussian_mechanism, gaussian_sigma_for_zcdp, laplace_mechanism
from dpjax.studies.registry import accuracy_row, register
from dpjax.studies.runner import monte_carlo


def _clipped_mean(data):
    clipped = np.clip(data.values, data.lower, data.upper)
    # Swap neighbours: one record moves by at most (upper - lower), so the mean by that over n.
    return float(clipped.mean()), (data.upper - data.lower) / clipped.size


@register(
    "laplace_clipped_mean",
    family="additive",
    datasets=("normal", "uniform"),
    description="mean clipped to the data bounds + Laplace noise (epsilon-DP, swap)",
)
def _laplace(key, data, epsilon, trials):
    mean, sensitivity = _clipped_mean(data)
    releases = monte_carlo(
        lambda k: laplace_mechanism(k, mean, epsilon, sensitivity=sensitivity), key, trials
    )
    return [accuracy_row("mean", releases, mean)]


@register(
    "gaussian_clipped_mean",
    family="additive",
    datasets=("normal", "uniform"),
    description="mean clipped to the data bounds + Gaussian noise (epsilon^2/2-zCDP, swap)",
)
def _gaussian(key, data, epsilon, trials):
    mean, sensitivity = _clipped_mean(data)
    sigma = gaussian_sigma_for_zcdp(PureDP(epsilon).to_zcdp().rho, sensitivity=sensitivity)
    releases = monte_carlo(lambda k: gaussian_mechanism(k, mean, sigma, sensitivity=sensitivity), key, trials)
    return [accuracy_row("mean", releases, mean)]
