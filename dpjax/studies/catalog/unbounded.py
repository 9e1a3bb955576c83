"""Studies of the unbounded quantile mechanism (Durfee 2023): UQE quantiles and the DP sum/mean."""

from __future__ import annotations

import jax
import numpy as np

from dpjax import aggregates
from dpjax.quantiles import unbounded
from dpjax.studies.registry import accuracy_row, register
from dpjax.studies.runner import monte_carlo

QUANTILES = (0.5, 0.99)


@register(
    "uqe_quantile",
    family="unbounded",
    datasets=("lognormal", "normal"),
    description="UQE (Alg. 2, Expo noise, beta=1.001) at q=0.5 and 0.99, lower = the dataset's lower bound",
)
def _uqe(key, data, epsilon, trials):
    x = np.asarray(data.values, np.float32)

    def releases(k):  # both levels in one compiled kernel, each its own epsilon-DP release
        return tuple(
            unbounded(jax.random.fold_in(k, i), x, q, epsilon, lower=data.lower)
            for i, q in enumerate(QUANTILES)
        )

    estimates = monte_carlo(releases, key, trials)
    return [
        accuracy_row(f"q{q:g}", est, np.quantile(data.values, q))
        for q, est in zip(QUANTILES, estimates, strict=True)
    ]


@register(
    "uqe_dp_sum",
    family="unbounded",
    datasets=("lognormal",),
    description="sum clipped at UQE's 0.99-quantile + Laplace (half of epsilon each, swap)",
)
def _dp_sum(key, data, epsilon, trials):
    x = np.asarray(data.values, np.float32)
    releases = monte_carlo(lambda k: aggregates.clipped_sum(k, x, epsilon, lower=data.lower), key, trials)
    truth = float(np.sum(data.values))
    return [
        accuracy_row("sum", releases.value, truth),
        accuracy_row("mean", releases.value / x.size, truth / x.size),
        accuracy_row("clip bound", releases.bound, np.quantile(data.values, 0.99)),
    ]
