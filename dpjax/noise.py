"""Scaled noise samplers with correct upper tails: Laplace, Gumbel, Exponential and Gaussian.

All samplers follow ``jax.random``: ``sampler(key, shape=(), scale=1.0, dtype=None, *, mode="high")``.

Why not plain ``jax.random``: a float32 uniform has 23-24 bits, so the naive Gumbel
``-log(-log U)`` never exceeds about 16.6 and the naive Exponential ``-log U`` never exceeds about
16.6 either. Mechanisms that compare noisy values against a threshold (AboveThreshold, Gumbel
top-k with a ⊥ threshold, report-noisy-max over 10^6 candidates) live in exactly those tails.

``mode="high"`` (the default) builds every variate from a standard exponential whose *both* tails
are exact to about 44 in float32 and float64:

* 64 random bits (both output words of one threefry2x32 hash, see :func:`random_word_pairs`) give
  a sign bit ``s`` and a uniform ``W`` on (0, 1/2] with resolution 2^-64 near 0 (relative
  precision of the dtype elsewhere);
* ``E = -log(W)`` when ``s`` is set (the upper half of Exp(1), E >= log 2) and
  ``E = -log1p(-W)`` otherwise (the lower half, E < log 2, fine near 0).

Since ``U = W`` or ``U = 1 - W`` is uniform on (0, 1), ``E = -log U`` is exactly Exp(1), and
neither branch ever evaluates ``log`` of a number rounded to 1. From ``E``: Gumbel ``-log E``
(tails to about +44 and -3.8, i.e. probabilities down to 1e-19), Laplace ``±E`` and Gaussians by
Box-Muller, two per ``E``: ``sqrt(2E) (cos 2 pi V, sin 2 pi V)`` (to about 9.4 sigma).

``mode="low"`` delegates to ``jax.random`` (one 32-bit word per variate, truncated tails), for
uses where the tail is irrelevant and speed is all.

These are floating-point samplers: they are right in distribution for studies, training and
benchmarks, but they are not hardened against floating-point side channels (Mironov 2012).

The exact integer samplers :func:`discrete_laplace` and :func:`discrete_gaussian` (Canonne, Kamath
and Steinke 2020; integer arithmetic only, see :mod:`dpjax.exact_noise`) and :func:`release_key`
(a key from the operating system's entropy) are re-exported here for releases.
"""

from dpjax._src.noise import (
    SAMPLERS,
    NoiseMode,
    Sampler,
    discrete_gaussian,
    discrete_laplace,
    exponential,
    exponential_from_sign_and_half_uniform,
    gaussian,
    gaussian_from_words,
    gumbel,
    laplace,
    laplace_from_sign_and_half_uniform,
    random_word_pairs,
    release_key,
    sample,
    sign_and_half_uniform_from_bits,
    standard_exponential,
)

__all__ = [
    "SAMPLERS",
    "NoiseMode",
    "Sampler",
    "discrete_gaussian",
    "discrete_laplace",
    "exponential",
    "exponential_from_sign_and_half_uniform",
    "gaussian",
    "gaussian_from_words",
    "gumbel",
    "laplace",
    "laplace_from_sign_and_half_uniform",
    "random_word_pairs",
    "release_key",
    "sample",
    "sign_and_half_uniform_from_bits",
    "standard_exponential",
]
