"""EXPERIMENTAL: the Laplace limited-domain mechanism (Durfee and Rogers 2019, Algorithm 4, Sec. 6.1).

As Algorithm 1 with ``Lap(1/epsilon)`` instead of Gumbel noise and, for restricted sensitivity
(``Delta < kbar``), the threshold ``h_bot = h_(kbar+1) + 1 + ln(Delta/delta)/epsilon``. Its epsilon
scales with Delta instead of k, but it has no range-bounded or pay-what-you-get composition.

Why experimental: the paper's constants for this variant (its eq. 8 and Lemma 6.1) were lost in the
text extraction. :func:`laplace_limited_domain_guarantee` returns a bound derived here from the
paper's proof outline (Cor. 6.1 and Lemma 6.2 for the fixed domain, Lemmas 5.2, 6.3 and 6.4 for the
bad and good events), not the paper's statement, with a conservative ``Delta + 1`` in place of
``Delta``: ``((Delta + 1) epsilon, (1 + e^{(Delta+1) epsilon}) (delta/2)(1 + ln(Delta/delta)/2))``.
``tests/topk/test_laplace.py`` checks it for k = 1 by exact numerical integration on tiny domains;
it is not proven here. Neighbors: add/remove one user touching at most Delta items.
"""

from __future__ import annotations

import functools
import math

import jax
from jax.typing import ArrayLike

from dpjax._src import noise
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import ApproxDP
from dpjax._src.host_checks import check_int, float_dtype, is_traced
from dpjax._src.topk import histogram
from dpjax._src.topk.limited_domain import TopKResult
from dpjax._src.validation import Checks

__all__ = [
    "laplace_limited_domain",
    "laplace_limited_domain_guarantee",
]

_CAP_BELOW_KBAR = "max_contributions must be < kbar for the Laplace variant (restricted sensitivity)"


def _delta_cap(checks, max_contributions, kbar, dtype):
    """Delta (``1 <= Delta < kbar``) as a ``dtype`` scalar: eager when concrete, recorded when traced."""
    cap = histogram.max_contributions_value(checks, max_contributions, dtype)
    if is_traced(cap):
        checks.record(cap < kbar, f"{_CAP_BELOW_KBAR}.")
    elif max_contributions >= kbar:
        raise ValueError(
            f"{_CAP_BELOW_KBAR}, got {max_contributions} and kbar={kbar}; use limited_domain otherwise."
        )
    return cap


@functools.partial(jax.jit, static_argnames=("k", "kbar"))
def _kernel(key, counts, epsilon, delta, delta_cap, *, k, kbar):
    ids, values = histogram.top_counts(counts, kbar + 1)
    dtype = epsilon.dtype
    gaps = (values[..., :kbar] - values[..., kbar:]).astype(dtype)
    laplaces = noise.laplace(key, values.shape, dtype=dtype)
    scores = epsilon * gaps + laplaces[..., :kbar]
    threshold = epsilon + histogram.log_ratio(delta_cap, delta) + laplaces[..., kbar]
    indices, num_returned = histogram.report_above(scores, threshold, ids[..., :kbar], k)
    return TopKResult(indices, num_returned, num_returned < k), histogram.no_negative_count(values)


def laplace_limited_domain(
    key: jax.Array,
    counts: ArrayLike,
    k: int,
    kbar: int,
    epsilon: ArrayLike,
    delta: ArrayLike,
    *,
    max_contributions: ArrayLike,
) -> TopKResult:
    """EXPERIMENTAL Algorithm 4: Laplace noise on the top-kbar counts and the ⊥ threshold.

    Reports the items whose ``h_i + Lap(1/epsilon)`` beat ``h_(kbar+1) + 1 + ln(Delta/delta)/epsilon
    + Lap(1/epsilon)``, in noisy order, at most k, ending with ⊥ when fewer. Neighbors: add/remove
    one user who touches at most ``max_contributions = Delta < kbar`` items. Guarantee: see
    :func:`laplace_limited_domain_guarantee` (derived, not the paper's lost statement).

    ``epsilon``, ``delta`` and ``max_contributions`` may be traced; ``k`` and ``kbar`` are static.
    An invalid traced value (including ``Delta >= kbar``) or NaN, negative or non-integer traced
    counts make ``indices`` and ``num_returned`` ``-1`` everywhere.

    Returns:
      A :class:`~dpjax.topk.TopKResult`, as :func:`~dpjax.topk.limited_domain`.

    Example:
      >>> import jax
      >>> res = laplace_limited_domain(jax.random.key(0), [90, 5, 80, 3, 2, 1], 2, 4, 1.0, 1e-6,
      ...                              max_contributions=1)
      >>> [int(i) for i in res.indices]
      [0, 2]
    """
    checks = Checks()
    counts = histogram.check_counts(checks, counts)
    k, kbar = histogram.check_k_kbar(k, kbar)
    dtype = float_dtype(counts)
    epsilon, delta = histogram.privacy(checks, epsilon, delta, dtype)
    cap = _delta_cap(checks, max_contributions, kbar, dtype)
    result, no_negative = _kernel(key, counts, epsilon, delta, cap, k=k, kbar=kbar)
    histogram.record_sign(checks, counts, no_negative)
    return checks.guard(result)


@elementwise("epsilon", "delta", "max_contributions")
def laplace_limited_domain_guarantee(
    k: int, epsilon: float, delta: float, *, max_contributions: int
) -> ApproxDP:
    """EXPERIMENTAL: ``((Delta+1) eps, (1 + e^{(Delta+1) eps}) (delta/2)(1 + ln(Delta/delta)/2))``.

    Takes the mechanism's privacy arguments in its order; ``k`` is validated (>= 1) but the bound is
    independent of it (the noisy counts themselves are a Laplace mechanism on the common domain).
    Derived from Durfee and Rogers (2019), Lemma 6.2 (the fixed-domain noisy counts are a Laplace
    mechanism in which at most Delta counts and ⊥ move) and Lemmas 5.2, 6.3, 6.4 (bad events: the
    difference of two ``Lap(1/eps)`` exceeds ``ln(Delta/delta)/eps`` with probability
    ``(delta/2Delta)(1 + ln(Delta/delta)/2)``, union over Delta indices), with the conservative
    ``Delta + 1``; not the paper's statement, which was lost. Host side: ``epsilon``, ``delta`` and
    ``max_contributions`` are concrete numbers or arrays of them (one guarantee per entry).

    Example:
      >>> round(laplace_limited_domain_guarantee(3, 0.5, 1e-6, max_contributions=1).epsilon, 6)
      1.0
    """
    check_int(k, "k", minimum=1)
    epsilon, delta = histogram.check_privacy(epsilon, delta)
    cap = check_int(max_contributions, "max_contributions", minimum=1)
    eps = (cap + 1) * epsilon
    bad = (delta / 2) * (1 + math.log(cap / delta) / 2)
    if eps >= -math.log(bad):  # (1 + e^eps) bad > 1 (and e^eps would overflow past eps ~ 709)
        return ApproxDP(eps, 1.0)
    return ApproxDP(eps, min((1 + math.exp(eps)) * bad, 1.0))
