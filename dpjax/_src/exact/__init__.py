"""Exact integer noise, one room: the discrete Laplace and discrete Gaussian samplers of Canonne,
Kamath and Steinke (2020, Algorithms 1-3) run as a word machine on random bits (``machine``), with
their fast paths (``fast``, ``gauss_fast``), the precomputed tables (``tables``), the packed state
(``compact``) and the key-to-words stream (``words``).

This package's names below are the only entry point: the exact mechanisms (``additive``,
``discrete_selection``, ``svt.discrete``), the float noise module and the public face
``dpjax.exact_noise`` import them from here, never from the modules inside.
"""

from dpjax._src.exact.machine import word_type
from dpjax._src.exact.noise import (
    LIMITS,
    Rational,
    discrete_gaussian,
    discrete_laplace,
    exact_rational,
    release_key,
)
from dpjax._src.exact.params import scale_at_least, sigma_at_least
from dpjax._src.exact.words import random_word_pairs

__all__ = [
    "LIMITS",
    "Rational",
    "discrete_gaussian",
    "discrete_laplace",
    "exact_rational",
    "random_word_pairs",
    "release_key",
    "scale_at_least",
    "sigma_at_least",
    "word_type",
]
