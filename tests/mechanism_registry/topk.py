"""Registry entries: :mod:`dpjax.topk` (Durfee and Rogers 2019) and its experimental Laplace variant.

The counts are float32 (integer-valued) so that the NaN-data tests apply; 20 items, a few of them
tied, so that every mechanism has both items and ⊥ in its support at these parameters.
"""

import numpy as np

from dpjax import topk
from dpjax._src.topk.laplace import laplace_limited_domain, laplace_limited_domain_guarantee
from mechanism_registry import Mechanism, entry

COUNTS = np.array([40, 3, 31, 0, 29, 29, 7, 18, 2, 25, 1, 0, 12, 9, 5, 27, 4, 6, 8, 3], np.float32)
EPSILON = (1.0, 0.3, 2.0)
DELTA = (1e-3, 1e-6, 0.1)

MECHANISMS = [
    entry(
        topk,
        "limited_domain",
        data={"counts": COUNTS},
        params={"epsilon": EPSILON, "delta": DELTA, "max_contributions": (2, 1, 6)},
        static={"k": 3, "kbar": 5},
        privacy=("epsilon", "delta"),
    ),
    entry(
        topk,
        "strictly_limited_domain",
        data={"counts": COUNTS},
        params={"epsilon": EPSILON, "delta": DELTA},
        static={"k": 3, "kbar": 5},
        privacy=("epsilon", "delta"),
        guarantee=topk.limited_domain_guarantee,
    ),
    entry(
        topk,
        "private_kbar",
        data={"counts": COUNTS},
        params={"epsilon": EPSILON, "delta": DELTA, "max_contributions": (2, 1, 6)},
        static={"k": 2, "kbar_max": 6},
        privacy=("epsilon", "delta"),
    ),
    entry(
        topk,
        "fixed_threshold",
        data={"counts": COUNTS},
        params={"epsilon": EPSILON, "delta": DELTA},
        static={"kbar": 4},
        privacy=("epsilon", "delta"),
    ),
    Mechanism(  # experimental, not exported from dpjax.topk
        name="topk.laplace.laplace_limited_domain",
        fn=laplace_limited_domain,
        data={"counts": COUNTS},
        params={"epsilon": EPSILON, "delta": DELTA, "max_contributions": (2, 1, 4)},
        static={"k": 3, "kbar": 5},
        privacy=("epsilon", "delta"),
        guarantee=laplace_limited_domain_guarantee,
    ),
]
