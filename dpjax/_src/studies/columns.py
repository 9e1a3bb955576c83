"""The columns of a study's table, and what each holds (the legend saved with the table)."""

from __future__ import annotations

__all__ = ["COLUMNS", "column_descriptions"]

COLUMNS = {
    "study": "the study's name",
    "mechanism": "the mechanism (or variant) that made the releases",
    "dataset": "the dataset the releases were made on",
    "metric": "what was measured on each release (described, with its unit, in the table headings "
    "and in results.json)",
    "statistic": "the summary of the trials' metric values: mean, rmse, median or qNN (NN% quantile)",
    "estimate": "the statistic's Monte Carlo estimate over the trials",
    "se": "standard error of the estimate",
    "ci_low": "lower end of the confidence interval of the statistic",
    "ci_high": "upper end of the confidence interval of the statistic",
    "theory": "closed-form value of the statistic where the mechanism has one (else empty)",
    "unit": "unit of metric, estimate, se, ci_low, ci_high and theory",
    "trials": "independent releases per cell",
    "failure_rate": "share of trials whose metric was not finite (invalid marker, nothing released), "
    "left out of the statistic",
    "ci_method": "how the interval was computed: CLT, Wilson (rates), CLT (mean square), order statistics "
    "(exact, or 'streamed' from a quantile sketch)",
    "replicate": "index of the independent replicate of the whole study (only with replicates > 1)",
}


_PARAMETERS = {
    "epsilon": "the privacy parameter ε of each release (a grid parameter; record.grid lists its values)",
    "k": "the number of items each release selects (a grid parameter; record.grid lists its values)",
}


def column_descriptions(columns, studies) -> dict[str, str]:
    """What each of ``columns`` holds: :data:`COLUMNS`, :data:`_PARAMETERS`, and for any other grid or
    derived parameter of ``studies`` a line saying which it is (so every column is described)."""
    described = {}
    for column in columns:
        if column in COLUMNS or column in _PARAMETERS:
            described[column] = COLUMNS.get(column) or _PARAMETERS[column]
            continue
        derived = [s.name for s in studies if column in s.derived]
        if derived:
            described[column] = (f"a parameter computed on the host from each grid point (study "
                                 f"{', '.join(derived)}) and passed to the mechanisms")
        elif any(column in s.grid for s in studies):
            described[column] = f"the grid parameter {column} (record.grid lists its values)"
    return described
