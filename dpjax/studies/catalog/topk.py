"""Studies of top-k over an unknown domain (Durfee and Rogers 2019) on the built-in Zipf histogram.

Each record is taken to be a distinct user (add/remove-one-user neighbours, counts of sensitivity 1;
a user touches one item, so Delta = 1 is also shown). A release must be ``(epsilon, 1e-6)``-DP in
total: ``delta' = delta = 5e-7`` and the per-step epsilon is calibrated by bisection so that Theorem
1's ``epsilon_star(k, eps, delta')`` (``k + 1`` for Algorithm 6) equals the study's epsilon.

As in the paper's deployment, the mechanisms receive only the true top-(kbar+1) counts (from a
"blackbox top-kbar solver", here ``top_counts``), which is also the fast path. Two histograms: the
full one (10^6 records, clear winners) and a 1% Bernoulli sample of its records (10^4 records), where
the top-10 is less separated from ``h_(kbar+1)`` and the ⊥ threshold starts to bind.

* ``topk_limited_domain``: Algorithm 1 (k = 10, kbar = 100, Delta unrestricted and Delta = 1) and
  Algorithm 6 (kbar chosen privately up to 100): number of indices returned (truth k, with the ⊥
  rate), precision of the returned indices against the true top-10 (truth 1; NaN, counted as a
  failure, when nothing is returned), and the pay-what-you-get charge ``num_returned + bottom`` (+1
  for Algorithm 6) against the charge of k that a fixed-k mechanism pays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpjax import topk
from dpjax.accounting.pay_what_you_get import calibrate_epsilon
from dpjax.studies.registry import accuracy_row, register
from dpjax.studies.runner import monte_carlo
from dpjax.topk._histogram import top_counts

K, KBAR, DELTA, DELTA_PRIME = 10, 100, 5e-7, 5e-7


def _rows(name, res, true_top, extra_cost=0):
    n = res.num_returned
    hits = np.isin(res.indices, true_top).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(n > 0, hits / n, np.nan)
    charged = n + res.bottom + extra_cost
    return [
        accuracy_row(f"indices returned, {name}", n, K, k=K, bottom_rate=float(res.bottom.mean())),
        accuracy_row(f"precision of returned, {name}", precision, 1.0, k=K),
        accuracy_row(f"PWYG outcomes charged, {name}", charged, K, k=K),
    ]


def _study_histograms(values):
    sample = np.random.default_rng(1).binomial(values, 0.01)
    return ("full", "1% sample"), np.stack([values, sample])


@register(
    "topk_limited_domain",
    family="topk",
    datasets=("zipf",),
    description="top-10 of an unknown domain at (eps, 1e-6): limited domain (Alg. 1), private kbar (Alg. 6)",
)
def _limited_domain(key, data, epsilon, trials):
    eps = calibrate_epsilon(epsilon, K, DELTA_PRIME)
    eps6 = calibrate_epsilon(epsilon, K + 1, DELTA_PRIME)
    labels, histograms = _study_histograms(data.values)
    ids, top = (np.asarray(a) for a in top_counts(jnp.asarray(histograms), KBAR + 1))
    top = jnp.asarray(top)  # [2, kbar+1]: position r of row b holds item ids[b, r] (ties by item id)

    def trial(kk):  # both histograms and all three variants in one compiled call
        k1, k2, k3 = jax.random.split(kk, 3)
        return (
            topk.limited_domain(k1, top, K, KBAR, eps, DELTA),
            topk.limited_domain(k2, top, K, KBAR, eps, DELTA, max_contributions=1),
            topk.private_kbar(k3, top, K, KBAR, eps6, DELTA),
        )

    results = monte_carlo(trial, key, trials)
    rows = []
    for b, label in enumerate(labels):
        for name, res, extra in zip(("Alg. 1", "Alg. 1, Delta=1", "Alg. 6"), results, (0, 0, 1), strict=True):
            res = jax.tree.map(lambda a, b=b: a[:, b], res)
            positions = res.indices
            res = res._replace(indices=np.where(positions >= 0, ids[b][np.maximum(positions, 0)], -1))
            rows += _rows(f"{name}, {label}", res, ids[b][:K], extra_cost=extra)
            if extra:
                rows[-3]["mean_kbar"] = float(res.kbar.mean())
    return rows
