"""What ``dpjax study`` says about results that are not results: cells where no trial gave a number."""

from __future__ import annotations

__all__ = [
    "empty_cells",
]

_KEYS = ("study", "mechanism", "dataset", "metric", "statistic", "estimate", "se", "ci_low", "ci_high",
         "theory", "unit", "trials", "failure_rate", "ci_method", "replicate")


def empty_cells(result) -> list[dict]:
    """The cells of a study's result (mechanism, dataset, grid point) where every trial failed (the
    metric was NaN or infinite in all of them), one failure record each, as ``results.json`` lists
    failures: ``{"mechanism", "dataset", "error", "where"}`` with the grid point in the error."""
    table = result.table
    if not len(table) or "failure_rate" not in table:
        return []
    empty = table[table["failure_rate"] >= 1]
    found: dict[tuple[str, str, str], list[str]] = {}  # (mechanism, dataset, where): metric names
    for row in empty.to_dict("records"):
        point = {k: v for k, v in row.items() if k not in _KEYS}
        where = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items())
        found.setdefault((row["mechanism"], row["dataset"], where), []).append(row["metric"])
    cells = []
    for (mechanism, dataset, where), metrics in found.items():
        names = ", ".join(dict.fromkeys(metrics))
        cells.append({"mechanism": mechanism, "dataset": dataset, "where": "results",
                      "error": f"every trial failed (no finite {names})" + (f" at {where}" if where else "")})
    return cells
