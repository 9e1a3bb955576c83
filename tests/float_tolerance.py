"""How far the floats of a traced, batched or sharded call may sit from the eager call's.

On the CPU, XLA evaluates an elementwise function with the same code fused or not, and dpjax fixes
its reduction orders; LLVM may still contract a multiply and an add into one fused multiply-add in a
batched (vectorized) loop and not in the scalar one, one rounding apart in each operand, and a
difference of two such operands (a Sparse-Vector-with-Gap gap, noisy query minus noisy threshold,
in float64 under ``vmap`` over its parameters) moves by up to 4 ulps of the result. XLA on GPU and
TPU evaluates transcendental functions with approximations that differ between fused and unfused
kernels, and picks a reduction tree by shape (a sum under ``vmap`` is another tree), so the same
expression moves by a few ulps there, amplified by the steps after it (up to 32 ulps seen on an
H100, in ``budgeting.knn``). Integer and boolean outputs stay bit-identical on every backend.

A release that adds floats of larger magnitude and cancels them (``value + noise`` of an additive
mechanism: 1.0 + (-1.121) = -0.121) carries their rounding, not its own: noise one ulp apart (the
vectorized and the scalar logarithm of XLA's CPU emitters, tests/conftest.py) moves the release by
9 ulps of itself. Such releases are compared within ``MAX_ULP`` ulps of their operands' magnitude.
"""

from __future__ import annotations

import jax
import numpy as np

MAX_ULP = 4 if jax.default_backend() == "cpu" else 64


def assert_close_ulp(got, want, operand_scale: float = 0.0) -> None:
    """``got`` within :data:`MAX_ULP` units in the last place of ``want``, or of ``operand_scale``
    where that is larger (the magnitude of the operands of a sum that may cancel)."""
    got, want = np.asarray(got), np.asarray(want)
    if not operand_scale:
        np.testing.assert_array_max_ulp(got, want, maxulp=MAX_ULP)
        return
    scale = np.maximum(np.abs(want), np.asarray(operand_scale, want.dtype))
    apart = ~(np.abs(got - want) <= MAX_ULP * np.spacing(scale))
    assert not apart.any(), f"{got[apart]} != {want[apart]} within {MAX_ULP} ulps of {scale[apart]}"
