"""Registry entries: :mod:`dpjax.selection`."""

import numpy as np

from dpjax import selection
from mechanism_registry import Mechanism

SCORES = np.array([3.0, 1.0, 0.0, 2.5, -1.0], np.float32)
PARAMS = {"epsilon": (1.0, 0.5, 2.0), "sensitivity": (1.0, 2.5)}

MECHANISMS = [
    Mechanism(
        name="selection.exponential_mechanism",
        fn=selection.exponential_mechanism,
        data={"utilities": SCORES},
        params=PARAMS,
        guarantee=selection.exponential_mechanism_guarantee,
    ),
    Mechanism(
        name="selection.exponential_mechanism[inverse_cdf]",
        fn=selection.exponential_mechanism,
        data={"utilities": np.linspace(-4.0, 2.0, 11, dtype=np.float32)},  # three blocks of 4
        params=PARAMS,
        static={"method": "inverse_cdf"},
        guarantee=selection.exponential_mechanism_guarantee,
    ),
    Mechanism(
        name="selection.exponential_mechanism[tree]",
        fn=selection.exponential_mechanism,
        data={"utilities": np.linspace(-4.0, 2.0, 11, dtype=np.float32)},  # padded to 16 leaves
        params=PARAMS,
        static={"method": "tree"},
        guarantee=selection.exponential_mechanism_guarantee,
    ),
    Mechanism(
        name="selection.report_noisy_max",
        fn=selection.report_noisy_max,
        data={"scores": SCORES},
        params=PARAMS,
        guarantee=selection.report_noisy_max_guarantee,
    ),
    *(
        Mechanism(
            name=f"selection.report_noisy_max[{noise}]",
            fn=selection.report_noisy_max,
            data={"scores": SCORES},
            params=PARAMS,
            static={"noise": noise, "monotonic": True},
            guarantee=selection.report_noisy_max_guarantee,
            )
        for noise in ("exponential", "laplace")
    ),
    Mechanism(
        name="selection.gumbel_top_k",
        fn=selection.gumbel_top_k,
        data={"scores": SCORES},
        params=PARAMS,
        static={"k": 3},
        guarantee=selection.gumbel_top_k_guarantee,
    ),
    Mechanism(
        name="selection.gumbel_top_k[tree]",
        fn=selection.gumbel_top_k,
        data={"scores": SCORES},
        params=PARAMS,
        static={"k": 3, "method": "tree"},
        guarantee=selection.gumbel_top_k_guarantee,
    ),
    Mechanism(
        name="selection.noisy_top_k_with_gap",
        fn=selection.noisy_top_k_with_gap,
        data={"scores": SCORES},
        params=PARAMS,
        static={"k": 2},
        guarantee=selection.noisy_top_k_with_gap_guarantee,
    ),
    Mechanism(
        name="selection.noisy_max_with_gap",
        fn=selection.noisy_max_with_gap,
        data={"scores": SCORES},
        params=PARAMS,
        static={"monotonic": True},
        guarantee=selection.noisy_max_with_gap_guarantee,
    ),
    Mechanism(
        name="selection.gumbel_top_k[counts]",
        fn=selection.gumbel_top_k,
        data={"scores": np.array([7, 2, 9, 9, 0, 4], np.int32)},
        params=PARAMS,
        static={"k": 2, "monotonic": True},
        guarantee=selection.gumbel_top_k_guarantee,
    ),
]
