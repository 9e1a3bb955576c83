"""A study of top-k over an unknown domain (Durfee and Rogers 2019) on the built-in Zipf histograms.

Each record is taken to be a distinct user (add/remove-one-user neighbors, counts of sensitivity 1;
a user touches one item, so Delta = 1 is also shown). A release must be ``(epsilon, 1e-6)``-DP in
total: ``delta' = delta = 5e-7`` and the per-step epsilon is calibrated by bisection (on the host,
a derived parameter of the study) so that Theorem 1's ``epsilon_star(k, eps, delta')`` (``k + 1``
for Algorithm 6) equals the study's epsilon.

As in the paper's deployment, the mechanisms receive only the true top-(kbar+1) counts (from a
"blackbox top-kbar solver", here ``top_counts``), which is also the fast path. Two histograms: the
full one (10^6 records, clear winners) and its 1% sample (``zipf_sample``, 10^4 records), where the
top-10 is less separated from ``h_(kbar+1)`` and the ⊥ threshold starts to bind.

Variants: Algorithm 1 (k = 10, kbar = 100, Delta unrestricted and Delta = 1) and Algorithm 6 (kbar
chosen privately up to 100). Metrics: indices returned (k = 10 unless ⊥ ends the list early), the ⊥
rate, the precision of the returned indices against the true top-10 (a trial that returns nothing
has no precision: counted as a failure), and the pay-what-you-get charge ``num_returned + bottom``
(+1 for Algorithm 6), against the charge of k that a fixed-k mechanism pays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax._src.accounting.pay_what_you_get import calibrate_epsilon
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import EPSILONS
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.studies.registry import register
from dpjax._src.topk.histogram import top_counts
from dpjax._src.topk.limited_domain import limited_domain
from dpjax._src.topk.private_kbar import private_kbar

__all__: list[str] = []

_K, _KBAR, _DELTA, _DELTA_PRIME = 10, 100, 5e-7, 5e-7
_VARIANTS = ("Alg. 1", "Alg. 1, Δ=1", "Alg. 6")


def _outcome(res, ids, extra_charge):
    indices = jnp.where(res.indices >= 0, ids[jnp.maximum(res.indices, 0)], -1)
    return {"indices": indices, "returned": res.num_returned, "bottom": res.bottom,
            "charged": res.num_returned + res.bottom + extra_charge}


def _limited_domain(key, counts, epsilon, step_epsilon, step_epsilon_alg6):
    eps, eps6 = step_epsilon, step_epsilon_alg6
    ids, top = top_counts(counts, _KBAR + 1)  # position r holds item ids[r] (ties by item id)
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        _VARIANTS[0]: _outcome(limited_domain(k1, top, _K, _KBAR, eps, _DELTA), ids, 0),
        _VARIANTS[1]: _outcome(
            limited_domain(k2, top, _K, _KBAR, eps, _DELTA, max_contributions=1), ids, 0
        ),
        _VARIANTS[2]: _outcome(private_kbar(k3, top, _K, _KBAR, eps6, _DELTA), ids, 1),
    }


register(Study(
    "topk_limited_domain",
    family="topk",
    description=f"top-{_K} of an unknown domain at (ε, 1e-6): limited domain (Alg. 1), private kbar (Alg. 6)",
    mechanisms=[Mechanism("limited domain", _limited_domain, variants=_VARIANTS)],
    datasets={"zipf": "zipf", "zipf_sample": "zipf_sample"},
    grid={"epsilon": EPSILONS},
    derived={  # per-step epsilons, calibrated on the host for each total epsilon
        "step_epsilon": lambda epsilon: calibrate_epsilon(epsilon, _K, _DELTA_PRIME),
        "step_epsilon_alg6": lambda epsilon: calibrate_epsilon(epsilon, _K + 1, _DELTA_PRIME),
    },
    truth=lambda counts, **_: top_counts(counts, _K)[0],
    metrics=[
        metrics.value("returned", f"indices returned (at most k = {_K})", "items", output="returned"),
        metrics.value("bottom", "⊥ released (fewer than k indices)", "fraction of releases", output="bottom",
                      rate=True),
        metrics.precision(output="indices",
                          description=f"precision: share of the returned in the true top-{_K}"),
        metrics.value("charged", "outcomes charged by pay-what-you-get", "outcomes", output="charged"),
    ],
))
