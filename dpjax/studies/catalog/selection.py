"""Studies of the selection mechanisms on the built-in Zipf histogram (counts, add/remove neighbours,
so the scores are monotonic with sensitivity 1).

* ``top_k_recall``: recall of the true top-k (k = 10, 100) at total epsilon, for one-shot Gumbel top-k
  (k selections at epsilon/k each, ``RangeBounded(epsilon)``) and Noisy-Top-K-with-Gap (Laplace k/epsilon,
  ``PureDP(epsilon)``).
* ``top_k_gap_blue``: Noisy-Top-K-with-Gap with measures (Ding et al. 2019, §5.2): half the budget
  selects the top 10 with gaps, half measures them with Laplace noise; errors of the measurements and of
  the BLUE that adds the gaps, whose MSE ratio should be (1 + k)/(2k) = 0.55 for well-separated counts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.additive import laplace_mechanism
from dpjax.postprocess import topk_gap
from dpjax.selection import gumbel_top_k, noisy_top_k_with_gap, noisy_top_k_with_gap_scale
from dpjax.studies.registry import accuracy_row, register
from dpjax.studies.runner import monte_carlo


def _recall(selected: np.ndarray, true_top: np.ndarray) -> np.ndarray:
    return np.isin(selected, true_top).mean(axis=-1)


@register(
    "top_k_recall",
    family="selection",
    datasets=("zipf",),
    description="recall of the top-k counts: one-shot Gumbel (k x eps/k) vs noisy top-k with gap (eps)",
)
def _top_k_recall(key, data, epsilon, trials):
    counts = jnp.asarray(data.values)
    rows = []
    for k in (10, 100):
        true_top = np.argsort(-data.values, kind="stable")[:k]
        gumbel_key, laplace_key = jax.random.split(jax.random.fold_in(key, k))
        gumbel = monte_carlo(
            lambda kk, k=k: gumbel_top_k(kk, counts, k, epsilon / k, monotonic=True), gumbel_key, trials
        )
        laplace = monte_carlo(
            lambda kk, k=k: noisy_top_k_with_gap(kk, counts, k, epsilon, monotonic=True)[0],
            laplace_key,
            trials,
        )
        for name, selected in (("gumbel", gumbel), ("laplace+gap", laplace)):
            rows.append(accuracy_row(f"top-{k} recall, {name}", _recall(selected, true_top), 1.0, k=k))
    return rows


@register(
    "top_k_gap_blue",
    family="selection",
    datasets=("zipf",),
    description="top-10 counts: Laplace measurements vs the BLUE with the free gaps (Thm 3, eps/2 + eps/2)",
)
def _top_k_gap_blue(key, data, epsilon, trials):
    k = 10
    counts = jnp.asarray(data.values)
    lam = topk_gap.variance_ratio(
        noisy_top_k_with_gap_scale(k, epsilon / 2, monotonic=True), k / (epsilon / 2)
    )

    def trial(kk):
        select_key, measure_key = jax.random.split(kk)
        idx, gaps = noisy_top_k_with_gap(select_key, counts, k, epsilon / 2, monotonic=True)
        truth = counts[idx].astype(gaps.dtype)
        alpha = laplace_mechanism(measure_key, truth, epsilon / 2, sensitivity=k)
        return alpha - truth, topk_gap.blue_estimate(alpha, gaps, lam) - truth

    err_alpha, err_beta = monte_carlo(trial, key, trials)
    ratio = float((err_beta**2).mean() / (err_alpha**2).mean())
    extra = {"k": k, "mse_ratio": ratio, "theory_ratio": topk_gap.blue_mse_ratio(k, lam)}
    return [
        accuracy_row("top-10 counts, measured (error)", err_alpha, 0.0, **extra),
        accuracy_row("top-10 counts, BLUE with gaps (error)", err_beta, 0.0, **extra),
    ]
