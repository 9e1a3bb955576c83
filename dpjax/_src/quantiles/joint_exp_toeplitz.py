"""The Toeplitz step of JointExp's forward pass, in log space, two ways.

Gillenwater, Joseph, Kulesza (ICML 2021), Alg. 1, lines 8-10: for quantile ``j`` every new run of
gap ``i`` is preceded by a last gap ``i' < i`` at distance ``g = i - i'``, with weight
``phi_j(g) = exp(-c |g - nu_j|)``. So the step is the strictly causal convolution

    y[i] = LSE_{i' < i} ( x[i'] - c |i - i' - nu| ),      y[0] = -inf,

of the log vector ``x`` (length ``n + 1``) with a two-sided exponential kernel.

* ``"fft"``: the paper's method. Exponentiate ``x`` and the kernel after subtracting their maxima,
  multiply in Fourier space (zero-padded to a power of two, so the convolution is linear), clamp
  round-off below 0, take the log. ``O(n log n)``; entries below about ``unit roundoff * max`` are
  lost (become noise or ``-inf``), which in float32 costs up to ~1e-4 in total variation.
* ``"scan"``: exact ``O(n)`` log-space recurrences, every entry
  accurate relative to itself. With ``L = floor(nu)`` and ``f = nu - L``:

  - far part (``g > L``): ``z[k] = LSE_{u <= k} x[u] - c (k - u)``, a decaying causal filter, and
    ``y_far[i] = z[i - L - 1] - c (1 - f)``;
  - near part (``1 <= g <= L``): ``y_near[i] = W[i] - c f`` with the window
    ``W[i] = LSE_{i - L <= u < i} x[u] - c (u - i + L)``, computed without subtraction by the van
    Herk / Gil-Werman trick: in blocks of length ``L`` aligned at multiples of ``L`` the window is
    an in-block suffix filter (restarting at block ends) plus an in-block prefix filter (growing by
    ``c``, restarting at block starts) of the next block.

  The three filters run together as one batched first-order log-space recurrence
  (:func:`_log_filter`), and ``L`` may be a traced value, so the steps of the ``lax.scan`` over
  quantiles share one body. The same filters run at the block level of the default ``"linear"``
  step (:mod:`dpjax._src.quantiles.joint_exp_linear`), which falls back to ``"scan"`` when it cannot
  certify an entry.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from dpjax._src.numerics import ceil_div

__all__: list[str] = []

_FILTER_BLOCK = 16
_BLOCK_ALIGN = 8
"""Rows are padded to a multiple of ``_FILTER_BLOCK * _BLOCK_ALIGN`` (:func:`aligned_length`), so that
loops over a row or a block column have even lengths: XLA CPU compiles an elementwise loop of odd
length to scalar code, slower still when the loop also reads a runtime scalar (``nu``, or ``c``,
when they are not compile-time constants; figures in benchmarks/README.md)."""


def aligned_length(size: int) -> int:
    """``size`` rounded up to a multiple of ``_FILTER_BLOCK * _BLOCK_ALIGN``: the row length of the
    Toeplitz step (and of the forward pass's rows), even so that XLA CPU vectorizes its loops."""
    step = _FILTER_BLOCK * _BLOCK_ALIGN
    return ceil_div(size, step) * step


def safe_max(v):
    """``max(v)``, or 0 when it is not finite (an all ``-inf`` vector): a safe shift for log values."""
    top = jnp.max(v)
    return jnp.where(jnp.isfinite(top), top, jnp.zeros_like(top))


def toeplitz_fft(x, c, nu):
    """``y[i] = LSE_{i' < i} (x[i'] - c |i - i' - nu|)`` by a max-shifted FFT convolution."""
    size = x.shape[0]
    dtype = x.dtype
    gap = jnp.arange(size, dtype=dtype)
    kernel = jnp.where(gap >= 1, -c * jnp.abs(gap - nu), -jnp.inf)
    k_max, x_max = safe_max(kernel), safe_max(x)
    fft_size = 1 << max(1, (2 * size - 1 - 1).bit_length())
    product = jnp.fft.rfft(jnp.exp(kernel - k_max), fft_size) * jnp.fft.rfft(jnp.exp(x - x_max), fft_size)
    linear = jnp.fft.irfft(product, fft_size)[:size].astype(dtype)
    y = jnp.log(jnp.maximum(linear, 0)) + k_max + x_max
    return y.at[0].set(-jnp.inf)


def _to_blocks(v, block: int, fill):
    """``(rows, size)`` -> ``(block, rows, blocks)``: element ``t`` of block ``b`` at ``[t, :, b]``."""
    rows, size = v.shape
    blocks = ceil_div(size, block)
    v = jnp.pad(v, ((0, 0), (0, blocks * block - size)), constant_values=fill)
    return jnp.moveaxis(v.reshape(rows, blocks, block), 2, 0)


def _from_blocks(v, size: int):
    """Inverse of :func:`_to_blocks`, materialised row by row (``lax.map``) so that XLA does not
    fuse the transpose into the consumers, which would recompute strided indices per element."""
    rows = lax.map(lambda row: row.T.reshape(-1), jnp.moveaxis(v, 1, 0))
    return rows[:, :size]


def _filter_blocks(decay, values):
    """:func:`_log_filter` on the block layout of :func:`_to_blocks` (padding: decay 0, value -inf).

    Both passes are ``lax.scan`` over the position in the block rather than whole-array
    expressions: XLA would otherwise fuse the layout transposes into the elementwise work and read
    memory with a cache-hostile stride, several times slower.
    """
    _, rows, blocks = values.shape
    dtype = values.dtype

    def within(carry, column):
        local, total = carry
        step_decay, value = column
        local = jnp.logaddexp(local + step_decay, value)
        return (local, total + step_decay), local

    start = (jnp.full((rows, blocks), -jnp.inf, dtype), jnp.zeros((rows, blocks), dtype))
    (local_end, total_end), local = lax.scan(within, start, (decay, values))
    if blocks == 1:
        return local
    ends = _log_filter(total_end, local_end)
    entering = jnp.concatenate([jnp.full((rows, 1), -jnp.inf, dtype), ends[:, :-1]], axis=1)

    def incoming(total, column):
        step_decay, local_value = column
        total = total + step_decay
        return total, jnp.logaddexp(local_value, entering + total)

    return lax.scan(incoming, jnp.zeros((rows, blocks), dtype), (decay, local))[1]


def _log_filter(decay, values):
    """Row-wise ``z[k] = logaddexp(z[k-1] + decay[k], values[k])``, ``z[-1] = -inf``.

    ``decay = -inf`` restarts the recurrence. Shapes ``(rows, size)``. The sequence is cut into
    blocks of ``_FILTER_BLOCK``: a ``lax.scan`` over the position in the block runs the recurrence
    inside every block at once, the block ends are filtered recursively, and a second scan adds each
    block's incoming value. Only sums of positive terms are formed (no subtraction), so every output
    is accurate relative to itself; ``O(size)`` work, ``O(_FILTER_BLOCK log size)`` sequential steps.
    """
    size = values.shape[1]
    blocked = _filter_blocks(_to_blocks(decay, _FILTER_BLOCK, 0), _to_blocks(values, _FILTER_BLOCK, -jnp.inf))
    return _from_blocks(blocked, size)


def shift_right(v, shift):
    """``out[i] = v[i - shift]`` (``-inf`` where ``i < shift``); ``0 <= shift`` may be traced."""
    size = v.shape[0]
    padded = jnp.concatenate([jnp.full((size,), -jnp.inf, v.dtype), v])
    return lax.dynamic_slice(padded, (size - jnp.minimum(shift, size),), (size,))


def remainder(values, length):
    """``values % length`` (floor convention) for int32 ``values`` and a traced scalar ``length >= 1``.

    XLA CPU lowers a remainder by a runtime divisor to one scalar division per element, which costs
    more than the filters themselves (``length = floor(nu)`` is traced: the levels may be). So the
    quotient is estimated in float32 and the remainder corrected in integers: the first estimate is
    within ``512 / length + 1`` of the quotient for any int32 value, so the first remainder is below
    ``512 + 2 length`` in magnitude, exact in float32; the second estimate is then off by at most
    one, which the last two selects fix. Exact for every int32 input.
    """
    inverse = 1 / length.astype(jnp.float32)

    def reduce(v):
        return v - jnp.floor(v.astype(jnp.float32) * inverse).astype(jnp.int32) * length

    rest = reduce(reduce(values))
    rest = jnp.where(rest < 0, rest + length, rest)
    return jnp.where(rest >= length, rest - length, rest)


def far_and_window_filters(far_values, window_values, c, length):
    """The three filters of :func:`toeplitz_scan` on inputs of an aligned length (``-inf`` padded):

    * ``z[k] = LSE_{u <= k} far_values[u] - c (k - u)`` (the far filter);
    * ``suffix[k] = LSE_{k <= u <= e(k)} window_values[u] - c (u - k)``, ``e(k)`` the end of the
      block of ``length`` that holds ``k`` (blocks aligned at multiples of ``length``);
    * ``prefix[k] = LSE_{s(k) <= u <= k} window_values[u] + c (k - u)``, ``s(k)`` its start.

    ``length >= 1`` (int32) and ``c`` may be traced. Returns ``(z, suffix, prefix)``.
    """
    padded = far_values.shape[0]
    dtype = far_values.dtype
    # The three filters' inputs are built directly in the block layout (position k = b * block + t);
    # the suffix filter runs on the reversed sequence.
    values = _to_blocks(jnp.stack([far_values, window_values[::-1], window_values]), _FILTER_BLOCK, -jnp.inf)
    block, _, blocks = values.shape
    position = (
        jnp.arange(blocks, dtype=jnp.int32)[None, :] * block + jnp.arange(block, dtype=jnp.int32)[:, None]
    )
    c = jnp.asarray(c, dtype)
    suffix_restart = remainder(padded - 1 - position, length) == length - 1
    prefix_restart = remainder(position, length) == 0
    decay = jnp.stack(
        [
            jnp.broadcast_to(-c, position.shape),
            jnp.where(suffix_restart, -jnp.inf, -c),
            jnp.where(prefix_restart, -jnp.inf, c),
        ],
        axis=1,
    )
    z, suffix, prefix = _from_blocks(_filter_blocks(decay, values), padded)
    return z, suffix[::-1], prefix


def toeplitz_scan(x, c, nu):
    """``y[i] = LSE_{i' < i} (x[i'] - c |i - i' - nu|)`` exactly, by three log-space filters."""
    size = x.shape[0]
    dtype = x.dtype
    window = jnp.floor(nu).astype(jnp.int32)
    frac = (nu - window).astype(dtype)
    length = jnp.maximum(window, 1)
    # Everything runs at the length of the block layout (even: see _BLOCK_ALIGN), with the data at
    # [0, size) in every row, the reversed one included; an output below size reads only inputs
    # below size, so the padding (-inf) changes nothing.
    padded = aligned_length(size)
    x = jnp.pad(x, (0, padded - size), constant_values=-jnp.inf)
    c = jnp.asarray(c, dtype)
    z, suffix, prefix = far_and_window_filters(x, x, c, length)
    far = shift_right(z, window + 1) - c * (1 - frac)
    # W[i] = suffix[i - L] (u in the block of i - L) (+) prefix[i - 1] - c (L - 1) (u in the block
    # of i, present unless i is block-aligned).
    aligned = remainder(jnp.arange(padded, dtype=jnp.int32), length) == 0
    head = jnp.where(window >= 1, shift_right(suffix, window) - c * frac, -jnp.inf)
    tail = jnp.where(aligned | (window < 1), -jnp.inf, shift_right(prefix, 1) - c * (window - 1 + frac))
    # A select, not ``.at[0].set``: XLA CPU emits the fused dynamic-update-slice form as a slow loop.
    return jnp.where(jnp.arange(padded) == 0, -jnp.inf, _log_sum_exp3(head, tail, far))[:size]


def _log_sum_exp3(a, b, d):
    """Elementwise ``log(e^a + e^b + e^d)`` with one log (vs two ``logaddexp``: fewer transcendentals
    per entry); exact up to rounding since the shifted sum lies in ``[1, 3]``, ``-inf`` if all are."""
    top = jnp.maximum(jnp.maximum(a, b), d)
    top = jnp.where(jnp.isfinite(top), top, 0)
    return top + jnp.log(jnp.exp(a - top) + jnp.exp(b - top) + jnp.exp(d - top))
