"""The fixed-threshold top-kbar set (Durfee and Rogers 2019, Algorithm 8, Appendix F).

Each item strictly above ``h_(kbar+1)`` is reported independently when its count plus
``Lap(1/epsilon)`` noise exceeds the fixed threshold ``tau = h_(kbar+1) + 1 + ln(kbar/(2 delta))
/epsilon`` ("truncated randomized response", Def. F.1). The output is an unordered set: no ranking,
no pay-what-you-get composition; the paper recommends it when kbar is small and ⊥ is preferred to an
item outside the true top-kbar.

The constant ``ln(kbar/(2 delta))`` is rebuilt from Durfee and Rogers (2019), Lemma F.2 (the
paper's formula was lost in extraction): an item in only one of two neighbors' strict domains has count
``h_(kbar+1) + 1``, so it is reported with probability ``exp(-epsilon(tau - h_(kbar+1) - 1))/2 =
delta/kbar``, and each item is ``(epsilon, delta/kbar)``-DP (Cor. F.1). The exact enumeration audit
in ``tests/topk/test_topk_privacy.py`` checks the resulting guarantee.

Neighbors: add/remove one user. Guarantee (Theorem 5): ``(kbar epsilon, delta)``-DP, and
``(kbar epsilon tanh(epsilon/2) + epsilon sqrt(2 kbar ln(1/delta')), delta + delta')``-DP by
advanced composition over the kbar items.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src import noise
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import ApproxDP
from dpjax._src.accounting.pay_what_you_get import advanced_composition_epsilon
from dpjax._src.host_checks import check_int, check_probability, float_dtype
from dpjax._src.topk import histogram
from dpjax._src.validation import Checks

__all__ = [
    "FixedThresholdResult",
    "fixed_threshold",
    "fixed_threshold_guarantee",
]


class FixedThresholdResult(NamedTuple):
    """The output of :func:`fixed_threshold`.

    Attributes:
      indices: ``[..., kbar]`` int32 the reported items in increasing index order (a set: the order
        carries no information), ``-1`` after ``num_returned``.
      num_returned: ``[...]`` int32 the size of the set.

    When a traced input was invalid, both are ``-1`` everywhere (the invalid marker).
    """

    indices: jax.Array
    num_returned: jax.Array


@functools.partial(jax.jit, static_argnames=("kbar",))
def _kernel(key, counts, epsilon, delta, *, kbar):
    ids, values = histogram.top_counts(counts, kbar + 1)
    dtype = epsilon.dtype
    gaps = (values[..., :kbar] - values[..., kbar:]).astype(dtype)
    threshold = epsilon + histogram.log_ratio(kbar / 2, delta)  # epsilon * (tau - h_(kbar+1))
    keep = (gaps > 0) & (epsilon * gaps + noise.laplace(key, gaps.shape, dtype=dtype) > threshold)
    missing = jnp.iinfo(jnp.int32).max
    members = jnp.sort(jnp.where(keep, ids[..., :kbar], missing), axis=-1)
    result = FixedThresholdResult(jnp.where(members == missing, -1, members), keep.sum(-1, dtype=jnp.int32))
    return result, histogram.no_negative_count(values)


def fixed_threshold(
    key: jax.Array, counts: ArrayLike, kbar: int, epsilon: ArrayLike, delta: ArrayLike
) -> FixedThresholdResult:
    """The items of the true top-kbar above a fixed threshold (Durfee and Rogers 2019, Algorithm 8).

    Reports ``{i : h_i > h_(kbar+1) and h_i + Lap(1/epsilon) > h_(kbar+1) + 1 +
    ln(kbar/(2 delta))/epsilon}``, an unordered set of at most kbar items. Neighbors: add/remove
    one user.

    Guarantee: ``(kbar epsilon, delta)``-DP, or with advanced composition over kbar items
    ``(kbar epsilon tanh(epsilon/2) + epsilon sqrt(2 kbar ln(1/delta')), delta + delta')``
    (Theorem 5, :func:`fixed_threshold_guarantee`).

    ``epsilon`` and ``delta`` may be traced; ``kbar`` fixes the output shape and is static.
    Concrete values are validated eagerly; an invalid traced value (or NaN, negative or
    non-integer traced counts) makes ``indices`` and ``num_returned`` ``-1`` everywhere.

    Args:
      key: a ``jax.random`` key.
      counts: ``[..., d]`` histogram(s) of non-negative integer counts.
      kbar: the limited domain size (the paper requires k = kbar here) (static).
      epsilon: per-item privacy parameter (Laplace scale ``1/epsilon``), > 0 (may be traced).
      delta: the total bad-event probability, in (0, 1) (may be traced).

    Returns:
      A :class:`FixedThresholdResult` ``(indices [..., kbar], num_returned [...])`` (``-1`` on
      invalid traced input).

    Example:
      >>> import jax
      >>> res = fixed_threshold(jax.random.key(0), [3, 95, 2, 90, 1], kbar=2, epsilon=1.0, delta=1e-6)
      >>> [int(i) for i in res.indices]
      [1, 3]
    """
    checks = Checks()
    counts = histogram.check_counts(checks, counts)
    kbar = check_int(kbar, "kbar", minimum=1)
    epsilon, delta = histogram.privacy(checks, epsilon, delta, float_dtype(counts))
    result, no_negative = _kernel(key, counts, epsilon, delta, kbar=kbar)
    histogram.record_sign(checks, counts, no_negative)
    return checks.guard(result)


@elementwise("epsilon", "delta", "delta_prime")
def fixed_threshold_guarantee(
    kbar: int, epsilon: float, delta: float, *, delta_prime: float = 0.0
) -> ApproxDP:
    """Theorem 5: ``(advanced_composition_epsilon(kbar, epsilon, delta'), delta + delta')``-DP.

    With ``delta' = 0`` this is ``(kbar epsilon, delta)``. There is no range-bounded improvement:
    the per-item mechanisms are epsilon-DP but not epsilon-range-bounded. Host side: ``epsilon``,
    ``delta`` and ``delta_prime`` are concrete numbers or arrays of them (one guarantee per entry).

    Example:
      >>> fixed_threshold_guarantee(5, 0.2, 1e-6)
      ApproxDP(epsilon=1.0, delta=1e-06)
    """
    kbar = check_int(kbar, "kbar", minimum=1)
    epsilon, delta = histogram.check_privacy(epsilon, delta)
    delta_prime = check_probability(delta_prime, "delta_prime", open_high=True)
    return ApproxDP(advanced_composition_epsilon(kbar, epsilon, delta_prime), min(delta + delta_prime, 1.0))
