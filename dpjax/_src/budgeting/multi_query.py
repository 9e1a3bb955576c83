"""Multiple queries reinvesting each user's savings (Liang and Yi, Sec. 5.1, Algorithm 3).

For queries ``l = 1..m`` and initial per-user budget ``B``, user ``i`` with remaining budget ``B_i``
is allotted

    r_i = gamma_l (B_i - (m - l + 1) B / m) + B / m,   gamma_l = 3/4 + (l - 1) / (4 (m - 1)),

i.e. ``B/m`` plus a share ``gamma_l`` of its accumulated savings (implemented as printed;
the text's "3/4 for the second query" differs from the formula; ``m = 1`` gives ``r_i = B``). Then a
privacy-saving algorithm ``PSA_l`` (e.g. :func:`dpjax.budgeting.range_count`) runs with
the allotments and each user is debited what it actually used (the paper prints ``Psi_s`` for
``Psi_l``, an erratum).

Invariants (proved by induction, checked in tests): at the start of query l,
``B_i >= (m - l + 1) B / m``; ``B/m <= r_i <= B_i``; at ``l = m``, ``r_i = B_i``; no user ever
exceeds B. If the PSA never saves, every ``r_i = B/m``: the uniform non-adaptive baseline.

:func:`run_multi_query` is a host-side driver (a Python loop over the m queries), not a
kernel: the allotments and debits are float64 on the host through a
:class:`~dpjax.accounting.PerUserLedger`, which must authorize every query's worst case
before it runs and settle what it actually used before the next allotment is computed. That
authorization is a host decision on concrete numbers, so the driver cannot run under ``jit`` or
``vmap`` and takes no traced parameters; the queries it calls are jit-compiled kernels (whose own
parameters may be traced).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from dpjax._src.accounting.per_user import PerUserLedger
from dpjax._src.host_checks import check_int

__all__ = [
    "allotment",
    "gamma_schedule",
    "run_multi_query",
]


def gamma_schedule(m: int) -> np.ndarray:
    """(m,) proportions ``gamma_l = 3/4 + (l-1)/(4(m-1))``, l = 1..m (``[1.0]`` for m = 1).

    Example:
      >>> gamma_schedule(3).tolist()
      [0.75, 0.875, 1.0]
    """
    m = check_int(m, "m", minimum=1)
    if m == 1:
        return np.ones(1)
    g = 0.75 + np.arange(m) / (4 * (m - 1))
    g[-1] = 1.0
    return g


def allotment(remaining: ArrayLike, initial: ArrayLike, l: int, m: int) -> np.ndarray:
    """Algorithm 3, line 4: ``gamma_l (B_i - (m-l+1) B/m) + B/m`` in float64 (``B_i`` itself at l = m).

    Args:
      remaining: (n,) current budgets ``B_i``; initial: scalar or (n,) initial budgets ``B``.
      l: the query, 1-based; m: the number of queries.
    """
    m = check_int(m, "m", minimum=1)
    l = check_int(l, "l", minimum=1, maximum=m)
    remaining = np.asarray(remaining, dtype=np.float64)
    initial = np.broadcast_to(np.asarray(initial, dtype=np.float64), remaining.shape)
    if l == m:
        return remaining.copy()
    savings = remaining - (m - l + 1) / m * initial
    return np.minimum(gamma_schedule(m)[l - 1] * savings + initial / m, remaining)


def run_multi_query(
    key: jax.Array,
    psa: Callable,
    ledger: PerUserLedger,
    m: int,
    *,
    adaptive: bool = True,
    dtype: DTypeLike = np.float32,
) -> tuple[list[Any], np.ndarray]:
    """Algorithm 3: runs ``m`` privacy-saving queries, reinvesting savings through ``ledger``.

    Host side (see the module docstring): ``m`` and ``adaptive`` are Python values, the budgets
    live in ``ledger``; each query is authorized before it runs and settled after it.

    Args:
      key: a ``jax.random`` key; query l uses ``fold_in(key, l)``.
      psa: ``psa(key, l, r) -> (answer, rounds, cumfrac)`` for query ``l`` (1-based) with (n,)
        allotments ``r`` (kernel dtype); ``rounds`` (n,) are the rounds each user released in and
        ``cumfrac`` the (c + 1,) cumulative split, so user i is debited ``r_i cumfrac[rounds_i]``.
      ledger: a :class:`~dpjax.accounting.PerUserLedger` (its budgets are ``B``).
      m: number of queries, >= 1.
      adaptive: True for Algorithm 3; False for the non-adaptive uniform ``B/m`` baseline (savings
        are then never spent).
      dtype: the kernel dtype the allotments are rounded down to.

    Returns:
      ``(answers, allotments)``: the m answers and the (m, n) float64 allotments used.
    """
    m = check_int(m, "m", minimum=1)
    initial = ledger.capacity
    answers, allots = [], []
    for l in range(1, m + 1):
        if adaptive:
            r = allotment(ledger.remaining, initial, l, m)
        else:
            r = np.minimum(initial / m, ledger.remaining)
        grant = ledger.reserve(r, label=f"query {l}", dtype=dtype)
        answer, rounds, cumfrac = psa(jax.random.fold_in(key, l), l, grant.kernel_r())
        grant.settle(np.asarray(rounds), np.asarray(cumfrac))
        answers.append(answer)
        allots.append(grant.r)
    return answers, np.stack(allots)
