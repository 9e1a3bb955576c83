"""Registry entries: :mod:`dpjax.svt` (AboveThreshold, sparse vector, sparse vector with gap)."""

import math

import numpy as np

from dpjax import svt
from mechanism_registry import Mechanism

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


def gumbel_above_threshold_guarantee(epsilon):
    return svt.above_threshold_guarantee(epsilon, epsilon, noise="gumbel")


MECHANISMS = [
    Mechanism(
        name="svt.above_threshold[first_passage]",
        fn=gumbel_above_threshold_first_passage,
        data=QUERIES,
        params={k: AT_PARAMS[k] for k in ("threshold", "sensitivity")} | {"epsilon": (0.5, 0.1, 4.0)},
        privacy=("epsilon", "sensitivity"),
        guarantee=gumbel_above_threshold_guarantee,
        guarantee_args=("epsilon",),
    ),
    *(
        Mechanism(
            name=f"svt.above_threshold[first_passage_{noise}]",
            fn=svt.above_threshold,
            data=QUERIES,
            params=AT_PARAMS,
            static={"noise": noise, "method": "first_passage"},
            privacy=(*AT_PRIVACY, "sensitivity"),
            guarantee=svt.above_threshold_guarantee,
            guarantee_args=("epsilon1", "epsilon2", "noise"),
        )
        for noise in ("laplace", "exponential")
    ),
    Mechanism(
        name="svt.sparse_vector[first_passage]",
        fn=svt.sparse_vector,
        data=QUERIES,
        params=AT_PARAMS,
        static={"c": 2, "method": "first_passage"},
        privacy=AT_PRIVACY,
        guarantee=svt.sparse_vector_guarantee,
        guarantee_args=("epsilon1", "epsilon2", "c"),
    ),
    Mechanism(
        name="svt.sparse_vector_with_gap[first_passage]",
        fn=svt.sparse_vector_with_gap,
        data=QUERIES,
        params=GAP_PARAMS,
        static={"k": 2, "method": "first_passage"},
        privacy=GAP_PRIVACY,
        guarantee=svt.sparse_vector_with_gap_guarantee,
        guarantee_args=("epsilon", "k"),
    ),
    Mechanism(
        name="svt.above_threshold",
        fn=svt.above_threshold,
        data=QUERIES,
        params=AT_PARAMS,
        privacy=(*AT_PRIVACY, "sensitivity"),
        guarantee=svt.above_threshold_guarantee,
        guarantee_args=("epsilon1", "epsilon2"),
    ),
    Mechanism(
        name="svt.above_threshold_blocked",
        fn=svt.above_threshold_blocked,
        data=QUERIES,
        params=AT_PARAMS,
        static={"block_size": 3, "noise": "exponential"},
        privacy=AT_PRIVACY,
        guarantee=svt.above_threshold_guarantee,
        guarantee_args=("epsilon1", "epsilon2", "noise"),
    ),
    Mechanism(
        name="svt.sparse_vector",
        fn=svt.sparse_vector,
        data=QUERIES,
        params=AT_PARAMS,
        static={"c": 2},
        privacy=AT_PRIVACY,
        guarantee=svt.sparse_vector_guarantee,
        guarantee_args=("epsilon1", "epsilon2", "c"),
    ),
    Mechanism(
        name="svt.sparse_vector_with_gap",
        fn=svt.sparse_vector_with_gap,
        data=QUERIES,
        params=GAP_PARAMS,
        static={"k": 2},
        privacy=GAP_PRIVACY,
        guarantee=svt.sparse_vector_with_gap_guarantee,
        guarantee_args=("epsilon", "k"),
    ),
    Mechanism(
        name="svt.adaptive_sparse_vector_with_gap",
        fn=svt.adaptive_sparse_vector_with_gap,
        data=QUERIES,
        params={**GAP_PARAMS, "sigma": (2.0, 0.0, math.inf)},
        static={"k": 2, "monotonic": True},
        privacy=(*GAP_PRIVACY, "sensitivity"),
        guarantee=svt.adaptive_sparse_vector_with_gap_guarantee,
        guarantee_args=("epsilon", "k"),
    ),
]
