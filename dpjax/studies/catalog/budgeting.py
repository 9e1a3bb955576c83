"""Studies of adaptive per-user budgeting by iterative elimination (Liang and Yi).

The built-in 1-D sample datasets stand in for user locations (one value per user, metres in spirit).
The study epsilon is read as a pure geo-privacy epsilon per unit distance, converted to CGP by
Lemma 3.1 (rho = epsilon^2 / 2); every user has that budget for the one query. Rows report the
error of PIE (c = 8 rounds, even split, beta0 = 0.025) next to the one-shot baseline with the same
budget, and the mean fraction of the budget saved (PrivSav).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax.budgeting.range_count import range_count, range_count_baseline
from dpjax.budgeting.threshold import threshold_baseline, threshold_query
from dpjax.studies.registry import accuracy_row, register
from dpjax.studies.runner import monte_carlo

C, BETA0 = 8, 0.025
USERS = 300  # the range count uses the first 300 values as users, to keep the study to seconds


@register(
    "pie_range_count",
    family="budgeting",
    datasets=("normal", "uniform"),
    description="count of 300 users in [-2, 2]: PIE-NI distance privatization (PM1, c=8) vs one-shot BM1, "
    "rho = eps^2/2 per user (local CGP)",
)
def _range_count(key, data, epsilon, trials):
    values = data.values[:USERS]
    x = np.asarray(values, np.float32)[:, None]  # NumPy: closed over by jit as a constant
    center, half = np.zeros(1, np.float32), np.full(1, 2.0, np.float32)
    truth = float(np.sum(np.abs(values) < 2.0))
    rho = epsilon**2 / 2

    def pm(k):
        count, res = range_count(k, x, rho, center, half, c=C, beta0=BETA0, mode="distance")
        return count, 1 - jnp.mean(res.rounds) / C

    counts, saving = monte_carlo(pm, key, trials)
    bm = monte_carlo(lambda k: range_count_baseline(k, x, rho, center, half, mode="distance"), key, trials)
    return [
        accuracy_row("count PM1 c8", counts, truth, privacy_saving=float(np.mean(saving))),
        accuracy_row("count BM1", bm, truth, privacy_saving=0.0),
    ]


@register(
    "pie_threshold",
    family="budgeting",
    datasets=("normal", "uniform"),
    description="central threshold query 1{#(x < -2) < 0.2 N} (Appendix C, corrected): PIE-NI (c=8) vs "
    "one-shot BM1, rho = eps^2/2 zCDP",
)
def _threshold(key, data, epsilon, trials):
    count = float(np.sum(data.values < -2.0))
    n_records = int(data.values.size)
    truth = float(count < 0.2 * n_records)
    rho = epsilon**2 / 2

    def pm(k):
        answer, res = threshold_query(k, count, rho, q=0.2, n_records=n_records, c=C, beta0=BETA0)
        return answer.astype(jnp.float32), 1 - res.rounds[0] / C

    answers, saving = monte_carlo(pm, key, trials)
    bm = monte_carlo(
        lambda k: threshold_baseline(k, count, rho, q=0.2, n_records=n_records).astype(jnp.float32),
        key,
        trials,
    )
    return [
        accuracy_row("answer PM c8", answers, truth, privacy_saving=float(np.mean(saving))),
        accuracy_row("answer BM1", bm, truth, privacy_saving=0.0),
    ]
