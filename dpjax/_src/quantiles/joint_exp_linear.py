"""JointExp's Toeplitz step in linear space: block matrix products, certified, with an exact fallback.

The step (Gillenwater, Joseph, Kulesza, ICML 2021, Alg. 1 lines 8-10) is the strictly causal
convolution ``y[i] = LSE_{i' < i} (x[i'] - c |i - i' - nu|)`` of a log vector (see
:mod:`dpjax._src.quantiles.joint_exp_toeplitz`). Here the sequence is cut into blocks of
``B`` gaps (:data:`LINEAR_BLOCKS`), each moved to linear space once, relative to its maximum ``S_b``
(``v = exp(x - S_b)``, one ``exp`` per element). For output block ``b`` and input block ``b - d``
the gaps are ``g = d B + t - t'``; with ``L = floor(nu)`` and ``D = max(floor((L + 1) / B) - 1, 0)``:

* ``d = 0, D + 1, D + 2`` (the block itself and the two around the kink ``g = nu``): explicit
  ``B x B`` kernel matrices ``phi(d B + t - t')`` (``g >= 1``);
* ``1 <= d <= D`` (every ``g <= L``, the near side): ``phi = e^{-c (nu - d B)} e^{c t} e^{-c t'}``
  factorises, so the blocks enter through one summary each, ``R_u = LSE_t' x[u, t'] - c t'``, and a
  window sum over block distances;
* ``d >= D + 3`` (every ``g > nu``, the far side): likewise through ``F_u = LSE_t' x[u, t'] + c t'``
  and a causal decaying filter over blocks.

The two block-level sums (``O(n / B)`` entries) run through the exact log-space filters of the scan
method (:func:`~dpjax._src.quantiles.joint_exp_toeplitz.far_and_window_filters`, with ``c B``). Each
output block is then the sum, with one scale per block, of three ``B x B`` kernel products (the
explicit blocks) and the near and far terms (the block-level sums times ``e^{+-c t}``), and one
``log`` per element. No subtraction is formed anywhere, so the only loss is underflow: every scaled
quantity is at most 1 in its block frame ``G_b`` (the largest log-magnitude feeding the block), and
an underflowed term is below ``tiny``. So every entry whose linear value in its frame is at least
``tiny * K / eps`` (``K`` terms) is accurate to ``eps`` relative to itself, exactly as the scan's
entries are; the step checks this for every entry that is not exactly zero (exact zeros are the
gaps at or before the first finite input) and for the block summaries, and when any check fails it
returns the exact log-space scan instead
(:func:`~dpjax._src.quantiles.joint_exp_toeplitz.toeplitz_scan`, by ``lax.cond``; under ``vmap`` over
``c`` or ``nu`` by :func:`dpjax._src.lanes.cond`: an attempt or the scan runs only where some lane
needs it). In float32 the threshold is
``2^-96`` of the frame (~66 nats): a row whose entries within one block span more than that is not
certified. The kernel alone spans up to ``c (2B - 2)`` nats in an explicit block, so the step is
tried with blocks of 32 gaps, then 16 (:data:`LINEAR_BLOCKS`), and only a row that neither
certifies takes the scan. On N(0, 5) data
(n = 20000, m = 29, swap, float32) blocks of 32 certify every row at epsilon <= 2, 17 of 28 at
epsilon 4 and none from epsilon 6; blocks of 16 certify every row up to epsilon 6, 18 of 28 at
epsilon 8 and none from epsilon 12 (there a row costs the scan plus both attempts). Float64 holds
~660 nats. Cost: one ``exp`` and one ``log`` per element, three ``(n / B, B) x (B, B)`` matrix
products and ``O(n / B)`` log-space work, against the scan's dozen transcendental functions per
element. The block summaries ``F_u`` and ``R_u`` of the input row are also its backward-sampler
block masses at block size ``B`` (:func:`toeplitz_linear_with_masses` combines them to the
sampler's blocks), so the forward pass needs no pass of its own over a row for those.

The step is split in two so that it can run on windows: :func:`block_frames` does the ``O(n / B)``
block-level work for an input that is finite only in a window of blocks (the input's elements are
touched only there), and :func:`window_values` the ``O(w)`` elementwise work for any window of
``w`` output gaps. Each frame also bounds every output entry of its block, which is what lets the
forward pass certify that a row outside its window is negligible.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.nn import logsumexp

from dpjax._src import lanes
from dpjax._src.numerics import ceil_div
from dpjax._src.quantiles.joint_exp_toeplitz import (
    aligned_length,
    far_and_window_filters,
    remainder,
    shift_right,
    toeplitz_scan,
)

__all__: list[str] = []

LINEAR_BLOCKS = (32, 16)
"""Gaps per block of the linear-space step, in the order tried: larger blocks are faster (fewer
block-level entries), smaller ones hold steeper rows in float32. Each divides the first, which
divides :func:`aligned_length`'s multiple of 128."""


def _shift_rows(v, shift, fill):
    """``out[b] = v[b - shift]`` (``fill`` where ``b < shift``) along the first axis; ``shift`` traced."""
    rows = v.shape[0]
    padded = jnp.concatenate([jnp.full(v.shape, fill, v.dtype), v])
    start = rows - jnp.minimum(shift, rows)
    return lax.dynamic_slice_in_dim(padded, start, rows, axis=0)


def _safe(v):
    """``v`` where finite, else 0: a frame that never makes ``exp(-inf - frame)`` NaN."""
    return jnp.where(jnp.isfinite(v), v, jnp.zeros_like(v))


def _toeplitz_linear_certified(x, c, nu, block: int = LINEAR_BLOCKS[0]):
    """``(y, certified)``: the linear-space step with blocks of ``block`` gaps (static), in blocks
    (shape ``(aligned_length(n) / block, block)``, flattened by the caller), and whether every entry
    of it is certified accurate relative to itself (see the module docstring)."""
    return _linear_step(x, c, nu, block)[:2]


class _Frames(NamedTuple):
    """The ``O(n / B)`` part of one linear step (each output block's frame and near and far terms)
    and the input in linear space: what :func:`window_values` needs for any window of the output.

    Attributes:
      values: ``exp(x - S_u)`` of the input's blocks, shape ``(w / B, B)``.
      start: the input's first block (int32).
      scaled: ``S_{b-d} + log peak_d`` for each explicit distance ``d``, three of shape ``(blocks,)``.
      kernels: the explicit kernel matrices relative to their peaks, shape ``(3, B, B)``.
      distances: the explicit distances ``0, D + 1, D + 2`` (int32, shape ``(3,)``).
      decay: ``r^t = e^{-c t}``, shape ``(B,)``.
      near: the near term of each output block (times ``e^{c t}``), shape ``(blocks,)``.
      far: the far term of each output block (times ``e^{-c t}``), shape ``(blocks,)``.
      frame: ``G_b``, shape ``(blocks,)``: every entry of output block ``b`` is the frame plus the
        log of at most ``3 B + 2`` terms of at most 1, so at most ``G_b + log(3 B + 2)`` (``-inf``
        where nothing feeds the block).
      left: the input's block summaries ``F_u`` (``-inf`` outside the input), shape ``(blocks,)``.
      right: likewise ``R_u``.
      first: the position of the input's first finite entry (the row length if none).
      certified: whether every block summary of the input is certified.
    """

    values: jax.Array
    start: jax.Array
    scaled: tuple[jax.Array, jax.Array, jax.Array]
    kernels: jax.Array
    distances: jax.Array
    decay: jax.Array
    near: jax.Array
    far: jax.Array
    frame: jax.Array
    left: jax.Array
    right: jax.Array
    first: jax.Array
    certified: jax.Array


def block_frames(x, start, length: int, c, nu, block: int) -> _Frames:
    """The :class:`_Frames` of the step for an input row of ``length`` gaps that is ``x`` (shape
    ``(w,)``, ``w`` a multiple of ``block``) at gaps ``[start B, start B + w)`` and ``-inf``
    elsewhere. ``start``, ``c`` and ``nu`` may be traced."""
    dtype = x.dtype
    blocks = length // block
    c = jnp.asarray(c, dtype)
    nu = jnp.asarray(nu, dtype)
    start = jnp.asarray(start, jnp.int32)
    near_blocks = jnp.maximum((jnp.floor(nu).astype(jnp.int32) + 1) // block - 1, 0)  # D
    x = x.reshape(-1, block)
    own_top = jnp.max(x, axis=1)  # S_u, -inf for an empty block
    v = jnp.exp(x - _safe(own_top)[:, None])
    t = jnp.arange(block, dtype=dtype)
    down = jnp.exp(-c * t)  # r^t
    up = down[::-1]  # r^(B - 1 - t)
    # The explicit blocks d = 0, D + 1, D + 2, kernels relative to their maxima (log peaks).
    distances = jnp.stack([jnp.int32(0), near_blocks + 1, near_blocks + 2])
    gap = (t[None, :] - t[:, None]).astype(dtype)  # t - t', rows t', columns t
    log_kernels = [
        jnp.where(d * block + gap >= 1, -c * jnp.abs(d.astype(dtype) * block + gap - nu), -jnp.inf)
        for d in distances
    ]
    peaks = [_safe(jnp.max(k)) for k in log_kernels]
    kernels = jnp.stack([jnp.exp(k - peak) for k, peak in zip(log_kernels, peaks, strict=True)])
    sums = v @ jnp.stack([down, up], axis=1)  # sum_t' v r^t', sum_t' v r^(B - 1 - t')
    info = jnp.finfo(dtype)
    floor_sums = info.tiny / info.eps * block
    certified = jnp.all(~jnp.isfinite(own_top) | jnp.all(sums >= floor_sums, axis=1))

    def place(own):
        return lax.dynamic_update_slice_in_dim(jnp.full((blocks,), -jnp.inf, dtype), own, start, 0)

    top = place(own_top)
    right = place(own_top + jnp.log(sums[:, 0]))  # R_u
    left = place(own_top + c * (block - 1) + jnp.log(sums[:, 1]))  # F_u
    # Block-level sums, at the aligned length of the block count (exact log-space filters).
    level = aligned_length(blocks)
    big_c = c * block
    period = jnp.maximum(near_blocks, 1)
    far_in, window_in = (jnp.pad(v, (0, level - blocks), constant_values=-jnp.inf) for v in (left, right))
    z, suffix, prefix = far_and_window_filters(far_in, window_in, big_c, period)
    aligned = remainder(jnp.arange(level, dtype=jnp.int32), period) == 0
    head = jnp.where(near_blocks >= 1, shift_right(suffix, near_blocks), -jnp.inf)
    tail = shift_right(prefix, 1) - big_c * (near_blocks - 1)
    tail = jnp.where(aligned | (near_blocks < 1), -jnp.inf, tail)
    # Near: LSE_{1 <= d <= D} R_{b-d} - c (nu - d B), times e^{c t} = e^{c (B - 1)} r^(B - 1 - t).
    near = jnp.logaddexp(head, tail)[:blocks] + c * (block * near_blocks.astype(dtype) + (block - 1) - nu)
    # Far: LSE_{d >= D + 3} F_{b-d} - c (d B - nu), times e^{-c t} = r^t.
    first_far = near_blocks + 3
    far = shift_right(z, first_far)[:blocks] - c * (block * first_far.astype(dtype) - nu)
    # The frame G_b: the largest log-magnitude feeding output block b; every scale below is <= 1.
    scaled = tuple(_shift_rows(top, d, -jnp.inf) + peak for d, peak in zip(distances, peaks, strict=True))
    frame = jnp.maximum(jnp.maximum(jnp.maximum(scaled[0], scaled[1]), jnp.maximum(scaled[2], near)), far)
    # The first finite input, from the block maxima and one block (a search over the whole row is
    # materialised by XLA CPU as a full integer array; minima of indices, as ``argmax`` is a slower
    # reduce-window there).
    first_block = jnp.min(jnp.where(jnp.isfinite(top), jnp.arange(blocks, dtype=jnp.int32), blocks - 1))
    inside = jnp.min(
        jnp.where(
            jnp.isfinite(lax.dynamic_index_in_dim(x, first_block - start, 0, keepdims=False)),
            jnp.arange(block, dtype=jnp.int32),
            length,
        )
    )
    first = jnp.minimum(first_block * block + inside, length)
    return _Frames(
        v, start, scaled, kernels, distances, down, near, far, frame, left, right, first, certified
    )


def window_values(frames: _Frames, start, span: int, size: int):
    """``(y, certified)``: the step's output at gaps ``[start B, start B + span)`` (``start`` a
    traced block index, ``span`` a static multiple of ``B``) in blocks of ``B``, and whether
    every entry of it is certified accurate relative to itself (entries at or past ``size``, and
    the exact zeros at or before the first finite input, are not checked)."""
    block = frames.decay.shape[0]
    rows = span // block
    start = jnp.asarray(start, jnp.int32)

    def window(v):
        return lax.dynamic_slice_in_dim(v, start, rows, axis=-1)

    frame = _safe(window(frames.frame))
    out = jnp.exp(window(frames.near) - frame)[:, None] * frames.decay[::-1]
    out = out + jnp.exp(window(frames.far) - frame)[:, None] * frames.decay
    # The kernel images of the input blocks d before each output block (scaling rows commutes with
    # the products, so the frames are applied afterwards; slicing the inputs, not the images, keeps
    # every dynamic offset out of the elementwise code). An input slice that misses the input's
    # blocks is clamped into its zero margin.
    for d in range(3):
        inputs = _input_blocks(frames, start, rows, frames.distances[d])
        out = out + jnp.exp(window(frames.scaled[d]) - frame)[:, None] * (inputs @ frames.kernels[d])
    info = jnp.finfo(out.dtype)
    floor_out = info.tiny / info.eps * (3 * block + 2)
    position = (start + jnp.arange(rows, dtype=jnp.int32))[:, None] * block + jnp.arange(
        block, dtype=jnp.int32
    )
    checked = (position > frames.first) & (position < size)
    certified = ~jnp.any(checked & (out < floor_out))
    return frame[:, None] + jnp.log(out), certified


def _input_blocks(frames: _Frames, start, rows: int, distance):
    """The input's linear-space blocks ``start - distance`` to ``start - distance + rows`` (zero
    outside the input)."""
    if rows == frames.values.shape[0] == frames.frame.shape[0]:
        # Input and output are the whole row: a shift (cheaper than the padded slice below).
        return _shift_rows(frames.values, distance, 0)
    # Any slice that misses the input's blocks is clamped into the zero margins, which are as
    # wide as the slice.
    padded = jnp.pad(frames.values, ((rows, rows), (0, 0)))
    return lax.dynamic_slice_in_dim(padded, start - distance - frames.start + rows, rows, axis=0)


def _linear_step(x, c, nu, block: int):
    """``(y, certified, left, right)``: :func:`_toeplitz_linear_certified`'s pair and the input's
    block summaries ``left = F_u = LSE_t x[u, t] + c t`` and ``right = R_u = LSE_t x[u, t] - c t``
    (shape ``(aligned_length(n) / B,)``), which the certificate covers too."""
    size = x.shape[0]
    padded = aligned_length(size)
    x = jnp.pad(x, (0, padded - size), constant_values=-jnp.inf)
    frames = block_frames(x, 0, padded, c, nu, block)
    y, certified = window_values(frames, 0, padded, size)
    return y, certified & frames.certified, frames.left, frames.right


def _first_certified(x, c, nu, finish, fallback):
    """``finish(block, y, left, right)`` for the first block size of :data:`LINEAR_BLOCKS` whose step
    is certified (each later size runs only when the one before fails), else ``fallback()``."""

    def attempt(sizes):
        if not sizes:
            return fallback()
        y, certified, left, right = _linear_step(x, c, nu, sizes[0])
        return lanes.cond(certified, lambda: finish(sizes[0], y, left, right), lambda: attempt(sizes[1:]))

    return attempt(LINEAR_BLOCKS)


def toeplitz_linear(x, c, nu):
    """``y[i] = LSE_{i' < i} (x[i'] - c |i - i' - nu|)``, every entry accurate relative to itself:
    the linear-space block step with the first block size that certifies, else :func:`toeplitz_scan`."""
    size = x.shape[0]
    # Flattened inside the branch, where ``y`` is materialised: fused into the producer, the
    # flattening makes XLA CPU compile the blocked arithmetic to scalar code (benchmarks/README.md).
    return _first_certified(
        x, c, nu, lambda block, y, left, right: y.reshape(-1)[:size], lambda: toeplitz_scan(x, c, nu)
    )


def toeplitz_linear_with_masses(x, c, nu, block: int, fallback_masses):
    """``(toeplitz_linear(x, c, nu), masses)`` with ``masses[0] = LSE_{t < block} x[k block + t] + c t``
    and ``masses[1]`` the same with ``- c t``, per block of ``block`` gaps (static, a multiple of
    ``LINEAR_BLOCKS[0]``) of ``x`` padded with ``-inf`` to whole blocks: the backward sampler's
    block masses. When a step is certified they come from its own block summaries (``F_u`` and
    ``R_u``, certified accurate relative to themselves), combined exactly in log space over the
    summaries of each block, so they cost no pass over the row; otherwise the scan runs and the
    masses are ``fallback_masses()``."""
    size = x.shape[0]

    def finish(step_block, y, left, right):
        # Flattened inside the branch, as in toeplitz_linear.
        return y.reshape(-1)[:size], sampler_masses(left, right, c, step_block, block)

    return _first_certified(x, c, nu, finish, lambda: (toeplitz_scan(x, c, nu), fallback_masses()))


def sampler_masses(left, right, c, step_block: int, block: int):
    """The backward sampler's block masses (see :func:`toeplitz_linear_with_masses`) of a row, from
    its summaries ``left = F_u`` and ``right = R_u`` per block of ``step_block`` gaps, combined
    exactly in log space over each block of ``block`` gaps (a multiple of ``step_block``)."""
    per = block // step_block
    groups = ceil_div(left.shape[0], per)
    shift = jnp.asarray(c, left.dtype) * step_block * jnp.arange(per, dtype=left.dtype)

    def combine(summaries, sign):
        summaries = jnp.pad(summaries, (0, groups * per - summaries.shape[0]), constant_values=-jnp.inf)
        return logsumexp(summaries.reshape(groups, per) + sign * shift, axis=1)

    return jnp.stack([combine(left, 1), combine(right, -1)])
