"""Differentially private quantiles: the unbounded quantile mechanism (Durfee 2023), JointExp
(Gillenwater, Joseph, Kulesza 2021), ApproxQuantiles (Kaplan, Schnapp, Stemmer 2022)
and the baselines the papers compare against."""

from dpjax._src.quantiles.agg_tree import agg_tree, agg_tree_guarantee
from dpjax._src.quantiles.app_ind_exp import app_ind_exp, app_ind_exp_guarantee
from dpjax._src.quantiles.approx_quantiles import (
    ApproxQuantilesMethod,
    approx_quantiles,
    approx_quantiles_guarantee,
)
from dpjax._src.quantiles.exp_mech import QuantileMethod, emq, emq_guarantee, ind_exp, ind_exp_guarantee
from dpjax._src.quantiles.joint_exp import (
    joint_exp,
    joint_exp_guarantee,
    joint_exp_log_normalizer,
    joint_exp_tables,
)
from dpjax._src.quantiles.joint_exp_tables import JointExpMethod
from dpjax._src.quantiles.joint_exp_tables import Tables as JointExpTables
from dpjax._src.quantiles.smooth import csmooth, csmooth_default_t, csmooth_guarantee
from dpjax._src.quantiles.unbounded import (
    UnboundedNoise,
    UnboundedResult,
    fully_unbounded,
    fully_unbounded_guarantee,
    unbounded,
    unbounded_guarantee,
    unbounded_result,
)
from dpjax._src.quantiles.unbounded_many import unbounded_many, unbounded_many_guarantee

__all__ = [
    "ApproxQuantilesMethod",
    "JointExpMethod",
    "JointExpTables",
    "QuantileMethod",
    "UnboundedNoise",
    "UnboundedResult",
    "agg_tree",
    "agg_tree_guarantee",
    "app_ind_exp",
    "app_ind_exp_guarantee",
    "approx_quantiles",
    "approx_quantiles_guarantee",
    "csmooth",
    "csmooth_default_t",
    "csmooth_guarantee",
    "emq",
    "emq_guarantee",
    "fully_unbounded",
    "fully_unbounded_guarantee",
    "ind_exp",
    "ind_exp_guarantee",
    "joint_exp",
    "joint_exp_guarantee",
    "joint_exp_log_normalizer",
    "joint_exp_tables",
    "unbounded",
    "unbounded_guarantee",
    "unbounded_many",
    "unbounded_many_guarantee",
    "unbounded_result",
]
