"""Top-k over an unknown domain: the limited-domain mechanism (Durfee and Rogers 2019, Alg. 1, 5).

"Practical Differentially Private Top-k Selection with Pay-what-you-get Composition" (NeurIPS 2019,
arXiv 1905.04273). The mechanism sees only the true top-(kbar+1) counts of a histogram. It adds
``Gumbel(1/epsilon)`` noise to the top-kbar counts and to a threshold
``h_bot = h_(kbar+1) + 1 + ln(min(Delta, kbar)/delta)/epsilon`` and reports the items of the noisy
top-k in noisy order until the noisy threshold wins, where it stops with ⊥ ("bottom").

Neighbors: add or remove one user (user-level DP); a user changes every count by at most 1 and, when
``max_contributions=Delta`` is given, at most Delta counts. Counts are then monotone, which is what
makes each selection epsilon-DP and epsilon-range-bounded with weights ``exp(epsilon h_i)``.

Guarantee (Theorem 1): ``(epsilon_star(k, epsilon, delta'), delta + delta')``-DP for every
``delta' >= 0`` (:func:`limited_domain_guarantee`); in a pay-what-you-get session (Algorithm 2) a
call is charged ``num_returned + bottom`` outcomes (:class:`dpjax.accounting.PayWhatYouGet`).

Implementation: scores are kept in "EM units" relative to the (kbar+1)-th count,
``s_i = epsilon (h_i - h_(kbar+1)) + G_i`` and ``s_bot = epsilon + ln(m/delta) + G_bot`` with
standard Gumbel ``G`` from :func:`dpjax.noise.gumbel` (exact upper tail to about 44 in float32),
the same ordering as the paper's scores, computed from exact integer differences. Only indices,
lengths and ⊥ flags are returned, never the noisy scores (they are not private).
"""

from __future__ import annotations

import functools
import math
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
    "TopKResult",
    "limited_domain",
    "limited_domain_guarantee",
    "strictly_limited_domain",
    "threshold_offset",
]


class TopKResult(NamedTuple):
    """The output of a limited-domain top-k call (arrays with the batch shape of ``counts``).

    Attributes:
      indices: ``[..., k]`` int32 item indices in noisy order, the first ``num_returned`` valid and
        the rest ``-1``.
      num_returned: ``[...]`` int32 number of indices returned, in ``0..k``.
      bottom: ``[...]`` bool, whether the output ended with ⊥ (exactly when ``num_returned < k``).

    When a traced input was invalid, ``indices`` and ``num_returned`` are ``-1`` everywhere (the
    invalid marker; ``bottom`` is then meaningless).
    """

    indices: jax.Array
    num_returned: jax.Array
    bottom: jax.Array

    @property
    def outcomes(self) -> jax.Array:
        """The pay-what-you-get charge of each call: ``num_returned + bottom`` (⊥ counts as one)."""
        return self.num_returned + self.bottom.astype(self.num_returned.dtype)


def threshold_offset(
    kbar: int, epsilon: float, delta: float, *, max_contributions: int | None = None
) -> float:
    """``h_bot - h_(kbar+1) = 1 + ln(min(Delta, kbar)/delta)/epsilon`` (eq. 6), in counts.

    The "+1" is the l_inf sensitivity of counts; ``min(Delta, kbar)`` bounds how many items can
    enter or leave the top-kbar between neighbors (Lemma 5.3). ``max_contributions=None`` is the
    unrestricted case (``min(Delta, kbar) = kbar``). A host-side reference (concrete numbers, a
    Python float); the kernels compute ``epsilon`` times this offset in their working dtype.

    Example:
      >>> round(threshold_offset(100, 1.0, 1e-6), 2)
      19.42
    """
    kbar = check_int(kbar, "kbar", minimum=1)
    epsilon, delta = histogram.check_privacy(epsilon, delta)
    delta_cap = histogram.check_max_contributions(max_contributions)
    m = kbar if delta_cap is None else min(delta_cap, kbar)
    return 1.0 + math.log(m / delta) / epsilon


@functools.partial(jax.jit, static_argnames=("k", "kbar", "strict"))
def _kernel(key, counts, epsilon, delta, delta_cap, *, k, kbar, strict):
    ids, values = histogram.top_counts(counts, kbar + 1)
    dtype = epsilon.dtype
    gaps = (values[..., :kbar] - values[..., kbar:]).astype(dtype)  # exact: h_i - h_(kbar+1) >= 0
    # One draw of kbar + 1 independent Gumbels (one sampler call keeps compilation cheap).
    gumbels = noise.gumbel(key, values.shape, dtype=dtype)
    scores = epsilon * gaps + gumbels[..., :kbar]
    if strict:  # Algorithm 5: only items strictly above h_(kbar+1)
        scores = jnp.where(gaps > 0, scores, -jnp.inf)
    # h_bot in EM units: epsilon * threshold_offset = epsilon + ln(min(Delta, kbar)/delta).
    m = kbar if delta_cap is None else jnp.minimum(delta_cap, kbar)
    threshold = epsilon + histogram.log_ratio(m, delta) + gumbels[..., kbar]
    indices, num_returned = histogram.report_above(scores, threshold, ids[..., :kbar], k)
    return TopKResult(indices, num_returned, num_returned < k), histogram.no_negative_count(values)


def _run(key, counts, k, kbar, epsilon, delta, max_contributions, strict):
    checks = Checks()
    counts = histogram.check_counts(checks, counts)
    k, kbar = histogram.check_k_kbar(k, kbar)
    dtype = float_dtype(counts)
    epsilon, delta = histogram.privacy(checks, epsilon, delta, dtype)
    delta_cap = histogram.max_contributions_value(checks, max_contributions, dtype)
    result, no_negative = _kernel(key, counts, epsilon, delta, delta_cap, k=k, kbar=kbar, strict=strict)
    histogram.record_sign(checks, counts, no_negative)
    return checks.guard(result)


def limited_domain(
    key: jax.Array,
    counts: ArrayLike,
    k: int,
    kbar: int,
    epsilon: ArrayLike,
    delta: ArrayLike,
    *,
    max_contributions: ArrayLike | None = None,
) -> TopKResult:
    """Top-k over an unknown domain with a noisy ⊥ threshold (Durfee and Rogers 2019, Algorithm 1).

    Only the true top-(kbar+1) counts of ``counts`` are used (extracted with the exact
    ``lax.top_k``, ties to the lower index). ``Gumbel(1/epsilon)`` noise is added to the top-kbar
    counts and to ``h_bot = h_(kbar+1) + 1 + ln(min(Delta, kbar)/delta)/epsilon``; the items whose
    noisy counts beat the noisy ``h_bot`` are returned in noisy order, at most ``k`` of them, and a
    shorter output ends with ⊥. Equal in distribution to peeling the exponential mechanism over the
    top-kbar items plus ⊥, stopping at ⊥ (Lemma 5.4).

    Neighbors: add/remove one user; each count changes by at most 1 and, with
    ``max_contributions=Delta``, at most Delta counts change.

    Guarantee: ``(epsilon_star(k, epsilon, delta'), delta + delta')``-DP for any ``delta' >= 0``
    (Theorem 1, :func:`limited_domain_guarantee`); the pay-what-you-get charge is
    ``result.outcomes``. Counts must be distinct-user counts (integers).

    Traced parameters: ``epsilon``, ``delta`` and ``max_contributions`` may be traced (``jax.vmap``
    over a grid of them gives, for the same key, what separate calls give); ``k`` and ``kbar`` fix
    the output shapes and are static. Concrete values are validated eagerly (``ValueError`` before
    any randomness); when a traced value is invalid (``epsilon <= 0``, ``delta`` outside (0, 1), NaN
    or infinite values, a non-integer Delta) or traced counts are NaN, negative or not integers,
    ``indices`` and ``num_returned`` are ``-1`` everywhere (``bottom`` carries no marker).

    Speed: pass many queries as the leading axes of ``counts`` (one call) rather than ``vmap`` over
    histograms; ``vmap`` over keys with the counts fixed does the top-(kbar+1) extraction once.
    Passing only the true top-(kbar+1) counts, sorted by (count desc, item id asc), gives the same
    law with indices into that short array (the paper's "blackbox top-kbar solver" interface).

    Args:
      key: a ``jax.random`` key.
      counts: ``[..., d]`` histogram(s) of non-negative integer counts; leading axes are independent
        queries. With ``d <= kbar`` zero-count padding items ``d, d+1, ...`` complete the top
        kbar+1 (Sec. 6.2), so a returned index ``>= d`` names a zero-count padding element.
      k: maximum number of indices returned, ``1 <= k <= kbar`` (static).
      kbar: size of the limited domain (the true top-kbar), ``kbar >= k`` (static).
      epsilon: per-step privacy parameter (Gumbel scale ``1/epsilon`` on counts), > 0 (may be traced).
      delta: the threshold's bad-event probability, in (0, 1) (may be traced).
      max_contributions: Delta, the number of items one user can contribute to (restricted
        sensitivity), an integer >= 1 (may be traced), or ``None`` (unrestricted).

    Returns:
      A :class:`TopKResult` ``(indices [..., k], num_returned [...], bottom [...])``; ``indices``
      and ``num_returned`` are ``-1`` when a traced input is invalid.

    Example:
      >>> import jax
      >>> res = limited_domain(jax.random.key(0), [5, 900, 3, 700, 650, 2], k=3, kbar=4,
      ...                      epsilon=1.0, delta=1e-6)
      >>> [int(i) for i in res.indices]
      [1, 3, 4]
    """
    return _run(key, counts, k, kbar, epsilon, delta, max_contributions, False)


def strictly_limited_domain(
    key: jax.Array, counts: ArrayLike, k: int, kbar: int, epsilon: ArrayLike, delta: ArrayLike
) -> TopKResult:
    """The strictly limited domain variant (Durfee and Rogers 2019, Algorithm 5, Sec. 6.2).

    As :func:`limited_domain`, but only items whose count is strictly above ``h_(kbar+1)`` can be
    returned (what OLAP systems returning non-zero counts provide), and the threshold is
    ``h_(kbar+1) + 1 + ln(kbar/delta)/epsilon`` whatever Delta is (no restricted-sensitivity
    improvement, Sec. 6.2). Neighbors: add/remove one user.

    Guarantee: as Algorithm 1, ``(epsilon_star(k, epsilon, delta'), delta + delta')``-DP
    (Lemma 6.6; :func:`limited_domain_guarantee`).

    ``epsilon`` and ``delta`` may be traced, ``k`` and ``kbar`` are static; invalid traced input
    gives ``-1`` indices and ``num_returned``, as :func:`limited_domain`.

    Returns:
      A :class:`TopKResult`, as :func:`limited_domain`.

    Example:
      >>> import jax
      >>> res = strictly_limited_domain(jax.random.key(0), [0, 0, 40, 0], k=2, kbar=3,
      ...                               epsilon=1.0, delta=1e-3)
      >>> [int(i) for i in res.indices], bool(res.bottom)
      ([2, -1], True)
    """
    return _run(key, counts, k, kbar, epsilon, delta, None, True)


@elementwise("epsilon", "delta", "delta_prime")
def limited_domain_guarantee(k: int, epsilon: float, delta: float, *, delta_prime: float = 0.0) -> ApproxDP:
    """Theorem 1: Algorithms 1 and 5 are ``(epsilon_star(k, epsilon, delta'), delta + delta')``-DP.

    ``epsilon_star`` (:func:`dpjax.accounting.epsilon_star`) is the min of
    ``k epsilon``, advanced composition, and the range-bounded bound of Lemma 4.4; it depends on
    ``k``, not on kbar or Delta (they only move the threshold). Host side: ``epsilon``, ``delta``
    and ``delta_prime`` must be concrete numbers or arrays of them (an array gives an object array
    of guarantees, one per entry).

    Example:
      >>> g = limited_domain_guarantee(10, 0.1, 1e-8, delta_prime=1e-6)
      >>> round(g.epsilon, 5), round(g.delta, 12)
      (0.88113, 1.01e-06)
    """
    k = check_int(k, "k", minimum=1)
    epsilon, delta = histogram.check_privacy(epsilon, delta)
    delta_prime = check_probability(delta_prime, "delta_prime", open_high=True)
    return ApproxDP(epsilon_star(k, epsilon, delta_prime), min(delta + delta_prime, 1.0))
