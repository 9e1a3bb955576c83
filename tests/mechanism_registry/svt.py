"""Registry entries: :mod:`dpjax.svt` (AboveThreshold, sparse vector, sparse vector with gap)."""

import math

import numpy as np

from dpjax import svt
from mechanism_registry import Mechanism, entry

QUERIES = {"queries": np.array([0.5, 3.0, -1.0, 4.5, 2.0, 6.0, 1.0, 5.0], np.float32)}
AT_PARAMS = {
    "threshold": (4.0, 0.0, 5.5),
    "epsilon1": (0.5, 0.1, 4.0),
    "epsilon2": (0.5, 4.0, 0.1),
    "sensitivity": (1.0, 0.5, 2.0),
}
AT_PRIVACY = ("epsilon1", "epsilon2")
GAP_PARAMS = {
    "threshold": (4.0, 0.0, 5.5),
    "epsilon": (1.0, 0.2, 8.0),
    "theta": (0.3, 0.7, 0.05),
    "sensitivity": (1.0, 0.5, 2.0),
}
GAP_PRIVACY = ("epsilon", "theta")


def gumbel_above_threshold_first_passage(key, queries, threshold, epsilon, sensitivity):
    """Gumbel AboveThreshold needs ``epsilon1 == epsilon2``: one traced budget for both."""
    options = {"noise": "gumbel", "sensitivity": sensitivity, "method": "first_passage"}
    return svt.above_threshold(key, queries, threshold, epsilon, epsilon, **options)


def gumbel_above_threshold_guarantee(epsilon, sensitivity=1.0):
    """The wrapper's companion: the same arguments, one budget for both."""
    return svt.above_threshold_guarantee(epsilon, epsilon, noise="gumbel", sensitivity=sensitivity)


MECHANISMS = [
    Mechanism(
        name="svt.above_threshold[first_passage]",
        fn=gumbel_above_threshold_first_passage,
        data=QUERIES,
        params={k: AT_PARAMS[k] for k in ("threshold", "sensitivity")} | {"epsilon": (0.5, 0.1, 4.0)},
        privacy=("epsilon", "sensitivity"),
        guarantee=gumbel_above_threshold_guarantee,
    ),
    *(
        entry(
            svt,
            f"above_threshold[first_passage_{noise}]",
            data=QUERIES,
            params=AT_PARAMS,
            static={"noise": noise, "method": "first_passage"},
            privacy=(*AT_PRIVACY, "sensitivity"),
        )
        for noise in ("laplace", "exponential")
    ),
    entry(
        svt,
        "sparse_vector[first_passage]",
        data=QUERIES,
        params=AT_PARAMS,
        static={"c": 2, "method": "first_passage"},
        privacy=AT_PRIVACY,
    ),
    entry(
        svt,
        "sparse_vector_with_gap[first_passage]",
        data=QUERIES,
        params=GAP_PARAMS,
        static={"c": 2, "method": "first_passage"},
        privacy=GAP_PRIVACY,
    ),
    entry(
        svt,
        "adaptive_sparse_vector_with_gap[first_passage]",
        data=QUERIES,
        params={**GAP_PARAMS, "sigma": (2.0, 0.0, math.inf)},
        static={"c": 2, "monotonic": True, "method": "first_passage"},
        privacy=(*GAP_PRIVACY, "sensitivity"),
    ),
    entry(
        svt,
        "above_threshold",
        data=QUERIES,
        params=AT_PARAMS,
        privacy=(*AT_PRIVACY, "sensitivity"),
    ),
    entry(
        svt,
        "above_threshold_blocked",
        data=QUERIES,
        params=AT_PARAMS,
        static={"block_size": 3, "noise": "exponential"},
        privacy=AT_PRIVACY,
        guarantee=svt.above_threshold_guarantee,
    ),
    entry(
        svt,
        "sparse_vector",
        data=QUERIES,
        params=AT_PARAMS,
        static={"c": 2},
        privacy=AT_PRIVACY,
    ),
    entry(
        svt,
        "sparse_vector_with_gap",
        data=QUERIES,
        params=GAP_PARAMS,
        static={"c": 2},
        privacy=GAP_PRIVACY,
    ),
    entry(
        svt,
        "adaptive_sparse_vector_with_gap",
        data=QUERIES,
        params={**GAP_PARAMS, "sigma": (2.0, 0.0, math.inf)},
        static={"c": 2, "monotonic": True},
        privacy=(*GAP_PRIVACY, "sensitivity"),
    ),
]
