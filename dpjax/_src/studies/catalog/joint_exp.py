"""A study of JointExp and its baselines (Gillenwater, Joseph, Kulesza, ICML 2021, Sec. 5).

The paper's setting: n = 1000 points (the first 1000 of the dataset), bounds [-100, 100], swap
neighbors, m = 5 evenly spaced quantiles ``q_j = j / (m + 1)``. The paper's error metric is the
number of data points between each released quantile and the true ("lower") quantile, averaged over
the m quantiles ("missed points"); the absolute error in data units is shown beside it.
"""

from __future__ import annotations

from dpjax._src.quantiles.agg_tree import agg_tree
from dpjax._src.quantiles.app_ind_exp import app_ind_exp
from dpjax._src.quantiles.exp_mech import ind_exp
from dpjax._src.quantiles.joint_exp import joint_exp
from dpjax._src.quantiles.smooth import csmooth
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import EPSILONS, quantile_points
from dpjax._src.studies.definition import Study
from dpjax._src.studies.registry import register

__all__: list[str] = []

_M_QUANTILES = 5
_LEVELS = quantile_points.levels(_M_QUANTILES)
_truth = quantile_points.truth_at(_LEVELS)
_missed_points = quantile_points.missed_points
_mechanism = quantile_points.mechanism_at(_LEVELS)


register(Study(
    "quantiles_m5",
    family="quantiles",
    description=f"{_M_QUANTILES} quantiles of 1000 points in [-100, 100]: JointExp vs its baselines",
    mechanisms=[
        _mechanism("JointExp", joint_exp, "one exponential mechanism over all m quantiles (ε-DP)"),
        _mechanism("IndExp", ind_exp, "one exponential mechanism per quantile at ε/m (ε-DP)"),
        _mechanism("AppIndExp", app_ind_exp, "IndExp with DDR20 composition ((ε, 1e-6)-DP)"),
        _mechanism(  # rho = ε²/2: the zCDP that ε-DP implies, the paper's comparison
            "CSmooth",
            lambda key, x, qs, epsilon, **kw: csmooth(key, x, qs, epsilon**2 / 2, **kw),
            "smooth sensitivity + Laplace log-normal (ε²/2-zCDP)",
        ),
        _mechanism("AggTree", agg_tree, "noisy b=8, h=3 count tree + Honaker aggregation (ε-DP)"),
    ],
    datasets={"normal": "normal"},  # the paper's; five series per panel (ten crowded the figure)
    grid={"epsilon": EPSILONS},
    truth=_truth,
    metrics=[
        metrics.Metric("missed_points", _missed_points,
                       f"data points between release and true quantile (mean over {_M_QUANTILES})",
                       "data points"),
        metrics.abs_error(("mean",), truth="quantiles",
                          description=f"absolute error of the quantiles (mean over {_M_QUANTILES})"),
    ],
))
