"""Registry entries: :mod:`dpjax.budgeting` (Liang and Yi, adaptive per-user budgeting).

20 users in the plane (about half inside the query box, a few near the query point) and c = 4
rounds, so that rounds both eliminate users and leave survivors at the registered parameters. Most
entries use the static ``noise_mode="low"`` (the plain ``jax.random`` sampler compiles in about half
the time; PIE-NI and the threshold query keep the default tail-exact sampler). The
per-user allotment ``rho`` is registered as a scalar (the tests sweep it with the invalid values);
per-user arrays of rho under ``vmap`` are tested in ``tests/budgeting/test_budgeting_apps.py``.

``run_multi_query`` is not registered: it is a host-side driver (a Python loop over queries that
authorizes and settles each one on a float64 :class:`~dpjax.accounting.per_user.PerUserLedger`),
with no traceable parameter and no data argument of its own. The PIE-based entries have no
``guarantee_grid=False``: their companions read an array ``rho`` as per-user allotments (a worst case
over users), not as a grid of parameters. A baseline spends each user's full ``rho_i`` once, the worst
case of its PIE variant, so it shares that companion.
"""

import numpy as np

from dpjax import budgeting
from dpjax._src.budgeting.geometry import distance_to
from mechanism_registry import entry

X = np.array(
    [
        [0.5, 0.2],
        [-0.8, 1.1],
        [1.9, -0.4],
        [0.1, -1.7],
        [-1.5, -0.6],
        [3.2, 2.9],
        [-4.1, 0.3],
        [2.5, -3.6],
        [0.0, 0.9],
        [-0.3, -0.2],
        [5.5, -1.0],
        [-2.2, 4.4],
        [1.2, 1.4],
        [-6.0, -5.2],
        [0.7, -0.9],
        [4.0, 4.5],
        [-1.1, 2.0],
        [2.1, 0.6],
        [-3.3, -2.7],
        [0.4, 6.1],
    ],
    np.float32,
)
SCORES = np.array(
    [
        -4.0,
        -2.5,
        -1.2,
        -0.6,
        -0.1,
        0.0,
        0.3,
        0.8,
        1.5,
        2.2,
        3.0,
        4.1,
        5.3,
        6.0,
        -3.1,
        2.7,
        -0.9,
        0.5,
        7.2,
        -5.5,
    ],
    np.float32,
)
RHO = (1.0, 0.5, 2.0)
BETA0 = (0.1, 0.025, 0.3)
CENTER = (np.array([0.0, 0.0], np.float32), np.array([1.0, -0.5], np.float32))
HALF = (np.array([2.0, 1.5], np.float32), np.array([1.0, 3.0], np.float32))
POINT = (
    np.array([0.0, 0.0], np.float32),
    np.array([1.5, -1.0], np.float32),
    np.array([-2.0, 2.0], np.float32),
)
BANDWIDTH = (1.0, 0.5, 2.0)
COUNT = np.array(12.0, np.float32)
Q = (0.1, 0.05, 0.3)
N_RECORDS = (100, 40, 1000)


def per_user(name, data, params, static, privacy, companion):
    """A PIE or baseline entry; its companion reads an array ``rho`` as per-user allotments."""
    guarantee = getattr(budgeting, f"{companion}_guarantee")
    fields = {"static": static, "privacy": privacy, "guarantee": guarantee, "guarantee_grid": False}
    return entry(budgeting, name, data=data, params=params, **fields)


PIE_PRIVACY = ("rho", "beta0")
MECHANISMS = [
    per_user(
        "pie_ni",
        {"data": SCORES},
        {"rho": RHO, "beta0": BETA0, "nu_low": (-1.0, -3.0, 0.0), "nu_high": (1.0, 0.0, 2.0)},
        {"c": 4},
        PIE_PRIVACY,
        "pie",
    ),
    per_user(
        "pie_k",
        {"data": X},
        {"rho": RHO, "beta0": BETA0, "score_params": POINT},
        {"k": 3, "c": 4, "score_fn": distance_to, "noise_mode": "low"},
        PIE_PRIVACY,
        "pie",
    ),
    per_user(
        "range_count",
        {"x": X},
        {"rho": RHO, "beta0": BETA0, "center": CENTER, "half_widths": HALF},
        {"c": 4, "noise_mode": "low"},
        PIE_PRIVACY,
        "range_count",
    ),
    per_user(
        "range_count_baseline",
        {"x": X},
        {"rho": RHO, "center": CENTER, "half_widths": HALF},
        {"mode": "distance", "noise_mode": "low"},
        ("rho",),
        "range_count",
    ),
    per_user(
        "kde",
        {"x": X},
        {"rho": RHO, "beta0": BETA0, "p": POINT, "bandwidth": BANDWIDTH},
        {"c": 4, "noise_mode": "low"},
        (*PIE_PRIVACY, "bandwidth"),
        "kde",
    ),
    per_user(
        "kde_baseline",
        {"x": X},
        {"rho": RHO, "p": POINT, "bandwidth": BANDWIDTH},
        {"noise_mode": "low"},
        ("rho", "bandwidth"),
        "kde",
    ),
    per_user(
        "knn", {"x": X}, {"rho": RHO, "beta0": BETA0, "p": POINT}, {"k": 3, "c": 4, "noise_mode": "low"},
        PIE_PRIVACY, "knn",
    ),
    per_user(
        "knn_baseline", {"x": X}, {"rho": RHO, "p": POINT}, {"k": 3, "mode": "point", "noise_mode": "low"},
        ("rho",), "knn",
    ),
    entry(
        budgeting,
        "threshold_query",
        data={"count": COUNT},
        params={"rho": RHO, "beta0": BETA0, "q": Q, "n_records": N_RECORDS},
        static={"c": 4},
        privacy=("rho", "beta0", "q"),
        guarantee=budgeting.threshold_guarantee,
    ),
    entry(
        budgeting,
        "threshold_baseline",
        data={"count": COUNT},
        params={"rho": RHO, "q": Q, "n_records": N_RECORDS},
        privacy=("rho", "q"),
        guarantee=budgeting.threshold_guarantee,
    ),
]
