"""Studies of the sparse vector family on the built-in Zipf item-count histogram.

Item counts of a histogram where each record holds one item are monotonic counting queries under
add/remove-one-record (each count moves by 0 or +1), so the monotonic noise scales apply. The stream
order is the dataset's fixed random item order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpjax.postprocess import svt_gap
from dpjax.studies.registry import accuracy_row, register
from dpjax.studies.runner import monte_carlo
from dpjax.svt import above_threshold, adaptive_sparse_vector_with_gap, gap_budget, sparse_vector_with_gap

K = 10


def _threshold_at_rank(counts, rank):
    """Midpoint of the counts at (0-based) ranks ``rank - 1`` and ``rank``: ``rank`` items are above."""
    ordered = np.sort(counts)[::-1]
    return float(ordered[rank - 1] + ordered[rank]) / 2


@register(
    "svt_gap_with_measures",
    family="svt",
    datasets=("zipf",),
    description="sparse vector with gap (k=10, eps/2) + measurements (eps/2), combined (Ding et al. §6.2)",
)
def _gap_with_measures(key, data, epsilon, trials):
    counts = data.values.astype(np.float64)
    threshold = _threshold_at_rank(counts, 4 * K)
    budget = gap_budget(epsilon / 2, K, monotonic=True)
    measure_scale = K / (epsilon / 2)

    def trial(k):
        select_key, measure_key = jax.random.split(k)
        res = sparse_vector_with_gap(select_key, counts, threshold, epsilon / 2, k=K, monotonic=True)
        truth = jnp.asarray(counts, res.gaps.dtype)[res.indices]
        alpha = truth + measure_scale * jax.random.laplace(measure_key, (K,))
        beta = svt_gap.combine_gap_and_measurement(
            res.gaps,
            threshold,
            alpha,
            svt_gap.gap_variance(budget, res.answer_branches),
            2 * measure_scale**2,
        )
        return alpha - truth, beta - truth, res.gaps + threshold - truth

    err_alpha, err_beta, err_gap = monte_carlo(trial, key, trials)
    # Errors of the reported counts (NaN where fewer than k were reported: counted as failures).
    return [
        accuracy_row("selected count, measurement only", err_alpha, 0.0, k=K),
        accuracy_row("selected count, gap only", err_gap, 0.0, k=K),
        accuracy_row("selected count, gap + measurement", err_beta, 0.0, k=K),
    ]


@register(
    "adaptive_svt_answers",
    family="svt",
    datasets=("zipf",),
    description="adaptive SVT with gap vs its sigma=inf baseline (k=10): answers, precision, recall",
)
def _adaptive_answers(key, data, epsilon, trials):
    counts = data.values.astype(np.float64)
    above = 8 * K
    threshold = _threshold_at_rank(counts, above)
    truly_above = jnp.asarray(counts > threshold)

    def trial(k):
        out = []
        for sigma in (None, jnp.inf):
            res = adaptive_sparse_vector_with_gap(
                k, counts, threshold, epsilon, k=K, sigma=sigma, monotonic=True
            )
            valid = res.indices >= 0
            answers = valid.sum()
            hits = jnp.where(valid, truly_above[jnp.maximum(res.indices, 0)], False).sum()
            out += [answers, hits / jnp.maximum(answers, 1), hits / above, res.epsilon_left / epsilon]
        return tuple(out)

    a_n, a_p, a_r, a_left, s_n, s_p, s_r, _ = monte_carlo(trial, key, trials)
    return [
        accuracy_row("answers (adaptive)", a_n, 2 * K - 1, k=K, items_above=above),
        accuracy_row("answers (sigma=inf)", s_n, K, k=K, items_above=above),
        accuracy_row("precision (adaptive)", a_p, 1.0, k=K),
        accuracy_row("precision (sigma=inf)", s_p, 1.0, k=K),
        accuracy_row("recall (adaptive)", a_r, 1.0, k=K),
        accuracy_row("recall (sigma=inf)", s_r, 1.0, k=K),
        accuracy_row("budget fraction left (adaptive)", a_left, 0.0, k=K),
    ]


@register(
    "above_threshold_first_heavy_item",
    family="svt",
    datasets=("zipf",),
    description="AboveThreshold (Exponential, eps1=eps2=eps/2): count of the first item above rank 100",
)
def _first_heavy(key, data, epsilon, trials):
    counts = data.values.astype(np.float64)
    threshold = _threshold_at_rank(counts, 100)
    padded = jnp.asarray(np.append(counts, np.nan))  # index -1 (no item) reads NaN: a failure

    def trial(k):
        return padded[above_threshold(k, counts, threshold, epsilon / 2, epsilon / 2, noise="exponential")]

    return [accuracy_row("count of the reported item", monte_carlo(trial, key, trials), threshold)]
