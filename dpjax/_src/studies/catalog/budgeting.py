"""Studies of adaptive per-user budgeting by iterative elimination (Liang and Yi).

The built-in 1-D sample datasets stand in for user locations (one value per user, metres in spirit).
The study epsilon is read as a pure geo-privacy epsilon per unit distance, converted to CGP by
Lemma 3.1 (rho = epsilon^2 / 2); every user has that budget for the one query. Each study compares
PIE (c = 8 rounds, even split, beta0 = 0.025) with the one-shot baseline at the same budget, and
reports the share of the budget PIE leaves unspent (PrivSav).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dpjax._src.budgeting.range_count import range_count, range_count_baseline
from dpjax._src.budgeting.threshold import threshold_baseline, threshold_query
from dpjax._src.studies import metrics
from dpjax._src.studies.catalog import EPSILONS
from dpjax._src.studies.definition import Mechanism, Study
from dpjax._src.studies.registry import register

__all__: list[str] = []

_C, _BETA0 = 8, 0.025
_USERS = 300  # the range count uses the first 300 values as users, to keep the study to seconds
_RANGE = 2.0  # the range query counts the users in [-RANGE, RANGE]
_SAVING = metrics.value("privacy_saving", "share of the budget left unspent (PrivSav)", "fraction of ρ",
                       output="saving")


def _users(x):
    return x[:_USERS, None]


def _box(x):
    return jnp.zeros(1, x.dtype), jnp.full(1, _RANGE, x.dtype)


def _rho(epsilon, users):
    """Every user's allotment rho = epsilon^2 / 2, as the (n,) form (which may be traced)."""
    return jnp.full(users.shape[0], epsilon**2 / 2, users.dtype)


def _pie_count(key, x, epsilon):
    users = _users(x)
    count, res = range_count(key, users, _rho(epsilon, users), *_box(users), c=_C, beta0=_BETA0,
                             mode="distance")
    return {"count": count, "saving": 1 - jnp.mean(res.rounds) / _C}


def _one_shot_count(key, x, epsilon):
    users = _users(x)
    return {"count": range_count_baseline(key, users, _rho(epsilon, users), *_box(users), mode="distance")}


register(Study(
    "pie_range_count",
    family="budgeting",
    description=f"count of {_USERS} users in [-{_RANGE:g}, {_RANGE:g}], local CGP with ρ = ε²/2 per user",
    mechanisms=[Mechanism(f"PIE-NI (PM1, c={_C})", _pie_count), Mechanism("one-shot (BM1)", _one_shot_count)],
    datasets={"normal": "normal", "uniform": "uniform"},
    grid={"epsilon": EPSILONS},
    truth=lambda x, **_: jnp.sum(jnp.abs(x[:_USERS]) < _RANGE),
    metrics=[metrics.abs_error(("mean", "q95"), unit="users", description="absolute error of the count",
                               output="count"), _SAVING],
))

_Q_SHARE, _MARGIN = 0.2, 2  # is #(x < cut) below 20% of the records? It is, by MARGIN records.


def _close_cut(x) -> float:
    """The cut with exactly ``_Q_SHARE N - _MARGIN`` records below it (computed on the host from the
    data): a close call, so the answer's noise matters at small ε (the one-shot Gaussian's σ = 1/ε
    records) and PIE needs more rounds than on an easy query."""
    ordered = np.sort(np.asarray(x))
    return float(ordered[int(_Q_SHARE * ordered.size) - _MARGIN])


def _count(x, cut):
    return jnp.sum(x < cut).astype(x.dtype)


def _pie_threshold(key, x, epsilon, cut):
    answer, res = threshold_query(key, _count(x, cut), epsilon**2 / 2, q=_Q_SHARE, n_records=x.size, c=_C,
                                  beta0=_BETA0)
    return {"answer": answer, "saving": 1 - res.rounds[0] / _C}


def _one_shot_threshold(key, x, epsilon, cut):
    return {"answer": threshold_baseline(key, _count(x, cut), epsilon**2 / 2, q=_Q_SHARE, n_records=x.size)}


register(Study(
    "pie_threshold",
    family="budgeting",
    description=f"central threshold query: is #(x < cut) < {_Q_SHARE:g} N, with the cut {_MARGIN} records "
    "inside? (Appendix C), ρ = ε²/2 zCDP",
    mechanisms=[Mechanism(f"PIE-NI (c={_C})", _pie_threshold),
                Mechanism("one-shot (BM1)", _one_shot_threshold)],
    datasets={"normal": ("normal", {"cut": _close_cut})},
    grid={"epsilon": EPSILONS},
    truth=lambda x, cut, **_: _count(x, cut) < _Q_SHARE * x.size,
    metrics=[metrics.wrong_answer(output="answer", description="wrong answer to the threshold query"),
             _SAVING],
))
