"""DELIBERATELY BROKEN mechanisms — negative controls for the audit tests. NEVER use them on data.

They live in ``tests/`` (a test helper module, not part of the package): a user audits their own
mechanism with :func:`dpjax.audit.audit` and calibrates the audit's false-alarm rate on the exactly
attained :mod:`dpjax.audit.reference` mechanisms; only the audit's own tests need mechanisms known to
be wrong.

Each function below is a known-wrong variant of a correct mechanism (its correct counterpart is in
:mod:`dpjax.audit.reference` or the library) and claims the correct mechanism's epsilon. The audit
suite (``tests/cross/test_audit_suite.py``) checks that :func:`dpjax.audit.audit` refutes every claim
with the default number of trials, on the worst-case neighbors of :mod:`dpjax.audit.neighbors`:

* :func:`svt_without_threshold_noise` — sparse vector with an exact threshold (in Lyu, Su, Li 2017's
  analysis the threshold noise is what pays for all the ⊥ answers at once); the true loss grows with
  the number of queries.
* :func:`svt_noisy_answers` — sparse vector that releases the noisy answer ``q_i + nu_i`` of each
  query above threshold (Lyu, Su, Li 2017, Alg. 3, from Roth's lecture notes): not eps'-DP for any
  finite eps'.
* :func:`svt_threshold_not_resampled` — sparse vector whose threshold noise is drawn once from a
  fixed key and reused by every release instead of being resampled per release: the noisy threshold
  is then a constant, and the ⊥ answers leak as if it had no noise. (Resampling *within* a release,
  after each ⊤, is not needed: Lyu, Su, Li 2017, Alg. 1 draws the threshold noise once per release.)
* :func:`noisy_max_monotone_scale` — Noisy-Max-with-Gap with the monotone scale ``1/eps`` used on
  non-monotone queries (seed-002 §6 O9: the ratio tends to ``e^{2 eps}``).
* :func:`limit_domain_without_plus_one` — limited-domain top-1 with the "+1" dropped from the ⊥
  threshold (seed-003 §9.2 mutation test: hockey-stick 1.76 delta, so (eps, delta) fails).
* :func:`laplace_half_scale` — the Laplace mechanism with half the noise it needs (true loss
  ``2 eps``), the simplest "wrong noise scale" bug (seed-000 §6 O6).
* :func:`dp_sum_noise_by_largest_norm` — the DP-SGD aggregation step of
  :func:`dpjax.optax.dp_aggregate` with its noise scaled by the largest clipped example norm of the
  batch instead of the clip norm (noise scaled by the wrong norm): the noise then depends on the
  data, and removing the one large example shrinks it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpjax import noise
from dpjax._src.audit.reference import gap_max, limit_domain_core, svt_outputs
from dpjax._src.host_checks import check_array, check_epsilon, check_int


def _svt_checks(queries, epsilon, c):
    return (
        check_array(queries, "queries", ndim=1),
        check_epsilon(epsilon),
        check_int(c, "c", minimum=1),
    )


def svt_without_threshold_noise(key, queries, epsilon: float, threshold: float, *, c: int = 1):
    """DELIBERATELY BROKEN: sparse vector with no threshold noise (claims eps-DP; is not).

    Same as :func:`dpjax.audit.reference.sparse_vector` (query noise ``Lap(4c/eps)``) but compares
    against the exact threshold. Output: int8 vector, 1 above, 0 below, -1 not processed.
    """
    queries, epsilon, c = _svt_checks(queries, epsilon, c)
    nu = noise.laplace(key, queries.shape, 4.0 * c / epsilon, queries.dtype)
    return svt_outputs(queries + nu >= threshold, c)


def svt_noisy_answers(key, queries, epsilon: float, threshold: float, *, c: int = 1):
    """DELIBERATELY BROKEN: sparse vector releasing ``q_i + nu_i`` above threshold (Lyu et al. Alg. 3).

    Threshold noise ``Lap(2/eps)``, query noise ``Lap(2c/eps)`` as in Alg. 3 (claims eps-DP; it is not
    eps'-DP for any eps'). Output: ``(pattern, answers)``: the int8 pattern of
    :func:`dpjax.audit.reference.svt_outputs` and a float vector with the noisy answer where the
    pattern is 1 and NaN elsewhere.
    """
    queries, epsilon, c = _svt_checks(queries, epsilon, c)
    k_threshold, k_queries = jax.random.split(key)
    noisy_threshold = threshold + noise.laplace(k_threshold, (), 2.0 / epsilon, queries.dtype)
    answers = queries + noise.laplace(k_queries, queries.shape, 2.0 * c / epsilon, queries.dtype)
    pattern = svt_outputs(answers >= noisy_threshold, c)
    return pattern, jnp.where(pattern == 1, answers, jnp.nan)


def svt_threshold_not_resampled(
    key, queries, epsilon: float, threshold: float, *, c: int = 1, threshold_key=None
):
    """DELIBERATELY BROKEN: sparse vector whose threshold noise is not resampled between releases.

    The threshold noise ``Lap(2/eps)`` comes from ``threshold_key`` (default ``jax.random.key(0)``), a
    key that does not change from one release to the next — the classic key-reuse bug — so every
    release compares against the same noisy threshold; only the query noise ``Lap(4c/eps)`` is
    fresh. Claims eps-DP; the loss grows with the number of ⊥ answers. Output as
    :func:`svt_without_threshold_noise`.
    """
    queries, epsilon, c = _svt_checks(queries, epsilon, c)
    threshold_key = jax.random.key(0) if threshold_key is None else threshold_key
    noisy_threshold = threshold + noise.laplace(threshold_key, (), 2.0 / epsilon, queries.dtype)
    nu = noise.laplace(key, queries.shape, 4.0 * c / epsilon, queries.dtype)
    return svt_outputs(queries + nu >= noisy_threshold, c)


def noisy_max_monotone_scale(key, queries, epsilon: float):
    """DELIBERATELY BROKEN: Noisy-Max-with-Gap with ``Lap(1/eps)`` on general (non-monotone) queries.

    Claims eps-DP (the monotone-query guarantee); on q = (0, 0) vs (1, -1) the loss tends to 2 eps
    (seed-002 §6 O9). Output: ``(index, gap)``.
    """
    queries = check_array(queries, "queries", ndim=1)
    return gap_max(key, queries, 1.0 / check_epsilon(epsilon))


def limit_domain_without_plus_one(key, counts, epsilon: float, delta: float, *, kbar: int):
    """DELIBERATELY BROKEN: limited-domain top-1 whose ⊥ threshold lacks the "+1" (seed-003 §9.2).

    Claims (eps, delta)-DP like :func:`dpjax.audit.reference.limit_domain_top1`; a new item entering
    the top-k̄ is then reported with probability above delta. Output: item id or -1 (⊥).
    """
    return limit_domain_core(key, counts, epsilon, delta, kbar, plus_one=0.0)


def laplace_half_scale(key, value, epsilon: float):
    """DELIBERATELY BROKEN: ``value + Lap(1/(2 eps))`` for a sensitivity-1 value; claims eps, is 2 eps."""
    value = check_array(value, "value", allow_empty=True)
    dtype = value.dtype if jnp.issubdtype(value.dtype, jnp.floating) else None
    return value + noise.laplace(key, value.shape, 0.5 / check_epsilon(epsilon), dtype)


def dp_sum_noise_by_largest_norm(
    key, per_example_grads, example_mask, noise_multiplier: float, clip_norm: float
):
    """DELIBERATELY BROKEN: clipped sum plus ``N(0, (noise_multiplier * m)^2)`` per coordinate, with
    ``m`` the largest clipped norm in the batch instead of ``clip_norm`` (claims the Gaussian
    mechanism's guarantee at ``noise_multiplier``; it is not DP). Output: the pytree of sums."""
    from dpjax._src.optax.transform import clip_and_sum

    clip = jnp.asarray(check_epsilon(clip_norm, "clip_norm"), jnp.float32)
    summed, norms = clip_and_sum(per_example_grads, clip, jnp.asarray(example_mask, bool))
    largest = jnp.max(jnp.where(example_mask, jnp.minimum(norms, clip), 0.0))
    leaves, treedef = jax.tree.flatten(summed)
    keys = jax.random.split(key, len(leaves))
    std = check_epsilon(noise_multiplier, "noise_multiplier") * largest
    noised = [
        leaf + noise.gaussian(k, leaf.shape, std, leaf.dtype) for leaf, k in zip(leaves, keys, strict=True)
    ]
    return jax.tree.unflatten(treedef, noised)
