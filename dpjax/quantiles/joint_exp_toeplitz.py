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
* ``"scan"``: exact ``O(n)`` log-space recurrences (spec seed-001 Sec. 4.2, option B). With
  ``L = floor(nu)`` the far part (``g > L``, weight ``e^{-c(g - nu)}``) is a decaying causal filter
  ``z[k] = logaddexp(z[k-1] - c, x[k])``; the near part (``1 <= g <= L``, weight ``e^{-c(nu - g)}``)
  is a window of length ``L`` computed by the van Herk / Gil-Werman block trick (an in-block
  suffix filter and an in-block prefix sum, never a subtraction). All three are first-order
  log-space recurrences (segments restart where the decay is ``-inf``), run as blocked scans of
  ``O(sqrt(n))`` sequential steps over vectors of ``O(sqrt(n))`` (small programs, fast to compile),
  and ``L`` may be a traced value (the steps of ``lax.scan`` over quantiles share one body).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax import lax

METHODS = ("scan", "fft")


def _safe_max(v):
    top = jnp.max(v)
    return jnp.where(jnp.isfinite(top), top, jnp.zeros_like(top))


def toeplitz_fft(x, c, nu):
    """``y[i] = LSE_{i' < i} (x[i'] - c |i - i' - nu|)`` by a max-shifted FFT convolution."""
    size = x.shape[0]
    dtype = x.dtype
    gap = jnp.arange(size, dtype=dtype)
    kernel = jnp.where(gap >= 1, -c * jnp.abs(gap - nu), -jnp.inf)
    k_max, x_max = _safe_max(kernel), _safe_max(x)
    fft_size = 1 << max(1, (2 * size - 1 - 1).bit_length())
    product = jnp.fft.rfft(jnp.exp(kernel - k_max), fft_size) * jnp.fft.rfft(jnp.exp(x - x_max), fft_size)
    linear = jnp.fft.irfft(product, fft_size)[:size].astype(dtype)
    y = jnp.log(jnp.maximum(linear, 0)) + k_max + x_max
    return y.at[0].set(-jnp.inf)


def _filter(decay, values):
    """``z[k] = logaddexp(z[k-1] + decay[k], values[k])`` (``z[-1] = -inf``; ``decay = -inf`` restarts).

    A blocked scan with blocks of about ``sqrt(size)``: a ``lax.scan`` along the block positions,
    vectorized over blocks, then a scan over the block carries and a fix-up. Every quantity is a
    log of a sum of positive terms; nothing is subtracted.
    """
    size = values.shape[0]
    block = max(1, math.isqrt(size - 1) + 1) if size > 1 else 1
    blocks = -(-size // block)
    pad = blocks * block - size
    decay = jnp.concatenate([decay, jnp.zeros((pad,), decay.dtype)]).reshape(blocks, block).T
    values = jnp.concatenate([values, jnp.full((pad,), -jnp.inf, values.dtype)]).reshape(blocks, block).T

    def along(carry, column):
        local, total = carry
        a, b = column
        local = jnp.logaddexp(local + a, b)
        total = total + a
        return (local, total), (local, total)

    start = (jnp.full((blocks,), -jnp.inf, values.dtype), jnp.zeros((blocks,), values.dtype))
    _, (local, total) = lax.scan(along, start, (decay, values))  # (block, blocks)

    def across(entering, last):
        local_end, total_end = last
        return jnp.logaddexp(entering + total_end, local_end), entering

    _, entering = lax.scan(across, jnp.asarray(-jnp.inf, values.dtype), (local[-1], total[-1]))
    return jnp.logaddexp(local, entering[None, :] + total).T.reshape(-1)[:size]


def _shift_right(v, shift):
    """``out[i] = v[i - shift]`` (``-inf`` where ``i < shift``); ``0 <= shift`` may be traced."""
    size = v.shape[0]
    padded = jnp.concatenate([jnp.full((size,), -jnp.inf, v.dtype), v])
    return lax.dynamic_slice(padded, (size - jnp.minimum(shift, size),), (size,))


def toeplitz_scan(x, c, nu):
    """``y[i] = LSE_{i' < i} (x[i'] - c |i - i' - nu|)`` exactly, by segmented log-space scans."""
    size = x.shape[0]
    dtype = x.dtype
    neg = jnp.full((size,), -jnp.inf, dtype)
    window = jnp.floor(nu).astype(jnp.int32)
    # Far part, g >= L + 1.
    z = _filter(jnp.full((size,), -c, dtype), x)
    far = _shift_right(z, window + 1) - c * (window + 1 - nu)
    # Near part, 1 <= g <= L: y[i] = w[i] - c (nu - L) with w[k] = LSE_{h<L} xp[k + h] - c h over
    # xp = x shifted right by L (so the window [i - L, i - 1] of x starts at xp[i]).
    length = jnp.maximum(window, 1)
    xp = _shift_right(jnp.concatenate([x, neg]), window)
    pos = jnp.arange(2 * size, dtype=jnp.int32)
    offset = pos % length
    offset_f = offset.astype(dtype)
    # LSE_{k <= u < block end} xp[u] - c (u - k), and LSE_{block start <= u <= e} xp[u] - c (u - start):
    # the recurrences restart (decay -inf) at block ends going backward, at block starts going forward.
    back_decay = jnp.where(offset == length - 1, -jnp.inf, -c).astype(dtype)
    suffix = _filter(back_decay[::-1], xp[::-1])[::-1]
    prefix = _filter(jnp.where(offset == 0, -jnp.inf, 0).astype(dtype), xp - c * offset_f)
    tail_index = jnp.minimum(pos[:size] + length - 1, 2 * size - 1)
    tail = prefix[tail_index] - c * (length - offset_f[:size])
    w = jnp.where(offset[:size] == 0, suffix[:size], jnp.logaddexp(suffix[:size], tail))
    near = jnp.where(window >= 1, w - c * (nu - window), neg)
    return jnp.logaddexp(near, far).at[0].set(-jnp.inf)


def toeplitz(method: str, x, c, nu):
    """Dispatches the Toeplitz step to ``"scan"`` or ``"fft"``."""
    return toeplitz_scan(x, c, nu) if method == "scan" else toeplitz_fft(x, c, nu)
