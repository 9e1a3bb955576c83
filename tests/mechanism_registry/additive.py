"""Registry entries: :mod:`dpjax.additive`."""

import numpy as np

from dpjax import additive
from mechanism_registry import entry

VALUE = np.array([1.0, 2.5, -3.0], np.float32)
# value + noise may cancel: compared within ulps of the largest value (tests/float_tolerance.py)
OPERAND_SCALE = float(np.abs(VALUE).max())

MECHANISMS = [
    entry(
        additive,
        "laplace_mechanism",
        data={"value": VALUE},
        operand_scale=OPERAND_SCALE,
        params={"epsilon": (1.0, 0.5, 2.0), "sensitivity": (1.0, 3.0)},
        guarantee=additive.laplace_guarantee,
    ),
    entry(
        additive,
        "gaussian_mechanism",
        data={"value": VALUE},
        operand_scale=OPERAND_SCALE,
        params={"sigma": (1.0, 0.3, 4.0), "sensitivity": (1.0, 2.0)},
        privacy=("sigma",),
        guarantee=additive.gaussian_guarantee,
    ),
]
