"""Registry entries: :mod:`dpjax.selection`."""

import numpy as np

from dpjax import selection
from mechanism_registry import entry

SCORES = np.array([3.0, 1.0, 0.0, 2.5, -1.0], np.float32)
PARAMS = {"epsilon": (1.0, 0.5, 2.0), "sensitivity": (1.0, 2.5)}

MECHANISMS = [
    entry(
        selection,
        "exponential_mechanism",
        data={"utilities": SCORES},
        params=PARAMS,
    ),
    entry(
        selection,
        "exponential_mechanism[inverse_cdf]",
        data={"utilities": np.linspace(-4.0, 2.0, 11, dtype=np.float32)},  # three blocks of 4
        params=PARAMS,
        static={"method": "inverse_cdf"},
    ),
    entry(
        selection,
        "exponential_mechanism[tree]",
        data={"utilities": np.linspace(-4.0, 2.0, 11, dtype=np.float32)},  # padded to 16 leaves
        params=PARAMS,
        static={"method": "tree"},
    ),
    entry(
        selection,
        "report_noisy_max",
        data={"scores": SCORES},
        params=PARAMS,
    ),
    *(
        entry(
            selection,
            f"report_noisy_max[{noise}]",
            data={"scores": SCORES},
            params=PARAMS,
            static={"noise": noise, "monotonic": True},
        )
        for noise in ("exponential", "laplace")
    ),
    entry(
        selection,
        "gumbel_top_k",
        data={"scores": SCORES},
        params=PARAMS,
        static={"k": 3},
    ),
    entry(
        selection,
        "gumbel_top_k[tree]",
        data={"scores": SCORES},
        params=PARAMS,
        static={"k": 3, "method": "tree"},
    ),
    entry(
        selection,
        "noisy_top_k_with_gap",
        data={"scores": SCORES},
        params=PARAMS,
        static={"k": 2},
    ),
    entry(
        selection,
        "noisy_max_with_gap",
        data={"scores": SCORES},
        params=PARAMS,
        static={"monotonic": True},
    ),
    entry(
        selection,
        "noisy_top_k_with_gap[gumbel]",
        data={"scores": SCORES},
        params=PARAMS,
        static={"k": 2, "noise": "gumbel"},
    ),
    entry(
        selection,
        "noisy_top_k_with_gap[gumbel,tree]",
        data={"scores": np.linspace(-4.0, 2.0, 11, dtype=np.float32)},  # padded to 16 leaves
        params=PARAMS,
        static={"k": 3, "noise": "gumbel", "method": "tree", "monotonic": True},
    ),
    entry(
        selection,
        "noisy_max_with_gap[gumbel,tree]",
        data={"scores": SCORES},
        params=PARAMS,
        static={"noise": "gumbel", "method": "tree"},
    ),
    entry(
        selection,
        "gumbel_top_k[counts]",
        data={"scores": np.array([7, 2, 9, 9, 0, 4], np.int32)},
        params=PARAMS,
        static={"k": 2, "monotonic": True},
    ),
    entry(
        selection,
        "joint_top_k",
        data={"scores": np.array([7, 2, 9, 9, 0, 4], np.int32)},
        params=PARAMS,
        static={"k": 2, "monotonic": True},
    ),
]
