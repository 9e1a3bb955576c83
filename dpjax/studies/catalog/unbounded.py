"""Studies of the unbounded quantile mechanism (Durfee 2023): UQE quantiles and the DP sum/mean."""

from __future__ import annotations

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
    rows = []
    for q in QUANTILES:
        estimates = monte_carlo(lambda k, q=q: unbounded(k, x, q, epsilon, lower=data.lower), key, trials)
        rows.append(accuracy_row(f"q{q:g}", estimates, np.quantile(data.values, q)))
    return rows


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
