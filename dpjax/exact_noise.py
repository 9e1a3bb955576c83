"""Exact integer noise: the discrete Laplace and discrete Gaussian of Canonne, Kamath and Steinke.

Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020),
Algorithm 1 (Bernoulli(exp(-gamma)) for a rational gamma), Algorithm 2 (discrete Laplace) and
Algorithm 3 (discrete Gaussian), on uniform integer bits from the key. Only integer operations
(additions, multiplications, shifts, comparisons, divisions by constants) touch the random bits, so
the law of the output is exactly the stated one: no floating-point value is ever computed on the
sampling path (a test checks the jaxpr). Two exact paths:

* **The fast pass** (:mod:`dpjax._src.exact.fast`; discrete Laplace with scale ``t/s``, ``t <= 64`` and
  ``s < 2^31``, for more than 256 values per call): every lane does the same fixed work on three
  threefry hashes, each trial of Algorithm 1 decided by one 16-bit digit against exactly tabled
  thresholds (:mod:`dpjax._src.exact.tables`). The lanes are a stream of candidates: the 6% the pass
  leaves rejected (scale 10) are dropped, the 2% it leaves open are settled exactly, and the output
  takes the kept ones in order. Faster than the state machine on large calls (benchmarks/README.md).
* **The Gaussian's fast rounds** (:mod:`dpjax._src.exact.gauss_fast`; discrete Gaussian whose proposal
  scale qualifies for the fast pass and stays below about 21, e.g. integer sigma up to 21, for more
  than 512 values): Algorithm 3's candidates drawn by the fast pass, about 1.4 per value (sigma 10),
  each acceptance read from three digits (exp(-1) trials and an exactly tabled row per ``|Y|``), the
  rare undecided ones decided exactly; the output takes the accepted candidates in order. Faster
  than the state machine on large calls (benchmarks/README.md).
* **The state machine** (:mod:`dpjax._src.exact.machine`; every other case):
  one step of Algorithms 1-3 per lane and 32-bit word, comparing W's binary expansion with each
  Bernoulli probability lazily, until every lane has accepted.

All draw the law exactly; they consume the key differently, so the same key gives different samples
on different paths.

**Exact rationals, host-side.** The scale (or sigma) is a Python number made an exact fraction
(``fractions.Fraction``: a float is taken at its exact binary value, ``0.1`` is not 1/10) or a
``(numerator, denominator)`` pair. It is static (not traced): the algorithms' Bernoulli
probabilities are fractions of these integers, and a traced float could not be made an exact
rational. Its size is bounded (:data:`LIMITS`) so that every intermediate product fits the
internal word (uint32, or uint64 under ``jax_enable_x64``); larger ones are refused eagerly.

**Range.** The output saturates at +-``L`` (``L`` the dtype's maximum): values beyond it (probability
``< 2 exp(-L/scale)``) are returned as +-L, an exact post-processing of the exact sample.
"""

from dpjax._src.exact import (
    LIMITS,
    Rational,
    discrete_gaussian,
    discrete_laplace,
    exact_rational,
    release_key,
)

__all__ = [
    "LIMITS",
    "Rational",
    "discrete_gaussian",
    "discrete_laplace",
    "exact_rational",
    "release_key",
]
