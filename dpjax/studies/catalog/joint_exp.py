"""Studies of JointExp and its baselines (Gillenwater, Joseph, Kulesza, ICML 2021, Sec. 5).

The paper's setting: n = 1000 points (the first 1000 of the dataset), bounds [-100, 100], swap
neighbours, m = 5 evenly spaced quantiles ``q_j = j / (m + 1)``. Each row is one quantile of one
mechanism; ``missed_points`` is the paper's error metric, the mean number of data points between
the release and the true ("lower") quantile.
"""

from __future__ import annotations

import numpy as np

from dpjax.quantiles import agg_tree, app_ind_exp, csmooth, ind_exp, joint_exp
from dpjax.studies.registry import accuracy_row, register
from dpjax.studies.runner import monte_carlo

N_POINTS = 1000
M_QUANTILES = 5
LEVELS = np.arange(1, M_QUANTILES + 1) / (M_QUANTILES + 1)


def _run(mechanism, key, data, epsilon, trials):
    x = np.sort(np.asarray(data.values[:N_POINTS], np.float64))
    bounds = (data.lower, data.upper)
    releases = monte_carlo(lambda k: mechanism(k, x, LEVELS, epsilon, bounds=bounds), key, trials)
    truth = np.quantile(x, LEVELS, method="lower")
    missed = np.abs(np.searchsorted(x, releases) - np.searchsorted(x, truth)).mean(axis=0)
    return [
        accuracy_row(f"quantile {q:.3f}", releases[:, j], truth[j], missed_points=float(missed[j]))
        for j, q in enumerate(LEVELS)
    ]


def _study(name, mechanism, description):
    @register(name, family="quantiles", datasets=("normal", "uniform"), description=description)
    def study(key, data, epsilon, trials):
        return _run(mechanism, key, data, epsilon, trials)

    return study


_study("joint_exp", joint_exp, "JointExp: 5 quantiles in one exponential mechanism (epsilon-DP, swap)")
_study("ind_exp", ind_exp, "IndExp: one exponential mechanism per quantile with epsilon/m (epsilon-DP)")
_study("app_ind_exp", app_ind_exp, "AppIndExp: IndExp with DDR20 composition ((epsilon, 1e-6)-DP)")
_study("csmooth", csmooth, "CSmooth: smooth sensitivity + Laplace log-normal (epsilon^2/2-zCDP)")
_study("agg_tree", agg_tree, "AggTree: noisy b=8, h=3 count tree + Honaker aggregation (epsilon-DP)")
