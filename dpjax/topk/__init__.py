"""Top-k selection over unknown domains with pay-what-you-get composition (Durfee and Rogers 2019).

* :func:`limited_domain` -- Algorithm 1: noisy top-k of the true top-kbar with a noisy ⊥ threshold.
* :func:`strictly_limited_domain` -- Algorithm 5: only items strictly above ``h_(kbar+1)``.
* :func:`private_kbar` -- Algorithm 6: kbar chosen privately by one more exponential mechanism.
* :func:`fixed_threshold` -- Algorithm 8: an unordered set above a fixed (non-noisy) threshold.

Their accounting (Theorem 1, Theorem 2 and the pay-what-you-get accountant of Algorithm 2) lives in
:mod:`dpjax._src.accounting.pay_what_you_get`.

Parameters: ``k``, ``kbar`` and ``kbar_max`` fix the output shapes and are static; ``epsilon``,
``delta`` (it moves the ⊥ threshold) and ``max_contributions`` may be traced. Concrete values are
validated eagerly; an invalid traced value, or NaN, negative or non-integer traced counts, make
every index output and ``num_returned`` (and the chosen ``kbar``) ``-1``. The guarantee companions
are host-side and take arrays of parameters (one guarantee per entry).

The joint exponential mechanism over known domains (Gillenwater et al. 2022) lives in
:mod:`dpjax._src.topk.joint` and is public as :func:`dpjax.selection.joint_top_k`.
"""

from dpjax._src.topk.fixed_threshold import FixedThresholdResult, fixed_threshold, fixed_threshold_guarantee
from dpjax._src.topk.limited_domain import (
    TopKResult,
    limited_domain,
    limited_domain_guarantee,
    strictly_limited_domain,
    threshold_offset,
)
from dpjax._src.topk.private_kbar import PrivateKbarResult, private_kbar, private_kbar_guarantee

__all__ = [
    "FixedThresholdResult",
    "PrivateKbarResult",
    "TopKResult",
    "fixed_threshold",
    "fixed_threshold_guarantee",
    "limited_domain",
    "limited_domain_guarantee",
    "private_kbar",
    "private_kbar_guarantee",
    "strictly_limited_domain",
    "threshold_offset",
]
