"""The exact mechanisms' noise parameters, rounded toward more noise when the sampler cannot take them.

The exact samplers (:mod:`dpjax.exact_noise`) take a scale ``t/s`` or a sigma whose integers fit
their internal word (:data:`dpjax.exact_noise.LIMITS`). A parameter with too many digits (a float is
its exact binary value: ``3.7`` has denominator ``2**51``) is replaced by a nearby rational the sampler
accepts that is **at least** as large: more noise than asked, so every guarantee stated for the
asked value still holds. One rule for every exact mechanism.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpjax._src.exact import noise as exact_noise


def scale_at_least(scale: Fraction, word) -> Fraction:
    """The smallest rational ``t/2^j >= scale`` the exact sampler accepts (``scale`` itself if it
    fits): more noise than asked, so the stated guarantee holds."""
    cap = exact_noise.scale_cap(word)
    if scale.numerator < cap and scale.denominator < cap:
        return scale
    j = max(0, (cap - 1).bit_length() - 1 - math.ceil(scale).bit_length())
    return Fraction(math.ceil(scale * 2**j), 2**j)


def _sigma_fits(sigma: Fraction, word) -> bool:
    try:
        exact_noise.gaussian_params(sigma, word)
    except ValueError:
        return False
    return True


_MAX_DENOMINATORS = 2**16  # bounds the search below for tiny sigmas: at most 2^16 candidates


def sigma_at_least(sigma: Fraction, word) -> Fraction:
    """The smallest ``a/b >= sigma`` the exact discrete Gaussian sampler accepts for ``word``
    (``sigma`` itself if it fits). Every denominator a feasible sigma can have is tried (``b`` with
    ``4 b^6 sigma^4 < 2^bits`` for sigma >= 1, ``2 b^4 sigma^2 < cap`` below 1, at most 2^16), each
    with its smallest numerator ``ceil(sigma b)``: so a finer word (uint64) never gives a larger
    sigma than a coarser one (uint32). Raises the sampler's "too large" error when none fits."""
    if _sigma_fits(sigma, word):
        return sigma
    s = float(sigma)
    if s >= 1:
        reach = (2.0 ** (np.iinfo(word).bits - 2) / s**4) ** (1 / 6)
    else:
        reach = (exact_noise.scale_cap(word) / (2 * s * s)) ** 0.25
    best = None
    for b in range(1, min(int(reach) + 2, _MAX_DENOMINATORS)):
        a = -(-sigma.numerator * b // sigma.denominator)  # ceil(sigma b)
        if best is not None and a * best.denominator >= best.numerator * b:
            continue
        if math.gcd(a, b) == 1 and _sigma_fits(Fraction(a, b), word):
            best = Fraction(a, b)
    if best is None:
        raise exact_noise.too_large("sigma^2", sigma * sigma, word)
    return best
