"""Differentially private quantiles: the unbounded quantile mechanism (Durfee 2023), JointExp
(Gillenwater, Joseph, Kulesza 2021) and the baselines the papers compare against."""

from dpjax.accounting.bounded_range import optimal_composition_epsilon as optimal_composition_epsilon
from dpjax.quantiles.agg_tree import agg_tree as agg_tree
from dpjax.quantiles.agg_tree import agg_tree_guarantee as agg_tree_guarantee
from dpjax.quantiles.app_ind_exp import app_ind_exp as app_ind_exp
from dpjax.quantiles.app_ind_exp import app_ind_exp_guarantee as app_ind_exp_guarantee
from dpjax.quantiles.exp_mech import emq as emq
from dpjax.quantiles.exp_mech import emq_guarantee as emq_guarantee
from dpjax.quantiles.exp_mech import ind_exp as ind_exp
from dpjax.quantiles.exp_mech import ind_exp_guarantee as ind_exp_guarantee
from dpjax.quantiles.joint_exp import joint_exp as joint_exp
from dpjax.quantiles.joint_exp import joint_exp_guarantee as joint_exp_guarantee
from dpjax.quantiles.joint_exp import joint_exp_log_normalizer as joint_exp_log_normalizer
from dpjax.quantiles.joint_exp import joint_exp_tables as joint_exp_tables
from dpjax.quantiles.smooth import csmooth as csmooth
from dpjax.quantiles.smooth import csmooth_guarantee as csmooth_guarantee
from dpjax.quantiles.unbounded import fully_unbounded as fully_unbounded
from dpjax.quantiles.unbounded import fully_unbounded_guarantee as fully_unbounded_guarantee
from dpjax.quantiles.unbounded import unbounded as unbounded
from dpjax.quantiles.unbounded import unbounded_guarantee as unbounded_guarantee
from dpjax.quantiles.unbounded import unbounded_result as unbounded_result
from dpjax.quantiles.unbounded_many import unbounded_many as unbounded_many
from dpjax.quantiles.unbounded_many import unbounded_many_guarantee as unbounded_many_guarantee
