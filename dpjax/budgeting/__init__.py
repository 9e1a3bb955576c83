"""Adaptive per-user privacy budgeting by iterative elimination (Liang and Yi, "Adaptive Privacy Budgeting").

* :mod:`~dpjax._src.budgeting.filters`: per-user filter state and rules (eqs. 7 and 10).
* :mod:`~dpjax._src.budgeting.pie`: PIE-NI (Algorithm 4) and PIE-k (Algorithm 5).
* :mod:`~dpjax._src.budgeting.multi_query`: Algorithm 3, reinvesting savings over m queries.
* applications: :mod:`~dpjax.budgeting.range_count`, :mod:`~dpjax.budgeting.kde`,
  :mod:`~dpjax.budgeting.knn`, :mod:`~dpjax._src.budgeting.threshold` (Appendix C).
* the host-side ledger is :class:`dpjax.accounting.PerUserLedger`.
"""

from dpjax._src.budgeting.bounds import tail_radius
from dpjax._src.budgeting.filters import (
    FilterState,
    approx_gp_capacity,
    approx_gp_filter_step,
    filter_step,
    init_filter,
)
from dpjax._src.budgeting.geometry import (
    box_signed_distance,
    distance_to,
    eta_shift,
    norm,
    rectangle_signed_distance,
)
from dpjax._src.budgeting.kde import kde, kde_baseline, kde_guarantee
from dpjax._src.budgeting.knn import knn, knn_baseline, knn_guarantee
from dpjax._src.budgeting.multi_query import allotment, gamma_schedule, run_multi_query
from dpjax._src.budgeting.pie import charged, pie_guarantee, pie_k, pie_ni
from dpjax._src.budgeting.pie_kernel import PIEResult
from dpjax._src.budgeting.pie_noise import user_noise
from dpjax._src.budgeting.range_count import range_count, range_count_baseline, range_count_guarantee
from dpjax._src.budgeting.splits import Split, SplitSchedule, split_schedule
from dpjax._src.budgeting.threshold import threshold_baseline, threshold_guarantee, threshold_query

__all__ = [
    "FilterState",
    "PIEResult",
    "Split",
    "SplitSchedule",
    "allotment",
    "approx_gp_capacity",
    "approx_gp_filter_step",
    "box_signed_distance",
    "charged",
    "distance_to",
    "eta_shift",
    "filter_step",
    "gamma_schedule",
    "init_filter",
    "kde",
    "kde_baseline",
    "kde_guarantee",
    "knn",
    "knn_baseline",
    "knn_guarantee",
    "norm",
    "pie_guarantee",
    "pie_k",
    "pie_ni",
    "range_count",
    "range_count_baseline",
    "range_count_guarantee",
    "rectangle_signed_distance",
    "run_multi_query",
    "split_schedule",
    "tail_radius",
    "threshold_baseline",
    "threshold_guarantee",
    "threshold_query",
    "user_noise",
]
