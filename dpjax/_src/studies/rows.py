"""The table rows of a study step: every (label, metric) x statistic x grid point [x replicate]."""

from __future__ import annotations

import itertools
import math

from dpjax._src.studies import streaming
from dpjax._src.studies.plan import Cell, Plan
from dpjax._src.studies.theory import theory_value

__all__ = ["table_rows"]


def table_rows(plan: Plan, cell: Cell, values: dict) -> list[dict]:
    """The table rows of one step: every (label, metric) x statistic x grid point [x replicate]."""
    study, fixed, replicates, trials = plan.study, cell.fixed, plan.replicates, plan.trials
    rows = []
    for (label, metric_name), trial_values in values.items():
        metric = next(m for m in study.metrics if m.name == metric_name)
        theory_fn = cell.mechanism.theory.get((label, metric_name), cell.mechanism.theory.get(metric_name))
        laws = [None if theory_fn is None else theory_fn(cell.data.host, **fixed, **point)
                for point in cell.points]
        for statistic in metric.statistics:
            s = streaming.summarize(trial_values, trials, replicates, statistic, plan.confidence, metric.rate)
            theory = [theory_value(law, statistic) for law in laws]
            for r, g in itertools.product(range(replicates), range(len(cell.points))):
                row = {"study": study.name, "mechanism": label, "dataset": cell.dataset,
                       **cell.static, **cell.points[g]}
                row.update(metric=metric_name, statistic=statistic, estimate=s["estimate"][r, g],
                           se=s["se"][r, g], ci_low=s["ci_low"][r, g], ci_high=s["ci_high"][r, g],
                           theory=theory[g] if math.isfinite(theory[g]) else None, unit=metric.unit,
                           trials=trials, failure_rate=1 - s["n"][r, g] / trials,
                           ci_method=str(s["method"][r, g]))
                if replicates > 1:
                    row["replicate"] = r
                rows.append(row)
    order = ["study", "mechanism", "dataset", *study.grid, *study.derived, "metric", "statistic", "estimate",
             "se", "ci_low", "ci_high", "theory", "unit", "trials", "failure_rate", "ci_method", "replicate"]
    return [{k: row[k] for k in order if k in row} for row in rows]
