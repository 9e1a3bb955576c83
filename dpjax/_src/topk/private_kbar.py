"""Limited-domain top-k with a privately chosen kbar (Durfee and Rogers 2019, Algorithm 6, Sec. 6.3).

The threshold of Algorithm 1 is ``h_(j+1) + 1 + ln(min(Delta, j)/delta)/epsilon`` for a limited
domain of size j: a larger domain lowers ``h_(j+1)`` but raises ``ln(j/delta)``. Algorithm 6 picks
``j`` in ``k..kbar_max`` by one exponential mechanism with quality
``q_j = -(h_(j+1) + ln(min(Delta, j)/delta)/epsilon)`` (sensitivity 1 and monotone by Lemma 5.1, so
epsilon-DP and epsilon-range-bounded with weights ``exp(epsilon q_j)``), then runs Algorithm 1 with
``kbar = j``. The chosen kbar is released at no extra cost.

Neighbors: add/remove one user. Guarantee: ``(epsilon_star(k + 1, epsilon, delta'), delta +
delta')``-DP (k replaced by k + 1 in Theorem 1); a pay-what-you-get call is charged
``num_returned + bottom + 1`` outcomes.
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
from dpjax._src.accounting.pay_what_you_get import epsilon_star
from dpjax._src.host_checks import check_int, check_probability, float_dtype
from dpjax._src.topk import histogram
from dpjax._src.validation import Checks

__all__ = [
    "PrivateKbarResult",
    "private_kbar",
    "private_kbar_guarantee",
]


class PrivateKbarResult(NamedTuple):
    """The output of :func:`private_kbar` (arrays with the batch shape of ``counts``).

    Attributes:
      indices: ``[..., k]`` int32 item indices in noisy order, ``-1`` after ``num_returned``.
      num_returned: ``[...]`` int32 number of indices returned.
      bottom: ``[...]`` bool, whether the output ended with ⊥.
      kbar: ``[...]`` int32 the privately chosen limited-domain size, in ``k..kbar_max``.

    When a traced input was invalid, ``indices``, ``num_returned`` and ``kbar`` are ``-1``
    everywhere (the invalid marker).
    """

    indices: jax.Array
    num_returned: jax.Array
    bottom: jax.Array
    kbar: jax.Array

    @property
    def outcomes(self) -> jax.Array:
        """The pay-what-you-get charge: ``num_returned + bottom + 1`` (the choice of kbar costs one)."""
        return self.num_returned + self.bottom.astype(self.num_returned.dtype) + 1


@functools.partial(jax.jit, static_argnames=("k", "kbar_max"))
def _kernel(key, counts, epsilon, delta, delta_cap, *, k, kbar_max):
    ids, values = histogram.top_counts(counts, kbar_max + 1)
    dtype = epsilon.dtype
    sizes = jnp.arange(k, kbar_max + 1)
    log_terms = histogram.log_ratio(sizes if delta_cap is None else jnp.minimum(sizes, delta_cap), delta)
    # Exact integer gaps to the smallest kept count: a common shift of every score.
    gaps = (values - values[..., kbar_max:]).astype(dtype)  # [..., kbar_max + 1], rank r = h_(r+1)
    # One draw of independent Gumbels, cut into the choice of kbar, the items and the threshold.
    gumbels = noise.gumbel(key, (*gaps.shape[:-1], 2 * kbar_max + 2 - k), dtype=dtype)
    choice_noise, item_noise, bottom_noise = (
        gumbels[..., : kbar_max + 1 - k],
        gumbels[..., kbar_max + 1 - k : 2 * kbar_max + 1 - k],
        gumbels[..., -1],
    )
    # EM over j in k..kbar_max with epsilon * q_j = -epsilon h_(j+1) - ln(min(Delta, j)/delta).
    quality = -epsilon * gaps[..., k:] - log_terms
    chosen = (k + jnp.argmax(quality + choice_noise, axis=-1)).astype(jnp.int32)
    ranks = jnp.arange(kbar_max)
    scores = jnp.where(ranks < chosen[..., None], epsilon * gaps[..., :kbar_max] + item_noise, -jnp.inf)
    next_gap = jnp.take_along_axis(gaps, chosen[..., None], axis=-1)[..., 0]
    threshold = epsilon * next_gap + epsilon + jnp.take(log_terms, chosen - k) + bottom_noise
    indices, num_returned = histogram.report_above(scores, threshold, ids[..., :kbar_max], k)
    result = PrivateKbarResult(indices, num_returned, num_returned < k, chosen)
    return result, histogram.no_negative_count(values)


def private_kbar(
    key: jax.Array,
    counts: ArrayLike,
    k: int,
    kbar_max: int,
    epsilon: ArrayLike,
    delta: ArrayLike,
    *,
    max_contributions: ArrayLike | None = None,
) -> PrivateKbarResult:
    """Algorithm 1 with kbar chosen privately in ``k..kbar_max`` (Durfee and Rogers 2019, Alg. 6).

    Picks ``j`` by the exponential mechanism (Gumbel-max) on ``-(h_(j+1) + ln(min(Delta, j)/delta)
    /epsilon)``, i.e. the limited domain with the lowest threshold, then runs
    :func:`~dpjax.topk.limited_domain` with ``kbar = j``. Only the true top-(kbar_max+1) counts are
    used. Neighbors: add/remove one user (with ``max_contributions=Delta``, at most Delta counts
    change).

    Guarantee: ``(epsilon_star(k + 1, epsilon, delta'), delta + delta')``-DP
    (:func:`private_kbar_guarantee`); pay-what-you-get charge ``result.outcomes``.

    ``epsilon``, ``delta`` and ``max_contributions`` may be traced; ``k`` and ``kbar_max`` fix the
    shapes and are static. Concrete values are validated eagerly; an invalid traced value (or NaN,
    negative or non-integer traced counts) makes ``indices``, ``num_returned`` and ``kbar`` ``-1``.

    Args:
      key: a ``jax.random`` key.
      counts: ``[..., d]`` histogram(s) of non-negative integer counts (padded with zero-count items
        ``d, d+1, ...`` when ``d <= kbar_max``).
      k: maximum number of indices returned, ``1 <= k <= kbar_max`` (static).
      kbar_max: the largest limited domain considered (static).
      epsilon: per-step privacy parameter, > 0 (may be traced).
      delta: the threshold's bad-event probability, in (0, 1) (may be traced).
      max_contributions: Delta, an integer >= 1 (may be traced), or ``None`` (unrestricted).

    Returns:
      A :class:`PrivateKbarResult` ``(indices [..., k], num_returned, bottom, kbar)`` (``-1`` indices,
      ``num_returned`` and ``kbar`` on invalid traced input).

    Example:
      >>> import jax
      >>> counts = [900, 800, 700, 20, 19, 18, 17, 16]
      >>> res = private_kbar(jax.random.key(0), counts, k=2, kbar_max=6, epsilon=1.0, delta=1e-6)
      >>> [int(i) for i in res.indices], 2 <= int(res.kbar) <= 6
      ([0, 1], True)
    """
    checks = Checks()
    counts = histogram.check_counts(checks, counts)
    k, kbar_max = histogram.check_k_kbar(k, kbar_max, "kbar_max")
    dtype = float_dtype(counts)
    epsilon, delta = histogram.privacy(checks, epsilon, delta, dtype)
    delta_cap = histogram.max_contributions_value(checks, max_contributions, dtype)
    result, no_negative = _kernel(key, counts, epsilon, delta, delta_cap, k=k, kbar_max=kbar_max)
    histogram.record_sign(checks, counts, no_negative)
    return checks.guard(result)


@elementwise("epsilon", "delta", "delta_prime")
def private_kbar_guarantee(k: int, epsilon: float, delta: float, *, delta_prime: float = 0.0) -> ApproxDP:
    """Algorithm 6: ``(epsilon_star(k + 1, epsilon, delta'), delta + delta')``-DP (Sec. 6.3).

    Host side: ``epsilon``, ``delta`` and ``delta_prime`` are concrete numbers or arrays of them.

    Example:
      >>> round(private_kbar_guarantee(9, 0.1, 1e-8, delta_prime=1e-6).epsilon, 5)
      0.88113
    """
    k = check_int(k, "k", minimum=1)
    epsilon, delta = histogram.check_privacy(epsilon, delta)
    delta_prime = check_probability(delta_prime, "delta_prime", open_high=True)
    return ApproxDP(epsilon_star(k + 1, epsilon, delta_prime), min(delta + delta_prime, 1.0))
