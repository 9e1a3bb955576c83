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
"""

from __future__ import annotations

import jax
import numpy as np

MAX_ULP = 4 if jax.default_backend() == "cpu" else 64


def assert_close_ulp(got, want) -> None:
    """``got`` within :data:`MAX_ULP` units in the last place of ``want``."""
    np.testing.assert_array_max_ulp(np.asarray(got), np.asarray(want), maxulp=MAX_ULP)
