"""JointExp's weights in closed form: the edge weight ``log phi`` of a step between gaps and
``log k!`` of a run of ``k`` quantiles in one gap (Gillenwater, Joseph, Kulesza, ICML 2021, Alg. 1)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

__all__ = ["log_factorials", "log_phi"]


def log_phi(c, gap, nu):
    """``log phi(g) = -c |g - nu|`` (the edge weight of a step of ``g`` gaps toward target ``nu``)."""
    return -c * jnp.abs(gap - nu)


def log_factorials(m: int) -> np.ndarray:
    """``log k!`` for ``k = 0..m``."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, m + 1, dtype=np.float64)))])
