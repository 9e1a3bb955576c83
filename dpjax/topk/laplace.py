"""EXPERIMENTAL: the Laplace limited-domain mechanism (Durfee and Rogers 2019, Algorithm 4, Sec. 6.1).

As Algorithm 1 with ``Lap(1/epsilon)`` instead of Gumbel noise and, for restricted sensitivity
(``Delta < kbar``), the threshold ``h_bot = h_(kbar+1) + 1 + ln(Delta/delta)/epsilon``. Its epsilon
scales with Delta instead of k, but it has no range-bounded or pay-what-you-get composition.

Why experimental: the paper's constants for this variant (its eq. 8 and Lemma 6.1) were lost in the
text extraction. :func:`laplace_limited_domain_guarantee` returns the spec's derived bound
(``seed-003`` §4.1, [D], not the paper's statement) with its conservative ``Delta + 1`` in place of
``Delta``: ``((Delta + 1) epsilon, (1 + e^{(Delta+1) epsilon}) (delta/2)(1 + ln(Delta/delta)/2))``.
``tests/test_topk_laplace.py`` checks it for k = 1 by exact numerical integration on tiny domains;
it is not proven here. Neighbours: add/remove one user touching at most Delta items.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax

from dpjax import noise
from dpjax.accounting import ApproxDP
from dpjax.topk._histogram import (
    check_counts,
    check_k_kbar,
    check_privacy,
    float32_exact,
    float_dtype,
    top_counts,
)
from dpjax.topk.limited_domain import TopKResult
from dpjax.validation import check_int


def _check_delta_cap(max_contributions, kbar) -> int:
    cap = check_int(max_contributions, "max_contributions", minimum=1)
    if cap >= kbar:
        raise ValueError(
            f"max_contributions must be < kbar for the Laplace variant (restricted sensitivity), "
            f"got {cap} and kbar={kbar}; use limited_domain otherwise."
        )
    return cap


@functools.partial(jax.jit, static_argnames=("k", "kbar", "exact_in_float32"))
def _kernel(key, counts, epsilon, bottom_score, *, k, kbar, exact_in_float32):
    ids, values = top_counts(counts, kbar + 1, exact_in_float32)
    dtype = float_dtype()
    gaps = (values[..., :kbar] - values[..., kbar:]).astype(dtype)
    laplaces = noise.laplace(key, values.shape, dtype=dtype)
    scores = epsilon * gaps + laplaces[..., :kbar]
    threshold = bottom_score + laplaces[..., kbar]
    noisy, positions = lax.top_k(scores, k)
    above = noisy > threshold[..., None]
    num_returned = above.sum(-1, dtype=jnp.int32)
    indices = jnp.where(above, jnp.take_along_axis(ids[..., :kbar], positions, axis=-1), -1)
    return TopKResult(indices, num_returned, num_returned < k)


def laplace_limited_domain(
    key, counts, k: int, kbar: int, epsilon: float, delta: float, *, max_contributions: int
) -> TopKResult:
    """EXPERIMENTAL Algorithm 4: Laplace noise on the top-kbar counts and the ⊥ threshold.

    Reports the items whose ``h_i + Lap(1/epsilon)`` beat ``h_(kbar+1) + 1 + ln(Delta/delta)/epsilon
    + Lap(1/epsilon)``, in noisy order, at most k, ending with ⊥ when fewer. Neighbours: add/remove
    one user who touches at most ``max_contributions = Delta < kbar`` items. Guarantee: see
    :func:`laplace_limited_domain_guarantee` (derived, not the paper's lost statement).

    Returns:
      A :class:`~dpjax.topk.TopKResult`, as :func:`~dpjax.topk.limited_domain`.

    Example:
      >>> import jax
      >>> res = laplace_limited_domain(jax.random.key(0), [90, 5, 80, 3, 2, 1], 2, 4, 1.0, 1e-6,
      ...                              max_contributions=1)
      >>> [int(i) for i in res.indices]
      [0, 2]
    """
    counts = check_counts(counts)
    k, kbar = check_k_kbar(k, kbar)
    epsilon, delta = check_privacy(epsilon, delta)
    cap = _check_delta_cap(max_contributions, kbar)
    dtype = float_dtype()
    eps, bottom_score = jnp.asarray(epsilon, dtype), jnp.asarray(epsilon + math.log(cap / delta), dtype)
    return _kernel(key, counts, eps, bottom_score, k=k, kbar=kbar, exact_in_float32=float32_exact(counts))


def laplace_limited_domain_guarantee(epsilon: float, delta: float, *, max_contributions: int) -> ApproxDP:
    """EXPERIMENTAL: ``((Delta+1) eps, (1 + e^{(Delta+1) eps}) (delta/2)(1 + ln(Delta/delta)/2))``.

    Independent of k (the noisy counts themselves are a Laplace mechanism on the common domain).
    Derived in the dpjax spec (§4.1, [D]) with the conservative ``Delta + 1``; not the paper's
    statement, which was lost.

    Example:
      >>> round(laplace_limited_domain_guarantee(0.5, 1e-6, max_contributions=1).epsilon, 6)
      1.0
    """
    epsilon, delta = check_privacy(epsilon, delta)
    cap = check_int(max_contributions, "max_contributions", minimum=1)
    eps = (cap + 1) * epsilon
    bad = (delta / 2) * (1 + math.log(cap / delta) / 2)
    return ApproxDP(eps, min((1 + math.exp(eps)) * bad, 1.0))
