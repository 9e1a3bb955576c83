"""The static layout of JointExp's forward tables: the row width, the backward sampler's blocks
and their masses, and the windows a row may be kept in (see ``forward_tables``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from dpjax._src.numerics import ceil_div
from dpjax._src.quantiles.joint_exp_linear import LINEAR_BLOCKS
from dpjax._src.quantiles.joint_exp_toeplitz import aligned_length

__all__ = [
    "UNIT",
    "block_masses",
    "outside_window",
    "padded_width",
    "place_window",
    "sampling_block",
    "window_span",
]


def sampling_block(size: int) -> int:
    """Gaps per block of the backward sampler: about ``sqrt(n)``, so a step costs ``O(sqrt(n))``;
    a multiple of every :data:`~dpjax._src.quantiles.joint_exp_linear.LINEAR_BLOCKS` size (so the block
    masses follow from the linear step's block summaries, and their loops vectorize: see
    :func:`~dpjax._src.quantiles.joint_exp_toeplitz.aligned_length`)."""
    unit = LINEAR_BLOCKS[0]
    return ceil_div(max(unit, math.isqrt(max(size - 1, 0)) + 1), unit) * unit


UNIT = LINEAR_BLOCKS[0]
"""Gaps per block of the windows (their placement, bounds and certificate)."""
WINDOW_FRACTION = 16
"""The forward pass keeps a row in a window of about this fraction of the row when the rest is
negligible (:func:`forward_tables`)."""


MIN_WINDOW = 2048
"""No windows narrower than this many gaps: below, a whole row costs little more than a window."""


def window_span(size: int) -> int:
    """The static window width (gaps) of the forward pass for rows of ``size`` gaps: about
    ``1 / WINDOW_FRACTION`` of the row at its aligned length, or 0 (no windows) below
    :data:`MIN_WINDOW`."""
    span = aligned_length(ceil_div(aligned_length(size), WINDOW_FRACTION))
    return span if span >= MIN_WINDOW else 0


def place_window(upper, margin, rows: int):
    """The first block of a window of ``rows`` blocks centred on the blocks whose bound ``upper`` is
    within ``max(margin, 0)`` of the largest (clamped into the row)."""
    index = jnp.arange(upper.shape[0], dtype=jnp.int32)
    above = upper >= jnp.max(upper) - jnp.maximum(margin, 0)
    low = jnp.min(jnp.where(above, index, upper.shape[0]))
    high = jnp.max(jnp.where(above, index, -1))
    return jnp.clip((low + high + 1 - rows) // 2, 0, upper.shape[0] - rows).astype(jnp.int32)


def outside_window(index, start, width: int):
    """Whether each of ``index`` lies outside ``[start, start + width)``."""
    return (index < start) | (index >= start + width)


def padded_width(size: int) -> int:
    """The row length ``aligned_length(size)`` rounded up to a whole number of :func:`sampling_block`
    blocks."""
    block = sampling_block(size)
    return ceil_div(aligned_length(size), block) * block


def block_masses(row, c, block: int):
    """Per block of ``block`` gaps of a padded row, ``LSE row + c t`` and ``LSE row - c t`` (stacked)."""
    padded = row.reshape(-1, block)
    ramp = c * jnp.arange(block, dtype=row.dtype)
    return jnp.stack([jax.nn.logsumexp(padded + ramp, axis=1), jax.nn.logsumexp(padded - ramp, axis=1)])
