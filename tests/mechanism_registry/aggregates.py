"""Registry entries: :mod:`dpjax.aggregates` (DP sum and mean with a UQE clipping bound)."""

import numpy as np

from dpjax import aggregates
from mechanism_registry import entry

X = np.round(np.random.default_rng(12).lognormal(2.0, 1.0, 300), 3).astype(np.float32)
PARAMS = {
    "epsilon": (2.0, 0.5, 8.0),
    "q": (0.99, 0.5),
    "beta": (1.01, 1.001),
    "clip_fraction": (0.5, 0.2),
    "lower": (0.0, 2.0),
}

MECHANISMS = [
    entry(
        aggregates,
        "clipped_sum",
        data={"x": X},
        params=PARAMS,
        privacy=("epsilon", "clip_fraction"),
        guarantee=aggregates.sum_guarantee,
    ),
    # sum and mean are clipped_sum's value (over n): two parameters each keep the suite lean.
    *(
        entry(aggregates, name, data={"x": X}, params={"epsilon": PARAMS["epsilon"], "q": PARAMS["q"]})
        for name in ("sum", "mean")
    ),
]
