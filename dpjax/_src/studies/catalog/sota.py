"""Studies of the state of the art beside the seeds' mechanisms (issue 47).

* ``quantiles_m29``: ApproxQuantiles (Kaplan, Schnapp and Stemmer, ICML 2022, Alg. 1) against
  JointExp and IndExp at m = 29 evenly spaced quantiles of 1000 points in [-100, 100] (swap
  neighbors, pure epsilon-DP for all three), the setting of KSS22's Fig. 2 on their normal data; the
  error is the number of points between release and true quantile, as in
  :mod:`dpjax._src.studies.catalog.joint_exp`.
* ``top_k_joint``: the joint exponential mechanism (Gillenwater, Joseph, Munoz Medina and Ribero
  Diaz, ICML 2022, Alg. 1) against one-shot Gumbel top-k (peeling, k selections at epsilon/k) at the
  same total epsilon, recall of the true top-k on the Zipf sample (counts, add/remove, monotone).
"""

from __future__ import annotations

import jax.numpy as jnp

from dpjax._src.quantiles.approx_quantiles import approx_quantiles
from dpjax._src.quantiles.exp_mech import ind_exp
from dpjax._src.quantiles.joint_exp import joint_exp
from dpjax._src.selection import gumbel_top_k, joint_top_k
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import EPSILONS, quantile_points
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.studies.registry import register

__all__: list[str] = []

_M = 29
_LEVELS = quantile_points.levels(_M)
_truth = quantile_points.truth_at(_LEVELS)
_missed_points = quantile_points.missed_points
_quantiles = quantile_points.mechanism_at(_LEVELS)


register(Study(
    "quantiles_m29",
    family="quantiles",
    description=f"{_M} quantiles of 1000 points in [-100, 100]: ApproxQuantiles vs JointExp vs IndExp",
    mechanisms=[
        _quantiles("ApproxQuantiles", approx_quantiles, "recursive splitting, one EM per node (ε-DP)"),
        _quantiles("JointExp", joint_exp, "one exponential mechanism over all m quantiles (ε-DP)"),
        _quantiles("IndExp", ind_exp, "one exponential mechanism per quantile at ε/m (ε-DP)"),
    ],
    datasets={"normal": "normal"},
    grid={"epsilon": EPSILONS},
    truth=_truth,
    metrics=[metrics.Metric("missed_points", _missed_points,
                            f"data points between release and true quantile (mean over {_M})",
                            "data points")],
))


def _true_top(counts, k, **_):
    return jnp.argsort(-counts, stable=True)[:k]


register(Study(
    "top_k_joint",
    family="selection",
    description="recall of the top-k counts: joint exponential mechanism (ε) vs one-shot Gumbel (k × ε/k)",
    mechanisms=[
        Mechanism("joint", lambda key, counts, epsilon, k: joint_top_k(
            key, counts, k, epsilon, monotonic=True)),
        Mechanism("one-shot Gumbel", lambda key, counts, epsilon, k: gumbel_top_k(
            key, counts, k, epsilon / k, monotonic=True)),
    ],
    datasets={"zipf_sample": "zipf_sample"},
    grid={"epsilon": EPSILONS, "k": (10,)},
    static=("k",),
    truth=_true_top,
    metrics=[metrics.recall(description="recall: share of the true top-k selected")],
))
