"""The central-model threshold query of Liang and Yi, Appendix C (Algorithm 9), corrected.

The curator is the single "user" (n = 1) holding N records; the metric is Hamming, so CGP is
zCDP. Query: ``1{|H| < qN}`` for a count ``|H|`` of sensitivity 1 (add/remove or swap one record).

:func:`threshold_query` runs PIE-NI on the noisy count with ``nu_low = nu_high = qN``. **Erratum
(spec 6.7):** the paper says S_0 / S_1 mean "less / greater than qN" and answers "Yes iff 1 in S_0",
which contradicts Algorithm 4 and Lemma 5.2 (S_1: phi < nu_low). The correct rule, implemented here,
is **Yes iff 1 in S_1**; if the count survives all c rounds the answer is ``y-bar < qN`` (the
baseline's distribution). With c = 1 it equals :func:`threshold_baseline` exactly.

Privacy: ``rho``-zCDP worst case (:func:`threshold_guarantee`); the curator is charged only
``rho cumfrac[e]`` (Cor C.1: if decided early the answer is right w.p. >= 1 - beta0).
"""

from __future__ import annotations

import jax.numpy as jnp

from dpjax.accounting import ZCDP
from dpjax.budgeting._common import baseline_release
from dpjax.budgeting.pie import ACTIVE, S1, PIEResult, pie_ni
from dpjax.validation import check_array, check_epsilon, check_int, check_probability


def _inputs(count, q, n_records):
    count = check_array(count, "count", ndim=0, nonnegative=True)
    q = check_probability(q, "q", open_low=True, open_high=True)
    n_records = check_int(n_records, "n_records", minimum=1)
    return count.astype(jnp.result_type(float)).reshape(1), q * n_records


def threshold_query(
    key,
    count,
    rho: float,
    *,
    q: float,
    n_records: int,
    c: int,
    beta0: float,
    split: str = "even",
    noise_mode: str = "high",
) -> tuple[jnp.ndarray, PIEResult]:
    """Algorithm 9 (corrected): is ``count < q * n_records``?

    Args:
      key: a ``jax.random`` key.
      count: the exact count |H| (scalar, >= 0; may be traced).
      rho: the zCDP allotment, > 0.
      q: in (0, 1); n_records: N, the public number of records.
      c, beta0, split, noise_mode: as :func:`dpjax.budgeting.pie.pie_ni`.

    Returns:
      ``(answer, result)``: a bool scalar and the one-user :class:`~dpjax.budgeting.pie.PIEResult`.

    Example:
      >>> import jax
      >>> ans, res = threshold_query(jax.random.key(0), 812.0, 0.5, q=0.1, n_records=10000, c=8, beta0=0.05)
      >>> bool(ans)
      True
    """
    rho = check_epsilon(rho, "rho")
    data, thr = _inputs(count, q, n_records)
    res = pie_ni(
        key, data, rho, c=c, beta0=beta0, nu_low=thr, nu_high=thr, split=split, noise_mode=noise_mode
    )
    answer = (res.status[0] == S1) | ((res.status[0] == ACTIVE) & (res.mean[0] < thr))
    return answer, res


def threshold_baseline(key, count, rho: float, *, q: float, n_records: int, noise_mode: str = "high"):
    """BM1: ``1{|H| + N(0, 1/(2 rho)) < qN}``; shares its noise with a c = 1 :func:`threshold_query`."""
    rho = check_epsilon(rho, "rho")
    data, thr = _inputs(count, q, n_records)
    return baseline_release(key, data, jnp.full(1, rho, data.dtype), noise_mode)[0] < thr


def threshold_guarantee(rho: float) -> ZCDP:
    """Worst case of one threshold query: ``rho``-zCDP (count sensitivity 1)."""
    return ZCDP(check_epsilon(rho, "rho"))
