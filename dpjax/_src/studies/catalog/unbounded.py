"""Studies of the unbounded quantile mechanism (Durfee 2023): UQE quantiles and the DP sum.

UQE needs only a lower bound (the dataset's: 0 for the lognormal data, -100 for the normal data).
The DP sum clips at UQE's 0.99-quantile estimate with half of epsilon and adds Laplace noise with
the other half (swap neighbors).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax._src import aggregates
from dpjax._src.quantiles.unbounded import unbounded
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import EPSILONS
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.studies.registry import register

__all__: list[str] = []

_QUANTILES = {"q = 0.5": 0.5, "q = 0.99": 0.99}


def _uqe(key, x, epsilon, lower):
    # Both levels in one compiled kernel, each its own epsilon-DP release.
    return {name: unbounded(jax.random.fold_in(key, i), x, q, epsilon, lower=lower)
            for i, (name, q) in enumerate(_QUANTILES.items())}


register(Study(
    "uqe_quantile",
    family="unbounded",
    description="UQE (Alg. 2, Exponential noise, β = 1.001) at q = 0.5 and 0.99, lower bound only",
    mechanisms=[Mechanism("UQE", _uqe, variants=tuple(_QUANTILES))],
    datasets={"lognormal": ("lognormal", {"lower": 0.0}), "normal": ("normal", {"lower": -100.0})},
    grid={"epsilon": EPSILONS},
    truth=lambda x, **_: {name: jnp.quantile(x, q) for name, q in _QUANTILES.items()},
    # Releases lie on UQE's geometric grid (ratio β from the lower bound): at large ε the error is
    # the true quantile's distance to its grid point, flat in ε (q = 0.5 on normal).
    metrics=[metrics.abs_error(("mean", "q95"), description=(
        "absolute error of the released quantile (floored by UQE's output grid at large ε)"))],
))


def _dp_sum(key, x, epsilon):
    release = aggregates.clipped_sum(key, x, epsilon, lower=0.0)
    return {"sum": release.value, "bound": release.bound}


register(Study(
    "uqe_dp_sum",
    family="unbounded",
    description="sum of 10,000 lognormal values clipped at UQE's 0.99-quantile + Laplace (ε/2 + ε/2, swap)",
    mechanisms=[Mechanism("clipped sum", _dp_sum)],
    datasets={"lognormal": "lognormal"},
    grid={"epsilon": EPSILONS},
    truth=lambda x, **_: {"sum": jnp.sum(x), "q99": jnp.quantile(x, 0.99)},
    metrics=[
        metrics.rel_error(("mean", "q95"), output="sum", truth="sum",
                          description="relative error of the sum"),
        metrics.Metric("clip_bound", lambda bound, q99: bound / q99,
                       "clipping bound over the true 0.99-quantile", "× true 0.99-quantile", ("mean",),
                       "linear", output="bound", truth="q99"),
    ],
))
