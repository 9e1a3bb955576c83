"""The central-model threshold query of Liang and Yi, Appendix C (Algorithm 9), corrected.

The curator is the single "user" (n = 1) holding N records; the metric is Hamming, so CGP is
zCDP. Query: ``1{|H| < qN}`` for a count ``|H|`` of sensitivity 1 (add/remove or swap one record).

:func:`threshold_query` runs PIE-NI on the noisy count with ``nu_low = nu_high = qN``. **Erratum:** the
paper says S_0 / S_1 mean "less / greater than qN" and answers "Yes iff 1 in S_0",
which contradicts Algorithm 4 and Lemma 5.2 (S_1: phi < nu_low). The correct rule, implemented here,
is **Yes iff 1 in S_1**; if the count survives all c rounds the answer is ``y-bar < qN`` (the
baseline's distribution). With c = 1 it equals :func:`threshold_baseline` exactly.

Privacy: ``rho``-zCDP worst case (:func:`threshold_guarantee`); the curator is charged only
``rho cumfrac[e]`` (Cor C.1: if decided early the answer is right w.p. >= 1 - beta0).

Output: the answer is an int32 scalar, 1 for "yes" (``count < qN``), 0 for "no" and -1 when a
traced input is invalid (a bool cannot carry the library's invalid marker), so test it with
``answer == 1``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from dpjax._src import sharded
from dpjax._src.accounting.elementwise import elementwise
from dpjax._src.accounting.guarantees import ZCDP
from dpjax._src.budgeting.common import baseline_release
from dpjax._src.budgeting.pie import check_beta0
from dpjax._src.budgeting.pie_kernel import ACTIVE, S1, PIEResult, check_plan, pie_kernel
from dpjax._src.budgeting.splits import Split
from dpjax._src.host_checks import check_epsilon, float_dtype
from dpjax._src.noise import NoiseMode
from dpjax._src.validation import Checks

__all__ = [
    "threshold_baseline",
    "threshold_guarantee",
    "threshold_query",
]


def _inputs(checks, count, rho, q, n_records):
    """(data (1,), r (1,), q, N): validated, in the count's float dtype."""
    count = checks.array(count, "count", ndim=0, nonnegative=True)
    dtype = float_dtype(count)
    rho = checks.epsilon(rho, "rho")
    q = checks.probability(q, "q", open_low=True, open_high=True)
    n_records = checks.integer(n_records, "n_records", dtype)
    data = count.astype(dtype).reshape(1)
    return data, jnp.full(1, rho, dtype), jnp.asarray(q, dtype), n_records


@functools.partial(jax.jit, static_argnames=("plan",))
@sharded.auto_axes
def _query_kernel(key, data, r, q, n_records, beta0, *, plan):
    thr = q * n_records
    res = pie_kernel(key, data, r, jnp.stack([thr, thr]), beta0, plan=plan)
    yes = (res.status[0] == S1) | ((res.status[0] == ACTIVE) & (res.mean[0] < thr))
    return yes.astype(jnp.int32), res


@functools.partial(jax.jit, static_argnames=("noise_mode",))
def _baseline_kernel(key, data, r, q, n_records, *, noise_mode):
    return (baseline_release(key, data, r, noise_mode)[0] < q * n_records).astype(jnp.int32)


def threshold_query(
    key: jax.Array,
    count: ArrayLike,
    rho: ArrayLike,
    *,
    q: ArrayLike,
    n_records: ArrayLike,
    c: int,
    beta0: ArrayLike,
    split: Split = "even",
    noise_mode: NoiseMode = "high",
) -> tuple[jnp.ndarray, PIEResult]:
    """Algorithm 9 (corrected): is ``count < q * n_records``?

    ``count``, ``rho``, ``q``, ``n_records`` and ``beta0`` may be traced; ``c``, ``split`` and
    ``noise_mode`` are static. Concrete values are validated eagerly (``ValueError`` before any
    randomness); an invalid traced value (``rho`` not > 0, ``q`` or ``beta0`` outside (0, 1),
    ``n_records`` not an integer >= 1, NaN or infinite values) or a NaN, infinite or negative traced
    ``count`` makes the answer ``-1`` and the result's fields NaN / ``-1``.

    Args:
      key: a ``jax.random`` key.
      count: the exact count |H| (scalar, >= 0; may be traced).
      rho: the zCDP allotment, > 0 (may be traced).
      q: in (0, 1) (may be traced); n_records: N, the public number of records, an integer >= 1
        (may be traced).
      c, beta0, split, noise_mode: as :func:`dpjax.budgeting.pie_ni`.

    Returns:
      ``(answer, result)``: an int32 scalar (1: yes, 0: no, -1: invalid traced input) and the
      one-user :class:`~dpjax.budgeting.PIEResult`.

    Example:
      >>> import jax
      >>> ans, res = threshold_query(jax.random.key(0), 812.0, 0.5, q=0.1, n_records=10000, c=8, beta0=0.05)
      >>> int(ans)
      1
    """
    static = check_plan(c, split, None, noise_mode)
    checks = Checks()
    data, r, q, n_records = _inputs(checks, count, rho, q, n_records)
    beta0 = check_beta0(checks, beta0, data.dtype)
    return checks.guard(_query_kernel(key, data, r, q, n_records, beta0, plan=static))


def threshold_baseline(
    key: jax.Array,
    count: ArrayLike,
    rho: ArrayLike,
    *,
    q: ArrayLike,
    n_records: ArrayLike,
    noise_mode: NoiseMode = "high",
) -> jax.Array:
    """BM1: ``1{|H| + N(0, 1/(2 rho)) < qN}``; shares its noise with a c = 1 :func:`threshold_query`.

    Returns an int32 scalar: 1 (yes), 0 (no) or -1 (invalid traced input, as
    :func:`threshold_query`). ``count``, ``rho``, ``q`` and ``n_records`` may be traced,
    ``noise_mode`` is static.
    """
    checks = Checks()
    data, r, q, n_records = _inputs(checks, count, rho, q, n_records)
    return checks.guard(_baseline_kernel(key, data, r, q, n_records, noise_mode=noise_mode))


@elementwise("rho")
def threshold_guarantee(rho: float) -> ZCDP:
    """Worst case of one threshold query: ``rho``-zCDP (count sensitivity 1).

    Host side: ``rho`` is a concrete number, or an array of them (one guarantee per entry).
    """
    return ZCDP(check_epsilon(rho, "rho"))
