"""Reference mechanisms with a known, exactly attained privacy loss, used to calibrate audits.

* :func:`randomized_response` (Warner 1965): a bit is kept with probability ``e^eps / (1 + e^eps)``
  and flipped otherwise. Neighboring relation: the bit itself changes (one individual's answer).
  It is eps-DP and the bound is attained by both outcomes, so an audit of it can only pass by the
  margin of its statistical error: the right mechanism to measure an audit's false-alarm rate.
* :func:`sparse_vector` (Lyu, Su, Li, PVLDB 2017, Algorithm 1): the correct SVT that the negative
  controls of ``tests/negative_controls.py`` modify. It is a reference for audits only; the library's SVT
  family lives in ``dpjax.svt``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax._src import noise
from dpjax._src.accounting.guarantees import PureDP
from dpjax._src.host_checks import check_array, check_epsilon, check_int

__all__ = [
    "gap_max",
    "limit_domain_core",
    "limit_domain_top1",
    "noisy_max_with_gap",
    "randomized_response",
    "randomized_response_guarantee",
    "sparse_vector",
    "sparse_vector_guarantee",
    "svt_outputs",
]


def randomized_response(key, bit, epsilon: float) -> jax.Array:
    """Reports ``bit`` with probability ``e^eps / (1 + e^eps)``, its negation otherwise.

    Warner (1965); guarantee: pure eps-DP (see :func:`randomized_response_guarantee`), attained with
    equality by both outcomes, under the relation "the bit changes".

    Args:
      key: a ``jax.random`` key.
      bit: a boolean or 0/1 array (any shape; each entry is reported independently, and the
        guarantee is per entry).
      epsilon: privacy parameter, > 0.

    Returns:
      A boolean array of ``bit``'s shape.

    Example:
      >>> import jax
      >>> randomized_response(jax.random.key(0), True, epsilon=1.0).dtype
      dtype('bool')
    """
    epsilon = check_epsilon(epsilon)
    bit = jnp.asarray(bit).astype(bool)
    keep = jax.random.bernoulli(key, jax.nn.sigmoid(epsilon), bit.shape)
    return jnp.where(keep, bit, ~bit)


def randomized_response_guarantee(epsilon: float) -> PureDP:
    """Randomized response's guarantee: pure eps-DP (tight)."""
    return PureDP(check_epsilon(epsilon))


def svt_outputs(hits, c: int) -> jax.Array:
    """SVT's released answers from the comparisons ``hits`` (bool, per query): stop after ``c`` tops.

    Returns an int8 vector: 1 = above (⊤), 0 = below (⊥), -1 = not processed (after the stop).
    """
    tops = jnp.cumsum(hits.astype(jnp.int32))
    before = jnp.concatenate([jnp.zeros(1, jnp.int32), tops[:-1]])  # tops before query i
    processed = before < c
    return jnp.where(processed, hits.astype(jnp.int8), jnp.int8(-1))


def sparse_vector(key, queries, epsilon: float, threshold: float, *, c: int = 1) -> jax.Array:
    """Sparse vector (Lyu, Su, Li 2017, Alg. 1) with eps1 = eps2 = eps/2 and sensitivity 1.

    Threshold noise ``Lap(2/eps)`` drawn once, query noise ``Lap(4 c/eps)``, stop after
    ``c`` answers above. Guarantee: eps-DP for queries of sensitivity 1 (any relation under which every
    query changes by at most 1). ``c = 1`` is AboveThreshold.

    Returns:
      int8 vector of the queries' shape: 1 above, 0 below, -1 not processed.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> sparse_vector(jax.random.key(0), jnp.zeros(5), 1.0, threshold=0.0).shape
      (5,)
    """
    epsilon = check_epsilon(epsilon)
    c = check_int(c, "c", minimum=1)
    queries = check_array(queries, "queries", ndim=1)
    k_threshold, k_queries = jax.random.split(key)
    noisy_threshold = threshold + noise.laplace(k_threshold, (), 2.0 / epsilon, queries.dtype)
    nu = noise.laplace(k_queries, queries.shape, 4.0 * c / epsilon, queries.dtype)
    return svt_outputs(queries + nu >= noisy_threshold, c)


def sparse_vector_guarantee(epsilon: float, *, c: int = 1) -> PureDP:
    """Sparse vector's guarantee (Lyu, Su, Li 2017, Theorem 2): pure eps-DP."""
    check_int(c, "c", minimum=1)
    return PureDP(check_epsilon(epsilon))


def noisy_max_with_gap(
    key, queries, epsilon: float, *, monotonic: bool = False
) -> tuple[jax.Array, jax.Array]:
    """Noisy-Max-with-Gap (Ding, Wang, Zhang, Kifer, PVLDB 2020, Alg. 1 with k = 1).

    Noise ``Lap(2/eps)`` per query (``Lap(1/eps)`` if ``monotonic``: counting queries under add/remove),
    release the index of the largest noisy query and its gap to the second largest. Guarantee:
    eps-DP for sensitivity-1 queries (Theorem 2). The reference for the negative control
    ``noisy_max_monotone_scale`` of ``tests/negative_controls.py``.

    Returns:
      ``(index, gap)``: int32 scalar and a non-negative float scalar.
    """
    epsilon = check_epsilon(epsilon)
    queries = check_array(queries, "queries", ndim=1)
    if queries.shape[0] < 2:
        raise ValueError("queries must have at least 2 entries.")
    return gap_max(key, queries, (1.0 if monotonic else 2.0) / epsilon)


def gap_max(key, queries, scale: float) -> tuple[jax.Array, jax.Array]:
    """Index of the largest of ``queries + Lap(scale)`` and its gap to the runner-up (no checks)."""
    dtype = queries.dtype if jnp.issubdtype(queries.dtype, jnp.floating) else None
    values, indices = jax.lax.top_k(queries + noise.laplace(key, queries.shape, scale, dtype), 2)
    return indices[0], values[0] - values[1]


def limit_domain_top1(key, counts, epsilon: float, delta: float, *, kbar: int) -> jax.Array:
    """Durfee and Rogers (NeurIPS 2019) limited-domain selection, Alg. 1 with k = 1 and Δ = ∞.

    Among the ``kbar`` largest counts (ties broken by the smaller id, data-independently), report the
    argmax of ``h_i + Gumbel(1/eps)`` against ``⊥`` with score ``h_(kbar+1) + 1 + ln(kbar/delta)/eps +
    Gumbel(1/eps)``. Guarantee: (eps, delta)-DP under add/remove of one user who changes each count by
    at most 1 (Durfee and Rogers 2019, Theorem 1 with k = 1; an exact audit is tight at
    (k̄ eps, delta)).

    Returns:
      int32 scalar: the reported item id, or -1 for ⊥.
    """
    return limit_domain_core(key, counts, epsilon, delta, kbar, plus_one=1.0)


def limit_domain_core(key, counts, epsilon, delta, kbar, *, plus_one):
    """Shared body of :func:`limit_domain_top1` and its "+1"-less negative control."""
    epsilon = check_epsilon(epsilon)
    kbar = check_int(kbar, "kbar", minimum=1)
    counts = check_array(counts, "counts", ndim=1)
    if kbar >= counts.shape[0]:
        raise ValueError(f"kbar must be < the number of items ({counts.shape[0]}), got {kbar}.")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}.")
    counts = counts.astype(jnp.result_type(float))
    top, ids = jax.lax.top_k(counts, kbar + 1)  # exact; ties toward the smaller id
    bottom = top[kbar] + plus_one + jnp.log(kbar / delta) / epsilon
    scores = jnp.concatenate([top[:kbar], bottom[None]])
    noisy = scores + noise.gumbel(key, scores.shape, 1.0 / epsilon, scores.dtype)
    winner = jnp.argmax(noisy)
    return jnp.where(winner == kbar, -1, ids[jnp.minimum(winner, kbar - 1)]).astype(jnp.int32)
