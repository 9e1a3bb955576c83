"""Registry entries: JointExp and the bounded quantile baselines of :mod:`dpjax.quantiles`."""

import numpy as np

from dpjax import quantiles
from dpjax.accounting import Neighbors
from mechanism_registry import entry

X = np.random.default_rng(0).normal(0.0, 1.0, 30).astype(np.float32)
QS = ((0.25, 0.5, 0.75), (0.1, 0.5, 0.9), (0.2, 0.3, 0.95))
BOUNDS = ((-3.0, 3.0), (-5.0, 4.0), (-1.5, 2.5))

MECHANISMS = [
    entry(
        quantiles,
        "joint_exp",
        data={"x": X},
        params={"epsilon": (1.0, 0.5, 2.0), "qs": QS, "bounds": BOUNDS},
        static={"neighbors": Neighbors.ADD_REMOVE},
    ),
    entry(
        quantiles,
        "emq",
        data={"x": X},
        params={"epsilon": (1.0, 0.5, 2.0), "q": (0.5, 0.1, 0.8), "bounds": BOUNDS},
        static={"neighbors": Neighbors.ADD_REMOVE},
    ),
    entry(
        quantiles,
        "ind_exp",
        data={"x": X},
        params={"epsilon": (1.0, 0.5, 2.0), "qs": QS, "bounds": BOUNDS},
    ),
    entry(
        quantiles,
        "app_ind_exp",
        data={"x": X},
        params={"epsilon": (1.0, 0.5, 2.0), "qs": QS, "bounds": BOUNDS, "delta": (1e-6, 1e-3, 0.0)},
        static={"neighbors": Neighbors.SWAP},
    ),
    entry(
        quantiles,
        "csmooth",
        data={"x": X},
        params={"rho": (0.5, 0.125, 2.0), "qs": QS, "bounds": BOUNDS},
        privacy=("rho",),
    ),
    entry(
        quantiles,
        "agg_tree",
        data={"x": X},
        params={"epsilon": (1.0, 0.5, 2.0), "qs": QS, "bounds": BOUNDS},
        static={"branching": 3, "height": 2, "neighbors": Neighbors.ADD_REMOVE},
    ),
    entry(
        quantiles,
        "approx_quantiles",
        data={"x": X},
        params={"epsilon": (1.0, 0.5, 2.0), "qs": QS, "bounds": BOUNDS},
        operand_scale=5.0,  # an output is a + u (b - a) for bounds or earlier outputs a, b (|.| <= 5)
    ),
]
