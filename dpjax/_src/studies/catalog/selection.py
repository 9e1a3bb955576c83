"""Studies of the selection mechanisms on the built-in Zipf histogram (counts, add/remove neighbors,
so the scores are monotonic with sensitivity 1).

* ``top_k_recall``: recall of the true top-k (k = 10, 100) at total epsilon, for one-shot Gumbel top-k
  (k selections at epsilon/k each, ``RangeBounded(epsilon)``) and Noisy-Top-K-with-Gap (Laplace k/epsilon,
  ``PureDP(epsilon)``).
* ``top_k_gap_blue``: Noisy-Top-K-with-Gap with measures (Ding et al. 2019, §5.2): half the budget
  selects the top 10 with gaps, half measures them with Laplace noise ``Lap(2k/epsilon)``; the mean
  squared error of the measurements is ``2 (2k/epsilon)^2`` and that of the BLUE that adds the gaps
  is Corollary 1's ``(1 + lam k)/(k + lam k)`` times it (0.55 at k = 10, lam = 1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax._src.additive import laplace_mechanism
from dpjax._src.postprocess import topk_gap
from dpjax._src.selection import gumbel_top_k
from dpjax._src.selection_gap import noisy_top_k_with_gap, noisy_top_k_with_gap_scale
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import EPSILONS
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.studies.registry import register

__all__: list[str] = []


def _true_top(counts, k, **_):
    return jnp.argsort(-counts, stable=True)[:k]


register(Study(
    "top_k_recall",
    family="selection",
    description="recall of the top-k counts: one-shot Gumbel (k × ε/k) vs noisy top-k with gap (ε)",
    mechanisms=[
        Mechanism("one-shot Gumbel", lambda key, counts, epsilon, k: gumbel_top_k(
            key, counts, k, epsilon / k, monotonic=True)),
        Mechanism("noisy top-k with gap", lambda key, counts, epsilon, k: noisy_top_k_with_gap(
            key, counts, k, epsilon, monotonic=True)[0]),
    ],
    # The 10^4-record sample: its top counts are ~10 apart, so at k = 10 the noise (scale k/ε) decides;
    # on the 10^6-record histogram both mechanisms recall every top-10 item at every ε.
    datasets={"zipf_sample": "zipf_sample"},
    grid={"epsilon": EPSILONS, "k": (10, 100)},
    static=("k",),
    truth=_true_top,
    metrics=[metrics.recall(description="recall: share of the true top-k selected")],
))

_K = 10
# Both noise scales are proportional to 1/epsilon, so their variance ratio does not depend on it.
_LAM = topk_gap.variance_ratio(noisy_top_k_with_gap_scale(_K, 0.5, monotonic=True), _K / 0.5)


def _gap_blue(key, counts, epsilon):
    select_key, measure_key = jax.random.split(key)
    idx, gaps = noisy_top_k_with_gap(select_key, counts, _K, epsilon / 2, monotonic=True)
    truth = counts[idx].astype(gaps.dtype)
    alpha = laplace_mechanism(measure_key, truth, epsilon / 2, sensitivity=_K)
    return {"measured": alpha - truth, "BLUE with gaps": topk_gap.blue_estimate(alpha, gaps, _LAM) - truth}


def _measured_mse(counts, epsilon):
    return {"mean": 2 * (2 * _K / epsilon) ** 2}


register(Study(
    "top_k_gap_blue",
    family="selection",
    description=f"top-{_K} counts: Laplace measurements vs the BLUE with the free gaps (Thm 3, ε/2 + ε/2)",
    mechanisms=[Mechanism("top-k gap + measures", _gap_blue, variants=("measured", "BLUE with gaps"), theory={
        ("measured", "count_mse"): _measured_mse,
        ("BLUE with gaps", "count_mse"): lambda counts, epsilon: {
            "mean": topk_gap.blue_mse_ratio(_K, _LAM) * _measured_mse(counts, epsilon)["mean"]},
    })],
    datasets={"zipf": "zipf"},
    grid={"epsilon": EPSILONS},
    metrics=[metrics.Metric(
        "count_mse", lambda error, _: jnp.mean(error**2),
        f"squared error of the {_K} selected items' released counts (mean over the {_K})", "count²")],
))
