"""Registry entries: the unbounded quantile family of :mod:`dpjax.quantiles` (Durfee 2023)."""

import numpy as np

from dpjax import quantiles
from mechanism_registry import entry

_RNG = np.random.default_rng(11)
POSITIVE = np.round(_RNG.lognormal(2.0, 1.0, 300), 3).astype(np.float32)
SIGNED = np.round(_RNG.normal(-3.0, 20.0, 300), 3).astype(np.float32)

MECHANISMS = [
    entry(
        quantiles,
        "unbounded",
        data={"x": POSITIVE},
        params={
            "q": (0.9, 0.5, 0.99),
            "epsilon": (1.0, 0.3, 4.0),
            "split": (0.5, 0.25),
            "lower": (0.0, -2.5, 3.0),
            "beta": (1.01, 1.001, 1.5),
        },
        privacy=("epsilon", "split"),
        static={"neighbors": "add_remove"},  # the value of Neighbors.ADD_REMOVE is accepted too
    ),
    entry(
        quantiles,
        "unbounded_result",
        data={"x": POSITIVE},
        params={
            "q": (0.5, 0.1, 1.0),
            "epsilon": (2.0, 0.5),
            "split": (0.5, 0.7),
            "lower": (-1.0, 0.5),
            "beta": (1.01, 1.05),
        },
        static={"noise": "laplace", "max_queries": 700},
        privacy=("epsilon", "split"),
        guarantee=quantiles.unbounded_guarantee,
    ),
    entry(
        quantiles,
        "fully_unbounded",
        data={"x": SIGNED},
        params={"q": (0.25, 0.75, 0.5), "epsilon": (1.0, 0.2, 3.0), "beta": (1.01, 1.002)},
        static={"noise": "gumbel", "max_queries": 2000},
    ),
    entry(
        quantiles,
        "unbounded_many",
        data={"x": POSITIVE},
        params={
            "qs": ((0.25, 0.5, 0.75), (0.1, 0.5, 0.99)),
            "epsilon": (3.0, 1.0),
            "split": (0.5, 0.4),
            "lower": (0.0, -1.0),
            "beta": (1.01, 1.2),
        },
        privacy=("epsilon", "split"),
    ),
]
